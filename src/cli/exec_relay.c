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
 * So every pipe end the sandbox shares is touched by a relay process only.
 * It copies the command's output into relay pipes that only the CLI and the
 * relay hold (read/write through a buffer, never splice: a splice between
 * two pipes locks both), and the CLI's input the other way. The CLI closes
 * its copies of the sandbox's ends while the relay still holds them (never
 * the last close), and when it is done it simply leaves: the relay dies with
 * it (PR_SET_PDEATHSIG) or, if it is stuck on a mutex, as soon as it gets
 * the mutex back, holding nothing of the caller's meanwhile.
 *
 * The relay is a process that shares our memory (CLONE_VM, no page tables
 * copied: a fork cost ~0.5 ms of CPU per exec, most of it copy-on-write
 * faults). It has its own fd table and signal handlers, runs on a stack and
 * state mapped for it alone that we never unmap while it may run, blocks
 * all signals (our handlers would run on our memory), and makes only raw
 * system calls: a libc wrapper would write errno in the thread-local storage
 * of the thread that started it, which is ours. Other architectures fork.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec_io.h"

#define RELAY_BUF 65536
#define RELAY_STACK (64 * 1024)

#if defined(__x86_64__) || defined(__aarch64__)
#define RELAY_SHARES_MEMORY 1
#else
#define RELAY_SHARES_MEMORY 0
#endif

/* What runs in the relay: on our memory, but not one of our threads, so no
 * sanitizer runtime (its reports and fake stacks use the thread data of the
 * thread that started it) and no libc. */
#if RELAY_SHARES_MEMORY
#define RELAY_SIDE __attribute__((no_sanitize("address", "undefined")))
#else
#define RELAY_SIDE
#endif

/* A system call that leaves errno alone: -errno on failure. */
RELAY_SIDE static long rsys(long n, long a, long b, long c, long d, long e)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
	return x0;
#else
	long r = syscall(n, a, b, c, d, e); /* a forked relay: its own errno */
	return r < 0 ? -errno : r;
#endif
}

#define R_READ(fd, b, n) rsys(SYS_read, (fd), (long)(b), (long)(n), 0, 0)
#define R_WRITE(fd, b, n) rsys(SYS_write, (fd), (long)(b), (long)(n), 0, 0)
#define R_CLOSE(fd) rsys(SYS_close, (fd), 0, 0, 0, 0)
#define R_FCNTL(fd, cmd, arg) rsys(SYS_fcntl, (fd), (cmd), (long)(arg), 0, 0)
#define R_CLOSE_RANGE(lo, hi) rsys(SYS_close_range, (long)(lo), (long)(hi), 0, 0, 0)

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
	pid_t parent;
	int keep[11];       /* every fd above, for the relay's own fd table */
	int nkeep;
};

/* poll(2) for both architectures (arm64 has only ppoll): a negative
 * timeout waits for ever, 0 not at all. */
RELAY_SIDE static long r_poll(struct pollfd *pf, unsigned n, int wait)
{
	struct timespec zero = { 0, 0 };
	return rsys(SYS_ppoll, (long)pf, n, wait ? 0 : (long)&zero, 0, 8);
}

RELAY_SIDE static void drop(int *fd)
{
	if (*fd >= 0)
		R_CLOSE(*fd);
	*fd = -1;
}

/* Both ends of a stream go at once: EOF on src is EOF for dst's reader,
 * and a reader gone from dst leaves nothing to copy src to. */
RELAY_SIDE static void end_stream(struct stream *s)
{
	drop(&s->src);
	drop(&s->dst);
	s->len = 0;
}

RELAY_SIDE static void step(struct stream *s, short revents)
{
	if (s->len == 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
		long n = R_READ(s->src, s->buf, RELAY_BUF);
		if (n > 0) {
			s->off = 0;
			s->len = (size_t)n;
		} else if (n == 0 || (n != -EAGAIN && n != -EINTR)) {
			end_stream(s);
			return;
		}
	}
	if (s->len > 0) {
		long w = R_WRITE(s->dst, s->buf + s->off, s->len);
		if (w > 0) {
			s->off += (size_t)w;
			s->len -= (size_t)w;
		} else if (w < 0 && w != -EAGAIN && w != -EINTR) {
			end_stream(s);
		}
	}
}

/* Nothing of the command's output waits in its pipes or in our buffers. */
RELAY_SIDE static int outputs_idle(struct relay_state *st)
{
	for (int i = 0; i < 2; i++) {
		struct stream *s = &st->s[i];
		if (s->src < 0)
			continue;
		if (s->len)
			return 0;
		struct pollfd pf = { .fd = s->src, .events = POLLIN };
		if (r_poll(&pf, 1, 0) != 0)
			return 0; /* data, or EOF still to be passed on */
	}
	return 1;
}

/* Closes every fd but those in keep (-1 entries ignored), a range at a time. */
RELAY_SIDE static void close_all_but(int *keep, int k)
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
			R_CLOSE_RANGE(lo, (unsigned)keep[i] - 1);
		lo = (unsigned)keep[i] + 1;
	}
	R_CLOSE_RANGE(lo, ~0U);
}

RELAY_SIDE static void nonblock(int fd)
{
	if (fd >= 0)
		R_FCNTL(fd, F_SETFL, R_FCNTL(fd, F_GETFL, 0) | O_NONBLOCK);
}

RELAY_SIDE static _Noreturn void relay_exit(int code)
{
	for (;;)
		rsys(SYS_exit_group, code, 0, 0, 0, 0);
}

RELAY_SIDE static int relay_main(void *arg)
{
	struct relay_state *st = arg;
	/* Every signal, glibc's own two included (sigprocmask leaves those
	 * out): their handlers would act on the thread data of our thread. */
	unsigned long all = ~0UL;
	rsys(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, sizeof(all), 0);
	/* Keep only the relay's fds: none of the caller's stdio. */
	close_all_but(st->keep, st->nkeep);
	for (int i = 0; i < 3; i++) {
		nonblock(st->s[i].src);
		nonblock(st->s[i].dst);
	}
	/* Dies with the CLI: once the CLI has left nobody reads what it
	 * copies. SIGPIPE is blocked (every signal is), so EPIPE ends a stream. */
	rsys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (rsys(SYS_getppid, 0, 0, 0, 0, 0) != st->parent)
		relay_exit(0);
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
			relay_exit(0);
		long k = r_poll(pf, (unsigned)n, 1);
		if (k == -EINTR)
			continue;
		if (k < 0)
			relay_exit(1);
		for (int j = 0; j < n; j++) {
			if (!pf[j].revents)
				continue;
			if (idx[j] < 0) {
				/* The exec is over: the sandbox's processes alone
				 * hold its ends now, so EOF comes when they go. */
				drop(&st->ctl);
				for (int i = 0; i < 3; i++)
					drop(&st->held[i]);
				continue;
			}
			struct stream *s = &st->s[idx[j]];
			if (s->len && (pf[j].revents & (POLLERR | POLLHUP)) && !(pf[j].revents & POLLOUT))
				end_stream(s); /* the reader of dst is gone */
			else
				step(s, pf[j].revents);
		}
		/* What the command wrote before its exit status is all in the
		 * CLI's pipes now: its grace for background writers can start. */
		if (st->ctl < 0 && st->ack >= 0 && outputs_idle(st))
			drop(&st->ack);
	}
}

/* The relay's state and, below it, its stack over a guard page: one
 * mapping, never unmapped while the relay may run. Sizes in pages of this
 * kernel's size (4 KiB to 64 KiB on arm64). */
static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (n + pg - 1) / pg * pg;
}

static size_t relay_map_len(void)
{
	return page_round(1) + page_round(RELAY_STACK) + page_round(sizeof(struct relay_state));
}

static pid_t spawn(struct relay_state *st, char *stack_top)
{
#if RELAY_SHARES_MEMORY
	/* Every signal blocked across the clone, so the relay starts (and
	 * stays) with all of them blocked; ours come back right after. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(relay_main, stack_top, CLONE_VM | SIGCHLD, st);
	int e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return pid;
#else
	(void)stack_top;
	pid_t pid = fork();
	if (pid == 0) {
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		relay_main(st);
	}
	return pid;
#endif
}

int cli_relay_start(struct cli_relay *r, const struct cli_relay_fds *f)
{
	int ctl[2], ack[2];
	r->pid = -1;
	r->ctl = r->ack = -1;
	r->map = NULL;
	if (pipe2(ctl, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(ack, O_CLOEXEC) < 0) {
		int e = errno;
		close(ctl[0]);
		close(ctl[1]);
		return -e;
	}
	size_t len = relay_map_len(), guard = page_round(1);
	char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (map == MAP_FAILED) {
		int e = errno;
		close(ctl[0]);
		close(ctl[1]);
		close(ack[0]);
		close(ack[1]);
		return -e;
	}
	mprotect(map, guard, PROT_NONE); /* best effort: the stack's guard */
	char *stack_top = map + guard + page_round(RELAY_STACK);
	struct relay_state *st = (struct relay_state *)stack_top;
	int src[3] = { f->out_r, f->err_r, f->rin_r }, dst[3] = { f->rout_w, f->rerr_w, f->in_w };
	st->nkeep = 0;
	st->keep[st->nkeep++] = st->ctl = ctl[0];
	st->keep[st->nkeep++] = st->ack = ack[1];
	for (int i = 0; i < 3; i++) {
		st->s[i].src = src[i];
		st->s[i].dst = dst[i];
		st->s[i].off = st->s[i].len = 0;
		/* A stream without one of its ends has nothing to copy:
		 * closing the other gives its reader EOF at once. */
		if (src[i] < 0 || dst[i] < 0)
			st->s[i].src = st->s[i].dst = -1;
		st->held[i] = f->theirs[i];
		st->keep[st->nkeep++] = st->s[i].src;
		st->keep[st->nkeep++] = st->s[i].dst;
		st->keep[st->nkeep++] = st->held[i];
	}
	st->parent = getpid();
	pid_t pid = spawn(st, stack_top);
	if (pid < 0) {
		int e = errno;
		close(ctl[0]);
		close(ctl[1]);
		close(ack[0]);
		close(ack[1]);
		munmap(map, len);
		return -e;
	}
	close(ctl[0]);
	close(ack[1]);
	r->pid = pid;
	r->ctl = ctl[1];
	r->ack = ack[0];
	r->map = map;
	r->map_len = len;
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
	 * the sandbox lets go of the pipe or its processes end, on a mapping
	 * we leave to it. */
	if (r->pid > 0 && waitpid(r->pid, NULL, WNOHANG) == r->pid && r->map) {
		munmap(r->map, r->map_len);
	}
	r->map = NULL;
	r->pid = -1;
	if (r->ack >= 0)
		close(r->ack);
	r->ack = -1;
}
