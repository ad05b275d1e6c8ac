/* SPDX-License-Identifier: MIT */
/*
 * Fork: N sandboxes starting from a live sandbox's file system. While the
 * parent's cgroup is frozen (a write in flight is in every child or in
 * none), its writable layer is reflink-copied once into a frozen layer
 * (frozen.c: a new subvolume, no btrfs commit, cost per file not per byte).
 * Each child then boots like a cold create, on a fresh empty writable layer
 * of its own, with the frozen layer as its top lower layer (a fork of a fork
 * stacks the ancestors' frozen layers below). Children boot in parallel, one
 * thread per CPU. The frozen layer goes with its last child.
 *
 * Past FORK_COPY_MAX files (counted first; or a tree the copy cannot take) the frozen
 * layer is a read-only btrfs snapshot of the parent's layer instead: one
 * transaction commit whatever it holds, shared by all children all the same
 * (it keeps the parent's on-disk ids: each child mounts it idmapped by a
 * shift of its own). Processes are not copied.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/log.h"
#include "../../util/str.h"
#include "../../util/fs.h"
#include "local_int.h"

extern const sbx_provider_ops sbx_provider_local;

/* Above this many files in the parent's writable layer, copying them costs
 * more than the one btrfs commit of a snapshot: ~100-250 us a file against
 * 15-60 ms a commit here (docs/performance.md, "Fork and snapshots"). */
#define FORK_COPY_MAX 256
#define FORK_THREADS_MAX 8

/* The children's spec: the caller's, else the parent's recorded one; the
 * image, user namespace mode and layer are always the parent's. */
static int child_spec(sbx_sandbox_opts *out, const struct local_state *st, const sbx_sandbox_opts *o,
		      const char *id, sbx_error **err)
{
	if (o && o->image && *o->image && strcmp(o->image, st->image) != 0)
		return sbx_error_set(err, -EINVAL, "fork sandbox %s: children run its image %s, not %s", id, st->image,
				     o->image);
	if (!o && !st->has_spec)
		return sbx_error_set(err, -ENOTSUP,
				     "fork sandbox %s: it was created by an older sbx that did not record its spec; "
				     "pass the children's spec", id);
	*out = o ? *o : st->spec;
	if (!o) {
		out->env = (const char *const *)st->env;
		out->labels = (const char *const *)st->labels;
		out->detach = st->detach;
	}
	out->image = st->image;
	out->upper_dir = NULL;
	out->userns = st->has_spec ? st->spec.userns : out->userns;
	return 0;
}

struct boot {
	pthread_mutex_t lock;
	size_t next, n;
	void **children;
	char **ids;
	struct local_ctx *c;
	const sbx_sandbox_opts *spec;
	char *const *frozen;
	int r;
	sbx_error *err;
};

static void *boot_thread(void *arg)
{
	struct boot *b = arg;
	for (;;) {
		pthread_mutex_lock(&b->lock);
		size_t i = b->r < 0 ? b->n : b->next++;
		pthread_mutex_unlock(&b->lock);
		if (i >= b->n)
			return NULL;
		sbx_error *e = NULL;
		int r = sbx__local_create_frozen(&b->children[i], &b->ids[i], b->c, b->spec, b->frozen, &e);
		if (r < 0) {
			pthread_mutex_lock(&b->lock);
			if (b->r == 0) {
				b->r = r;
				b->err = e;
				e = NULL;
			}
			pthread_mutex_unlock(&b->lock);
			sbx_error_free(e);
		}
	}
}

/* The children on the frozen layers, booted by up to one thread per CPU. */
static int boot_children(void **children, char **ids, size_t n, struct local_ctx *c, const sbx_sandbox_opts *spec,
			 char *const *frozen, sbx_error **err)
{
	struct boot b = { .n = n, .children = children, .ids = ids, .c = c, .spec = spec, .frozen = frozen };
	pthread_mutex_init(&b.lock, NULL);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = cpus > 1 ? (size_t)cpus : 1;
	if (nt > n)
		nt = n;
	if (nt > FORK_THREADS_MAX)
		nt = FORK_THREADS_MAX;
	pthread_t th[FORK_THREADS_MAX];
	size_t started = 0;
	for (; started + 1 < nt; started++)
		if (pthread_create(&th[started], NULL, boot_thread, &b) != 0)
			break;
	boot_thread(&b);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&b.lock);
	if (b.r < 0) {
		for (size_t i = 0; i < n; i++) {
			if (!children[i])
				continue;
			sbx_provider_local.destroy(children[i], NULL);
			sbx_provider_local.close(children[i]);
			free(ids[i]);
			children[i] = NULL;
			ids[i] = NULL;
		}
		if (err && !*err)
			*err = b.err;
		else
			sbx_error_free(b.err);
	}
	return b.r;
}

/* How many of a stack's frozen layers keep a shifted id base. */
static int shifted(char *const *frozen)
{
	int k = 0;
	for (size_t i = 0; frozen && frozen[i]; i++)
		k += sbx__frozen_base(frozen[i]) != 0;
	return k;
}

/* The frozen layer of parent p (its cgroup frozen): a copy of its upper
 * dir, or past FORK_COPY_MAX files a read-only snapshot (one btrfs commit
 * whatever it holds), unless the stack has no room for one more shifted
 * layer: then a copy of any size. *entry: the layer's entry for the
 * children's lists. */
static int freeze(char **entry, struct local_ctx *c, const struct local_sb *p, const struct local_state *st,
		  sbx_error **err)
{
	char name[LOCAL_ID_LEN + 1];
	sbx_error *e = NULL;
	int r = sbx__frozen_make(name, c, p->id, st->layer_base, FORK_COPY_MAX, p->id, &e);
	if (r == 0) {
		*entry = xstrdup(name);
		return 0;
	}
	if (r != -E2BIG)
		SBX_LOGW("fork %s: %s; taking a snapshot instead", p->id, e && e->msg ? e->msg : "copy failed");
	sbx_error_free(e);
	/* userns=host: on-disk ids are the sandbox's own, no shift needed. */
	uint32_t base = st->spec.userns == SBX_USERNS_HOST ? 0 : st->layer_base;
	if (!base || shifted(st->frozen) < FROZEN_MAX_SHIFTED) {
		if ((r = sbx__frozen_snapshot(name, c, p->id, p->id, err)) < 0)
			return r;
		*entry = base ? xasprintf("%s:%u", name, base) : xstrdup(name);
		return 0;
	}
	if ((r = sbx__frozen_make(name, c, p->id, st->layer_base, 0, p->id, err)) < 0)
		return r;
	*entry = xstrdup(name);
	return 0;
}

int sbx__local_fork(void **children, char **ids, size_t n, void *parent, const sbx_sandbox_opts *o,
		    sbx_error **err)
{
	struct local_sb *p = parent;
	struct local_ctx *c = p->ctx;
	struct local_state st;
	_cleanup_free_ char *path = xasprintf("%s.json", p->dir);
	if (sbx__state_read(&st, path, NULL) < 0)
		return sbx_error_set(err, -ESRCH, "fork: no sandbox '%s' (gone?)", p->id);
	sbx_sandbox_opts spec;
	_cleanup_close_ int layer = -1;
	char *entry = NULL;
	char **frozen = NULL;
	int r = child_spec(&spec, &st, o, p->id, err);
	if (r < 0)
		goto out;
	if (!sbx__proc_alive(p->pid, p->start)) {
		r = sbx_error_set(err, -ESRCH, "fork: sandbox %s is not running", p->id);
		goto out;
	}
	layer = sbx__scratch_open(&c->scratch, p->id);
	if (layer < 0 || sbx__scratch_mode(&c->scratch, SBX_SCRATCH_DISK, NULL) != SCRATCH_DISK) {
		r = sbx_error_set(err, -ENOTSUP,
				  "fork: sandbox %s has no writable layer on disk (tmpfs or a host upper dir); "
				  "forks need the btrfs scratch layer (SBX_SCRATCH=disk)", p->id);
		goto out;
	}
	double t0 = sbx__now_mono();
	struct cg_layout *cg = sbx__local_cg(c);
	/* Freezing fails without a freezer (or when already paused): the
	 * copy is then as consistent as a crash, which btrfs guarantees. */
	int froze = !sbx__cg_frozen(cg, p->id) && sbx__cg_freeze(cg, p->id, 1, NULL) == 0;
	if (froze)
		sbx__cg_freeze_settle(cg, p->id);
	/* The parent's id guards the new layer until the children hold it. */
	r = freeze(&entry, c, p, &st, err);
	if (froze)
		sbx__cg_freeze(cg, p->id, 0, NULL);
	double t1 = sbx__now_mono();
	if (r < 0)
		goto out;
	frozen = sbx__strv_dup((const char *const *)st.frozen);
	sbx__strv_push(&frozen, entry);
	r = boot_children(children, ids, n, c, &spec, frozen, err);
	if (r == 0)
		SBX_LOGD("local: forked %s into %zu in %.2f ms (frozen layer %s in %.2f ms%s)", p->id, n,
			 (sbx__now_mono() - t0) * 1e3, entry, (t1 - t0) * 1e3, froze ? ", parent frozen" : "");
	/* Drops the guard: with no child holding it the layer goes now. */
	sbx__frozen_unref(c, entry, p->id);
out:
	free(entry);
	sbx__strv_free(frozen);
	sbx__state_clear(&st);
	return r;
}
