/* SPDX-License-Identifier: MIT */
/* The local provider's pause: cgroup v2's cgroup.freeze or a v1 freezer
 * group, and the checks that a freeze took hold. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "local_int.h"

/* Pause: v2 writes cgroup.freeze; v1 uses a freezer group made on first use
 * (most sandboxes are never paused, so creation does not pay for it), into
 * which every process of the sandbox is moved, until the set is stable. */
int sbx__cg_freeze(const struct cg_layout *cg, const char *id, int freeze, sbx_error **err)
{
	if (cg->mode == CG_V2) {
		_cleanup_free_ char *d = sbx__cg_dir(cg, 0, id);
		int r = sbx__cg_write_str(d, "cgroup.freeze", freeze ? "1" : "0");
		return r < 0 ? sbx_error_setsys(err, r, -r, "cgroup %s: cgroup.freeze", d) : 0;
	}
	if (cg->mode != CG_V1)
		return sbx_error_set(err, -ENOSYS, "pause needs cgroups, and none are usable here");
	if (!cg->freezer)
		return sbx_error_set(err, -ENOSYS, "pause needs the v1 freezer controller, which is not mounted");
	_cleanup_free_ char *parent = xasprintf("%s/%s", cg->freezer, cg->parent);
	_cleanup_free_ char *d = xasprintf("%s/%s", parent, id);
	mkdir(parent, 0755);
	if (freeze) {
		if (mkdir(d, 0755) < 0 && errno != EEXIST)
			return sbx_error_setsys(err, -errno, errno, "create freezer group %s", d);
		_cleanup_free_ char *pids = sbx__cg_dir(cg, CG_PIDS, id);
		_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", pids);
		for (int round = 0; round < 20; round++) {
			char *data = NULL;
			size_t n;
			if (sbx__read_file(&data, &n, procs, 1 << 20, err) < 0)
				return -EIO;
			char *rest = data, *l;
			while ((l = strsep(&rest, "\n")) != NULL)
				if (*l)
					sbx__cg_write_str(d, "cgroup.procs", l);
			free(data);
			if (sbx__cg_write_str(d, "freezer.state", "FROZEN") < 0)
				return sbx_error_setsys(err, -errno, errno, "freeze %s", d);
			/* A process forked while we moved others is still outside: go again. */
			char *again = NULL;
			size_t m;
			int stable = 1;
			if (sbx__read_file(&again, &m, procs, 1 << 20, NULL) == 0) {
				_cleanup_free_ char *fz = xasprintf("%s/cgroup.procs", d);
				char *frozen = NULL;
				size_t k;
				if (sbx__read_file(&frozen, &k, fz, 1 << 20, NULL) == 0) {
					stable = strcmp(again, frozen) == 0;
					free(frozen);
				}
				free(again);
			}
			if (stable)
				return 0;
		}
		return 0;
	}
	int r = sbx__cg_write_str(d, "freezer.state", "THAWED");
	return r < 0 ? sbx_error_setsys(err, r, -r, "thaw %s", d) : 0;
}

void sbx__cg_thaw_if_frozen(const struct cg_layout *cg, const char *id)
{
	if (cg->mode == CG_V2) {
		_cleanup_free_ char *d = sbx__cg_dir(cg, 0, id);
		sbx__cg_write_str(d, "cgroup.freeze", "0");
		return;
	}
	if (cg->mode != CG_V1 || !cg->freezer)
		return;
	_cleanup_free_ char *fz = xasprintf("%s/%s/%s", cg->freezer, cg->parent, id);
	if (access(fz, F_OK) == 0)
		sbx__cg_write_str(fz, "freezer.state", "THAWED");
}

/* The kernel freezes asynchronously: a write in flight ends before the group
 * reports frozen. Bounded, so a task stuck in the kernel cannot stall a fork. */
void sbx__cg_freeze_settle(const struct cg_layout *cg, const char *id)
{
	_cleanup_free_ char *f = NULL;
	const char *want;
	if (cg->mode == CG_V2) {
		_cleanup_free_ char *d = sbx__cg_dir(cg, 0, id);
		f = xasprintf("%s/cgroup.events", d);
		want = "frozen 1";
	} else if (cg->mode == CG_V1 && cg->freezer) {
		f = xasprintf("%s/%s/%s/freezer.state", cg->freezer, cg->parent, id);
		want = "FROZEN";
	} else {
		return;
	}
	for (int i = 0; i < 100; i++) {
		_cleanup_free_ char *v = NULL;
		size_t n;
		if (sbx__read_file(&v, &n, f, 4096, NULL) < 0 || strstr(v, want))
			return;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

int sbx__cg_frozen(const struct cg_layout *cg, const char *id)
{
	_cleanup_free_ char *f = NULL;
	if (cg->mode == CG_V2) {
		_cleanup_free_ char *d = sbx__cg_dir(cg, 0, id);
		f = xasprintf("%s/cgroup.freeze", d);
	} else if (cg->mode == CG_V1 && cg->freezer) {
		f = xasprintf("%s/%s/%s/freezer.state", cg->freezer, cg->parent, id);
	} else {
		return 0;
	}
	_cleanup_free_ char *v = NULL;
	size_t n;
	if (sbx__read_file(&v, &n, f, 64, NULL) < 0)
		return 0;
	return v[0] == '1' || strncmp(v, "FROZEN", 6) == 0;
}
