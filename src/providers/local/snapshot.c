/* SPDX-License-Identifier: MIT */
/*
 * Named snapshots: a sandbox's writable layer frozen as a read-only btrfs
 * snapshot (<scratch>/.snap-NAME: the dot keeps GC's scan of dead sandboxes'
 * layers away from it) with a record <state>/local/snapshots/NAME.json (the
 * image, spec and on-disk id base, as a sandbox's state file has them). A
 * create whose image is "snapshot:NAME" starts from a writable snapshot of
 * it, exactly like a fork child. Snapshots live until removed. A snapshot of
 * a fork child records the frozen layers below its writable one and holds
 * them (as "snapshot:NAME", frozen.c) until it is removed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/log.h"
#include "../../util/str.h"
#include "local_int.h"

#define SNAP_PREFIX "snapshot:"

static int valid_name(const char *n)
{
	size_t len = strlen(n);
	return len >= 1 && len <= 64 && n[0] != '.' &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == len;
}

static char *record_path(struct local_ctx *c, const char *name)
{
	return xasprintf("%s/snapshots/%s.json", c->dir, name);
}

static char *subvol_name(const char *name)
{
	return xasprintf(".snap-%s", name);
}

int sbx__local_snapshot(char **name_out, void *h, const char *name, sbx_error **err)
{
	struct local_sb *p = h;
	struct local_ctx *c = p->ctx;
	char gen[32];
	if (!name) {
		char hex[LOCAL_ID_LEN + 1];
		sbx__random_hex(hex, LOCAL_ID_LEN);
		snprintf(gen, sizeof(gen), "snap-%s", hex);
		name = gen;
	}
	if (!valid_name(name))
		return sbx_error_set(err, -EINVAL,
				     "snapshot name '%s': expected 1..64 of A-Z a-z 0-9 _ . - (not starting with '.')", name);
	struct local_state st;
	_cleanup_free_ char *path = xasprintf("%s.json", p->dir);
	if (sbx__state_read(&st, path, NULL) < 0)
		return sbx_error_set(err, -ESRCH, "snapshot: no sandbox '%s' (gone?)", p->id);
	_cleanup_free_ char *dir = xasprintf("%s/snapshots", c->dir);
	_cleanup_free_ char *rec = record_path(c, name);
	_cleanup_free_ char *sub = subvol_name(name);
	_cleanup_close_ int layer = sbx__scratch_open(&c->scratch, p->id);
	int r = 0;
	struct stat sst;
	if (layer < 0 || sbx__scratch_mode(&c->scratch, SBX_SCRATCH_DISK, NULL) != SCRATCH_DISK) {
		r = sbx_error_set(err, -ENOTSUP,
				  "snapshot: sandbox %s has no writable layer on disk (tmpfs or a host upper dir); "
				  "snapshots need the btrfs scratch layer (SBX_SCRATCH=disk)", p->id);
	} else if ((r = sbx__mkdir_p(dir, 0700, err)) < 0) {
	} else if (stat(rec, &sst) == 0 || sbx__scratch_exists(&c->scratch, sub)) {
		r = sbx_error_set(err, -EEXIST, "snapshot '%s' exists already (sbx snapshot rm %s)", name, name);
	} else {
		struct cg_layout *cg = sbx__local_cg(c);
		int froze = !sbx__cg_frozen(cg, p->id) && sbx__cg_freeze(cg, p->id, 1, NULL) == 0;
		if (froze)
			sbx__cg_freeze_settle(cg, p->id);
		r = sbx__scratch_freeze(&c->scratch, p->id, sub, err);
		if (froze)
			sbx__cg_freeze(cg, p->id, 0, NULL);
	}
	if (r == 0) {
		free(st.id);
		st.id = xstrdup(name);
		st.status = (free(st.status), xstrdup("snapshot"));
		st.pid = 0;
		st.start = 0;
		st.created = sbx__now_real();
		st.expires = 0;
		_cleanup_free_ char *holder = xasprintf("snapshot:%s", name);
		size_t held = 0;
		for (; r == 0 && st.frozen && st.frozen[held]; held++)
			if ((r = sbx__frozen_ref(c, st.frozen[held], holder, err)) < 0)
				break;
		if (r == 0 && (r = sbx__state_write(rec, &st, err)) < 0)
			held = st.frozen ? sbx__strv_len((const char *const *)st.frozen) : 0;
		if (r < 0) {
			for (size_t i = 0; i < held; i++)
				sbx__frozen_unref(c, st.frozen[i], holder);
			sbx__scratch_remove(&c->scratch, sub);
		}
	}
	if (r == 0)
		*name_out = xstrdup(name);
	sbx__state_clear(&st);
	return r;
}

int sbx__local_snapshot_remove(void *ctx, const char *name, sbx_error **err)
{
	struct local_ctx *c = ctx;
	if (!valid_name(name))
		return sbx_error_set(err, -ENOENT, "no snapshot '%s'", name);
	_cleanup_free_ char *rec = record_path(c, name);
	_cleanup_free_ char *sub = subvol_name(name);
	struct local_state st;
	int had = sbx__state_read(&st, rec, NULL) == 0;
	int r = sbx__scratch_remove(&c->scratch, sub);
	if (had && r >= 0) {
		_cleanup_free_ char *holder = xasprintf("snapshot:%s", name);
		if (unlink(rec) < 0 && errno != ENOENT)
			r = -errno;
		else
			sbx__frozen_unref_all(c, st.frozen, holder);
	}
	if (had)
		sbx__state_clear(&st);
	else if (r >= 0 && unlink(rec) == 0) /* a record cut short */
		had = 1;
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "remove snapshot %s", name);
	if (!had && r == 0)
		return sbx_error_set(err, -ENOENT, "no snapshot '%s'", name);
	return 0;
}

int sbx__local_is_snapshot_image(const char *image)
{
	return image && strncmp(image, SNAP_PREFIX, strlen(SNAP_PREFIX)) == 0;
}

int sbx__local_create_snapshot(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
			       sbx_error **err)
{
	const char *name = o->image + strlen(SNAP_PREFIX);
	if (!valid_name(name))
		return sbx_error_set(err, -ENOENT, "no snapshot '%s'", name);
	_cleanup_free_ char *rec = record_path(c, name);
	_cleanup_free_ char *sub = subvol_name(name);
	struct local_state st;
	if (sbx__state_read(&st, rec, NULL) < 0)
		return sbx_error_set(err, -ENOENT, "no snapshot '%s' (sbx snapshot ID %s makes one)", name, name);
	sbx_sandbox_opts spec = *o;
	spec.image = st.image;
	spec.upper_dir = NULL;
	if (st.has_spec)
		spec.userns = st.spec.userns;
	char id[LOCAL_ID_LEN + 1];
	sbx__random_hex(id, LOCAL_ID_LEN);
	int r = sbx__scratch_mode(&c->scratch, SBX_SCRATCH_DISK, err);
	if (r >= 0)
		r = sbx__scratch_snapshot(&c->scratch, sub, id, (uint64_t)sbx__local_storage_mb(c, &spec) << 20, err);
	if (r >= 0 && (r = sbx__local_create_from(sb_out, id_out, c, &spec, id, st.layer_base, st.frozen, err)) < 0)
		sbx__scratch_remove(&c->scratch, id);
	sbx__state_clear(&st);
	return r < 0 ? r : 0;
}
