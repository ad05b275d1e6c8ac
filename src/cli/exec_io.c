/* SPDX-License-Identifier: MIT */
/*
 * The stdio of `sbx run` and `sbx exec`. Handing the command our own fds (as
 * the library allows) let a sandbox reopen /proc/self/fd/1 and read the host
 * file stdout was redirected to, read keystrokes from our terminal through
 * it, and keep appending from a background process after we returned. So the
 * command gets pipes made here, and one pump thread copies them to our
 * stdout/stderr (and our stdin into its stdin pipe) while the main thread
 * waits in sbx_sandbox_exec(), whose start, errors and exit codes stay the
 * library's. When the exit status is in, the pump drains what the pipes hold
 * for a short, bounded grace and stops: a background process still holding
 * the pipes then writes into a pipe nobody reads, never into a host file.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "cli.h"
#include "exec_io.h"

/* As long as the library's own exec drains its pipes after the exit status. */
#define DRAIN_GRACE_S 0.05
/* How long the relay may take to pass on what the command's pipes hold after
 * its exit status: only a relay stuck on a pipe's mutex takes this long. */
#define ACK_MAX_S 5.0
#define CHUNK 65536
/* A command writing small chunks fast (4 KiB from `head`, `cat` of a pipe)
 * would wake the pump once per chunk: thousands of wakeups for 10 MiB, each
 * a thread switch on a loaded host. While data streams, the pump waits this
 * long between wakeups instead, and the pipes hold what arrives meanwhile. */
#define STREAM_NAP_NS 200000L
#define PIPE_SIZE (1 << 20)
/* The pump's frames are small (its buffers are in struct pump). */
#define PUMP_STACK (256 * 1024)

struct pump {
	int out[2];        /* read ends: stdout, stderr (-1 when merged or at EOF) */
	int in_w;          /* write end of the command's stdin pipe, -1 when not (or no longer) fed */
	int wake;          /* eventfd: the command has exited */
	int ack;           /* the relay's: hangs up once it passed on what the command wrote */
	int splice_out[2]; /* 1 until splice(2) to our stdout/stderr is refused */
	int splice_in;     /* 1 until splice(2) from our stdin is refused */
	int in_full;       /* the stdin pipe was full at the last splice */
	size_t drained;    /* output bytes moved since the exit status */
	size_t in_off, in_len;
	char in_buf[CHUNK];
	char buf[CHUNK];
};

int cli_write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			poll(&pf, 1, -1);
		} else if (!(w < 0 && errno == EINTR)) {
			return w < 0 && errno == EPIPE ? -1 : 0; /* else: a closed fd drops output */
		}
	}
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* What one step of the pump did: nothing, emptied its source or filled its
 * sink (wait for more), or a whole chunk (likely more right away). */
enum { MOVED_NONE, MOVED_SOME, MOVED_CHUNK };

/* What is in output pipe i, to our own fd. At EOF, or when our own reader
 * went away, the pipe is closed: the command then gets EPIPE as if it wrote
 * to ours. splice(2) moves pages without a copy through us, to a file, a pipe
 * or /dev/null; an O_APPEND file or a terminal refuses it (EINVAL) and gets
 * read(2)/write(2) from then on; a full non-blocking sink (EAGAIN) this once. */
static int pump_out(struct pump *p, int i)
{
	int to = i ? STDERR_FILENO : STDOUT_FILENO;
	if (p->splice_out[i]) {
		ssize_t n = splice(p->out[i], NULL, to, NULL, PIPE_SIZE, SPLICE_F_MOVE);
		if (n > 0) {
			p->drained += (size_t)n;
			return n == PIPE_SIZE ? MOVED_CHUNK : MOVED_SOME;
		}
		if (n == 0 || errno == EPIPE) {
			close_fd(&p->out[i]);
			return MOVED_NONE;
		}
		if (errno == EINTR)
			return MOVED_NONE;
		if (errno != EAGAIN)
			p->splice_out[i] = 0;
	}
	ssize_t n = read(p->out[i], p->buf, CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return MOVED_NONE;
	if (n <= 0 || cli_write_all(to, p->buf, (size_t)n) < 0) {
		close_fd(&p->out[i]);
		return MOVED_NONE;
	}
	p->drained += (size_t)n;
	return n == CHUNK ? MOVED_CHUNK : MOVED_SOME;
}

static int feed_in(struct pump *p)
{
	ssize_t w = write(p->in_w, p->in_buf + p->in_off, p->in_len);
	if (w > 0) {
		p->in_off += (size_t)w;
		p->in_len -= (size_t)w;
		return p->in_len ? MOVED_SOME : MOVED_CHUNK;
	}
	if (!(w < 0 && (errno == EAGAIN || errno == EINTR)))
		close_fd(&p->in_w); /* the command closed its stdin */
	return MOVED_NONE;
}

/* Our stdin into the command's: splice(2) when the kernel allows it (a
 * file, a pipe, a socket), else read(2) into in_buf and write(2). */
static int read_in(struct pump *p)
{
	if (p->splice_in) {
		ssize_t n = splice(STDIN_FILENO, NULL, p->in_w, NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0)
			return n == PIPE_SIZE ? MOVED_CHUNK : MOVED_SOME;
		if (n == 0 || errno == EPIPE) {
			close_fd(&p->in_w); /* EOF for the command, or it closed its stdin */
			return MOVED_NONE;
		}
		if (errno == EINTR)
			return MOVED_NONE;
		if (errno == EAGAIN) {
			/* Our stdin polled readable, so the pipe is full: wait
			 * for room (unless another reader took our input). */
			struct pollfd pf = { .fd = p->in_w, .events = POLLOUT };
			p->in_full = poll(&pf, 1, 0) == 0;
			return p->in_full ? MOVED_SOME : MOVED_NONE;
		}
		p->splice_in = 0;
	}
	ssize_t n = read(STDIN_FILENO, p->in_buf, CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return MOVED_NONE;
	if (n <= 0) {
		close_fd(&p->in_w); /* EOF for the command */
		return MOVED_NONE;
	}
	p->in_off = 0;
	p->in_len = (size_t)n;
	int r = feed_in(p);
	return n == CHUNK ? r : MOVED_SOME;
}

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	/* EPIPE instead of a signal, for a command that closed its stdin and a
	 * reader of ours that went away alike. */
	sigset_t pipe_sig;
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_sig, NULL);
	int exited = 0, acked = 0, streaming = 0;
	double until = 0, left = 0, ack_until = 0;
	size_t budget = 0;
	for (;;) {
		struct pollfd pf[5];
		int n = 0, oi[2] = { -1, -1 }, wi = -1, ri = -1, fi = -1, ai = -1, timeout = -1;
		for (int i = 0; i < 2; i++)
			if (p->out[i] >= 0) {
				oi[i] = n;
				pf[n++] = (struct pollfd){ .fd = p->out[i], .events = POLLIN };
			}
		if (exited && !acked && sbx__now_mono() >= ack_until)
			acked = 1; /* the relay is stuck on a pipe's mutex */
		if (exited && acked && until == 0) {
			/* What the command wrote before it exited is in our
			 * pipes now, at most their size, and goes out however
			 * slow our reader is. Background processes may keep
			 * writing for ever: of theirs, only what comes within
			 * the grace. */
			until = sbx__now_mono() + DRAIN_GRACE_S;
			p->drained = 0;
			for (int i = 0; i < 2; i++) {
				int sz = p->out[i] >= 0 ? fcntl(p->out[i], F_GETPIPE_SZ) : 0;
				budget += sz > 0 ? (size_t)sz : 0;
			}
		}
		if (!exited) {
			wi = n;
			pf[n++] = (struct pollfd){ .fd = p->wake, .events = POLLIN };
			if (p->in_w >= 0 && (p->in_len || p->in_full)) {
				fi = n;
				pf[n++] = (struct pollfd){ .fd = p->in_w, .events = POLLOUT };
			} else if (p->in_w >= 0) {
				ri = n;
				pf[n++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
			}
		} else if (!acked) {
			if (n == 0)
				break;
			ai = n;
			pf[n++] = (struct pollfd){ .fd = p->ack, .events = POLLIN };
			left = ack_until - sbx__now_mono();
			timeout = (int)(left * 1000) + 1;
		} else {
			left = until - sbx__now_mono();
			if (n == 0 || (left <= 0 && p->drained >= budget))
				break;
			timeout = left > 0 ? (int)(left * 1000) + 1 : 0;
		}
		int k = poll(pf, (nfds_t)n, timeout);
		if (k < 0 && errno != EINTR)
			break;
		if (k == 0 && exited && acked && left <= 0)
			break;
		if (k <= 0)
			continue;
		int moved = MOVED_NONE, m;
		for (int i = 0; i < 2; i++)
			if (oi[i] >= 0 && pf[oi[i]].revents && (m = pump_out(p, i)) > moved)
				moved = m;
		if (fi >= 0 && pf[fi].revents) {
			p->in_full = 0;
			if ((m = p->in_len ? feed_in(p) : read_in(p)) > moved)
				moved = m;
		}
		if (ri >= 0 && pf[ri].revents && (m = read_in(p)) > moved)
			moved = m;
		if (ai >= 0 && pf[ai].revents)
			acked = 1;
		if (wi >= 0 && pf[wi].revents) {
			exited = 1;
			acked = p->ack < 0;
			ack_until = sbx__now_mono() + ACK_MAX_S;
		}
		/* Data twice in a row is a stream, not one burst or a keystroke:
		 * once a step ran dry, let the next chunks pile up. */
		if (moved == MOVED_NONE)
			streaming = 0;
		else if (moved == MOVED_SOME && streaming++ && !exited)
			nanosleep(&(struct timespec){ .tv_nsec = STREAM_NAP_NS }, NULL);
	}
	return NULL;
}

void cli_stdio_guard(void)
{
	for (int fd = 0; fd < 3; fd++) {
		int nfd = fcntl(fd, F_GETFD) < 0 && errno == EBADF ? open("/dev/null", O_RDWR) : fd;
		if (nfd >= 0 && nfd != fd)
			close(nfd);
	}
}

/* stdout and stderr are one open file (2>&1): one pipe keeps their order. */
static int same_file(int a, int b)
{
	pid_t me = getpid();
	return syscall(SYS_kcmp, me, me, KCMP_FILE, a, b) == 0;
}

int cli_stdin_forwarded(enum cli_stdin in)
{
	struct stat st;
	if (fstat(STDIN_FILENO, &st) < 0)
		return 0;
	/* Nothing to copy: EOF is all it would read. */
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
		return 0;
	return in == CLI_STDIN_ALWAYS || !isatty(STDIN_FILENO);
}

/* A pipe whose end `mine` (0 = read, 1 = write) is ours and non-blocking. */
static int make_pipe(int *ours, int *theirs, int mine)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return -1;
	*ours = pp[mine];
	*theirs = pp[!mine];
	fcntl(*ours, F_SETFL, O_NONBLOCK);
	fcntl(*ours, F_SETPIPE_SZ, PIPE_SIZE); /* best effort: room while the pump naps */
	return 0;
}

int cli_exec_stdio(sbx_sandbox *sb, const sbx_exec_opts *base, enum cli_stdin in, int *timed_out)
{
	/* Fields one by one: zeroing the buffers would touch 32 pages that
	 * splice(2) mostly never needs (a page fault each, per exec). */
	struct pump *p = xmalloc(sizeof(*p));
	p->out[0] = p->out[1] = p->in_w = p->wake = p->ack = -1;
	p->splice_out[0] = p->splice_out[1] = p->splice_in = 1;
	p->in_full = 0;
	p->in_off = p->in_len = p->drained = 0;
	int theirs[3] = { -1, -1, -1 }; /* stdout, stderr, stdin ends for the command */
	/* The host's ends of the command's pipes go to the relay, and the pump
	 * works on relay pipes only the relay and we hold (exec_relay.c). */
	struct cli_relay_fds rf = { -1, -1, -1, -1, -1, -1, { -1, -1, -1 } };
	struct cli_relay relay = { -1, -1, -1, NULL, 0 };
	cli_stdio_guard();
	int merged = same_file(STDOUT_FILENO, STDERR_FILENO), fwd = cli_stdin_forwarded(in), started = 0;
	int code = EXIT_SBX;
	int ok = make_pipe(&rf.out_r, &theirs[0], 0) == 0 && make_pipe(&p->out[0], &rf.rout_w, 0) == 0 &&
		 (merged || (make_pipe(&rf.err_r, &theirs[1], 0) == 0 &&
			     make_pipe(&p->out[1], &rf.rerr_w, 0) == 0)) &&
		 make_pipe(&rf.in_w, &theirs[2], 1) == 0 &&
		 (!fwd || make_pipe(&p->in_w, &rf.rin_r, 1) == 0) &&
		 (p->wake = eventfd(0, EFD_CLOEXEC)) >= 0;
	/* Without input the command still gets a pipe, at EOF at once: the
	 * library would hand it the host's /dev/null, an inode of the host a
	 * sandbox root could chmod through /proc/self/fd/0. The relay closes
	 * the write end of a stream with no source. */
	memcpy(rf.theirs, theirs, sizeof(theirs));
	if (ok && (errno = -cli_relay_start(&relay, &rf)) != 0)
		ok = 0;
	p->ack = relay.ack;
	/* The relay holds these now; ours are never the last close. */
	close_fd(&rf.out_r);
	close_fd(&rf.err_r);
	close_fd(&rf.in_w);
	close_fd(&rf.rout_w);
	close_fd(&rf.rerr_w);
	close_fd(&rf.rin_r);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PUMP_STACK);
	if (ok && (errno = pthread_create(&t, &attr, pump_main, p)) == 0)
		started = 1;
	pthread_attr_destroy(&attr);
	if (!started) {
		fprintf(stderr, "sbx exec: stdio pipes: %s\n", strerror(errno));
		goto out;
	}
	sbx_exec_opts o = *base;
	o.stdout_fd = theirs[0];
	o.stderr_fd = merged ? theirs[0] : theirs[1];
	o.stdin_fd = theirs[2];
	o.fds_are_private = 1; /* pipes made here for this command alone */
	o.stdin_data = NULL;
	o.on_output = NULL;
	sbx_exec_result res;
	sbx_error *err = NULL;
	int r = sbx_sandbox_exec(&res, sb, &o, &err);
	/* Now the relay and the sandbox hold the other ends; once the relay
	 * drops its copies, EOF comes when the sandbox's processes go. */
	for (int i = 0; i < 3; i++)
		close_fd(&theirs[i]);
	cli_relay_release(&relay);
	uint64_t one = 1;
	if (write(p->wake, &one, sizeof(one)) < 0)
		abort(); /* an eventfd write of 1 cannot fail */
	pthread_join(t, NULL);
	if (r < 0) {
		cli_fail("exec", err);
		goto out;
	}
	/* A command that could not start (not found): the library's message. */
	if (res.err && res.err_len)
		fwrite(res.err, 1, res.err_len, stderr);
	*timed_out = res.timed_out;
	code = res.timed_out ? EXIT_TIMEOUT : res.exit_code;
	sbx_exec_result_free(&res);
out:
	for (int i = 0; i < 3; i++)
		close_fd(&theirs[i]);
	cli_relay_finish(&relay);
	close_fd(&p->out[0]);
	close_fd(&p->out[1]);
	close_fd(&p->in_w);
	if (p->wake >= 0)
		close(p->wake);
	free(p);
	return code;
}
