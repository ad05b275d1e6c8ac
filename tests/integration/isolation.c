/* SPDX-License-Identifier: MIT */
/* Isolation: what a sandboxed process can see and do. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

TestSuite(isolation, .init = setup, .fini = teardown);

Test(isolation, host_processes_invisible)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code;
	char *out = sbx_test_sh(sb, "ls -d /proc/[0-9]* | wc -l; cat /proc/1/cmdline", &code);
	cr_assert_eq(code, 0);
	int n = atoi(out);
	/* init, sh, ls and wc: nothing of the host's hundreds of processes */
	cr_assert(n >= 2 && n <= 5, "sandbox sees %d processes: %s", n, out);
	cr_assert_not_null(strstr(out, "sbx-init"), "pid 1 is not sbx-init: %s", out);
	free(out);
	destroy(sb);
}

Test(isolation, host_files_invisible_and_image_untouched)
{
	char host[] = "/tmp/sbx-hostfile-XXXXXX";
	int fd = mkstemp(host);
	cr_assert(fd >= 0);
	close(fd);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -e %s && echo visible; echo x >> /etc/passwd; echo done", host);
	int code;
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert_str_eq(out, "done\n");
	free(out);
	destroy(sb);
	/* The image layer is shared and read-only: a new sandbox sees the original. */
	sb = sbx_test_sandbox(rt, NULL);
	out = sbx_test_sh(sb, "grep -c '^x$' /etc/passwd", &code);
	cr_assert_str_eq(out, "0\n");
	free(out);
	destroy(sb);
	unlink(host);
}

/* init holds host fds (its cgroup directory, the control socket). Were it
 * dumpable, a sandboxed root could open /proc/1/fd/N without CAP_SYS_PTRACE
 * and walk ".." from the cgroup directory up to the host's "/" (the runc
 * CVE-2024-21626 pattern), or rewrite init through /proc/1/mem. */
Test(isolation, init_fds_and_memory_out_of_reach)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code;
	char *out = sbx_test_sh(sb,
				"n=0; for f in /proc/1/fd/*; do "
				"  [ -e \"$f\" ] && n=$((n+1)); "
				"  for up in .. ../.. ../../.. ../../../.. ../../../../.. ../../../../../..; do "
				"    cat \"$f/$up/etc/os-release\" 2>/dev/null && echo ESCAPED; "
				"  done; "
				"done; "
				"cat /proc/1/mem >/dev/null 2>&1 && echo MEM; "
				"cat /proc/1/environ >/dev/null 2>&1 && echo ENVIRON; "
				"ls /proc/1/fd >/dev/null 2>&1; echo \"reachable=$n\"",
				&code);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert_null(strstr(out, "ESCAPED"), "escaped through init's fds: %s", out);
	cr_assert_null(strstr(out, "MEM"), "/proc/1/mem readable: %s", out);
	cr_assert_null(strstr(out, "ENVIRON"), "/proc/1/environ readable: %s", out);
	cr_assert_not_null(strstr(out, "reachable=0"), "init's fds reachable: %s", out);
	free(out);
	destroy(sb);
}

Test(isolation, no_network_by_default)
{
	/* A listener on the host's loopback must be unreachable from the sandbox. */
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(ls, 1), 0);
	socklen_t len = sizeof(sa);
	getsockname(ls, (struct sockaddr *)&sa, &len);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "/probe connect %d; cat /proc/net/dev | tail -n +3 | cut -d: -f1", ntohs(sa.sin_port));
	int code;
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert_not_null(strstr(out, "connect: Connection refused"), "%s", out);
	/* only loopback exists */
	cr_assert_not_null(strstr(out, "lo"), "%s", out);
	cr_assert_null(strstr(out, "eth"), "%s", out);
	free(out);
	destroy(sb);
	close(ls);
}

Test(isolation, host_network_on_request)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(ls, 1), 0);
	socklen_t len = sizeof(sa);
	getsockname(ls, (struct sockaddr *)&sa, &len);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.network = SBX_NETWORK_HOST;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	upload_probe(sb);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "/probe connect %d", ntohs(sa.sin_port));
	int code;
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert_str_eq(out, "connect: ok\n");
	free(out);
	destroy(sb);
	close(ls);
}

Test(isolation, own_hostname)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.hostname = "episode-42";
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	int code;
	char *out = sbx_test_sh(sb, "hostname; cat /etc/hostname; grep episode-42 /etc/hosts | wc -l", &code);
	cr_assert_str_eq(out, "episode-42\nepisode-42\n1\n");
	free(out);
	destroy(sb);
	char host[256];
	gethostname(host, sizeof(host));
	cr_assert_str_neq(host, "episode-42");
}

Test(isolation, capabilities_dropped)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code;
	char *out = sbx_test_sh(sb, "grep -E '^Cap(Eff|Bnd)|^NoNewPrivs|^Seccomp:' /proc/self/status", &code);
	/* Docker's default set minus CAP_MKNOD and CAP_NET_RAW (bit 13); no
	 * CAP_SYS_ADMIN (bit 21). */
	cr_assert_not_null(strstr(out, "CapEff:\t00000000a00405fb"), "%s", out);
	cr_assert_not_null(strstr(out, "CapBnd:\t00000000a00405fb"), "%s", out);
	cr_assert_not_null(strstr(out, "NoNewPrivs:\t1"), "%s", out);
	cr_assert_not_null(strstr(out, "Seccomp:\t2"), "%s", out);
	free(out);
	destroy(sb);
}

Test(isolation, seccomp_denies_mount_ptrace_and_more)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	int code;
	char *out = sbx_test_sh(sb, "for c in mount ptrace unshare bpf keyctl mknod; do /probe $c; done", &code);
	cr_assert_str_eq(out,
			 "mount: Operation not permitted\nptrace: Operation not permitted\n"
			 "unshare: Operation not permitted\nbpf: Operation not permitted\n"
			 "keyctl: Operation not permitted\nmknod: Operation not permitted\n");
	free(out);
	destroy(sb);
}

Test(isolation, sandboxes_do_not_see_each_other)
{
	sbx_sandbox *a = sbx_test_sandbox(rt, NULL);
	sbx_sandbox *b = sbx_test_sandbox(rt, NULL);
	int code;
	free(sbx_test_sh(a, "echo secret > /tmp/a; sleep 30 >/dev/null 2>&1 &", &code));
	char *out = sbx_test_sh(a, "ps | grep -v grep | grep -c 'sleep 30'", &code);
	cr_assert_str_eq(out, "1\n");
	free(out);
	out = sbx_test_sh(b, "cat /tmp/a 2>&1; ps | grep -v grep | grep -c 'sleep 30'", &code);
	cr_assert_not_null(strstr(out, "No such file"), "%s", out);
	cr_assert_not_null(strstr(out, "\n0\n"), "%s", out);
	free(out);
	destroy(a);
	destroy(b);
}

/* Sandboxes served from the namespace pool (nspool.c; it starts at a
 * process's second create) each get their own fresh network, UTS and IPC
 * namespaces: never the host's, never another sandbox's, loopback up. */
Test(isolation, pooled_namespaces_are_fresh_and_distinct)
{
	enum { N = 6 };
	sbx_sandbox *sb[N];
	char *ids[N];
	char host[256];
	snprintf(host, sizeof(host), "%s", "");
	for (int k = 0; k < 3; k++) {
		char p[64], t[64];
		static const char *kinds[] = { "net", "uts", "ipc" };
		snprintf(p, sizeof(p), "/proc/self/ns/%s", kinds[k]);
		ssize_t n = readlink(p, t, sizeof(t) - 1);
		cr_assert_gt(n, 0);
		t[n] = '\0';
		strncat(host, t, sizeof(host) - strlen(host) - 2);
		strcat(host, " ");
	}
	for (int i = 0; i < N; i++) {
		sb[i] = sbx_test_sandbox(rt, NULL);
		usleep(20000); /* let the pool refill, so later creates are served from it */
		int code;
		ids[i] = sbx_test_sh(sb[i], "for k in net uts ipc; do printf '%s ' $(readlink /proc/self/ns/$k); done; "
				     "ip link show lo 2>/dev/null | grep -c UP || cat /sys/class/net/lo/operstate", &code);
		cr_assert_eq(code, 0, "%s", ids[i]);
		char *nl = strchr(ids[i], ' ');
		cr_assert_not_null(nl);
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(ids[i], ids[j], "two sandboxes share namespaces: %s", ids[i]);
		/* none of the three matches the host's */
		char first[64];
		for (const char *s = ids[i]; sscanf(s, "%63s", first) == 1 && strchr(first, ':');) {
			cr_assert_null(strstr(host, first), "sandbox in a host namespace: %s", first);
			s = strchr(s, ' ');
			if (!s)
				break;
			s++;
		}
	}
	for (int i = 0; i < N; i++) {
		destroy(sb[i]);
		free(ids[i]);
	}
}


/* An idle init runs on a stack of its own .bss and has unmapped [stack],
 * [vvar] and [vdso] (init/main.c); whatever libc used of the old stack
 * (the auxiliary vector for malloc's first call, the environment) must
 * still work: a timed-out tree makes init allocate (kill_tree's opendir). */
Test(isolation, idle_init_maps_only_its_binary)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code;
	free(sbx_test_sh(sb, "true", &code));
	cr_assert_eq(code, 0);
	char path[64], maps[8192];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)sandbox_init_pid(sb));
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = fread(maps, 1, sizeof(maps) - 1, f);
	fclose(f);
	maps[n] = '\0';
	cr_expect_null(strstr(maps, "[stack]"), "init still maps its stack:\n%s", maps);
	cr_expect_null(strstr(maps, "[vdso]"), "init still maps the vDSO:\n%s", maps);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "sleep 30 & sleep 30";
	o.timeout_s = 0.3;
	sbx_exec_result r = { 0 };
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, &err), 0, "exec: %s", err ? err->msg : "?");
	cr_expect_eq(r.timed_out, 1);
	sbx_exec_result_free(&r);
	char *out = sbx_test_sh(sb, "echo alive", &code);
	cr_expect_str_eq(out, "alive\n", "init died after a timeout");
	free(out);
	destroy(sb);
}

/* /dev/shm shares /dev's tmpfs (one superblock less per sandbox) but keeps
 * a tmpfs's /dev/shm flags: writable by anyone, nothing runs from it. */
Test(isolation, dev_shm_is_writable_and_noexec)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	int code;
	char *out = sbx_test_sh(sb,
				"grep ' /dev/shm ' /proc/self/mountinfo | grep -c 'nosuid,nodev,noexec'; "
				"stat -c %a /dev/shm; echo x > /dev/shm/f && cat /dev/shm/f; "
				"cp /bin/busybox /dev/shm/bb && /dev/shm/bb true 2>/dev/null || echo denied",
				&code);
	cr_expect_str_eq(out, "1\n1777\nx\ndenied\n", "got %s", out);
	free(out);
	destroy(sb);
}
