/* SPDX-License-Identifier: MIT */
/* The sandbox's v1 memory group, seen from the host (limits.c, pool.c, cli_pool.c). */
#ifndef SBX_TEST_INTEGRATION_MEMCG_H
#define SBX_TEST_INTEGRATION_MEMCG_H

#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <unistd.h>

#include <sbx/sandbox.h>

/* v1 memory group of the sandbox ("" if the host has no v1 memory
 * hierarchy: the lazy memcg is v1 only), in buf; 1 if it exists. */
static inline int memcg_dir_of(const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "/sys/fs/cgroup/memory/sbx-*/%s", id);
	glob_t g;
	int found = glob(buf, 0, NULL, &g) == 0;
	if (found)
		snprintf(buf, cap, "%s", g.gl_pathv[0]);
	globfree(&g);
	return found;
}

static inline int memcg_dir(sbx_sandbox *sb, char *buf, size_t cap)
{
	return memcg_dir_of(sbx_sandbox_id(sb), buf, cap);
}

static inline int have_v1_memory(void)
{
	return access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0;
}

static inline long read_long(const char *dir, const char *file)
{
	char p[1024];
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p))
		return -1;
	FILE *f = fopen(p, "r");
	long v = -1;
	if (f && fscanf(f, "%ld", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

static inline void require_v1_memory(void)
{
	if (!have_v1_memory())
		cr_skip_test("no cgroup v1 memory hierarchy: the memory group is made at create");
}

#endif
