/* SPDX-License-Identifier: MIT */
/*
 * What a sandbox does cannot block its init or escape its limits (attacks
 * docs/security.md describes, init's side): a FIFO in place of /etc/passwd,
 * a fork bomb under a CPU quota, the host's open-file limit, CAP_NET_RAW. A
 * watchdog alarm turns a hang into a failure instead of a stuck suite.
 */
#include <signal.h>
#include <stdio.h>
#include <glob.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"

TestSuite(sandbox_limits, .init = setup, .fini = teardown, .timeout = 180);

static void watchdog(unsigned s)
{
	signal(SIGALRM, SIG_DFL);
	alarm(s);
}

static char *sh_as(sbx_sandbox *sb, const char *user, const char *cmd, int *code, int *rc)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	o.user = user;
	sbx_exec_result res;
	sbx_error *err = NULL;
	*rc = sbx_sandbox_exec(&res, sb, &o, &err);
	if (*rc < 0) {
		char *m = strdup(err && err->msg ? err->msg : "?");
		sbx_error_free(err);
		return m;
	}
	*code = res.exit_code;
	char *out = res.out ? res.out : strdup("");
	res.out = NULL;
	sbx_exec_result_free(&res);
	return out;
}

/* Before: init opened /etc/passwd (a FIFO the sandbox made) to resolve the
 * user and blocked for good, so this exec and every later one hung. */
Test(sandbox_limits, fifo_passwd_does_not_block_init)
{
	watchdog(60);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code, rc;
	free(sbx_test_sh(sb, "rm -f /etc/passwd && mkfifo /etc/passwd && echo ok", &code));
	cr_assert_eq(code, 0);
	/* A fresh user lookup (not the cached one): a named user. */
	char *out = sh_as(sb, "nobody", "id -u", &code, &rc);
	cr_assert_lt(rc, 0, "user nobody resolved from a FIFO: %s", out);
	cr_assert_not_null(strstr(out, "not found"), "unexpected error: %s", out);
	free(out);
	out = sh_as(sb, "root", "echo alive", &code, &rc);
	cr_assert_eq(rc, 0, "exec as root after the FIFO: %s", out);
	cr_assert_str_eq(out, "alive\n");
	free(out);
	destroy(sb);
	alarm(0);
}

/* An image without /etc at all still runs as root, as in Docker. */
Test(sandbox_limits, no_passwd_file_means_root)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code, rc;
	free(sbx_test_sh(sb, "rm -f /etc/passwd /etc/group", &code));
	char *out = sh_as(sb, "root", "id -u", &code, &rc);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_str_eq(out, "0\n");
	free(out);
	out = sh_as(sb, "1234:55", "id -u; id -g", &code, &rc);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_str_eq(out, "1234\n55\n");
	free(out);
	destroy(sb);
}

/* A fork bomb under a CPU quota: init's exec timeout still fires and the
 * sandbox still answers afterwards. Before, init shared the quota with the
 * bomb and its 3 s timer fired about 3 s late (strace of init), the kill
 * loop then raced the forks: the exec took 7-12 s. Now init stays outside
 * the quota (v1 cpu <id>/run) and stops the group's forks before killing. */
Test(sandbox_limits, fork_bomb_under_cpu_quota_keeps_timeouts)
{
	watchdog(150);
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.cpus = 0.5; /* the default pids limit (4096) applies */
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "b() { b | b & }; b; sleep 1000";
	o.timeout_s = 3;
	sbx_exec_result res;
	sbx_error *err = NULL;
	int r = sbx_sandbox_exec(&res, sb, &o, &err);
	cr_assert_eq(r, 0, "exec: %s", err ? err->msg : "?");
	cr_assert(res.timed_out, "the bomb's exec did not time out");
	sbx_exec_result_free(&res);
	int code;
	char *out = sbx_test_sh(sb, "echo alive", &code);
	cr_assert_str_eq(out, "alive\n");
	free(out);
	destroy(sb);
	alarm(0);
}

/* Commands get sbx's open-file limit, not whatever the host process had
 * (before: a host at 256 gave every command 256). */
Test(sandbox_limits, open_file_limit_is_not_the_hosts)
{
	struct rlimit old, low;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	setrlimit(RLIMIT_NOFILE, &old);
	int code;
	char *out = sbx_test_sh(sb, "ulimit -n", &code);
	cr_assert_neq(atoi(out), 256, "the sandbox inherited the host's open-file limit");
	cr_assert_geq(atoi(out), 1024, "open-file limit %s", out);
	free(out);
	destroy(sb);
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.nofile_max = 4000;
	sb = sbx_test_sandbox(rt, &so);
	out = sbx_test_sh(sb, "ulimit -n", &code);
	cr_assert_str_eq(out, "4000\n");
	free(out);
	destroy(sb);
}

static void packet(sbx_network net, sbx_userns ns, int net_raw, int want_ok)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.network = net;
	so.userns = ns;
	so.net_raw = net_raw;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	upload_probe(sb);
	int code;
	char *out = sbx_test_sh(sb, "/probe packet", &code);
	if (want_ok)
		cr_assert_str_eq(out, "packet: ok\n", "control: packet socket with net_raw failed: %s", out);
	else
		cr_assert_str_eq(out, "packet: Operation not permitted\n",
				 "a packet socket (a sniffer's start) opened: %s", out);
	free(out);
	destroy(sb);
}

/* Before: CAP_NET_RAW was kept, and with the host's network a sandbox
 * sniffed the server's X-API-KEY off lo with an AF_PACKET socket. */
Test(sandbox_limits, no_packet_sockets_in_any_mode)
{
	packet(SBX_NETWORK_NONE, SBX_USERNS_PRIVATE, 0, 0);
	packet(SBX_NETWORK_NONE, SBX_USERNS_HOST, 0, 0);
	packet(SBX_NETWORK_HOST, SBX_USERNS_HOST, 0, 0);
	packet(SBX_NETWORK_HOST, SBX_USERNS_PRIVATE, 0, 0);
	/* the explicit opt-in still works where root inside is root of the
	 * network namespace */
	packet(SBX_NETWORK_NONE, SBX_USERNS_HOST, 1, 1);
}

/* init writes /etc/hostname, /etc/hosts and /etc/resolv.conf. It used to do
 * so before pivot_root, through relative paths: an image whose etc is a
 * symlink to /etc led it to the host's /etc (as host root with
 * userns=host). Now they are written inside the new root. */
Test(sandbox_limits, image_etc_symlink_does_not_reach_host_etc)
{
	char dir[] = "/tmp/sbx-etclink-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char p[600];
	snprintf(p, sizeof(p), "mkdir -p %s/bin %s/real-etc && cp /bin/busybox %s/bin/ && ln -s busybox %s/bin/sh && "
		 "ln -s /real-etc %s/etc", dir, dir, dir, dir, dir);
	cr_assert_eq(system(p), 0);
	struct stat before;
	cr_assert_eq(stat("/etc/hostname", &before), 0);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(NULL, rt, "etclink", dir, &err), 0, "import: %s", err ? err->msg : "?");
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.image = "etclink";
	so.userns = SBX_USERNS_HOST;
	so.hostname = "etclink-probe";
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	int code;
	char *out = sbx_test_sh(sb, "cat /etc/hostname", &code);
	cr_assert_str_eq(out, "etclink-probe\n");
	free(out);
	destroy(sb);
	struct stat after;
	cr_assert_eq(stat("/etc/hostname", &after), 0);
	cr_assert(after.st_ino == before.st_ino && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
		  after.st_mtim.tv_nsec == before.st_mtim.tv_nsec, "the host's /etc/hostname was rewritten");
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	cr_assert_eq(system(p), 0);
}

/* Before: the writable layer was a tmpfs in host RAM charged to the memory
 * limit, so writing more than --memory to the sandbox's disk was OOM-killed
 * (a 10 GiB tmpfs per sandbox by default). Now it is a quota-capped btrfs
 * subvolume on disk: page cache, not pinned memory. */
Test(sandbox_limits, writable_layer_is_on_disk_not_in_memory)
{
	watchdog(120);
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.memory_mb = 64;
	so.storage_mb = 512;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	int code;
	char *out = sbx_test_sh(sb, "dd if=/dev/zero of=/big bs=1M count=200 2>&1 && wc -c < /big", &code);
	cr_assert_eq(code, 0, "a 200 MiB write under a 64 MiB memory limit failed (%d): %s", code, out);
	cr_assert_not_null(strstr(out, "209715200"), "%s", out);
	free(out);
	destroy(sb);
}

/* The host-side path of a sandbox's writable layer ($SBX_SCRATCH_DIR/<key>/<id>). */
static int scratch_layer(char *out, size_t n, const char *id)
{
	const char *root = getenv("SBX_SCRATCH_DIR");
	cr_assert_not_null(root, "tests run with SBX_SCRATCH_DIR set (tests/meson.build)");
	char pat[600];
	snprintf(pat, sizeof(pat), "%s/*/%s", root, id);
	glob_t g;
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	int found = g.gl_pathc == 1;
	if (found)
		snprintf(out, n, "%s", g.gl_pathv[0]);
	globfree(&g);
	return found;
}

/* Before: without --storage, a 10 GiB tmpfs; a spec that sets nothing must
 * still get a storage limit, and it must be enforced by the kernel on the
 * host side (a qgroup), not by anything inside. */
Test(sandbox_limits, storage_limit_applies_by_default)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char layer[700], cmd[800], line[512], id[64];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	cr_assert(scratch_layer(layer, sizeof(layer), id), "no writable layer of %s on disk", id);
	snprintf(cmd, sizeof(cmd), "btrfs qgroup show -r --raw -f '%s' 2>&1", layer);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	unsigned long long limit = 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long a, b, c;
		if (sscanf(line, "0/%*u %llu %llu %llu", &a, &b, &c) == 3)
			limit = c;
	}
	pclose(p);
	cr_assert(limit > 0 && limit <= 10240ULL << 20, "default storage limit %llu bytes", limit);
	destroy(sb);
	cr_assert_not(scratch_layer(layer, sizeof(layer), id), "layer of %s left after destroy", id);
}

/* Before: a read() of a pipe waits, uninterruptibly and whatever O_NONBLOCK
 * says, for the pipe's mutex, and a process inside that splices from an idle
 * socket into its stdout (busybox cat's sendfile) holds that mutex as long as
 * it likes. The exec read stdout on its own thread, so it never returned
 * (past its timeout, for as long as the sandbox lived) and the host process
 * could not even be killed. Now a reader thread takes that wait and the exec
 * returns on the command's exit status. */
Test(sandbox_limits, pipe_lock_held_inside_cannot_hang_exec)
{
	watchdog(120);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "echo before; exec 9>&1; nc -l -p 5557 -e sh -c 'cat >&9' 2>/dev/null & sleep 0.3; "
		  "(sleep 1000 | nc 127.0.0.1 5557) & sleep 0.5; exit 0";
	o.timeout_s = 30;
	sbx_exec_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, &err), 0, "%s", err ? err->msg : "?");
	cr_assert_eq(r.exit_code, 0);
	cr_assert_str_eq(r.out, "before\n");
	sbx_exec_result_free(&r);
	/* and the sandbox still answers */
	int code;
	char *out = sbx_test_sh(sb, "echo alive", &code);
	cr_assert_str_eq(out, "alive\n");
	free(out);
	destroy(sb);
}

/* An image with no /etc at all (FROM scratch, a bare static binary): the
 * default user is uid 0 with no lookup, and `sbx run IMAGE -- /bin/true`
 * works through the CLI, as Docker and bubblewrap run it. */
Test(sandbox_limits, rootfs_without_etc_runs)
{
	char dir[] = "/tmp/sbx-noetc-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char p[700];
	snprintf(p, sizeof(p), "mkdir -p %s/bin && cp /bin/busybox %s/bin/true", dir, dir);
	cr_assert_eq(system(p), 0);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(NULL, rt, "noetc", dir, &err), 0, "import: %s", err ? err->msg : "?");
	const char *sbx = getenv("SBX_BUILD_ROOT");
	cr_assert_not_null(sbx);
	snprintf(p, sizeof(p), "SBX_STATE_DIR='%s' SBX_IMAGE_DIR='%s' '%s/src/cli/sbx' run noetc -- /bin/true",
		 sbx_runtime_state_dir(rt), sbx_runtime_image_dir(rt), sbx);
	int st = system(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbx run on a rootfs without /etc: status %d", st);
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	cr_assert_eq(system(p), 0);
}
