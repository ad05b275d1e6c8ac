/* SPDX-License-Identifier: MIT */
/* Resource limits: pids, memory and storage stop inside the sandbox. */
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "memcg.h"

TestSuite(limits, .init = setup, .fini = teardown);

/* Reads "<key> N" from a pids cgroup file of this sandbox, or -1. */
static long pids_file(sbx_sandbox *sb, const char *file, const char *key);
static long pids_file(sbx_sandbox *sb, const char *file, const char *key)
{
	char pat[256];
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/pids/sbx-*/%s/%s", sbx_sandbox_id(sb), file);
	glob_t g;
	if (glob(pat, 0, NULL, &g) != 0)
		return -1;
	FILE *f = fopen(g.gl_pathv[0], "r");
	globfree(&g);
	if (!f)
		return -1;
	char line[128];
	long v = -1;
	while (fgets(line, sizeof(line), f))
		if (!key[0])
			v = atol(line);
		else if (!strncmp(line, key, strlen(key)))
			v = atol(line + strlen(key));
	fclose(f);
	return v;
}

Test(limits, fork_bomb_stops_at_pids_limit)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.pids_max = 48;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "for i in $(seq 200); do sleep 100 & done; wait";
	o.timeout_s = 2;
	sbx_exec_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, &err), 0, "%s", err ? err->msg : "");
	/* the shell reported failed forks; the host never noticed */
	cr_assert_not_null(strstr(r.err, "fork"), "no fork failure reported: %s", r.err);
	sbx_exec_result_free(&r);
	long peak = pids_file(sb, "pids.peak", "");
	if (peak >= 0)
		cr_assert(peak <= 48 && peak >= 40, "pids.peak %ld (limit 48)", peak);
	const char *pk[] = { "pkill", "sleep", NULL };
	o.shell = NULL;
	o.argv = pk;
	o.timeout_s = 0;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, NULL), 0);
	sbx_exec_result_free(&r);
	usleep(100000);
	o.argv = NULL;
	o.shell = "echo alive";
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, NULL), 0);
	cr_assert_str_eq(r.out, "alive\n");
	sbx_exec_result_free(&r);
	destroy(sb);
}

Test(limits, memory_hog_is_killed_inside_only)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.memory_mb = 64;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	/* The upload runs nothing inside: the hog is the first command, the
	 * one that makes the (lazy) memory group, and the limit holds for it. */
	upload_probe(sb);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	const char *argv[] = { "/probe", "hog", "512", NULL };
	o.argv = argv;
	sbx_exec_result r;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, NULL), 0);
	cr_assert_eq(r.signal, 9, "hog was not OOM-killed: exit %d out %s", r.exit_code, r.out);
	sbx_exec_result_free(&r);
	/* a modest allocation still works, and the sandbox lives on */
	const char *small[] = { "/probe", "hog", "16", NULL };
	o.argv = small;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, NULL), 0);
	cr_assert_eq(r.exit_code, 0, "%s %s", r.out, r.err);
	cr_assert_str_eq(r.out, "hog: allocated 16 MiB\n");
	sbx_exec_result_free(&r);
	destroy(sb);
}

Test(limits, filling_the_disk_stops_at_storage_mb)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.storage_mb = 32;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	int code;
	char *out = sbx_test_sh(sb, "dd if=/dev/zero of=/big bs=1M count=100 2>&1; "
				    "echo size=$(( $(wc -c < /big) / 1048576 ))", &code);
	/* ENOSPC from a tmpfs, EDQUOT from the disk layer's quota. */
	cr_assert(strstr(out, "No space left on device") || strstr(out, "Disk quota exceeded"), "%s", out);
	char *size = strstr(out, "size=");
	cr_assert_not_null(size, "%s", out);
	int mb = atoi(size + 5);
	cr_assert(mb >= 28 && mb <= 32, "wrote %d MiB with a 32 MiB cap", mb);
	free(out);
	/* deleting frees the space again */
	out = sbx_test_sh(sb, "rm /big; dd if=/dev/zero of=/f bs=1M count=8 2>/dev/null && echo ok", &code);
	cr_assert_str_eq(out, "ok\n");
	free(out);
	destroy(sb);
}

Test(limits, cpu_quota_is_applied)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.cpus = 0.5;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	/* Its own cgroup is not mounted inside the sandbox; check from the host. */
	char pat[256];
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/cpu/sbx-*/%s/run/cpu.cfs_quota_us", sbx_sandbox_id(sb));
	glob_t g;
	if (glob(pat, 0, NULL, &g) == 0) {
		FILE *f = fopen(g.gl_pathv[0], "r");
		long q = 0;
		cr_assert_eq(fscanf(f, "%ld", &q), 1);
		cr_assert_eq(q, 50000);
		fclose(f);
	} else {
		snprintf(pat, sizeof(pat), "/sys/fs/cgroup/unified/sbx-*/%s/cpu.max", sbx_sandbox_id(sb));
		cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no cpu controller file for %s", sbx_sandbox_id(sb));
		FILE *f = fopen(g.gl_pathv[0], "r");
		char line[64] = "";
		cr_assert_not_null(fgets(line, sizeof(line), f));
		cr_assert_str_eq(line, "50000 100000\n");
		fclose(f);
	}
	globfree(&g);
	destroy(sb);
}

/* sbx_sandbox_limits: what a spec asks for, else the provider's defaults
 * (what security/server checks against the cgroup and the qgroup). */
Test(limits, reported_limits_fill_in_the_defaults)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	sbx_limits l;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_limits(&l, rt, &so, &err), 0, "%s", err ? err->msg : "");
	cr_expect_eq(l.cpus, 0);
	const char *dm = getenv("SBX_DEFAULT_MEMORY");
	if (!dm || !*dm)
		cr_expect(l.memory_mb >= 256 && l.memory_mb <= 8192, "default memory %u MiB", l.memory_mb);
	cr_expect(l.storage_mb >= 256 && l.storage_mb <= 10240, "default storage %u MiB", l.storage_mb);
	so.cpus = 1.5;
	so.memory_mb = 300;
	so.storage_mb = 200;
	cr_assert_eq(sbx_sandbox_limits(&l, rt, &so, &err), 0, "%s", err ? err->msg : "");
	cr_expect(l.cpus == 1.5 && l.memory_mb == 300 && l.storage_mb == 200, "%g %u %u", l.cpus, l.memory_mb,
		  l.storage_mb);
	so.provider = "no-such-provider";
	cr_expect_eq(sbx_sandbox_limits(&l, rt, &so, &err), -ENOENT);
	sbx_error_free(err);
}

/* sbx_sandbox_stats: CPU time, memory and the writable layer grow with
 * what runs inside, and a paused sandbox still answers. */
Test(limits, stats_follow_what_runs_inside)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.storage_mb = 64;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	sbx_stats a, b;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_stats(&a, sb, &err), 0, "%s", err ? err->msg : "");
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	/* btrfs accounts a qgroup at transaction commit: sync makes it now */
	o.shell = "head -c 8000000 /dev/urandom > /big; sync; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";
	sbx_exec_result r;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	sbx_exec_result_free(&r);
	cr_assert_eq(sbx_sandbox_stats(&b, sb, &err), 0, "%s", err ? err->msg : "");
	cr_expect(b.cpu_s > a.cpu_s, "cpu %g s then %g s", a.cpu_s, b.cpu_s);
	cr_expect(b.mem_bytes > 0 && b.mem_cache_bytes <= b.mem_bytes, "memory %llu, cache %llu", b.mem_bytes,
		  b.mem_cache_bytes);
	cr_expect(b.disk_bytes >= a.disk_bytes + 7000000, "layer %llu then %llu bytes", a.disk_bytes, b.disk_bytes);
	cr_expect(b.disk_total_bytes >= 60ull << 20 && b.disk_total_bytes <= 70ull << 20, "layer limit %llu",
		  b.disk_total_bytes);
	cr_assert_eq(sbx_sandbox_pause(sb, &err), 0, "%s", err ? err->msg : "");
	cr_expect_eq(sbx_sandbox_stats(&b, sb, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_sandbox_resume(sb, &err), 0, "%s", err ? err->msg : "");
	destroy(sb);
}


/* An idle sandbox has no memory group (each costs shrinker info that grows
 * with the host's superblocks); the first exec, from another handle opened
 * by id, makes it with the limit and moves init in. */
Test(limits, memcg_is_made_at_first_exec)
{
	require_v1_memory();
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.memory_mb = 96;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	char dir[512];
	cr_assert_not(memcg_dir(sb, dir, sizeof(dir)), "idle sandbox has a memory group %s", dir);
	/* stats work without one */
	sbx_stats st;
	cr_assert_eq(sbx_sandbox_stats(&st, sb, NULL), 0);
	sbx_sandbox *again = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt, NULL, sbx_sandbox_id(sb), &err), 0, "%s", err ? err->msg : "");
	int code;
	char *out = sbx_test_sh(again, "echo first", &code);
	cr_assert_str_eq(out, "first\n");
	free(out);
	cr_assert(memcg_dir(sb, dir, sizeof(dir)), "no memory group after the first exec");
	cr_expect_eq(read_long(dir, "memory.limit_in_bytes"), 96L << 20);
	/* init (the only process left) is in it */
	cr_expect_gt(read_long(dir, "cgroup.procs"), 1);
	out = sbx_test_sh(sb, "echo second", &code);
	cr_assert_str_eq(out, "second\n");
	free(out);
	sbx_sandbox_free(again);
	char gone[512];
	snprintf(gone, sizeof(gone), "%s", dir);
	destroy(sb);
	cr_expect_neq(access(gone, F_OK), 0, "memory group left after destroy");
}

struct first_exec {
	sbx_sandbox *sb;
	int rc, code;
};

static void *first_exec_thread(void *arg)
{
	struct first_exec *fe = arg;
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "true";
	sbx_exec_result r;
	fe->rc = sbx_sandbox_exec(&r, fe->sb, &o, NULL);
	if (fe->rc == 0) {
		fe->code = r.exit_code;
		sbx_exec_result_free(&r);
	}
	return NULL;
}

/* Two handles racing for the first exec: both run inside the limit. */
Test(limits, concurrent_first_execs_share_the_memcg)
{
	require_v1_memory();
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.memory_mb = 80;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	sbx_sandbox *again = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt, NULL, sbx_sandbox_id(sb), NULL), 0);
	struct first_exec a = { .sb = sb }, b = { .sb = again };
	pthread_t ta, tb;
	pthread_create(&ta, NULL, first_exec_thread, &a);
	pthread_create(&tb, NULL, first_exec_thread, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_expect(a.rc == 0 && a.code == 0 && b.rc == 0 && b.code == 0, "%d/%d %d/%d", a.rc, a.code, b.rc,
		  b.code);
	char dir[512];
	cr_assert(memcg_dir(sb, dir, sizeof(dir)));
	cr_expect_eq(read_long(dir, "memory.limit_in_bytes"), 80L << 20);
	sbx_sandbox_free(again);
	destroy(sb);
}

/* A sandbox destroyed before running anything leaves no group behind, even
 * when a stale handle then tries its first exec. */
Test(limits, destroy_idle_leaves_no_cgroups)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char id[64], pat[256];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	sbx_sandbox *again = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt, NULL, id, NULL), 0);
	destroy(again);
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.shell = "true";
	sbx_exec_result r;
	sbx_error *err = NULL;
	cr_expect_eq(sbx_sandbox_exec(&r, sb, &eo, &err), -ESRCH);
	sbx_error_free(err);
	sbx_sandbox_free(sb);
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/sbx-*/%s", id);
	glob_t g;
	int found = glob(pat, 0, NULL, &g) == 0;
	cr_expect_not(found, "left: %s", found ? g.gl_pathv[0] : "");
	if (found)
		globfree(&g);
}

static int spares_in(const char *memcg)
{
	char pat[600];
	snprintf(pat, sizeof(pat), "%s", memcg);
	*strrchr(pat, '/') = '\0';
	strncat(pat, "/.spare-*", sizeof(pat) - strlen(pat) - 1);
	glob_t g;
	int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	if (n)
		globfree(&g);
	return n;
}

/* A destroyed sandbox's memory group is kept as a spare (cgroup_spare.c)
 * for the next first exec, which writes its own limit over the last one,
 * higher or lower, and the limit holds. */
Test(limits, memcg_spares_take_the_new_limit)
{
	require_v1_memory();
	/* A process parks from its second create on (cgroup_spare.c): with
	 * one create behind it, each sandbox below leaves a spare that the
	 * next one takes, raising (64 -> 160) and lowering (160 -> 48). */
	destroy(sbx_test_sandbox(rt, NULL));
	static const unsigned mbs[] = { 64, 160, 48 };
	for (size_t i = 0; i < sizeof(mbs) / sizeof(mbs[0]); i++) {
		sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
		so.memory_mb = mbs[i];
		sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
		upload_probe(sb);
		sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
		const char *argv[] = { "/probe", "hog", "512", NULL };
		o.argv = argv;
		sbx_exec_result r;
		cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, NULL), 0);
		cr_expect_eq(r.signal, 9, "%u MiB: hog was not OOM-killed: exit %d %s", mbs[i], r.exit_code,
			     r.err ? r.err : "");
		sbx_exec_result_free(&r);
		char dir[512];
		cr_assert(memcg_dir(sb, dir, sizeof(dir)));
		long want = (long)mbs[i] << 20, memsw = read_long(dir, "memory.memsw.limit_in_bytes");
		cr_expect_eq(read_long(dir, "memory.limit_in_bytes"), want, "sandbox %zu", i);
		cr_expect(memsw == -1 || memsw == want, "sandbox %zu: memsw %ld", i, memsw);
		cr_expect_eq(read_long(dir, "memory.max_usage_in_bytes") <= want, 1);
		destroy(sb);
		cr_expect_gt(spares_in(dir), 0, "no spare memory group after destroy %zu", i);
	}
}

/* total_shmem of memory group DIR's memory.stat, -1 if unreadable. */
static long long stat_shmem(const char *dir)
{
	char p[600], key[64];
	snprintf(p, sizeof(p), "%s/memory.stat", dir);
	FILE *f = fopen(p, "r");
	long long v = -1, x;
	while (f && fscanf(f, "%63s %lld", key, &x) == 2)
		if (!strcmp(key, "total_shmem"))
			v = x;
	if (f)
		fclose(f);
	return v;
}

/* A group whose dead sandbox still holds tmpfs pages (its /dev/shm, while
 * the mount namespace is being released) is not kept: no spare ever
 * carries memory the next sandbox could not reclaim. */
Test(limits, memcg_spares_hold_no_tmpfs_memory)
{
	require_v1_memory();
	/* From the second create on, the namespace pool's thread runs and a
	 * destroy leaves the mount namespace (and its tmpfs) to it. */
	for (int i = 0; i < 2; i++)
		destroy(sbx_test_sandbox(rt, NULL));
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.memory_mb = 128;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	int code;
	free(sbx_test_sh(sb, "dd if=/dev/zero of=/dev/shm/fill bs=1M count=16 2>/dev/null; echo done", &code));
	cr_assert_eq(code, 0);
	char dir[512];
	cr_assert(memcg_dir(sb, dir, sizeof(dir)));
	cr_expect_gt(stat_shmem(dir), 8LL << 20, "the fill is not charged to the sandbox's group");
	destroy(sb);
	char pat[600];
	snprintf(pat, sizeof(pat), "%s", dir);
	*strrchr(pat, '/') = '\0';
	strncat(pat, "/.spare-*", sizeof(pat) - strlen(pat) - 1);
	glob_t g;
	if (glob(pat, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			cr_expect_eq(stat_shmem(g.gl_pathv[i]), 0, "%s holds tmpfs memory", g.gl_pathv[i]);
		globfree(&g);
	}
}
