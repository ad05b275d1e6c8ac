/* SPDX-License-Identifier: MIT */
/* Resource limits: pids, memory and storage stop inside the sandbox. */
#include <glob.h>
#include <unistd.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

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
