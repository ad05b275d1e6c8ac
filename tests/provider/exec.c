/* SPDX-License-Identifier: MIT */
/*
 * Provider conformance, commands: exit codes, signals, timeouts, env/cwd/user,
 * 10 MiB of output, stdin, and the streamed process API. The same cases run
 * for every provider ($SBX_CONF_PROVIDER, harness.h).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

TestSuite(conf_exec, .init = conf_setup, .fini = conf_teardown, .timeout = 120);

static sbx_exec_result run_argv(sbx_sandbox *sb, const char *const *argv)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.argv = argv;
	return conf_exec(sb, &o);
}

Test(conf_exec, exit_codes)
{
	sbx_sandbox *sb = conf_create(NULL);
	static const int codes[] = { 0, 1, 42 };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "echo out; echo err >&2; exit %d", codes[i]);
		sbx_exec_result r = conf_sh(sb, cmd);
		cr_assert_eq(r.exit_code, codes[i], "%s: exit %d, want %d", C.name, r.exit_code, codes[i]);
		cr_assert_eq(r.signal, 0);
		cr_assert_eq(r.timed_out, 0);
		cr_assert_str_eq(r.out ? r.out : "", "out\n", "stdout kept apart");
		cr_assert_str_eq(r.err ? r.err : "", "err\n", "stderr kept apart");
		sbx_exec_result_free(&r);
	}
	const char *f[] = { "false", NULL };
	sbx_exec_result r = run_argv(sb, f);
	cr_assert_eq(r.exit_code, 1, "argv false: %d", r.exit_code);
	sbx_exec_result_free(&r);
	const char *nope[] = { "/no/such/binary", "arg", NULL };
	r = run_argv(sb, nope);
	cr_assert_eq(r.exit_code, 127, "%s: a missing binary gives %d, want 127", C.name, r.exit_code);
	sbx_exec_result_free(&r);
	r = conf_sh(sb, "no-such-command-here");
	cr_assert_eq(r.exit_code, 127, "sh: unknown command gives %d", r.exit_code);
	sbx_exec_result_free(&r);
	/* an exit status above 128 is an exit, not a signal */
	r = conf_sh(sb, "exit 130");
	cr_assert_eq(r.exit_code, 130);
	cr_assert_eq(r.signal, 0, "%s: 'exit 130' reported as signal %d", C.name, r.signal);
	sbx_exec_result_free(&r);
	conf_destroy(sb);
}

Test(conf_exec, killed_by_signal)
{
	if (C.kind == CONF_DAYTONA)
		cr_skip_test("not applicable: Daytona's toolbox reports an exit code only (a signal is 128+N, "
			     "not told apart from 'exit 128+N')");
	sbx_sandbox *sb = conf_create(NULL);
	static const int sigs[] = { SIGKILL, SIGTERM, SIGSEGV };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "echo before; kill -%d $$; echo after", sigs[i]);
		sbx_exec_result r = conf_sh(sb, cmd);
		cr_assert_eq(r.signal, sigs[i], "%s: signal %d, want %d (exit %d)", C.name, r.signal, sigs[i],
			     r.exit_code);
		cr_assert_eq(r.exit_code, 128 + sigs[i], "exit_code %d, want 128+%d", r.exit_code, sigs[i]);
		cr_assert_eq(r.timed_out, 0);
		cr_assert_str_eq(r.out ? r.out : "", "before\n");
		sbx_exec_result_free(&r);
	}
	conf_destroy(sb);
}

/* 1 while PID (inside the sandbox) still exists. */
static int alive_in(sbx_sandbox *sb, const char *pid)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "kill -0 %s 2>/dev/null", pid);
	sbx_exec_result r = conf_sh(sb, cmd);
	int alive = r.exit_code == 0;
	sbx_exec_result_free(&r);
	return alive;
}

Test(conf_exec, timeout_kills_the_tree)
{
	sbx_sandbox *sb = conf_create(NULL);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "echo $$ > /tmp/sh.pid; sleep 3600 & echo $! > /tmp/child.pid; echo started; wait";
	o.timeout_s = 1;
	sbx_exec_result r = conf_exec(sb, &o);
	cr_assert_eq(r.timed_out, 1, "%s: timed_out %d (exit %d, signal %d)", C.name, r.timed_out, r.exit_code,
		     r.signal);
	cr_assert_neq(r.exit_code, 0);
	cr_assert_str_eq(r.out ? r.out : "", "started\n", "output before the timeout is kept");
	sbx_exec_result_free(&r);
	r = conf_sh(sb, "cat /tmp/sh.pid; cat /tmp/child.pid");
	char sh_pid[32] = "", child_pid[32] = "";
	cr_assert_eq(sscanf(r.out ? r.out : "", "%31s %31s", sh_pid, child_pid), 2, "pid files: '%s'", r.out);
	sbx_exec_result_free(&r);
	/* The kill may land a moment after the result: wait, bounded. */
	double until = conf_now() + 10;
	while ((alive_in(sb, sh_pid) || alive_in(sb, child_pid)) && conf_now() < until)
		conf_sleep(0.1);
	cr_assert(!alive_in(sb, sh_pid), "%s: the timed-out shell %s still runs", C.name, sh_pid);
	cr_assert(!alive_in(sb, child_pid), "%s: its child %s still runs", C.name, child_pid);
	r = conf_sh(sb, "echo still usable");
	cr_assert_str_eq(r.out, "still usable\n", "the sandbox outlives a timed-out command");
	sbx_exec_result_free(&r);
	conf_destroy(sb);
}

Test(conf_exec, env_and_cwd)
{
	sbx_sandbox_opts so = conf_opts();
	const char *senv[] = { "CONF_A=from sandbox", "CONF_B=from sandbox", NULL };
	so.env = senv;
	so.workdir = "/work";
	sbx_sandbox *sb = conf_create(&so);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	const char *xenv[] = { "CONF_B=from exec", "CONF_C=spaces, = and 'quotes'", NULL };
	o.shell = "printf '%s|%s|%s|' \"$CONF_A\" \"$CONF_B\" \"$CONF_C\"; pwd";
	o.env = xenv;
	sbx_exec_result r = conf_exec(sb, &o);
	cr_assert_str_eq(r.out, "from sandbox|from exec|spaces, = and 'quotes'|/work\n",
			 "%s: env/workdir: %s", C.name, r.out);
	sbx_exec_result_free(&r);
	o.cwd = "/tmp";
	o.env = NULL;
	o.shell = "pwd; echo \"$CONF_B\"";
	r = conf_exec(sb, &o);
	cr_assert_str_eq(r.out, "/tmp\nfrom sandbox\n", "%s: cwd: %s", C.name, r.out);
	sbx_exec_result_free(&r);
	const char *argv[] = { "/bin/sh", "-c", "echo \"$0 $1\"; pwd", "x", "y z", NULL };
	sbx_exec_opts a = SBX_EXEC_OPTS_INIT;
	a.argv = argv;
	a.cwd = "/home/user";
	r = conf_exec(sb, &a);
	cr_assert_str_eq(r.out, "x y z\n/home/user\n", "%s: argv kept word for word: %s", C.name, r.out);
	sbx_exec_result_free(&r);
	conf_destroy(sb);
}

static char *sh_out(sbx_sandbox *sb, const char *cmd, const char *user)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	o.user = user;
	sbx_exec_result r = conf_exec(sb, &o);
	cr_assert_eq(r.exit_code, 0, "%s as %s: exit %d: %s", cmd, user ? user : "default", r.exit_code, r.err);
	char *s = r.out;
	r.out = NULL;
	sbx_exec_result_free(&r);
	return s ? s : calloc(1, 1);
}

Test(conf_exec, users)
{
	sbx_sandbox *sb = conf_create(NULL);
	char *s = sh_out(sb, "id -u; id -un", NULL);
	cr_assert_str_eq(s, "0\nroot\n", "%s: default user: %s", C.name, s);
	free(s);
	s = sh_out(sb, "id -u; id -g; id -un; touch /tmp/by-user; stat -c %u:%g /tmp/by-user", "user");
	cr_assert_str_eq(s, "1000\n1000\nuser\n1000:1000\n", "%s: user 'user': %s", C.name, s);
	free(s);
	s = sh_out(sb, "id -u", "1000");
	cr_assert_str_eq(s, "1000\n", "%s: numeric user: %s", C.name, s);
	free(s);
	/* the non-root user cannot write where only root may */
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "touch /root/x";
	o.user = "user";
	sbx_exec_result r = conf_exec(sb, &o);
	cr_assert_neq(r.exit_code, 0, "%s: user 1000 wrote into /root (0755 root)", C.name);
	sbx_exec_result_free(&r);
	conf_destroy(sb);

	/* a sandbox whose default user is not root; root still on request */
	sbx_sandbox_opts so = conf_opts();
	so.user = "user";
	sb = conf_create(&so);
	s = sh_out(sb, "id -u", NULL);
	cr_assert_str_eq(s, "1000\n", "%s: sandbox user 'user': %s", C.name, s);
	free(s);
	s = sh_out(sb, "id -u", "root");
	cr_assert_str_eq(s, "0\n", "%s: exec user root in a user sandbox: %s", C.name, s);
	free(s);
	conf_destroy(sb);
}

#define BIG (10u << 20)

Test(conf_exec, ten_mib_of_stdout_intact)
{
	sbx_sandbox *sb = conf_create(NULL);
	unsigned char *data = malloc(BIG); /* checksrc: allow (test) */
	cr_assert_not_null(data);
	conf_fill(data, BIG, 10);
	char want[65], got[65];
	conf_sha256(data, BIG, want);
	sbx_error *err = NULL;
	int rc = sbx_sandbox_write_file(sb, "/tmp/big.bin", data, BIG, 0644, &err);
	cr_assert_eq(rc, 0, "write 10 MiB: %d %s", rc, ERRMSG(err));
	sbx_exec_result r = conf_sh(sb, "sha256sum /tmp/big.bin");
	cr_assert_eq(r.exit_code, 0);
	cr_assert(r.out && strncmp(r.out, want, 64) == 0, "%s: the file's hash inside %.64s, want %s", C.name,
		  r.out ? r.out : "", want);
	sbx_exec_result_free(&r);
	r = conf_sh(sb, "cat /tmp/big.bin; echo done >&2");
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.out_truncated, 0);
	cr_assert_eq(r.out_len, BIG, "%s: %zu bytes of stdout, want %u", C.name, r.out_len, BIG);
	conf_sha256(r.out, r.out_len, got);
	cr_assert_str_eq(got, want, "%s: 10 MiB of stdout changed on the way", C.name);
	cr_assert_str_eq(r.err ? r.err : "", "done\n");
	sbx_exec_result_free(&r);
	free(data);
	conf_destroy(sb);
}

Test(conf_exec, stdin_data)
{
	sbx_sandbox *sb = conf_create(NULL);
	size_t n = 1u << 20;
	unsigned char *data = malloc(n); /* checksrc: allow (test) */
	cr_assert_not_null(data);
	conf_fill(data, n, 11);
	for (size_t i = 0; i < 256; i++)
		data[i] = (unsigned char)i; /* every byte value, NUL first */
	char want[65];
	conf_sha256(data, n, want);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "sha256sum";
	o.stdin_data = data;
	o.stdin_len = n;
	o.timeout_s = 60;
	sbx_exec_result r = conf_exec(sb, &o);
	cr_assert_eq(r.timed_out, 0, "%s: sha256sum of 1 MiB of stdin timed out", C.name);
	cr_assert_eq(r.exit_code, 0);
	cr_assert(r.out && strncmp(r.out, want, 64) == 0, "%s: stdin hash %.64s, want %s", C.name,
		  r.out ? r.out : "", want);
	sbx_exec_result_free(&r);
	free(data);
	/* no stdin_data: EOF at once, never the test's own stdin */
	sbx_exec_opts e = SBX_EXEC_OPTS_INIT;
	e.shell = "wc -c";
	e.timeout_s = 30;
	r = conf_exec(sb, &e);
	cr_assert_eq(r.timed_out, 0, "%s: a command reading stdin hung without stdin_data", C.name);
	cr_assert_eq(strtol(r.out ? r.out : "x", NULL, 10), 0, "wc -c: %s", r.out);
	sbx_exec_result_free(&r);
	conf_destroy(sb);
}

/*
 * stdin echoed back: `cat` with more than 64 KiB of stdin_data. Busybox cat
 * moves stdin to stdout with sendfile(2); from a socket into a pipe the kernel
 * holds the pipe's lock while it waits for more input, so a caller that read
 * stdout and wrote stdin on one thread blocked in read(2) (O_NONBLOCK or not)
 * and never sent the rest (local exec before its reader thread; sbx serve
 * while SendInput held the lock its output pump needs).
 */
Test(conf_exec, stdin_echoed_back)
{
	sbx_sandbox *sb = conf_create(NULL);
	static const size_t sizes[] = { 1000, 65536, 200000, 1u << 20 };
	unsigned char *data = malloc(1u << 20); /* checksrc: allow (test) */
	cr_assert_not_null(data);
	conf_fill(data, 1u << 20, 12);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
		o.shell = "cat";
		o.stdin_data = data;
		o.stdin_len = sizes[i];
		o.timeout_s = 20;
		sbx_exec_result r = conf_exec(sb, &o);
		cr_assert_eq(r.timed_out, 0, "%s: cat of %zu bytes of stdin hung (%zu bytes out before the timeout)",
			     C.name, sizes[i], r.out_len);
		cr_assert_eq(r.out_len, sizes[i], "%s: cat gave back %zu of %zu bytes (exit %d, stderr '%s')", C.name,
			     r.out_len, sizes[i], r.exit_code, r.err ? r.err : "");
		cr_assert_eq(memcmp(r.out, data, sizes[i]), 0);
		sbx_exec_result_free(&r);
	}
	free(data);
	conf_destroy(sb);
}

/* Reads fd to EOF (bounded), appending to buf. */
static size_t drain(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		cr_assert_gt(poll(&pf, 1, 30000), 0, "%s: stream never became readable", C.name);
		ssize_t k = read(fd, buf + got, cap - 1 - got);
		if (k < 0 && errno == EAGAIN)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	return got;
}

Test(conf_exec, streamed_process)
{
	sbx_sandbox *sb = conf_create(NULL);
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = "read line; echo \"got $line\"; echo e >&2; exit 4";
	sbx_process *p = NULL;
	sbx_error *err = NULL;
	int r = sbx_process_start(&p, sb, &x, 1, &err);
	if (r == -ENOSYS && C.kind == CONF_DAYTONA)
		cr_skip_test("not applicable: the daytona provider has no streamed processes yet (no process_start)");
	if (r == -ENOSYS && C.kind == CONF_FAULTY) {
		sbx_error_free(err);
		conf_destroy(sb);
		cr_skip_test("not applicable: faulty has no process API (no process_start in its ops, so -ENOSYS)");
	}
	cr_assert_eq(r, 0, "%s: process_start: %d %s", C.name, r, ERRMSG(err));
	cr_assert_gt(sbx_process_pid(p), 0);
	int status = -1, to = -1;
	int in = sbx_process_stdin_fd(p);
	cr_assert_geq(in, 0);
	cr_assert_eq(sbx_process_poll(p, &status, &to, 0, &err), 0, "running until it has read a line");
	cr_assert_eq(write(in, "ping\n", 5), 5);
	sbx_process_close_stdin(p);
	char out[256], errb[64];
	drain(sbx_process_stdout_fd(p), out, sizeof(out));
	cr_assert_str_eq(out, "got ping\n");
	drain(sbx_process_stderr_fd(p), errb, sizeof(errb));
	cr_assert_str_eq(errb, "e\n");
	cr_assert_eq(sbx_process_poll(p, &status, &to, 1, &err), 1);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 4, "%s: status %#x", C.name, status);
	cr_assert_eq(to, 0);
	sbx_process_free(p);

	/* a signal ends it, and the status says which */
	x.shell = "sleep 3600";
	cr_assert_eq(sbx_process_start(&p, sb, &x, 0, &err), 0);
	cr_assert_eq(sbx_process_signal(p, SIGTERM, &err), 0, "%s", ERRMSG(err));
	cr_assert_eq(sbx_process_poll(p, &status, &to, 1, &err), 1);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "%s: status %#x after SIGTERM", C.name,
		  status);
	sbx_process_free(p);

	/* timeout_s applies to started processes too */
	x.timeout_s = 1;
	cr_assert_eq(sbx_process_start(&p, sb, &x, 0, &err), 0);
	cr_assert_eq(sbx_process_poll(p, &status, &to, 1, &err), 1);
	cr_assert_eq(to, 1, "%s: timed_out not set (status %#x)", C.name, status);
	sbx_process_free(p);
	conf_destroy(sb);
}

/* SBX_DAYTONA_EXEC=execute: one process/execute call per exec; stderr is
 * merged into stdout (as Daytona's execute does) and `timeout -s KILL`
 * inside keeps the output written before the deadline. */
Test(conf_exec, daytona_execute_mode)
{
	if (C.kind != CONF_DAYTONA)
		cr_skip_test("not applicable: Daytona's process/execute mode");
	setenv("SBX_DAYTONA_EXEC", "execute", 1);
	sbx_runtime *saved = C.rt;
	C.rt = conf_runtime();
	sbx_sandbox *sb = conf_create(NULL); /* the provider reads its mode when it starts */
	unsetenv("SBX_DAYTONA_EXEC");
	sbx_exec_result r = conf_sh(sb, "echo out; echo err >&2; exit 3");
	cr_assert_eq(r.exit_code, 3);
	cr_assert_str_eq(r.out ? r.out : "", "out\nerr\n", "execute merges the streams: %s", r.out);
	sbx_exec_result_free(&r);
	const char *argv[] = { "/bin/sh", "-c", "echo \"$0 $1\"", "x", "y z", NULL };
	sbx_exec_opts a = SBX_EXEC_OPTS_INIT;
	a.argv = argv;
	r = conf_exec(sb, &a);
	cr_assert_str_eq(r.out, "x y z\n");
	sbx_exec_result_free(&r);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "echo started; sleep 3600 & wait";
	o.timeout_s = 1;
	r = conf_exec(sb, &o);
	cr_assert_eq(r.timed_out, 1, "timed_out %d (exit %d)", r.timed_out, r.exit_code);
	cr_assert_str_eq(r.out ? r.out : "", "started\n", "output before the timeout is kept");
	sbx_exec_result_free(&r);
	conf_destroy(sb);
	sbx_runtime_free(C.rt);
	C.rt = saved;
}
