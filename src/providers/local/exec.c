/* SPDX-License-Identifier: MIT */
/*
 * Blocking exec for the local provider, built on the streamed process
 * (process.c): start, then feed stdin and wait for the exit status on one
 * poll loop while a reader thread takes stdout/stderr (see struct outpump).
 * No setns and no fork here: safe from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/fs.h"
#include "local_int.h"

#define DEFAULT_OUTPUT_MAX (16u << 20)
/* After the exit status: background processes get this long to close the
 * pipes once what the command wrote is in; a reader that cannot say it took
 * that (stuck on a pipe's mutex) is waited for this much longer at most. */
#define DRAIN_GRACE_S 0.05
#define DRAIN_MAX_S 5.0

/*
 * The output pipes are shared with the sandbox, and a read() of a pipe
 * waits, uninterruptibly and whatever O_NONBLOCK says, for the pipe's mutex:
 * a process inside that splices from an idle socket into its stdout (cat's
 * sendfile does) holds that mutex for as long as it likes. So the reads run
 * on a thread of their own, and the exec returns on the command's exit
 * status even while that thread is stuck. The last close of a pipe waits for
 * that mutex too, so the thread owns the read ends (taken from the process
 * handle) and its half of this struct, and closes and frees them whenever it
 * gets out.
 */
struct outpump {
	pthread_mutex_t lk;
	int fd[2];          /* stdout/stderr read ends, the reader's to close (-1 at EOF) */
	int wake;           /* eventfd: the reader's poll ends when stop is set */
	int note;           /* eventfd: the exec's poll learns that both hit EOF */
	int kick;           /* eventfd: the command exited, take what the pipes hold */
	int drained;        /* eventfd: the reader took it (what the command wrote is in) */
	sbx_buf buf[2];
	int truncated[2];
	size_t max;
	const sbx_exec_opts *o; /* on_output is called only while !stop */
	int stop, refs;
};

static void outpump_unref(struct outpump *p)
{
	pthread_mutex_lock(&p->lk);
	int last = --p->refs == 0;
	pthread_mutex_unlock(&p->lk);
	if (!last)
		return;
	for (int i = 0; i < 2; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
		sbx__buf_free(&p->buf[i]);
	}
	if (p->wake >= 0)
		close(p->wake);
	if (p->note >= 0)
		close(p->note);
	if (p->kick >= 0)
		close(p->kick);
	if (p->drained >= 0)
		close(p->drained);
	pthread_mutex_destroy(&p->lk);
	free(p);
}

static void take(struct outpump *p, int i, const char *chunk, size_t n)
{
	pthread_mutex_lock(&p->lk);
	if (!p->stop) {
		if (p->o->on_output)
			p->o->on_output(i + 1, chunk, n, p->o->payload);
		if (p->buf[i].len < p->max) {
			if (sbx__buf_append_trunc(&p->buf[i], chunk, n))
				p->truncated[i] = 1;
		} else {
			p->truncated[i] = 1;
		}
	}
	pthread_mutex_unlock(&p->lk);
}

/* Reads what pipe i holds now; 0 at EOF or on an error (then closed). */
static int read_once(struct outpump *p, int i, char *chunk, size_t size)
{
	ssize_t n = read(p->fd[i], chunk, size);
	if (n > 0) {
		take(p, i, chunk, (size_t)n);
		return 1;
	}
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		close(p->fd[i]);
		p->fd[i] = -1;
	}
	return 0;
}

/* Everything the pipes hold at this moment, then a note to the exec: what
 * the command wrote before its exit status came is all in. Bounded by what
 * the pipes held plus what writers add meanwhile: a background process
 * writing for ever is cut at 64 rounds. */
static void drain_now(struct outpump *p, char *chunk, size_t size)
{
	for (int round = 0, more = 1; more && round < 64; round++) {
		more = 0;
		for (int i = 0; i < 2; i++) {
			struct pollfd pf = { .fd = p->fd[i], .events = POLLIN };
			if (p->fd[i] >= 0 && poll(&pf, 1, 0) > 0)
				more |= read_once(p, i, chunk, size);
		}
	}
	uint64_t one = 1;
	(void)!write(p->drained, &one, sizeof(one));
}

static void *outpump_main(void *arg)
{
	struct outpump *p = arg;
	char chunk[65536];
	for (;;) {
		struct pollfd pf[4] = { { .fd = p->wake, .events = POLLIN }, { .fd = p->kick, .events = POLLIN } };
		int np = 2, idx[4] = { -1, -1, -1, -1 };
		for (int i = 0; i < 2; i++)
			if (p->fd[i] >= 0) {
				idx[np] = i;
				pf[np++] = (struct pollfd){ .fd = p->fd[i], .events = POLLIN };
			}
		if (np == 2)
			break;
		if (poll(pf, (nfds_t)np, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break; /* stop */
		for (int j = 2; j < np; j++)
			if (pf[j].revents)
				read_once(p, idx[j], chunk, sizeof(chunk));
		if (pf[1].revents) {
			uint64_t v;
			(void)!read(p->kick, &v, sizeof(v));
			drain_now(p, chunk, sizeof(chunk));
		}
	}
	/* Closed here, never by the exec: a sandbox process may hold the
	 * pipe's mutex (this close then waits for it, on this thread alone). */
	for (int i = 0; i < 2; i++)
		if (p->fd[i] >= 0) {
			close(p->fd[i]);
			p->fd[i] = -1;
		}
	uint64_t one = 1;
	(void)!write(p->note, &one, sizeof(one));
	outpump_unref(p);
	return NULL;
}

/* Starts the reader over out and err (either may be -1), which it owns from
 * now on, also when this fails. */
static int outpump_start(struct outpump **out, int ofd, int efd, const sbx_exec_opts *o, size_t max,
			 sbx_error **err)
{
	struct outpump *p = xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->lk, NULL);
	p->o = o;
	p->max = max;
	p->refs = 2;
	p->wake = eventfd(0, EFD_CLOEXEC);
	p->note = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->drained = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->fd[0] = ofd;
	p->fd[1] = efd;
	sbx__buf_init(&p->buf[0], max);
	sbx__buf_init(&p->buf[1], max);
	int e = p->wake < 0 || p->note < 0 || p->kick < 0 || p->drained < 0 ? errno : 0;
	pthread_t t;
	pthread_attr_t at;
	if (!e) {
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 128 * 1024);
		e = pthread_create(&t, &at, outpump_main, p);
		pthread_attr_destroy(&at);
	}
	if (e) {
		p->refs = 1;
		outpump_unref(p);
		return sbx_error_setsys(err, -e, e, "start the output reader of an exec");
	}
	*out = p;
	return 0;
}

/* Ends the exec's use of the reader: output after this point is dropped. */
static void outpump_stop(struct outpump *p, sbx_exec_result *res)
{
	pthread_mutex_lock(&p->lk);
	p->stop = 1;
	if (res) {
		res->out = sbx__buf_steal(&p->buf[0], &res->out_len);
		res->err = sbx__buf_steal(&p->buf[1], &res->err_len);
		res->out_truncated = p->truncated[0];
		res->err_truncated = p->truncated[1];
	}
	pthread_mutex_unlock(&p->lk);
	uint64_t one = 1;
	(void)!write(p->wake, &one, sizeof(one));
	outpump_unref(p);
}

static void set_status(sbx_exec_result *out, int st)
{
	if (WIFSIGNALED(st)) {
		out->signal = WTERMSIG(st);
		out->exit_code = 128 + out->signal;
	} else {
		out->exit_code = WEXITSTATUS(st);
	}
}

/* Not found / not executable: a result, like a shell's, not an error. */
static void not_started(sbx_exec_result *out, const sbx_exec_opts *o, int start_exit, const char *msg, double t0)
{
	out->exit_code = start_exit;
	out->err = xasprintf("sbx: %s\n", msg);
	out->err_len = strlen(out->err);
	out->out = xstrdup("");
	if (o->on_output)
		o->on_output(2, out->err, out->err_len, o->payload);
	out->seconds = sbx__now_mono() - t0;
}

int sbx__local_exec(sbx_exec_result *out, struct local_sb *sb, const sbx_exec_opts *o,
		    sbx_error **err)
{
	size_t max = o->output_max ? o->output_max : DEFAULT_OUTPUT_MAX;
	double t0 = sbx__now_mono();
	struct local_proc *p = NULL;
	struct sbx_process_fds fds;
	int start_exit = 0;
	char msg[1024] = "";
	/* Quiet: init sends no M_STARTED, which saves a wakeup per exec. */
	int r = sbx__local_proc_start(&p, &fds, sb, o, 0, 1, &start_exit, msg, sizeof(msg), err);
	if (r < 0)
		return r;
	/* On a terminal, its output is stdout and stdin_data is typed into it. */
	int tty = fds.tty_fd >= 0;
	struct outpump *op = NULL;
	int ofd = -1, efd = -1;
	if (tty)
		ofd = fcntl(fds.tty_fd, F_DUPFD_CLOEXEC, 0); /* a terminal: no pipe mutex */
	else
		sbx__local_proc_give_output(p, &ofd, &efd);
	/* The caller gave all of stdio its own fds (as `sbx exec` does):
	 * nothing to read, so no reader thread and its four eventfds. */
	int eof = ofd < 0 && efd < 0, drained = eof;
	if (!eof && (r = outpump_start(&op, ofd, efd, o, max, err)) < 0)
		goto out;
	int in_w = tty && o->stdin_data ? fds.tty_fd : fds.in_fd;
	const char *in_data = o->stdin_data;
	size_t in_left = o->stdin_data ? o->stdin_len : 0;
	if (in_w >= 0 && in_left == 0) {
		if (!tty)
			shutdown(in_w, SHUT_WR);
		in_w = -1;
	}
	int exited = 0, status = 0, timed_out = 0;
	double drain_until = 0, drain_max = 0;
	while (!exited || !eof) {
		struct pollfd pf[4];
		int np = 0, ci = -1, ni = -1, ii = -1, di = -1;
		if (!exited) {
			ci = np;
			pf[np++] = (struct pollfd){ .fd = fds.status_fd, .events = POLLIN };
		} else if (!drained) {
			di = np;
			pf[np++] = (struct pollfd){ .fd = op->drained, .events = POLLIN };
		}
		if (op) {
			ni = np;
			pf[np++] = (struct pollfd){ .fd = op->note, .events = POLLIN };
		}
		if (in_w >= 0) {
			ii = np;
			pf[np++] = (struct pollfd){ .fd = in_w, .events = POLLOUT };
		}
		int timeout = -1;
		if (exited) {
			/* The command is gone; background children may still hold the
			 * pipes. Once the reader has taken what they hold (however
			 * late a loaded host schedules it), give them the grace,
			 * then stop. A reader stuck on a pipe's mutex never says it
			 * drained: drain_max bounds that. */
			double now = sbx__now_mono();
			double left = (drained ? drain_until : drain_max) - now;
			if (left <= 0)
				break;
			timeout = (int)(left * 1000) + 1;
		}
		int k = poll(pf, (nfds_t)np, timeout);
		if (k < 0 && errno != EINTR) {
			r = sbx_error_setsys(err, -errno, errno, "exec in sandbox %s", sb->id);
			goto out;
		}
		if (k <= 0)
			continue;
		if (ni >= 0 && pf[ni].revents) {
			uint64_t v;
			(void)!read(op->note, &v, sizeof(v));
			eof = 1; /* the reader only ends early at EOF of both */
		}
		if (di >= 0 && pf[di].revents)
			drained = 1;
		if (ii >= 0 && pf[ii].revents) {
			size_t len = in_left > 65536 ? 65536 : in_left;
			ssize_t w = tty ? write(in_w, in_data, len) : send(in_w, in_data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0) {
				in_data += w;
				in_left -= (size_t)w;
			}
			if (in_left == 0 || (w < 0 && errno != EAGAIN && errno != EINTR)) {
				if (!tty)
					shutdown(in_w, SHUT_WR);
				in_w = -1;
			}
		}
		if (ci >= 0 && pf[ci].revents) {
			r = sbx__local_proc_poll(p, &status, &timed_out, 0, &start_exit, msg, sizeof(msg), err);
			if (r == -ENOENT && start_exit) {
				if (op)
					outpump_stop(op, NULL);
				op = NULL;
				not_started(out, o, start_exit, msg, t0);
				r = 0;
				goto out;
			}
			if (r < 0)
				goto out;
			if (r == 1) {
				exited = 1;
				drain_until = sbx__now_mono() + DRAIN_GRACE_S;
				drain_max = drain_until + DRAIN_MAX_S;
				uint64_t one = 1;
				if (op)
					(void)!write(op->kick, &one, sizeof(one));
			}
			r = 0;
		}
	}
	set_status(out, status);
	out->timed_out = timed_out;
	out->seconds = sbx__now_mono() - t0;
	if (op) {
		outpump_stop(op, out);
		op = NULL;
	} else {
		out->out = xstrdup("");
		out->err = xstrdup("");
	}
out:
	if (op)
		outpump_stop(op, NULL);
	sbx__local_proc_free(p, 1);
	return r;
}
