/* SPDX-License-Identifier: MIT */
/*
 * cgroups for the local provider. Hosts differ: pure v2, pure v1, or hybrid
 * (v1 controllers plus an empty v2 tree, as on this project's CI machines).
 * We use v2 only when it actually has the memory and pids controllers, else
 * v1. SBX_CGROUP=v1|v2|none overrides; SBX_CGROUP_PARENT names our group
 * (default "sbx-<hash of the state dir>").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "local_int.h"

static const char *const v1_names[CG_N] = { "memory", "pids", "cpu" };

const char *sbx__cg_mode_name(enum cg_mode m)
{
	switch (m) {
	case CG_V1: return "v1";
	case CG_V2: return "v2";
	case CG_NONE: return "none";
	default: return "?";
	}
}

/* Finds cgroup mounts in mountinfo: v1 per controller, and the v2 mount. */
static void scan_mounts(char *v1[CG_N], char **v2, char **freezer)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	while (f && getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char mnt[4096], fstype[64], src[256], opts[1024];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %255s %1023s", fstype, src, opts) != 3)
			continue;
		if (strcmp(fstype, "cgroup2") == 0 && !*v2) {
			*v2 = xstrdup(mnt);
			continue;
		}
		if (strcmp(fstype, "cgroup") != 0)
			continue;
		char *rest = opts, *o;
		while ((o = strsep(&rest, ",")) != NULL) {
			for (int c = 0; c < CG_N; c++)
				if (strcmp(o, v1_names[c]) == 0 && !v1[c])
					v1[c] = xstrdup(mnt);
			if (strcmp(o, "freezer") == 0 && !*freezer)
				*freezer = xstrdup(mnt);
		}
	}
	free(line);
}

static int v2_usable(const char *root)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.controllers", root);
	char *data = NULL;
	size_t n;
	if (sbx__read_file(&data, &n, p, 4096, NULL) < 0)
		return 0;
	int ok = strstr(data, "memory") && strstr(data, "pids");
	free(data);
	return ok;
}

static int write_str(const char *dir, const char *file, const char *val)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	_cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return sbx__write_all(fd, val, strlen(val));
}

/* One parent group per state dir, so two runtimes on one host (a server and
 * the CLI, or parallel tests) never mistake each other's groups for orphans. */
static char *parent_name(const char *state_dir)
{
	const char *env = sbx__env("SBX_CGROUP_PARENT");
	if (env && *env)
		return xstrdup(env);
	uint32_t h = 2166136261u;
	for (const char *p = state_dir; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return xasprintf("sbx-%08x", h);
}

int sbx__cg_detect(struct cg_layout *cg, const char *state_dir, sbx_error **err)
{
	memset(cg, 0, sizeof(*cg));
	cg->parent = parent_name(state_dir);
	const char *want = sbx__env("SBX_CGROUP");
	char *v1[CG_N] = { 0 }, *v2 = NULL, *freezer = NULL;
	scan_mounts(v1, &v2, &freezer);
	enum cg_mode mode = CG_NONE;
	if (want && strcmp(want, "none") == 0)
		mode = CG_NONE;
	else if (want && strcmp(want, "v2") == 0)
		mode = v2 ? CG_V2 : CG_NONE;
	else if (want && strcmp(want, "v1") == 0)
		mode = v1[CG_MEMORY] && v1[CG_PIDS] ? CG_V1 : CG_NONE;
	else if (v2 && v2_usable(v2))
		mode = CG_V2;
	else if (v1[CG_MEMORY] && v1[CG_PIDS])
		mode = CG_V1;
	if (want && *want && mode == CG_NONE && strcmp(want, "none") != 0) {
		for (int c = 0; c < CG_N; c++)
			free(v1[c]);
		free(v2);
		free(freezer);
		return sbx_error_set(err, -ENOSYS, "SBX_CGROUP=%s: that cgroup version is not mounted here", want);
	}
	cg->mode = mode;
	if (mode == CG_V2) {
		cg->root[0] = v2;
		v2 = NULL;
		_cleanup_free_ char *dir = xasprintf("%s/%s", cg->root[0], cg->parent);
		mkdir(dir, 0755);
		write_str(cg->root[0], "cgroup.subtree_control", "+memory +pids +cpu");
		write_str(dir, "cgroup.subtree_control", "+memory +pids +cpu");
	} else if (mode == CG_V1) {
		cg->freezer = steal_ptr(&freezer);
		/* Parents are made with a sandbox's first group in them
		 * (mkdir_group): a `sbx run` without a CPU quota makes no cpu
		 * parent, and the memory parent waits for the first exec. */
		for (int c = 0; c < CG_N; c++) {
			cg->root[c] = v1[c];
			v1[c] = NULL;
		}
	}
	for (int c = 0; c < CG_N; c++)
		free(v1[c]);
	free(v2);
	free(freezer);
	return 0;
}

int sbx__local_cg_check(struct local_ctx *c, sbx_error **err)
{
	pthread_mutex_lock(&c->cg_lock);
	int r = c->cg_state;
	if (r == 0) {
		sbx_error *e = NULL;
		r = sbx__cg_detect(&c->cg_, c->dir, &e);
		if (r < 0) {
			sbx__cg_free(&c->cg_); /* mode none, nothing made */
			c->cg_msg = xstrdup(e && e->msg ? e->msg : "cgroups: detection failed");
			sbx_error_free(e);
		}
		c->cg_state = r < 0 ? r : 1;
	}
	if (r < 0)
		sbx_error_set(err, r, "%s", c->cg_msg);
	pthread_mutex_unlock(&c->cg_lock);
	return r < 0 ? r : 0;
}

struct cg_layout *sbx__local_cg(struct local_ctx *c)
{
	sbx__local_cg_check(c, NULL);
	return &c->cg_;
}

void sbx__cg_free(struct cg_layout *cg)
{
	/* Drop our parent groups when nothing is left in them (busy ones stay). */
	sbx__cg_spare_drop(cg);
	for (int c = 0; c < CG_N && cg->parent; c++) {
		const char *root = cg->mode == CG_V2 ? (c ? NULL : cg->root[0]) : cg->root[c];
		if (!root)
			continue;
		_cleanup_free_ char *dir = xasprintf("%s/%s", root, cg->parent);
		rmdir(dir);
	}
	if (cg->freezer && cg->parent) {
		_cleanup_free_ char *dir = xasprintf("%s/%s", cg->freezer, cg->parent);
		rmdir(dir);
	}
	for (int c = 0; c < CG_N; c++)
		free(cg->root[c]);
	free(cg->parent);
	free(cg->freezer);
	memset(cg, 0, sizeof(*cg));
}

/*
 * A sandbox without a memory limit could take the host's memory (its
 * commands and its writable layer, a tmpfs charged to it). The default is a
 * quarter of the host's RAM, between 256 MiB and 8 GiB; SBX_DEFAULT_MEMORY=0
 * turns it off, another size replaces it.
 */
static unsigned default_memory_mb;
static pthread_once_t default_memory_once = PTHREAD_ONCE_INIT;

static void default_memory_init(void)
{
	const char *v = sbx__env("SBX_DEFAULT_MEMORY");
	uint64_t bytes;
	if (v && *v && sbx__parse_size(&bytes, v) == 0) {
		if (strspn(v, "0123456789") == strlen(v))
			bytes <<= 20; /* a bare number is MiB, as for --memory */
		default_memory_mb = (unsigned)(bytes >> 20);
		return;
	}
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mb = pages > 0 && psz > 0 ? ((uint64_t)pages * (uint64_t)psz >> 20) / 4 : 2048;
	default_memory_mb = (unsigned)(mb < 256 ? 256 : mb > 8192 ? 8192 : mb);
}

unsigned sbx__cg_default_memory_mb(void)
{
	pthread_once(&default_memory_once, default_memory_init);
	return default_memory_mb;
}

int sbx__local_limits(sbx_limits *out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)err;
	out->cpus = o->cpus > 0 ? o->cpus : 0;
	out->memory_mb = o->memory_mb ? o->memory_mb : sbx__cg_default_memory_mb();
	out->storage_mb = sbx__local_storage_mb(ctx, o);
	return 0;
}


static char *group_dir(const struct cg_layout *cg, int c, const char *id)
{
	const char *root = cg->mode == CG_V2 ? cg->root[0] : cg->root[c];
	if (!root || (cg->mode == CG_V2 && c != 0))
		return NULL;
	return xasprintf("%s/%s/%s", root, cg->parent, id);
}

char *sbx__cg_dir(const struct cg_layout *cg, int c, const char *id)
{
	return group_dir(cg, c, id);
}

int sbx__cg_write_str(const char *dir, const char *file, const char *val)
{
	return write_str(dir, file, val);
}

static int set_limits(const struct cg_layout *cg, const char *id, const sbx_sandbox_opts *o,
		      sbx_error **err)
{
	char v[64];
	int r = 0;
	/* v1: the memory group is made at the first exec (sbx__cg_memory_join). */
	_cleanup_free_ char *mem = cg->mode == CG_V1 ? NULL : group_dir(cg, CG_MEMORY, id);
	_cleanup_free_ char *pids = cg->mode == CG_V2 ? xstrdup(mem) : group_dir(cg, CG_PIDS, id);
	_cleanup_free_ char *cpu = cg->mode == CG_V2 ? xstrdup(mem) : group_dir(cg, CG_CPU, id);
	/* v1 groups exist only for requested limits (see wanted()). */
	unsigned pids_max = o->pids_max ? o->pids_max : 4096;
	snprintf(v, sizeof(v), "%u", pids_max);
	if (pids && (r = write_str(pids, "pids.max", v)) < 0)
		return sbx_error_setsys(err, r, -r, "cgroup %s: set pids.max=%s", pids, v);
	unsigned memory_mb = o->memory_mb ? o->memory_mb : sbx__cg_default_memory_mb();
	if (memory_mb && mem) {
		uint64_t bytes = (uint64_t)memory_mb << 20;
		snprintf(v, sizeof(v), "%" PRIu64, bytes);
		if (cg->mode == CG_V2) {
			r = write_str(mem, "memory.max", v);
			write_str(mem, "memory.swap.max", "0");
		} else {
			r = write_str(mem, "memory.limit_in_bytes", v);
			write_str(mem, "memory.memsw.limit_in_bytes", v);
		}
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "cgroup %s: set memory limit %s", mem, v);
	}
	if (o->cpus > 0 && cpu) {
		long quota = (long)(o->cpus * 100000.0);
		if (quota < 1000)
			quota = 1000;
		if (cg->mode == CG_V2) {
			snprintf(v, sizeof(v), "%ld 100000", quota);
			r = write_str(cpu, "cpu.max", v);
		} else {
			/* v1: the quota is on <id>/run, where commands go; init
			 * stays in <id>, outside it, so a command that eats the
			 * quota (a fork bomb) cannot delay init's timers. */
			_cleanup_free_ char *run = xasprintf("%s/run", cpu);
			snprintf(v, sizeof(v), "%ld", quota);
			r = mkdir(run, 0755) < 0 && errno != EEXIST ? -errno : write_str(run, "cpu.cfs_quota_us", v);
		}
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "cgroup %s: set cpu quota %s", cpu, v);
	}
	return 0;
}

/* v1: a cpu group only when the spec asks for a quota; pids always (the
 * default pids limit, and per-exec groups for killing trees). The memory
 * group waits for the first exec (sbx__cg_memory_join): each memcg costs
 * ~0.6-1 MiB of shrinker info that grows with the number of superblocks on
 * the host, and an idle sandbox runs only init, no user code. */
static int wanted(const struct cg_layout *cg, int c, const sbx_sandbox_opts *o)
{
	if (cg->mode == CG_V2)
		return c == 0;
	return c == CG_PIDS || (c == CG_CPU && o->cpus > 0);
}

/* mkdir that recreates the shared parent a concurrent gc may have removed. */
static int mkdir_group(const struct cg_layout *cg, const char *d)
{
	int r = -1;
	for (int tries = 0; tries < 3 && r < 0; tries++) {
		r = mkdir(d, 0755);
		if (r < 0 && errno == EEXIST)
			r = 0;
		if (r < 0 && errno == ENOENT) {
			_cleanup_free_ char *parent = xstrdup(d);
			*strrchr(parent, '/') = '\0';
			mkdir(parent, 0755);
			if (cg->mode == CG_V2)
				write_str(parent, "cgroup.subtree_control", "+memory +pids +cpu");
		} else if (r < 0) {
			break;
		}
	}
	return r < 0 ? -errno : 0;
}

int sbx__cg_memory_join(const struct cg_layout *cg, const char *id, unsigned memory_mb, pid_t init,
			sbx_error **err)
{
	if (cg->mode != CG_V1 || !memory_mb)
		return 0;
	_cleanup_free_ char *d = group_dir(cg, CG_MEMORY, id);
	if (!d)
		return 0;
	/* Every caller sets the limit itself before moving init, so a racing
	 * first exec that finds the group made (EEXIST) never joins it before
	 * the limit is set. */
	char v[64], pid[32];
	snprintf(v, sizeof(v), "%" PRIu64, (uint64_t)memory_mb << 20);
	snprintf(pid, sizeof(pid), "%d", (int)init);
	int r = 0, ready = 0;
	/* Only a sandbox without a group yet takes a spare (a later exec from
	 * another process finds its group and just rewrites the limit). A
	 * spare has the last sandbox's limits: memsw first when raising (it
	 * must stay >= the memory limit), after (below) when lowering; a spare
	 * that cannot shrink to the limit goes, and a fresh group is made. */
	if (access(d, F_OK) != 0 && sbx__cg_spare_take(cg, d) == 0) {
		write_str(d, "memory.memsw.limit_in_bytes", v);
		ready = write_str(d, "memory.limit_in_bytes", v) == 0;
		if (!ready && rmdir(d) < 0 && errno != ENOENT)
			return sbx_error_setsys(err, -errno, errno, "cgroup %s: reuse a spare group", d);
	}
	/* ENOENT: a racing first exec removed a spare it could not shrink
	 * between our mkdir (EEXIST) and the write: make it again, once. */
	for (int tries = 0; !ready; tries++) {
		if ((r = mkdir_group(cg, d)) < 0)
			return sbx_error_setsys(err, r, -r, "create cgroup %s", d);
		if ((r = write_str(d, "memory.limit_in_bytes", v)) == 0)
			break;
		if (r != -ENOENT || tries)
			return sbx_error_setsys(err, r, -r, "cgroup %s: set memory limit %s", d, v);
	}
	write_str(d, "memory.memsw.limit_in_bytes", v);
	if ((r = write_str(d, "cgroup.procs", pid)) < 0) {
		rmdir(d); /* init is gone: leave no group behind (EBUSY if a racer's is in) */
		return sbx_error_setsys(err, r, -r, "cgroup %s: move init %s in", d, pid);
	}
	return 0;
}

int sbx__cg_create(const struct cg_layout *cg, const char *id, const sbx_sandbox_opts *o,
		   sbx_error **err)
{
	sbx__cg_spare_count_create();
	if (cg->mode == CG_NONE) {
		if (o->memory_mb || o->cpus > 0 || o->pids_max)
			return sbx_error_set(err, -ENOSYS,
					     "resource limits need cgroups, and none are usable here (SBX_CGROUP=none or not mounted)");
		return 0;
	}
	for (int c = 0; c < CG_N; c++) {
		_cleanup_free_ char *d = wanted(cg, c, o) ? group_dir(cg, c, id) : NULL;
		if (!d)
			continue;
		/* Another process sharing the state dir may remove the (then empty)
		 * parent at exit: mkdir_group recreates it. */
		int r = mkdir_group(cg, d);
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "create cgroup %s", d);
	}
	return set_limits(cg, id, o, err);
}

int sbx__cg_procs_fds(const struct cg_layout *cg, const char *id, int fds[CG_N], sbx_error **err)
{
	int n = 0;
	for (int c = 0; c < CG_N; c++) {
		_cleanup_free_ char *d = group_dir(cg, c, id);
		if (!d || access(d, F_OK) != 0)
			continue;
		_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", d);
		fds[n] = open(procs, O_WRONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			int e = errno;
			while (n > 0)
				close(fds[--n]);
			return sbx_error_setsys(err, -e, e, "open %s", procs);
		}
		n++;
	}
	return n;
}

int sbx__cg_cpu_run_fd(const struct cg_layout *cg, const char *id)
{
	if (cg->mode != CG_V1)
		return -1;
	_cleanup_free_ char *d = group_dir(cg, CG_CPU, id);
	if (!d)
		return -1;
	_cleanup_free_ char *p = xasprintf("%s/run/cgroup.procs", d);
	return open(p, O_WRONLY | O_CLOEXEC);
}

int sbx__cg_exec_dirfd(const struct cg_layout *cg, const char *id)
{
	_cleanup_free_ char *d = group_dir(cg, cg->mode == CG_V2 ? 0 : CG_PIDS, id);
	if (!d)
		return -1;
	return open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Kills the processes listed in dir/cgroup.procs; returns how many were listed. */
static int kill_procs(const char *dir)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.procs", dir);
	char *data = NULL;
	size_t n;
	if (sbx__read_file(&data, &n, p, 1 << 20, NULL) < 0)
		return 0;
	int count = 0;
	char *rest = data, *line;
	while ((line = strsep(&rest, "\n")) != NULL)
		if (*line) {
			kill((pid_t)strtol(line, NULL, 10), SIGKILL);
			count++;
		}
	free(data);
	return count;
}

/* Removes dir's child groups, then dir, retrying while processes die. */
static int remove_group(const char *dir, sbx_error **err)
{
	/* The common case, an empty group without per-exec sub-groups, is one
	 * rmdir; only a busy group is scanned. */
	if (rmdir(dir) == 0 || errno == ENOENT)
		return 0;
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : sbx_error_setsys(err, -errno, errno, "open cgroup %s", dir);
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.') {
			_cleanup_free_ char *sub = xasprintf("%s/%s", dir, de->d_name);
			int r = remove_group(sub, err);
			if (r < 0)
				return r;
		}
	for (int i = 0; i < 2000; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			break;
		kill_procs(dir);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return sbx_error_setsys(err, -errno, errno, "remove cgroup %s", dir);
}

int sbx__cg_remove(const struct cg_layout *cg, const char *id, sbx_error **err)
{
	int ret = 0;
	if (cg->mode == CG_V1 && cg->freezer) {
		_cleanup_free_ char *fz = xasprintf("%s/%s/%s", cg->freezer, cg->parent, id);
		if (access(fz, F_OK) == 0) {
			write_str(fz, "freezer.state", "THAWED");
			remove_group(fz, NULL);
		}
	}
	for (int c = 0; c < CG_N; c++) {
		_cleanup_free_ char *d = group_dir(cg, c, id);
		if (!d || (c == CG_MEMORY && sbx__cg_spare_park(cg, d) == 0))
			continue;
		int r = remove_group(d, err);
		if (r < 0 && !ret)
			ret = r;
	}
	return ret;
}

char **sbx__cg_list(const struct cg_layout *cg)
{
	char **ids = NULL;
	for (int c = 0; c < CG_N; c++) {
		const char *root = cg->mode == CG_V2 ? cg->root[0] : cg->root[c];
		if (!root || (cg->mode == CG_V2 && c))
			continue;
		_cleanup_free_ char *dir = xasprintf("%s/%s", root, cg->parent);
		_cleanup_closedir_ DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (de->d_type == DT_DIR && strlen(de->d_name) == LOCAL_ID_LEN) {
				int dup = 0;
				for (size_t i = 0; ids && ids[i]; i++)
					dup |= strcmp(ids[i], de->d_name) == 0;
				if (!dup)
					sbx__strv_push(&ids, de->d_name);
			}
	}
	return ids;
}
