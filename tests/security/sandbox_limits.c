/* SPDX-License-Identifier: MIT */
/*
 * What a sandbox does cannot block its init or escape its limits (attacks
 * docs/security.md describes, init's side): a FIFO in place of /etc/passwd,
 * a fork bomb under a CPU quota, the host's open-file limit, CAP_NET_RAW. A
 * watchdog alarm turns a hang into a failure instead of a stuck suite.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
