/* SPDX-License-Identifier: MIT */
/*
 * The relay process of `sbx exec`'s stdio. A read() of a pipe, and the last
 * close() of one, wait uninterruptibly for the pipe's mutex, and a process
 * in the sandbox can hold that mutex for as long as it likes (splice or
 * sendfile from an idle socket into its stdout: busybox `cat` does). Had the
 * CLI read the command's pipes itself, a background process doing that kept
 * `sbx exec` from returning until the sandbox ended, and a thread would not
 * help: a process exits only when all its threads do, and until then it
 * keeps our stdout open for whoever waits for its EOF (`$(sbx exec ...)`).
 *
 * So every pipe end the sandbox shares is touched by a forked relay process
 * only. It copies the command's output into relay pipes that only the CLI
 * and the relay hold (read/write through a buffer, never splice: a splice
 * between two pipes locks both), and the CLI's input the other way. The CLI
 * closes its copies of the sandbox's ends while the relay still holds them
 * (never the last close), and when it is done it simply leaves: the relay
 * dies with it (PR_SET_PDEATHSIG) or, if it is stuck on a mutex, as soon as
 * it gets the mutex back, holding nothing of the caller's meanwhile.
 *
 * The relay runs only async-signal-safe calls on memory set up before the
 * fork, since the CLI may have threads (the library's) when it forks.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "exec_io.h"

#define RELAY_BUF 65536

/* One direction: src → buf → dst. */
struct stream {
	int src, dst;
	size_t off, len;
	char buf[RELAY_BUF];
};

struct relay_state {
	struct stream s[3]; /* stdout, stderr, stdin */
	int held[3];        /* the sandbox's ends, dropped when ctl hangs up */
	int ctl;
	int ack;            /* closed once, after ctl, the output pipes are empty */
};

static void drop(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Both ends of a stream go at once: EOF on src is EOF for dst's reader,
 * and a reader gone from dst leaves nothing to copy src to. */
static void end_stream(struct stream *s)
{
	drop(&s->src);
	drop(&s->dst);
	s->len = 0;
}

static void step(struct stream *s, short revents)
{
	if (s->len == 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = read(s->src, s->buf, RELAY_BUF);
		if (n > 0) {
			s->off = 0;
			s->len = (size_t)n;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			end_stream(s);
			return;
		}
	}
	if (s->len > 0) {
		ssize_t w = write(s->dst, s->buf + s->off, s->len);
		if (w > 0) {
			s->off += (size_t)w;
			s->len -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			end_stream(s);
		}
	}
}

/* Nothing of the command's output waits in its pipes or in our buffers. */
static int outputs_idle(struct relay_state *st)
{
	for (int i = 0; i < 2; i++) {
		struct stream *s = &st->s[i];
		if (s->src < 0)
			continue;
		if (s->len)
			return 0;
		struct pollfd pf = { .fd = s->src, .events = POLLIN };
		if (poll(&pf, 1, 0) != 0)
			return 0; /* data, or EOF still to be passed on */
	}
	return 1;
}

static _Noreturn void relay_main(struct relay_state *st, pid_t parent)
{
	/* Dies with the CLI: once the CLI has left nobody reads what it copies. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL); /* EPIPE ends a stream instead */
	for (;;) {
		struct pollfd pf[4];
		int idx[4], n = 0, live = 0;
		for (int i = 0; i < 3; i++) {
			struct stream *s = &st->s[i];
			if (s->src < 0 && s->dst < 0)
				continue;
			live++;
			idx[n] = i;
			pf[n++] = s->len ? (struct pollfd){ .fd = s->dst, .events = POLLOUT }
					 : (struct pollfd){ .fd = s->src, .events = POLLIN };
		}
		if (st->ctl >= 0) {
			idx[n] = -1;
			pf[n++] = (struct pollfd){ .fd = st->ctl, .events = POLLIN };
		}
		if (n == 0 || (live == 0 && st->ctl < 0))
			_exit(0);
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (int k = 0; k < n; k++) {
			if (!pf[k].revents)
				continue;
			if (idx[k] < 0) {
				/* The exec is over: the sandbox's processes alone
				 * hold its ends now, so EOF comes when they go. */
				drop(&st->ctl);
				for (int i = 0; i < 3; i++)
					drop(&st->held[i]);
				continue;
			}
			struct stream *s = &st->s[idx[k]];
			if (s->len && (pf[k].revents & (POLLERR | POLLHUP)) && !(pf[k].revents & POLLOUT))
				end_stream(s); /* the reader of dst is gone */
			else
				step(s, pf[k].revents);
		}
		/* What the command wrote before its exit status is all in the
		 * CLI's pipes now: its grace for background writers can start. */
		if (st->ctl < 0 && st->ack >= 0 && outputs_idle(st))
			drop(&st->ack);
	}
}

/* Closes every fd but the k in keep (-1 entries ignored), a range at a time. */
static void close_all_but(int *keep, int k)
{
	for (int i = 1; i < k; i++) /* insertion sort: at most 11 */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	unsigned lo = 0;
	for (int i = 0; i < k; i++) {
		if (keep[i] < 0)
			continue;
		if ((unsigned)keep[i] > lo)
			close_range(lo, (unsigned)keep[i] - 1, 0);
		lo = (unsigned)keep[i] + 1;
	}
	close_range(lo, ~0U, 0);
}

static void nonblock(int fd)
{
	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int cli_relay_start(struct cli_relay *r, const struct cli_relay_fds *f)
{
	int ctl[2], ack[2];
	r->pid = -1;
	r->ctl = r->ack = -1;
	if (pipe2(ctl, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(ack, O_CLOEXEC) < 0) {
		int e = errno;
		close(ctl[0]);
		close(ctl[1]);
		return -e;
	}
	struct relay_state *st = xmalloc(sizeof(*st));
	int src[3] = { f->out_r, f->err_r, f->rin_r }, dst[3] = { f->rout_w, f->rerr_w, f->in_w };
	for (int i = 0; i < 3; i++) {
		st->s[i].src = src[i];
		st->s[i].dst = dst[i];
		st->s[i].off = st->s[i].len = 0;
		/* A stream without one of its ends has nothing to copy:
		 * closing the other gives its reader EOF at once. */
		if (src[i] < 0 || dst[i] < 0) {
			st->s[i].src = st->s[i].dst = -1;
		}
		st->held[i] = f->theirs[i];
	}
	st->ctl = ctl[0];
	st->ack = ack[1];
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(ctl[0]);
		close(ctl[1]);
		close(ack[0]);
		close(ack[1]);
		free(st);
		return -e;
	}
	if (pid == 0) {
		/* Keep only the relay's fds: none of the caller's stdio. */
		int keep[11] = { ctl[0], ack[1] };
		int k = 2;
		for (int i = 0; i < 3; i++) {
			keep[k++] = st->s[i].src;
			keep[k++] = st->s[i].dst;
			keep[k++] = st->held[i];
		}
		close_all_but(keep, k);
		for (int i = 0; i < 3; i++) {
			nonblock(st->s[i].src);
			nonblock(st->s[i].dst);
		}
		relay_main(st, parent);
	}
	free(st);
	close(ctl[0]);
	close(ack[1]);
	r->pid = pid;
	r->ctl = ctl[1];
	r->ack = ack[0];
	return 0;
}

void cli_relay_release(struct cli_relay *r)
{
	if (r->ctl >= 0)
		close(r->ctl);
	r->ctl = -1;
}

void cli_relay_finish(struct cli_relay *r)
{
	cli_relay_release(r);
	/* Reaped if it is done; else it goes on without us (reparented) until
	 * the sandbox lets go of the pipe or its processes end. */
	if (r->pid > 0)
		waitpid(r->pid, NULL, WNOHANG);
	r->pid = -1;
	if (r->ack >= 0)
		close(r->ack);
	r->ack = -1;
}
