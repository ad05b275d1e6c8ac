/* SPDX-License-Identifier: MIT */
/*
 * Spare memory groups (cgroup v1): a destroyed sandbox's emptied memory
 * group is renamed to "<parent>/.spare-N" instead of removed, and the next
 * sandbox's first exec renames it to its own id instead of making one.
 *
 * Why: making a memory cgroup allocates its shrinker map, and removing it
 * walks that map (alloc_shrinker_info, reparent_shrinker_deferred), both
 * linear in the number of superblocks the host has ever had at once; after
 * 5000 sandboxes one mkdir + rmdir costs ~0.6 ms of CPU more than a pids
 * group's (docs/performance.md), more than a fifth of a whole lifecycle.
 * A removed group that still holds page cache also lingers as a dying
 * memcg. A rename is one kernfs operation.
 *
 * A spare keeps only what is reclaimable (page cache of files the last
 * sandbox read, charged until reclaimed; sbx stats leave cache out): a
 * group that still holds anonymous or tmpfs memory is removed as before.
 * Its peak and fail counters are reset when it is parked, and the next
 * sandbox writes its own limit before init moves in. A process parks
 * from its second create on, as the namespace pool starts (nspool.c): a
 * one-shot `sbx run` or `sbx rm` would only park a group to remove it at
 * its exit, 70 system calls for nothing. Names are claimed by
 * rename, which fails with EEXIST on a taken name, so processes sharing a
 * state dir never take the same spare. At most SBX_MEMCG_SPARES (default
 * 16) per parent; a runtime that parked any removes them all when it is
 * freed (cgroup.c), like the parent groups. What a crashed process left
 * is taken by later first execs and removed by the next process that
 * parks (a server, a trainer, a pool keeper); a process that parked none
 * (`sbx exec`, `sbx ls`, `sbx rm`, `sbx gc`, a one-shot `sbx run`) leaves
 * them. A process that parked and exits drops a live server's spares too:
 * that only costs the server fresh groups until it parks new ones.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "local_int.h"

#define SPARES_MAX 64

/* Set once this process parks a spare: a process that never did (`sbx
 * exec`, `sbx ls`) does not pay SPARES_MAX rmdirs on its way out. */
static int parked_any;
/* Sandboxes this process created: parking starts at the second. */
static unsigned creates;

void sbx__cg_spare_count_create(void)
{
	__atomic_add_fetch(&creates, 1, __ATOMIC_RELAXED);
}

static unsigned spares(void)
{
	const char *v = sbx__env("SBX_MEMCG_SPARES");
	long n = v && *v ? strtol(v, NULL, 10) : 16;
	return n < 0 ? 0 : n > SPARES_MAX ? SPARES_MAX : (unsigned)n;
}

static char *spare_path(const struct cg_layout *cg, unsigned k)
{
	return xasprintf("%s/%s/.spare-%u", cg->root[CG_MEMORY], cg->parent, k);
}

static int usable(const struct cg_layout *cg)
{
	return cg->mode == CG_V1 && cg->root[CG_MEMORY] && cg->parent;
}

int sbx__cg_spare_take(const struct cg_layout *cg, const char *dir)
{
	unsigned n = usable(cg) ? spares() : 0;
	/* Parking fills the lowest free name, so spares are .spare-0 up but
	 * for gaps that concurrent takes leave: four missing names in a row
	 * end the search (a spare past them waits for a later take, or the
	 * runtime's end), so a sandbox with none to take pays four renames. */
	for (unsigned k = 0, miss = 0; k < n && miss < 4; k++) {
		_cleanup_free_ char *s = spare_path(cg, k);
		if (rename(s, dir) == 0)
			return 0;
		if (errno != ENOENT)
			break;
		miss++;
	}
	return -1;
}

/* Whether the group holds no memory the next sandbox could not reclaim:
 * tmpfs pages (/dev, /dev/shm, a tmpfs writable layer, SysV shm) stay
 * charged while the dead sandbox's mount and IPC namespaces are still
 * being released (nspool.c does that in the background), and without
 * swap they would count against the next sandbox's limit. Anonymous
 * memory went with the tasks (the group is empty); page cache is fine:
 * it is reclaimed first. */
static int unreclaimable_free(const char *dir)
{
	uint64_t shmem = 1;
	return sbx__cg_read_key(&shmem, dir, "memory.stat", "total_shmem") == 0 && shmem == 0;
}

int sbx__cg_spare_park(const struct cg_layout *cg, const char *dir)
{
	unsigned n = usable(cg) && __atomic_load_n(&creates, __ATOMIC_RELAXED) >= 2 ? spares() : 0;
	if (!n)
		return -1;
	/* Only an empty group: a dying task would live on in the spare. */
	_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", dir);
	char *data = NULL;
	size_t len = 0;
	if (sbx__read_file(&data, &len, procs, 4096, NULL) < 0)
		return -1;
	free(data);
	if (len || !unreclaimable_free(dir))
		return -1;
	static const char *const counters[] = { "memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes",
						"memory.failcnt", "memory.memsw.failcnt" };
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		sbx__cg_write_str(dir, counters[i], "0");
	for (unsigned k = 0; k < n; k++) {
		_cleanup_free_ char *s = spare_path(cg, k);
		if (rename(dir, s) == 0) {
			__atomic_store_n(&parked_any, 1, __ATOMIC_RELAXED);
			return 0;
		}
		if (errno != EEXIST && errno != ENOTEMPTY)
			break;
	}
	return -1;
}

void sbx__cg_spare_drop(const struct cg_layout *cg)
{
	if (!usable(cg) || !__atomic_load_n(&parked_any, __ATOMIC_RELAXED))
		return;
	for (unsigned k = 0; k < SPARES_MAX; k++) {
		_cleanup_free_ char *s = spare_path(cg, k);
		rmdir(s);
	}
}
