/* SPDX-License-Identifier: MIT */
/*
 * The stats op: what a local sandbox uses now, read from the host side only
 * (never through init, so a paused sandbox answers too). CPU and memory
 * from its cgroups: v2 cpu.stat usage_usec, memory.current and the "file"
 * line of memory.stat; v1 cpuacct.usage when cpuacct shares the cpu
 * hierarchy, else the CPU times in /proc of every process in its pids
 * group (sub-groups included; a process's cutime/cstime carries the
 * children it reaped, so nothing is counted twice), memory.usage_in_bytes
 * and total_cache. Disk: the referenced bytes and limit of its writable
 * layer's btrfs qgroup (btrfs counts at transaction commit, so writes show
 * up to a commit interval late; no sync is forced, which would flush every
 * sandbox's layer); for an in-memory layer, statfs of the sandbox root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "local_int.h"

#define STAT_FILE_MAX (1u << 20)

static int read_u64(uint64_t *out, const char *dir, const char *file)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	char *data = NULL;
	size_t n;
	if (sbx__read_file(&data, &n, p, 4096, NULL) < 0)
		return -1;
	data[strcspn(data, "\n")] = '\0';
	int r = sbx__parse_u64(out, data);
	free(data);
	return r;
}

int sbx__cg_read_key(uint64_t *out, const char *dir, const char *file, const char *key)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	char *data = NULL;
	size_t n;
	if (sbx__read_file(&data, &n, p, STAT_FILE_MAX, NULL) < 0)
		return -1;
	int r = -1;
	size_t kl = strlen(key);
	for (char *l = data; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, kl) == 0 && l[kl] == ' ') {
			char *end = l + kl + 1 + strcspn(l + kl + 1, "\n");
			char c = *end;
			*end = '\0';
			r = sbx__parse_u64(out, l + kl + 1);
			*end = c;
			break;
		}
	free(data);
	return r;
}

/* utime + stime + cutime + cstime of one process, in clock ticks. */
static uint64_t proc_ticks(const char *pid)
{
	_cleanup_free_ char *p = xasprintf("/proc/%s/stat", pid);
	char *data = NULL;
	size_t n;
	if (sbx__read_file(&data, &n, p, 4096, NULL) < 0)
		return 0;
	uint64_t t = 0;
	char *s = strrchr(data, ')'); /* the command name may hold anything */
	unsigned long long u, st;
	long long cu, cs;
	if (s && sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &u, &st, &cu,
			&cs) == 4)
		t = u + st + (uint64_t)(cu > 0 ? cu : 0) + (uint64_t)(cs > 0 ? cs : 0);
	free(data);
	return t;
}

/* Sums proc_ticks over the processes of a v1 group and its sub-groups. */
static uint64_t group_ticks(const char *dir, int depth)
{
	uint64_t t = 0;
	_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", dir);
	char *data = NULL;
	size_t n;
	if (sbx__read_file(&data, &n, procs, STAT_FILE_MAX, NULL) == 0) {
		char *rest = data, *l;
		while ((l = strsep(&rest, "\n")) != NULL)
			if (*l)
				t += proc_ticks(l);
		free(data);
	}
	DIR *d = depth < 8 ? opendir(dir) : NULL;
	for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", dir, e->d_name);
		t += group_ticks(sub, depth + 1);
	}
	if (d)
		closedir(d);
	return t;
}

static void cpu_mem(sbx_stats *out, const struct cg_layout *cg, const char *id)
{
	uint64_t v;
	if (cg->mode == CG_V2) {
		_cleanup_free_ char *d = sbx__cg_dir(cg, 0, id);
		if (d && sbx__cg_read_key(&v, d, "cpu.stat", "usage_usec") == 0)
			out->cpu_s = (double)v / 1e6;
		if (d && read_u64(&v, d, "memory.current") == 0)
			out->mem_bytes = v;
		if (d && sbx__cg_read_key(&v, d, "memory.stat", "file") == 0)
			out->mem_cache_bytes = v;
		return;
	}
	if (cg->mode != CG_V1)
		return;
	_cleanup_free_ char *cpu = sbx__cg_dir(cg, CG_CPU, id), *mem = sbx__cg_dir(cg, CG_MEMORY, id);
	_cleanup_free_ char *pids = sbx__cg_dir(cg, CG_PIDS, id);
	if (cpu && read_u64(&v, cpu, "cpuacct.usage") == 0)
		out->cpu_s = (double)v / 1e9;
	else if (pids)
		out->cpu_s = (double)group_ticks(pids, 0) / (double)sysconf(_SC_CLK_TCK);
	if (mem && read_u64(&v, mem, "memory.usage_in_bytes") == 0)
		out->mem_bytes = v;
	if (mem && sbx__cg_read_key(&v, mem, "memory.stat", "total_cache") == 0)
		out->mem_cache_bytes = v;
}

/* Referenced bytes and limit of the qgroup of the btrfs subvolume dirfd. */
static int qgroup_usage(sbx_stats *out, int dirfd)
{
	struct btrfs_ioctl_ino_lookup_args a = { .treeid = 0, .objectid = BTRFS_FIRST_FREE_OBJECTID };
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	if (ioctl(dirfd, BTRFS_IOC_INO_LOOKUP, &a) < 0 || ioctl(dirfd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return -1;
	char path[160];
	int n = snprintf(path, sizeof(path), "/sys/fs/btrfs/");
	for (int i = 0; i < BTRFS_FSID_SIZE; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
			      fi.fsid[i]);
	snprintf(path + n, sizeof(path) - (size_t)n, "/qgroups/0_%llu", (unsigned long long)a.treeid);
	uint64_t used, max;
	if (read_u64(&used, path, "referenced") < 0)
		return -1;
	out->disk_bytes = used;
	if (read_u64(&max, path, "max_referenced") == 0)
		out->disk_total_bytes = max;
	return 0;
}

int sbx__local_stats(sbx_stats *out, void *h, sbx_error **err)
{
	(void)err;
	struct local_sb *sb = h;
	cpu_mem(out, sbx__local_cg(sb->ctx), sb->id);
	_cleanup_close_ int fd = sb->scratch ? open(sb->scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (fd < 0)
		fd = sbx__scratch_open(&sb->ctx->scratch, sb->id);
	if (fd >= 0 && qgroup_usage(out, fd) == 0 && out->disk_total_bytes)
		return 0;
	/* An in-memory layer (or no qgroup): the file system under the root,
	 * when an earlier file call fetched the root fd (asking init for it
	 * would wait on a paused sandbox). */
	pthread_mutex_lock(&sb->lock);
	int root = sb->rootfd >= 0 ? fcntl(sb->rootfd, F_DUPFD_CLOEXEC, 0) : -1;
	pthread_mutex_unlock(&sb->lock);
	struct statvfs v;
	if (root >= 0 && fstatvfs(root, &v) == 0) {
		out->disk_total_bytes = (unsigned long long)v.f_blocks * v.f_frsize;
		out->disk_bytes = (unsigned long long)(v.f_blocks - v.f_bfree) * v.f_frsize;
	}
	if (root >= 0)
		close(root);
	return 0;
}
