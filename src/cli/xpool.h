/* SPDX-License-Identifier: MIT */
/*
 * Cross-process warm pools (`sbx pool`, docs/cli.md): a keeper process keeps
 * N sandboxes of one image and spec ready in the state dir, and `sbx run` /
 * `sbx create` in any other process take one with an atomic rename.
 *
 * <state>/xpool/<name>/          one pool; name = 16 hex of the spec's key
 *   keeper.lock                  flock(2)ed by the live keeper, all its life
 *   info.json                    image, size, keeper pid (for `sbx pool ls`)
 *   ready/<id>                   idle, owned by the keeper
 *   taken/<id>.<pid>.<start>     claimed by process pid (start: its start
 *                                time, against pid reuse), in use by it
 *   dead/<id>                    killed by its taker (`sbx run`), left for the
 *                                keeper (or `sbx gc`) to clean up
 * A ready record holds "<init pid> <init start>" of its sandbox.
 * <state>/xpool/.given/<id>      handed to `sbx create`: an ordinary sandbox now
 *
 * Pooled sandboxes are created detached and labelled sbx.xpool=<name>, so
 * `sbx gc` can tell who answers for each: the keeper while it lives (ready
 * or being made), the taker while it lives (taken), the user (given).
 */
#ifndef SBX_CLI_XPOOL_H
#define SBX_CLI_XPOOL_H

#include <sys/types.h>

#include <sbx/sbx.h>

#define XPOOL_LABEL "sbx.xpool"

/* The pool name of a spec (o->ttl_s and o->detach ignored): 16 hex. */
void xpool_name(char out[17], const sbx_sandbox_opts *o);
/* <state>/xpool[/<name>[/<sub>]]: owned. */
char *xpool_path(sbx_runtime *rt, const char *name, const char *sub);

/* A sandbox taken from a pool, or none. */
struct xpool_taken {
	char *record; /* taken/<id>.<pid>.<start> path, NULL when none */
	char *dead;   /* its dead/<id> path */
	pid_t init;   /* the sandbox's init on the host, 0 when unknown */
	unsigned long long init_start;
};
/*
 * Takes a ready sandbox of the pool matching `o`, if a pool exists and holds
 * one: 1 with *sb open and t->record set, 0 when there is none (cold create).
 */
int xpool_take(sbx_sandbox **sb, struct xpool_taken *t, sbx_runtime *rt, const sbx_sandbox_opts *o);
/* After `sbx create` took it: the sandbox is the user's now. */
void xpool_give(struct xpool_taken *t, sbx_runtime *rt, const char *id);
/* After `sbx run` destroyed it: drops the record. */
void xpool_done(struct xpool_taken *t);
/* Instead of a destroy, for `sbx run`: kills the sandbox's init (and so
 * every process in it) now and leaves the rest of the teardown (mounts,
 * writable layer, cgroups, state) to the keeper. 0, or -1 when it cannot
 * (then destroy it as usual). */
int xpool_hand_off(struct xpool_taken *t);

/* For `sbx gc`: 1 when the pooled sandbox `i` has nobody left to answer for
 * it (its keeper or taker died), 0 when somebody does, -1 when not pooled.
 * With 1 (and not dry), its records are gone when this returns. */
int xpool_orphan(sbx_runtime *rt, const sbx_sandbox_info *i, int dry);
/* For `sbx gc` after it destroyed (v: what is left, or all it listed):
 * drops records of sandboxes not in v and the dirs of dead keepers' pools
 * that hold nothing. */
void xpool_sweep(sbx_runtime *rt, const sbx_sandbox_info *v, size_t n);

/* Whether pid with start time `start` (0: any) still runs. */
int xpool_alive(pid_t pid, unsigned long long start);
unsigned long long xpool_starttime(pid_t pid);
/* 1 when the keeper of <pool dir> holds its lock. */
int xpool_keeper_alive(const char *pool_dir);

#endif
