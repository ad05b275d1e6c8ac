/* SPDX-License-Identifier: MIT */
/**
 * @file pool.h
 * Warm pools: a runtime keeps N sandboxes of a spec created ahead, refilled
 * on a thread of its own, and sbx_sandbox_create() hands one out when the
 * spec matches instead of creating (a cold create otherwise).
 *
 * The pool key is the whole spec (provider, image, limits, network, env,
 * workdir, user, hostname, egress rules, scratch) plus the labels the create
 * pipeline would give (the caller's, sbx.task, sbx.launcher, sbx.run_id),
 * except ttl_s: the TTL is the taker's, set at hand-out. Labels cannot be
 * changed after a create, so a taker with other labels or task misses the
 * pool. A handed-out sandbox belongs to its taker and is never handed out
 * again. Pooled sandboxes carry label sbx.pool=<key hash> (kept after
 * hand-out, as provenance) and are never detached, so `sbx gc` reaps the idle
 * ones of a crashed process. sbx_runtime_free() destroys the idle ones.
 */
#ifndef SBX_POOL_H
#define SBX_POOL_H

#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_POOL_OPTS_VERSION 1

typedef struct sbx_pool_opts {
	unsigned version;              /**< SBX_POOL_OPTS_VERSION */
	const sbx_sandbox_opts *spec;  /**< borrowed for the call; copied */
	unsigned size;                 /**< sandboxes kept ready (1..1024) */
	const char *task;              /**< the sbx.task label takers pass in sbx_create_ctl */
} sbx_pool_opts;

#define SBX_POOL_OPTS_INIT { .version = SBX_POOL_OPTS_VERSION }

/**
 * Keeps opts->size sandboxes of opts->spec ready in RT. Refills take one
 * create slot at a time, and only while no foreground create waits for one.
 * Adding a spec already pooled raises its size.
 * @return 0, -EINVAL (bad spec or size; detach or upper_dir set: not
 *         poolable), -ENOENT (unknown provider).
 */
int sbx_pool_add(sbx_runtime *rt, const sbx_pool_opts *opts, sbx_error **err);

/**
 * Waits until every pool of RT is full.
 * @return 0, -ETIMEDOUT after timeout_s (0 = no deadline), or the error of a
 *         pool whose last three refills failed (its message names the spec's
 *         image and the provider's reason).
 */
int sbx_pool_wait(sbx_runtime *rt, double timeout_s, sbx_error **err);

/** Sandboxes ready in all pools of RT now. */
unsigned sbx_pool_ready(sbx_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
