/* SPDX-License-Identifier: MIT */
/*
 * The CLI's stdio never enters the sandbox. Each test runs the real `sbx exec`
 * with its stdin/stdout bound to a host file or terminal, as a user's shell
 * would (`sbx exec ID -- cmd >>log`, `<input`, in a terminal), and has the
 * command try to reach that host object: reopen /proc/self/fd/N to read it
 * (or read keystrokes), append to it from a background process after the
 * exec returned, or find a host path among a background process's fds.
 * The sandbox may only ever hold pipe ends the CLI pumps.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"

TestSuite(stdio, .init = setup, .fini = teardown);

static char dir[64];

static sbx_sandbox *sandbox(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sbx-stdio-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	setenv("SBX_STATE_DIR", sbx_runtime_state_dir(rt), 1);
	setenv("SBX_IMAGE_DIR", sbx_runtime_image_dir(rt), 1);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	return sb;
}

static void done(sbx_sandbox *sb)
{
	destroy(sb);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* A host file in the test dir holding `body`, opened with `flags`. */
static int host_file(const char *name, const char *body, int flags)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(body, f);
	fclose(f);
	chmod(p, 0600);
	int fd = open(p, flags | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s", p);
	return fd;
}

static char *slurp_host(const char *name)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f, "%s", p);
	size_t cap = 1 << 16, n = 0, k;
	char *s = malloc(cap);
	while ((k = fread(s + n, 1, cap - n - 1, f)) > 0)
		if ((n += k) + 1 == cap)
			s = realloc(s, cap *= 2);
	s[n] = '\0';
	fclose(f);
	return s;
}

/* Reads a sandbox file; "" when missing. */
static char *sandbox_file(sbx_sandbox *sb, const char *path)
{
	void *data = NULL;
	size_t len = 0;
	sbx_error *err = NULL;
	if (sbx_sandbox_read_file(&data, &len, sb, path, 0, &err) < 0) {
		sbx_error_free(err);
		return strdup("");
	}
	return data;
}

/* Runs `sbx exec [FLAG] ID -- /bin/sh -c CMD` with the given fds as its stdin,
 * stdout and stderr; returns its exit status. */
static int cli_exec(sbx_sandbox *sb, int in, int out, int errfd, const char *flag, const char *cmd)
{
	char sbx[512];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	const char *argv[10];
	int a = 0;
	argv[a++] = "sbx";
	argv[a++] = "exec";
	if (flag)
		argv[a++] = flag;
	argv[a++] = sbx_sandbox_id(sb);
	argv[a++] = "--";
	argv[a++] = "/bin/sh";
	argv[a++] = "-c";
	argv[a++] = cmd;
	argv[a] = NULL;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fds[3] = { in, out, errfd };
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0 && dup2(fds[i], i) < 0)
				_exit(126);
		execv(sbx, (char *const *)argv);
		_exit(127);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "sbx exec died: status %d", st);
	return WEXITSTATUS(st);
}

/* Waits (bounded by the test timeout, not asserted) until PATH exists in the sandbox. */
static void wait_for(sbx_sandbox *sb, const char *path)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; [ -e %s ]",
		 path, path);
	int code = -1;
	free(sbx_test_sh(sb, cmd, &code));
	cr_assert_eq(code, 0, "%s never appeared", path);
}

Test(stdio, stdout_host_file_is_not_readable)
{
	sbx_sandbox *sb = sandbox();
	int out = host_file("out", "HOSTSECRET-stdout\n", O_WRONLY | O_APPEND);
	int code = cli_exec(sb, -1, out, -1, NULL,
			    "/probe reopen 1 r /tmp/got; exec 3>&1; readlink /proc/self/fd/3 > /tmp/link; echo visible");
	close(out);
	cr_assert_eq(code, 0);
	char *got = sandbox_file(sb, "/tmp/got"), *link = sandbox_file(sb, "/tmp/link");
	cr_expect_null(strstr(got, "HOSTSECRET"), "the sandbox read the host file behind stdout: %s", got);
	cr_expect_null(strstr(link, dir), "the sandbox sees stdout's host path: %s", link);
	char *host = slurp_host("out");
	cr_expect_str_eq(host, "HOSTSECRET-stdout\nreopen: ok\nvisible\n", "the command's output still lands: %s", host);
	free(got);
	free(link);
	free(host);
	done(sb);
}

Test(stdio, background_cannot_append_after_exec)
{
	sbx_sandbox *sb = sandbox();
	int out = host_file("out", "before\n", O_WRONLY | O_APPEND);
	/* The background waits for /tmp/go, written only once the CLI returned:
	 * whatever it writes then is after the exec, not a timing guess. */
	int code = cli_exec(sb, -1, out, out, NULL,
			    "(trap '' PIPE; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo LATE-STDOUT; "
			    "echo LATE-STDERR >&2; /probe reopen 1 w LATE-REOPEN; touch /tmp/bg-done) & echo started");
	close(out);
	cr_assert_eq(code, 0);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/go", "", 0, 0644, &err), 0);
	wait_for(sb, "/tmp/bg-done");
	char *host = slurp_host("out");
	cr_expect_null(strstr(host, "LATE"), "a background process wrote to the host file after exec: %s", host);
	cr_expect_str_eq(host, "before\nstarted\n");
	free(host);
	done(sb);
}

Test(stdio, background_holds_no_host_fd)
{
	sbx_sandbox *sb = sandbox();
	int out = host_file("out", "", O_WRONLY | O_APPEND);
	int in = host_file("in", "input\n", O_RDONLY);
	/* The CLI must return although the background keeps its stdio open. */
	int code = cli_exec(sb, in, out, out, NULL, "sleep 1000 & echo $! > /tmp/bgpid; exit 3");
	close(out);
	close(in);
	cr_assert_eq(code, 3);
	int alive = -1;
	char *fds = sbx_test_sh(sb, "p=$(cat /tmp/bgpid); kill -0 $p && ls -l /proc/$p/fd/", &alive);
	cr_assert_eq(alive, 0, "the background process is gone: %s", fds);
	cr_expect_null(strstr(fds, dir), "a background process holds a host file: %s", fds);
	free(fds);
	done(sb);
}

Test(stdio, stdin_host_file_is_only_piped)
{
	sbx_sandbox *sb = sandbox();
	/* The caller consumed the first line; the sandbox gets the rest, and
	 * must not be able to rewind to the line or write into the file. */
	int in = host_file("in", "HOSTSECRET-consumed\nPIPED\n", O_RDONLY);
	cr_assert_eq(lseek(in, 20, SEEK_SET), 20);
	int code = cli_exec(sb, in, -1, -1, NULL,
			    "/probe reopen 0 r /tmp/got; /probe reopen 0 w TAMPERED; cat > /tmp/rest");
	close(in);
	cr_assert_eq(code, 0);
	char *got = sandbox_file(sb, "/tmp/got"), *rest = sandbox_file(sb, "/tmp/rest");
	cr_expect_null(strstr(got, "HOSTSECRET"), "the sandbox reread the host file behind stdin: %s", got);
	cr_expect_not_null(strstr(got, "PIPED") ? got : strstr(rest, "PIPED"), "piped input lost: '%s' '%s'",
			   got, rest);
	char *host = slurp_host("in");
	cr_expect_str_eq(host, "HOSTSECRET-consumed\nPIPED\n", "the sandbox wrote into stdin's host file");
	free(got);
	free(rest);
	free(host);
	done(sb);
}

Test(stdio, terminal_keystrokes_stay_on_the_host)
{
	sbx_sandbox *sb = sandbox();
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(m, 0);
	cr_assert_eq(grantpt(m), 0);
	cr_assert_eq(unlockpt(m), 0);
	int s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(s, 0);
	/* A line typed at the terminal before the command runs, meant for the
	 * user's shell: without -i neither the CLI nor the sandbox reads it. */
	cr_assert_eq(write(m, "KEYSTROKE-SECRET\n", 17), 17);
	int code = cli_exec(sb, s, s, s, NULL,
			    "/probe reopen 0 r /tmp/got0; /probe reopen 1 r /tmp/got1; /probe reopen 2 r /tmp/got2");
	cr_assert_eq(code, 0);
	for (int i = 0; i < 3; i++) {
		char p[32];
		snprintf(p, sizeof(p), "/tmp/got%d", i);
		char *got = sandbox_file(sb, p);
		cr_expect_null(strstr(got, "KEYSTROKE"), "the sandbox read the host terminal via fd %d: %s", i, got);
		free(got);
	}
	fcntl(s, F_SETFL, O_NONBLOCK);
	char line[64] = "";
	ssize_t n = read(s, line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = '\0';
	cr_expect_str_eq(line, "KEYSTROKE-SECRET\n", "the typed line was consumed");
	close(s);
	close(m);
	done(sb);
}

Test(stdio, stdin_without_input_is_no_host_file)
{
	sbx_sandbox *sb = sandbox();
	/* Not forwarded (a terminal, or /dev/null): still no host inode on fd
	 * 0, where a sandbox root could fchmod or fchown it. */
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(null, 0);
	int code = cli_exec(sb, null, -1, -1, NULL, "exec 3<&0; readlink /proc/self/fd/3 > /tmp/link; cat");
	close(null);
	cr_assert_eq(code, 0);
	char *link = sandbox_file(sb, "/tmp/link");
	cr_expect_eq(strncmp(link, "pipe:", 5), 0, "stdin is a host file: %s", link);
	free(link);
	done(sb);
}

Test(stdio, interactive_flag_forwards_a_terminal)
{
	sbx_sandbox *sb = sandbox();
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(m, 0);
	cr_assert_eq(grantpt(m), 0);
	cr_assert_eq(unlockpt(m), 0);
	int s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(s, 0);
	cr_assert_eq(write(m, "typed\n", 6), 6);
	int out = host_file("out", "", O_WRONLY | O_APPEND);
	int code = cli_exec(sb, s, out, -1, "-i", "head -n 1; readlink /proc/self/fd/0 > /tmp/link");
	close(out);
	cr_assert_eq(code, 0);
	char *host = slurp_host("out"), *link = sandbox_file(sb, "/tmp/link");
	cr_expect_str_eq(host, "typed\n");
	cr_expect_eq(strncmp(link, "pipe:", 5), 0, "stdin is the terminal: %s", link);
	free(host);
	free(link);
	close(s);
	close(m);
	done(sb);
}

Test(stdio, slow_reader_gets_all_output)
{
	sbx_sandbox *sb = sandbox();
	/* The command exits with most of its 1 MB still in the CLI's pipe, and
	 * our reader takes a chunk now and then: that is the command's output,
	 * not a background process's, and must all arrive, however long after
	 * the exit status (past the drain grace). */
	int pp[2];
	cr_assert_eq(pipe2(pp, O_CLOEXEC), 0);
	char sbx[512], id[64];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(pp[1], 1);
		execl(sbx, "sbx", "exec", id, "--", "head", "-c", "1000000", "/dev/zero", (char *)NULL);
		_exit(127);
	}
	close(pp[1]);
	size_t total = 0;
	char buf[65536];
	ssize_t n;
	while ((n = read(pp[0], buf, sizeof(buf))) > 0) {
		total += (size_t)n;
		usleep(20 * 1000);
	}
	close(pp[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbx exec: status %d", st);
	cr_expect_eq(total, 1000000u, "got %zu bytes", total);
	done(sb);
}

Test(stdio, output_and_input_are_pumped)
{
	sbx_sandbox *sb = sandbox();
	int out = host_file("out", "", O_WRONLY | O_APPEND);
	int in = host_file("in", "one\ntwo\n", O_RDONLY);
	int code = cli_exec(sb, in, out, -1, NULL, "wc -l; head -c 10485760 /dev/zero | tr '\\0' x; exit 9");
	close(out);
	close(in);
	cr_assert_eq(code, 9);
	struct stat st;
	char p[128];
	snprintf(p, sizeof(p), "%s/out", dir);
	cr_assert_eq(stat(p, &st), 0);
	cr_expect_eq(st.st_size, 2 + (10 << 20), "output size %lld", (long long)st.st_size);
	done(sb);
}

/* A process inside that holds its stdout pipe's mutex: busybox cat copies
 * an idle socket into the pipe with sendfile, which keeps the mutex while
 * it waits for input. A read() of that pipe, or its last close(), then
 * waits uninterruptibly. `sbx exec` must still return on the command's exit
 * status, and whoever reads its stdout to EOF (`$(sbx exec ...)`) must get
 * the EOF: nothing of ours may be stuck on a pipe the sandbox shares. */
Test(stdio, pipe_lock_held_inside_cannot_hang_the_cli, .timeout = 180)
{
	sbx_sandbox *sb = sandbox();
	int pp[2];
	cr_assert_eq(pipe2(pp, O_CLOEXEC), 0);
	char sbx[512], id[64];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(pp[1], 1);
		execl(sbx, "sbx", "exec", id, "--", "/bin/sh", "-c",
		      "echo before; exec 9>&1; nc -l -p 5557 -e sh -c 'cat >&9' 2>/dev/null & sleep 0.3; "
		      "(sleep 1000 | nc 127.0.0.1 5557) & sleep 0.5; exit 7",
		      (char *)NULL);
		_exit(127);
	}
	close(pp[1]);
	/* Read stdout to EOF, as a shell's $(...) does, for at most 60 s (a
	 * bound for the failure case, not a timing assertion). */
	char buf[256];
	size_t n = 0;
	int eof = 0;
	for (int i = 0; i < 600 && !eof; i++) {
		struct pollfd pf = { .fd = pp[0], .events = POLLIN };
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t k = read(pp[0], buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			eof = 1;
		else
			n += (size_t)k;
	}
	buf[n] = '\0';
	int st = 0, exited = 0;
	for (int i = 0; i < 600 && !exited; i++)
		if (waitpid(pid, &st, WNOHANG) == pid)
			exited = 1;
		else
			usleep(100 * 1000);
	close(pp[0]);
	/* Either way the sandbox goes: it unblocks a stuck CLI too. */
	done(sb);
	if (!exited)
		waitpid(pid, &st, 0);
	cr_assert(eof, "the CLI's stdout never reached EOF while a process inside held the pipe's mutex");
	cr_assert(exited, "sbx exec did not return while a process inside held the pipe's mutex");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7, "sbx exec: status %d", st);
	cr_expect_str_eq(buf, "before\n");
}
