/* SPDX-License-Identifier: MIT */
/*
 * `sbx exec -t`: the command's terminal is made inside the sandbox, and the
 * host terminal never enters. Each test runs the real CLI on a host
 * pseudo-terminal made here, as a user's shell would (the CLI is its session
 * leader, the host pty its controlling terminal), plays the user on the
 * pty's master, and checks what the command sees (its own devpts, the size,
 * the keys), what the host terminal is left with (its mode, no injected
 * input), and what a background process keeps holding once the CLI is gone.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../integration/common.h"

TestSuite(stdio_tty, .init = setup, .fini = teardown);

static sbx_sandbox *sandbox(void)
{
	setenv("SBX_STATE_DIR", sbx_runtime_state_dir(rt), 1);
	setenv("SBX_IMAGE_DIR", sbx_runtime_image_dir(rt), 1);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	return sb;
}

/* A host terminal: *m is the user's side (what a terminal emulator holds). */
static int host_pty(int *m, unsigned short rows, unsigned short cols)
{
	*m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(*m, 0);
	cr_assert_eq(grantpt(*m), 0);
	cr_assert_eq(unlockpt(*m), 0);
	int s = open(ptsname(*m), O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert_geq(s, 0);
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	cr_assert_eq(ioctl(s, TIOCSWINSZ, &ws), 0);
	return s;
}

/* Starts `sbx exec FLAG ID -- /bin/sh -c CMD` (CMD NULL: a command that is
 * not there) with `in`/`out` as its stdio; on a terminal `in` it is that
 * terminal's session leader. */
static pid_t cli_start(sbx_sandbox *sb, int in, int out, const char *flag, const char *cmd)
{
	char sbx[512];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setsid();
		if (isatty(in))
			ioctl(in, TIOCSCTTY, 0);
		if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		if (!cmd)
			execl(sbx, "sbx", "exec", flag, sbx_sandbox_id(sb), "--", "nosuchcommand", (char *)NULL);
		else
			execl(sbx, "sbx", "exec", flag, sbx_sandbox_id(sb), "--", "/bin/sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

struct session {
	char out[65536];
	size_t len;
	int code;     /* exit code, or 128+signal */
	int raw_seen; /* the host terminal was out of canonical mode once READY came */
};

/*
 * Plays the user on master `m` of the CLI's terminal `s`: collects the
 * output; once it holds "READY", types `keys` (or, with keys NULL, calls
 * `act`). Ends when the CLI exits; bounded by the test's timeout only.
 */
static void play(struct session *ss, pid_t pid, int m, int s, const char *keys, void (*act)(pid_t, int))
{
	int done = 0, st = 0;
	ss->len = 0;
	ss->raw_seen = 0;
	for (;;) {
		struct pollfd pf = { .fd = m, .events = POLLIN };
		if (poll(&pf, 1, 50) > 0) {
			ssize_t n = read(m, ss->out + ss->len, sizeof(ss->out) - 1 - ss->len);
			if (n > 0)
				ss->len += (size_t)n;
		}
		ss->out[ss->len] = '\0';
		if (!done && strstr(ss->out, "READY")) {
			done = 1;
			struct termios t;
			ss->raw_seen = tcgetattr(s, &t) == 0 && !(t.c_lflag & ICANON);
			if (keys)
				cr_assert_eq(write(m, keys, strlen(keys)), (ssize_t)strlen(keys));
			else if (act)
				act(pid, m);
		}
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
	}
	/* What the CLI wrote before it exited is in the host pty already. */
	fcntl(m, F_SETFL, O_NONBLOCK);
	ssize_t n;
	while ((n = read(m, ss->out + ss->len, sizeof(ss->out) - 1 - ss->len)) > 0)
		ss->len += (size_t)n;
	ss->out[ss->len] = '\0';
	ss->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int same_mode(const struct termios *a, const struct termios *b)
{
	return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag && a->c_cflag == b->c_cflag &&
	       a->c_lflag == b->c_lflag && memcmp(a->c_cc, b->c_cc, sizeof(a->c_cc)) == 0;
}

/* The value on the line after `key` in the output ("key\r\nvalue\r\n"). */
static char *after(const char *out, const char *key, char *buf, size_t n)
{
	const char *p = strstr(out, key);
	buf[0] = '\0';
	if (p && (p = strchr(p, '\n')))
		snprintf(buf, n, "%.*s", (int)strcspn(p + 1, "\r\n"), p + 1);
	return buf;
}

Test(stdio_tty, the_terminal_is_the_sandboxs_own)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 33, 111);
	struct stat host;
	cr_assert_eq(fstat(s, &host), 0);
	pid_t pid = cli_start(sb, s, s, "-t",
			     "echo K1; tty; echo K2; test -t 0 -a -t 1 -a -t 2 && echo yes; echo K3; stty size; "
			     "echo K4; readlink /proc/self/fd/0; echo K5; stat -L -c %d /proc/self/fd/0; "
			     "echo K6; stat -c %d /dev/pts/ptmx; echo K7; stat -L -c %u /proc/self/fd/0; exit 7");
	struct session ss;
	play(&ss, pid, m, s, NULL, NULL);
	cr_assert_eq(ss.code, 7, "exit code %d: %s", ss.code, ss.out);
	char v[256], w[256];
	cr_expect_eq(strncmp(after(ss.out, "K1", v, sizeof(v)), "/dev/pts/", 9), 0, "tty: %s", ss.out);
	cr_expect_str_eq(after(ss.out, "K2", v, sizeof(v)), "yes", "%s", ss.out);
	cr_expect_str_eq(after(ss.out, "K3", v, sizeof(v)), "33 111", "%s", ss.out);
	cr_expect_str_eq(after(ss.out, "K4", v, sizeof(v)), after(ss.out, "K1", w, sizeof(w)), "%s", ss.out);
	/* On the sandbox's devpts instance, not the host's. */
	cr_expect_str_eq(after(ss.out, "K5", v, sizeof(v)), after(ss.out, "K6", w, sizeof(w)), "%s", ss.out);
	cr_expect_neq(strtoull(v, NULL, 10), (unsigned long long)host.st_dev, "the host's devpts: %s", ss.out);
	cr_expect_str_eq(after(ss.out, "K7", v, sizeof(v)), "0", "the slave is root's inside: %s", ss.out);
	close(s);
	close(m);
	destroy(sb);
}

Test(stdio_tty, keystrokes_reach_the_command_and_the_mode_comes_back)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 24, 80);
	struct termios before, now;
	cr_assert_eq(tcgetattr(s, &before), 0);
	pid_t pid = cli_start(sb, s, s, "-it", "echo READY; read line; echo got:$line; exit 3");
	struct session ss;
	play(&ss, pid, m, s, "hello\r", NULL);
	cr_assert_eq(ss.code, 3, "exit code %d: %s", ss.code, ss.out);
	cr_expect_not_null(strstr(ss.out, "got:hello"), "%s", ss.out);
	cr_expect(ss.raw_seen, "the host terminal stayed in canonical mode under -it");
	cr_assert_eq(tcgetattr(s, &now), 0);
	cr_expect(same_mode(&before, &now), "the host terminal's mode was not restored");
	close(s);
	close(m);
	destroy(sb);
}

static void ctrl_c(pid_t pid, int m)
{
	(void)pid;
	cr_assert_eq(write(m, "\003", 1), 1);
}

Test(stdio_tty, ctrl_c_goes_to_the_command)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 24, 80);
	pid_t pid = cli_start(sb, s, s, "-it", "trap 'echo INT; exit 9' INT; echo READY; while :; do sleep 0.1; done");
	struct session ss;
	play(&ss, pid, m, s, NULL, ctrl_c);
	cr_expect_eq(ss.code, 9, "exit code %d: %s", ss.code, ss.out);
	cr_expect_not_null(strstr(ss.out, "INT"), "%s", ss.out);
	close(s);
	close(m);
	destroy(sb);
}

static void grow(pid_t pid, int m)
{
	(void)pid;
	/* As a terminal emulator resized: the kernel signals the CLI. */
	struct winsize ws = { .ws_row = 50, .ws_col = 120 };
	cr_assert_eq(ioctl(m, TIOCSWINSZ, &ws), 0);
}

Test(stdio_tty, window_size_follows_the_host)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 24, 80);
	pid_t pid = cli_start(sb, s, s, "-it", "trap 'stty size; exit 4' WINCH; echo READY; while :; do sleep 0.1; done");
	struct session ss;
	play(&ss, pid, m, s, NULL, grow);
	cr_expect_eq(ss.code, 4, "exit code %d: %s", ss.code, ss.out);
	cr_expect_not_null(strstr(ss.out, "50 120"), "%s", ss.out);
	close(s);
	close(m);
	destroy(sb);
}

static void terminate(pid_t pid, int m)
{
	(void)m;
	kill(pid, SIGTERM);
}

Test(stdio_tty, a_signal_restores_the_terminal_and_ends_the_command)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 24, 80);
	struct termios before, now;
	cr_assert_eq(tcgetattr(s, &before), 0);
	pid_t pid = cli_start(sb, s, s, "-it", "echo READY; exec sleep 1000");
	struct session ss;
	play(&ss, pid, m, s, NULL, terminate);
	cr_expect_eq(ss.code, 128 + SIGTERM, "exit code %d: %s", ss.code, ss.out);
	cr_assert_eq(tcgetattr(s, &now), 0);
	cr_expect(same_mode(&before, &now), "the host terminal was left raw");
	int code = -1;
	free(sbx_test_sh(sb, "i=0; while ps | grep -q '[s]leep 1000' && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "
			 "! ps | grep -q '[s]leep 1000'", &code));
	cr_expect_eq(code, 0, "the command outlived the CLI");
	close(s);
	close(m);
	destroy(sb);
}

Test(stdio_tty, the_host_terminal_is_out_of_reach)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 24, 80);
	/* Typed for the user's shell before the command runs: without -i
	 * neither the CLI nor the sandbox reads it. What the command types
	 * into its own terminal (TIOCSTI) must not reach the host's either,
	 * where the user's shell would run it after we exit. */
	cr_assert_eq(write(m, "KEYSTROKE-SECRET\n", 17), 17);
	pid_t pid = cli_start(sb, s, s, "-t",
			     "/probe reopen 0 r /tmp/got0; /probe reopen 1 r /tmp/got1; /probe reopen 2 r /tmp/got2; "
			     "/probe reopen 0 r /tmp/got3 < /dev/tty; /probe sti 0 'echo INJECTED'");
	struct session ss;
	play(&ss, pid, m, s, NULL, NULL);
	cr_assert_eq(ss.code, 0, "exit code %d: %s", ss.code, ss.out);
	/* Hosts may disable TIOCSTI altogether (dev.tty.legacy_tiocsti = 0). */
	FILE *f = fopen("/proc/sys/dev/tty/legacy_tiocsti", "r");
	int sti = !f || fgetc(f) != '0';
	if (f)
		fclose(f);
	if (sti)
		cr_expect_not_null(strstr(ss.out, "sti: ok"), "TIOCSTI on the command's own terminal: %s", ss.out);
	int code = -1;
	char *got = sbx_test_sh(sb, "cat /tmp/got0 /tmp/got1 /tmp/got2 /tmp/got3", &code);
	cr_expect_null(strstr(got, "KEYSTROKE"), "the sandbox read the host terminal: %s", got);
	free(got);
	fcntl(s, F_SETFL, O_NONBLOCK);
	char line[128] = "";
	ssize_t n = read(s, line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = '\0';
	cr_expect_str_eq(line, "KEYSTROKE-SECRET\n", "the typed line was consumed");
	n = read(s, line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = '\0';
	cr_expect_null(strstr(line, "INJECTED"), "the sandbox typed into the host terminal: %s", line);
	close(s);
	close(m);
	destroy(sb);
}


static int same_ns(pid_t a, pid_t b)
{
	char p[64], la[64] = "", lb[64] = "";
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)a);
	if (readlink(p, la, sizeof(la) - 1) <= 0)
		return 0;
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)b);
	return readlink(p, lb, sizeof(lb) - 1) > 0 && !strcmp(la, lb);
}

/* 1 when a process of init's sandbox has this comm ("name\n"). */
static int sandbox_runs(pid_t init, const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int found = 0;
	while (!found && (de = readdir(d))) {
		pid_t q = (pid_t)strtol(de->d_name, NULL, 10);
		char p[64], c[64] = "";
		snprintf(p, sizeof(p), "/proc/%d/comm", (int)q);
		FILE *f = q > 0 && q != init && same_ns(q, init) ? fopen(p, "r") : NULL;
		if (f) {
			found = fgets(c, sizeof(c), f) && !strcmp(c, comm);
			fclose(f);
		}
	}
	closedir(d);
	return found;
}

Test(stdio_tty, a_background_process_keeps_only_the_sandboxs_terminal)
{
	sbx_sandbox *sb = sandbox();
	int m, s = host_pty(&m, 24, 80);
	struct stat host;
	cr_assert_eq(fstat(s, &host), 0);
	/* Its stdin explicitly the terminal too (sh gives a background
	 * command /dev/null), and SIGHUP ignored (the terminal hangs up). */
	pid_t pid = cli_start(sb, s, s, "-t", "exec 3<&0; trap '' HUP; sleep 1000 <&3 3<&- & echo started");
	struct session ss;
	play(&ss, pid, m, s, NULL, NULL);
	cr_assert_eq(ss.code, 0, "exit code %d: %s", ss.code, ss.out);
	cr_expect_eq(kill(pid, 0), -1, "the CLI is still there");
	pid_t init = sandbox_init_pid(sb);
	char p[256];
	struct stat pts, dev;
	snprintf(p, sizeof(p), "/proc/%d/root/dev/pts", (int)init);
	cr_assert_eq(stat(p, &pts), 0);
	snprintf(p, sizeof(p), "/proc/%d/root/dev", (int)init);
	cr_assert_eq(stat(p, &dev), 0);
	/* The background's redirections are done once it runs sleep. */
	for (int i = 0; i < 600 && !sandbox_runs(init, "sleep\n"); i++)
		usleep(10000);
	/* Every process of the sandbox but init: fds on the sandbox's devpts
	 * or /dev only, and the background one still on its terminal. */
	int procs = 0, on_pts = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t q = (pid_t)strtol(de->d_name, NULL, 10);
		if (q <= 0 || q == init || !same_ns(q, init))
			continue;
		procs++;
		snprintf(p, sizeof(p), "/proc/%d/fd", (int)q);
		DIR *fd = opendir(p);
		struct dirent *fe;
		while (fd && (fe = readdir(fd))) {
			if (fe->d_name[0] == '.')
				continue;
			char f[600], link[256] = "";
			struct stat st;
			snprintf(f, sizeof(f), "%s/%s", p, fe->d_name);
			cr_assert_eq(stat(f, &st), 0, "%s", f);
			cr_expect(readlink(f, link, sizeof(link) - 1) > 0, "%s", f);
			cr_expect(!(st.st_dev == host.st_dev && st.st_ino == host.st_ino),
				  "pid %d holds the host terminal on fd %s", (int)q, fe->d_name);
			cr_expect(st.st_dev == pts.st_dev || st.st_dev == dev.st_dev,
				  "pid %d fd %s is no sandbox file: %s", (int)q, fe->d_name, link);
			if (st.st_dev == pts.st_dev) {
				on_pts++;
				cr_expect_neq(st.st_uid, 0u, "the terminal belongs to host root: %s", link);
			}
		}
		if (fd)
			closedir(fd);
	}
	closedir(d);
	cr_expect_eq(procs, 1, "expected the background sleep alone, found %d processes", procs);
	cr_expect_eq(on_pts, 3, "the background holds %d fds of its terminal", on_pts);
	close(s);
	close(m);
	destroy(sb);
}

/* Runs the CLI with stdin and stdout on host files (no terminal at all). */
static int no_terminal(sbx_sandbox *sb, const char *flag, const char *input, const char *cmd, char *out,
		       size_t outlen)
{
	char in_path[] = "/tmp/sbx-tty-in-XXXXXX", out_path[] = "/tmp/sbx-tty-out-XXXXXX";
	int in = mkstemp(in_path), o = mkstemp(out_path);
	cr_assert(in >= 0 && o >= 0);
	cr_assert_eq(write(in, input, strlen(input)), (ssize_t)strlen(input));
	lseek(in, 0, SEEK_SET);
	pid_t pid = cli_start(sb, in, o, flag, cmd);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ssize_t n = pread(o, out, outlen - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(in);
	close(o);
	unlink(in_path);
	unlink(out_path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(stdio_tty, without_a_host_terminal)
{
	sbx_sandbox *sb = sandbox();
	char out[4096];
	/* Piped input is typed in, then ^D; the size is the default. */
	int code = no_terminal(sb, "-t", "one\ntwo\n", "stty size; cat; echo done; exit 5", out, sizeof(out));
	cr_expect_eq(code, 5, "exit code %d: %s", code, out);
	cr_expect_not_null(strstr(out, "24 80"), "%s", out);
	cr_expect_not_null(strstr(out, "two\r\n"), "%s", out);
	cr_expect_not_null(strstr(out, "done"), "%s", out);
	cr_expect_null(strstr(out, "not a TTY"), "%s", out);
	/* -i without a terminal: the same, with a warning (docker refuses). */
	code = no_terminal(sb, "-it", "x", "cat; echo done", out, sizeof(out));
	cr_expect_eq(code, 0, "exit code %d: %s", code, out);
	cr_expect_not_null(strstr(out, "the input device is not a TTY"), "%s", out);
	cr_expect_not_null(strstr(out, "done"), "%s", out);
	/* Not found: the shell's code, as without -t. */
	code = no_terminal(sb, "-t", "", NULL, out, sizeof(out));
	cr_expect_eq(code, 127, "exit code %d: %s", code, out);
	cr_expect_not_null(strstr(out, "command not found"), "%s", out);
	destroy(sb);
}

Test(stdio_tty, run_takes_t_too)
{
	setenv("SBX_STATE_DIR", sbx_runtime_state_dir(rt), 1);
	setenv("SBX_IMAGE_DIR", sbx_runtime_image_dir(rt), 1);
	char sbx[512], out_path[] = "/tmp/sbx-tty-run-XXXXXX", out[256];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	int o = mkstemp(out_path);
	cr_assert_geq(o, 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(o, 1);
		execl(sbx, "sbx", "run", "-t", "busybox", "--", "sh", "-c", "tty; exit 6", (char *)NULL);
		_exit(127);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ssize_t n = pread(o, out, sizeof(out) - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(o);
	unlink(out_path);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 6, "status %d: %s", st, out);
	cr_expect_eq(strncmp(out, "/dev/pts/", 9), 0, "%s", out);
}
