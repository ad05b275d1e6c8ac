/* SPDX-License-Identifier: MIT */
/*
 * `sbx exec -t` and `sbx run -t`. The command runs on a terminal made inside
 * the sandbox (its own devpts instance: init opens the master and gives the
 * command the slave as stdin, stdout, stderr and controlling terminal), and
 * only the master comes out, to us: the sandbox never holds our terminal or
 * any other fd of ours. Here one loop copies our stdin into the master and
 * the master to our stdout, keeps the window size in step (at start and on
 * SIGWINCH), and has our terminal in raw mode while keystrokes go in, so that
 * ^C, ^Z and the line editing are the sandbox terminal's. Our terminal's mode
 * comes back on every way out: a return, a signal that ends us (the command
 * is killed first, as when we die without -t), SIGTSTP (cooked while we are
 * stopped), and a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "cli.h"
#include "exec_io.h"

/* As the pipe pump: what comes within this grace after the exit status, and
 * at least what a terminal's buffers hold, is the command's output; a
 * background process still writing afterwards is not waited for. */
#define DRAIN_GRACE_S 0.05
#define DRAIN_BUDGET (256u << 10)
#define CHUNK 65536

static const int crash_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

/* Our terminal's mode before raw, for the signal handlers too. */
static struct termios saved_mode;
static volatile sig_atomic_t raw_on;

static void raw_restore(void)
{
	if (raw_on) {
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_mode);
		raw_on = 0;
	}
}

static void raw_enter(void)
{
	struct termios t = saved_mode;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0)
		raw_on = 1;
}

/* SA_RESETHAND: the default action runs once the mode is back. */
static void on_crash(int sig)
{
	raw_restore();
	raise(sig);
}

struct tty_pump {
	int m;               /* the master (the process handle's), -1 once at EIO */
	int in_open;         /* our stdin is still copied in */
	int out_gone;        /* our stdout's reader left: output is dropped */
	int at_line_start;   /* the last byte typed in was a newline (or none yet) */
	size_t in_off, in_len;
	size_t drained;      /* output bytes since the exit status */
	char in[CHUNK];
	char out[CHUNK];
};

/* The first of our stdout, stdin, stderr that is a terminal with a size. */
static int host_size(struct winsize *ws)
{
	static const int fds[] = { STDOUT_FILENO, STDIN_FILENO, STDERR_FILENO };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (ioctl(fds[i], TIOCGWINSZ, ws) == 0 && ws->ws_row && ws->ws_col)
			return 1;
	return 0;
}

static void resize(int m)
{
	struct winsize ws;
	if (m >= 0 && host_size(&ws))
		ioctl(m, TIOCSWINSZ, &ws);
}

static void feed(struct tty_pump *t)
{
	ssize_t w = write(t->m, t->in + t->in_off, t->in_len);
	if (w > 0) {
		t->in_off += (size_t)w;
		t->in_len -= (size_t)w;
	} else if (!(w < 0 && (errno == EAGAIN || errno == EINTR))) {
		t->in_len = 0;
		t->in_open = 0;
	}
}

/* Our stdin ended. A terminal has no EOF of its own: on a line-editing
 * (canonical) terminal, its EOF character ends input as ^D typed by a user
 * would (twice after a partial line: the first only hands the line over). */
static void type_eof(struct tty_pump *t)
{
	struct termios mode;
	t->in_open = 0;
	if (tcgetattr(t->m, &mode) < 0 || !(mode.c_lflag & ICANON) || mode.c_cc[VEOF] == _POSIX_VDISABLE)
		return;
	t->in_off = 0;
	t->in_len = t->at_line_start ? 1 : 2;
	t->in[0] = t->in[1] = (char)mode.c_cc[VEOF];
	feed(t);
}

static void read_in(struct tty_pump *t)
{
	ssize_t n = read(STDIN_FILENO, t->in, CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		type_eof(t);
		return;
	}
	t->at_line_start = t->in[n - 1] == '\n';
	t->in_off = 0;
	t->in_len = (size_t)n;
	feed(t);
}

/* The master to our stdout. A read gets at most the terminal's 4 KiB line
 * buffer: read on while more is there and write once, which halves the
 * system calls of a stream. EIO: no process holds the terminal any more. */
static void read_out(struct tty_pump *t, sbx_process *p)
{
	size_t got = 0;
	while (got < CHUNK) {
		ssize_t n = read(t->m, t->out + got, CHUNK - got);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (!(n < 0 && (errno == EAGAIN || errno == EINTR)))
			t->m = -1;
		break;
	}
	t->drained += got;
	if (!got || t->out_gone || cli_write_all(STDOUT_FILENO, t->out, got) == 0)
		return;
	/* Nobody reads us: hang the command up as a closed terminal would. */
	t->out_gone = 1;
	sbx_process_signal(p, SIGHUP, NULL);
}

/* 0, or the signal that ends us. */
static int on_signals(int sigfd, struct tty_pump *t, int raw)
{
	struct signalfd_siginfo si;
	int fatal = 0;
	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGWINCH) {
			resize(t->m);
		} else if (si.ssi_signo == SIGTSTP) {
			raw_restore();
			kill(getpid(), SIGSTOP);
			if (raw)
				raw_enter();
			resize(t->m);
		} else {
			fatal = (int)si.ssi_signo;
		}
	}
	return fatal;
}

static int start(sbx_process **p, sbx_sandbox *sb, const sbx_exec_opts *base)
{
	struct winsize ws;
	sbx_exec_opts o = *base;
	o.tty = 1;
	o.tty_rows = o.tty_cols = 0; /* the library's 24x80 without a terminal of ours */
	if (host_size(&ws)) {
		o.tty_rows = ws.ws_row;
		o.tty_cols = ws.ws_col;
	}
	o.stdin_fd = o.stdout_fd = o.stderr_fd = -1;
	o.stdin_data = NULL;
	o.on_output = NULL;
	sbx_error *err = NULL;
	int r = sbx_process_start(p, sb, &o, 0, &err);
	if (r == 0)
		return -1;
	/* Not found / not executable: the shell's codes, as without -t. */
	if (r == -ENOENT || r == -EACCES) {
		fprintf(stderr, "sbx: %s\n", err && err->msg ? err->msg : "cannot run the command");
		sbx_error_free(err);
		return r == -ENOENT ? 127 : 126;
	}
	cli_fail("exec", err);
	return EXIT_SBX;
}

int cli_exec_tty(sbx_sandbox *sb, const sbx_exec_opts *base, enum cli_stdin in, int *timed_out)
{
	cli_stdio_guard();
	*timed_out = 0;
	struct tty_pump *t = xmalloc(sizeof(*t));
	t->in_open = cli_stdin_forwarded(in);
	t->out_gone = t->in_off = t->in_len = t->drained = 0;
	t->at_line_start = 1;
	int raw = t->in_open && isatty(STDIN_FILENO);
	if (in == CLI_STDIN_ALWAYS && !isatty(STDIN_FILENO))
		fprintf(stderr, "sbx exec: the input device is not a TTY: its bytes are typed into the "
				"command's terminal as they come, then ^D\n");
	sigset_t set, old;
	sigemptyset(&set);
	static const int sigs[] = { SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		fprintf(stderr, "sbx exec: signalfd: %s\n", strerror(errno));
	/* EPIPE, not death, when our reader goes: the command is hung up. */
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_pipe;
	sigaction(SIGPIPE, &ign, &old_pipe);
	sbx_process *p = NULL;
	int code = sigfd < 0 ? EXIT_SBX : start(&p, sb, base);
	if (code >= 0)
		goto out;
	if (raw && tcgetattr(STDIN_FILENO, &saved_mode) == 0) {
		struct sigaction sa = { .sa_handler = on_crash, .sa_flags = SA_RESETHAND | SA_NODEFER };
		for (size_t i = 0; i < sizeof(crash_sigs) / sizeof(crash_sigs[0]); i++)
			sigaction(crash_sigs[i], &sa, NULL);
		raw_enter();
	}
	t->m = sbx_process_tty_fd(p);
	int status_fd = sbx_process_status_fd(p), exited = 0, status = 0, fatal = 0;
	double until = 0;
	for (;;) {
		struct pollfd pf[4];
		int n = 0, mi = -1, si = -1, ii = -1, timeout = -1;
		pf[n++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		if (t->m >= 0) {
			mi = n;
			pf[n++] = (struct pollfd){ .fd = t->m, .events = POLLIN | (t->in_len ? POLLOUT : 0) };
		}
		if (!exited) {
			si = n;
			pf[n++] = (struct pollfd){ .fd = status_fd, .events = POLLIN };
			if (t->in_open && !t->in_len && t->m >= 0) {
				ii = n;
				pf[n++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
			}
		} else {
			double left = until - sbx__now_mono();
			if (t->m < 0 || (left <= 0 && t->drained >= DRAIN_BUDGET))
				break;
			timeout = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		int k = poll(pf, (nfds_t)n, timeout);
		if (k < 0 && errno != EINTR)
			break;
		if (k == 0 && exited)
			break;
		if (k <= 0)
			continue;
		if (pf[0].revents && (fatal = on_signals(sigfd, t, raw)) != 0)
			break;
		if (mi >= 0 && (pf[mi].revents & POLLOUT) && t->in_len)
			feed(t);
		if (mi >= 0 && (pf[mi].revents & ~POLLOUT))
			read_out(t, p);
		if (ii >= 0 && pf[ii].revents)
			read_in(t);
		if (si >= 0 && pf[si].revents) {
			sbx_error *err = NULL;
			int r = sbx_process_poll(p, &status, timed_out, 0, &err);
			if (r < 0) {
				raw_restore();
				cli_fail("exec", err);
				code = EXIT_SBX;
				break;
			}
			if (r == 1) {
				exited = 1;
				until = sbx__now_mono() + DRAIN_GRACE_S;
				t->drained = 0;
			}
		}
	}
	raw_restore();
	if (code < 0)
		code = fatal    ? 128 + fatal
		       : !exited ? EXIT_SBX
		       : *timed_out ? EXIT_TIMEOUT
		       : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
				     : WEXITSTATUS(status);
out:
	/* Still running (a signal ended us): killed with its tree here. */
	sbx_process_free(p);
	if (sigfd >= 0)
		close(sigfd);
	sigaction(SIGPIPE, &old_pipe, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(t);
	return code;
}
