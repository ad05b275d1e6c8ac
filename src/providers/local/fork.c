/* SPDX-License-Identifier: MIT */
/*
 * Fork: N sandboxes starting from a live sandbox's file system. The parent's
 * writable layer is a btrfs subvolume; each child's starts as a snapshot of
 * it (copy-on-write: O(1) in what the parent wrote, no frozen layer to
 * collect later, since btrfs keeps shared extents until their last user is
 * gone). The parent's cgroup is frozen while the snapshots are taken, so a
 * write in flight is either in every child or in none. Each child then boots
 * like a fresh sandbox over the parent's image with its own id, cgroups and
 * id range; its layer keeps the parent's on-disk ids and is mounted
 * idmapped onto the child's range. Processes are not copied.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/log.h"
#include "../../util/str.h"
#include "../../util/fs.h"
#include "local_int.h"

extern const sbx_provider_ops sbx_provider_local;

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
	char (*cid)[LOCAL_ID_LEN + 1] = xcalloc(n, sizeof(*cid));
	size_t made = 0, started = 0;
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
	uint64_t limit = (uint64_t)sbx__local_storage_mb(c, &spec) << 20;
	double t0 = sbx__now_mono();
	struct cg_layout *cg = sbx__local_cg(c);
	/* Freezing fails without a freezer (or when already paused): the
	 * snapshot is then as consistent as a crash, which btrfs guarantees. */
	int froze = !sbx__cg_frozen(cg, p->id) && sbx__cg_freeze(cg, p->id, 1, NULL) == 0;
	if (froze)
		sbx__cg_freeze_settle(cg, p->id);
	for (; made < n; made++) {
		sbx__random_hex(cid[made], LOCAL_ID_LEN);
		if ((r = sbx__scratch_snapshot(&c->scratch, p->id, cid[made], limit, err)) < 0)
			break;
	}
	if (froze)
		sbx__cg_freeze(cg, p->id, 0, NULL);
	double t1 = sbx__now_mono();
	if (r < 0)
		goto out;
	for (; started < n; started++) {
		if ((r = sbx__local_create_from(&children[started], &ids[started], c, &spec, cid[started],
						st.layer_base, err)) < 0)
			break;
	}
	if (r == 0)
		SBX_LOGD("local: forked %s into %zu in %.2f ms (snapshots %.2f ms%s)", p->id, n,
			 (sbx__now_mono() - t0) * 1e3, (t1 - t0) * 1e3, froze ? ", parent frozen" : "");
out:
	if (r < 0) {
		for (size_t i = 0; i < started; i++) {
			sbx_provider_local.destroy(children[i], NULL);
			sbx_provider_local.close(children[i]);
			free(ids[i]);
			children[i] = NULL;
			ids[i] = NULL;
		}
		for (size_t i = started; i < made; i++)
			sbx__scratch_remove(&c->scratch, cid[i]);
	}
	free(cid);
	sbx__state_clear(&st);
	return r;
}
