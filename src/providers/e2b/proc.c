/* SPDX-License-Identifier: MIT */
/*
 * Streamed processes on E2B: the Start stream runs on a thread of its own
 * that feeds local pipes, so the fd semantics of process.h hold (pollable
 * stdout/stderr read ends, a writable stdin, a status fd that becomes
 * readable at exit). The thread blocks SIGPIPE: a reader that went away
 * turns into EPIPE and the output is dropped, never a signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "e2b_int.h"

struct e2b_proc {
	struct e2b_stream s;
	struct e2b_feeder feeder;
	pthread_t thr;
	int thr_running;
	pthread_mutex_t m;
	pthread_cond_t cv;
	int out_r, out_w, err_r, err_w, in_w, st_r, st_w;
	int done;          /* the stream is over */
	int rc;            /* its result */
	sbx_error *err;    /* its error */
	int status, timed_out;
	int detached_in;   /* in_w was handed to the caller */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Writes all of d to fd, giving up when the reader is gone or on cancel. */
static void pump(struct e2b_proc *p, int fd, const char *d, size_t n)
{
	while (n && fd >= 0 && !p->s.cancel) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		int pr = poll(&pf, 1, 200);
		if (pr == 0 || (pr < 0 && errno == EINTR))
			continue;
		if (pr < 0 || (pf.revents & (POLLERR | POLLNVAL)))
			return;
		ssize_t w = write(fd, d, n);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w < 0) {
			if (errno == EPIPE) {
				sigset_t ss;
				struct timespec zero = { 0, 0 };
				sigemptyset(&ss);
				sigaddset(&ss, SIGPIPE);
				sigtimedwait(&ss, NULL, &zero);
			}
			return;
		}
		d += w, n -= (size_t)w;
	}
}

static int proc_on_start(struct e2b_stream *s)
{
	struct e2b_proc *p = s->ud;
	pthread_mutex_lock(&p->m);
	p->feeder.pid = s->pid;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->m);
	sbx__e2b_feeder_start(&p->feeder);
	return 0;
}

static int proc_on_data(struct e2b_stream *s, int fd, const char *d, size_t n)
{
	struct e2b_proc *p = s->ud;
	pump(p, fd == 1 ? p->out_w : p->err_w, d, n);
	return 0;
}

static void *proc_main(void *u)
{
	struct e2b_proc *p = u;
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	sbx_error *e = NULL;
	int r = sbx__e2b_stream_run(&p->s, &e);
	if (r < 0 && p->s.started && !p->s.got_end && !p->s.cancel)
		sbx__e2b_send_signal(&p->s.conn, p->s.pid, SIGKILL, NULL);
	if (r == -ETIMEDOUT && p->s.started && p->s.timeout_s > 0) {
		sbx_error_free(e);
		e = NULL;
		r = 0;
		p->s.rpc_rc = -ETIMEDOUT;
	}
	int st = 0, to = 0;
	if (r == 0)
		sbx__e2b_stream_status(&p->s, &st, &to);
	else
		st = SIGKILL;
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	pthread_mutex_lock(&p->m);
	p->rc = r;
	p->err = e;
	p->status = st;
	p->timed_out = to;
	p->done = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->m);
	if (p->st_w >= 0) {
		ssize_t w = write(p->st_w, "x", 1);
		(void)w;
	}
	return NULL;
}

static void proc_destroy(struct e2b_proc *p)
{
	p->s.cancel = 1;
	close_fd(&p->out_r);
	close_fd(&p->err_r);
	if (p->thr_running)
		pthread_join(p->thr, NULL);
	sbx__e2b_feeder_join(&p->feeder);
	close_fd(&p->out_w);
	close_fd(&p->err_w);
	close_fd(&p->st_r);
	close_fd(&p->st_w);
	if (!p->detached_in)
		close_fd(&p->in_w);
	sbx_error_free(p->err);
	sbx__e2b_stream_clear(&p->s);
	pthread_mutex_destroy(&p->m);
	pthread_cond_destroy(&p->cv);
	free(p);
}

static int make_pipe(int *r, int *w, int nonblock_read)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return -errno;
	*r = pp[0];
	*w = pp[1];
	if (nonblock_read)
		fcntl(pp[0], F_SETFL, O_NONBLOCK);
	return 0;
}

int sbx__e2b_proc_start(void **out, struct sbx_process_fds *fds, struct e2b_sb *sb,
			const sbx_exec_opts *o, int keep_stdin, sbx_error **err)
{
	struct e2b_proc *p = xcalloc(1, sizeof(*p));
	p->out_r = p->out_w = p->err_r = p->err_w = p->in_w = p->st_r = p->st_w = -1;
	pthread_mutex_init(&p->m, NULL);
	pthread_cond_init(&p->cv, NULL);
	int stdin_pipe = o->stdin_fd < 0 && !o->stdin_data && keep_stdin;
	int want_stdin = stdin_pipe || o->stdin_fd >= 0 || o->stdin_data;
	sbx__e2b_stream_init(&p->s, sb, o, want_stdin);
	p->s.on_start = proc_on_start;
	p->s.on_data = proc_on_data;
	p->s.ud = p;
	p->feeder = (struct e2b_feeder){ .conn = &p->s.conn, .fd = -1, .cancel = &p->s.cancel };
	int r = 0;
	if (o->stdout_fd >= 0)
		p->out_w = fcntl(o->stdout_fd, F_DUPFD_CLOEXEC, 3);
	else
		r = make_pipe(&p->out_r, &p->out_w, 1);
	if (r == 0 && o->stderr_fd >= 0)
		p->err_w = fcntl(o->stderr_fd, F_DUPFD_CLOEXEC, 3);
	else if (r == 0)
		r = make_pipe(&p->err_r, &p->err_w, 1);
	if (r == 0)
		r = make_pipe(&p->st_r, &p->st_w, 1);
	if (r == 0 && stdin_pipe) {
		r = make_pipe(&p->feeder.fd, &p->in_w, 0);
	} else if (r == 0 && o->stdin_fd >= 0) {
		p->feeder.fd = fcntl(o->stdin_fd, F_DUPFD_CLOEXEC, 3);
	} else if (r == 0 && o->stdin_data) {
		p->feeder.data = o->stdin_data;
		p->feeder.len = o->stdin_len;
	}
	if (r == 0 && (p->out_w < 0 || p->err_w < 0 || (o->stdin_fd >= 0 && p->feeder.fd < 0)))
		r = -errno;
	if (r < 0) {
		r = sbx_error_setsys(err, r, -r, "e2b: process pipes");
		proc_destroy(p);
		return r;
	}
	if (pthread_create(&p->thr, NULL, proc_main, p) != 0) {
		proc_destroy(p);
		return sbx_error_set(err, -EAGAIN, "e2b: cannot start the process stream thread");
	}
	p->thr_running = 1;
	pthread_mutex_lock(&p->m);
	while (!p->s.started && !p->done)
		pthread_cond_wait(&p->cv, &p->m);
	int started = p->s.started;
	pthread_mutex_unlock(&p->m);
	if (!started) {
		pthread_join(p->thr, NULL);
		p->thr_running = 0;
		if (sbx__e2b_stream_start_failed(&p->s, p->rc))
			r = sbx_error_set(err, -ENOENT, "e2b: %s", p->s.rpc_msg ? p->s.rpc_msg : "command not found");
		else if (p->rc < 0) {
			r = p->rc;
			if (err && !*err)
				*err = steal_ptr(&p->err);
		} else {
			r = sbx_error_set(err, p->s.rpc_rc ? p->s.rpc_rc : -EPROTO, "e2b: process did not start: %s",
					  p->s.rpc_msg ? p->s.rpc_msg : "no start event");
		}
		proc_destroy(p);
		return r;
	}
	*fds = (struct sbx_process_fds){ .pid = (pid_t)p->s.pid, .out_fd = p->out_r, .err_fd = p->err_r,
					 .in_fd = p->in_w, .status_fd = p->st_r };
	p->detached_in = p->in_w >= 0;
	*out = p;
	return 0;
}

int sbx__e2b_proc_poll(void *h, int *status, int *timed_out, int block, sbx_error **err)
{
	struct e2b_proc *p = h;
	pthread_mutex_lock(&p->m);
	while (block && !p->done)
		pthread_cond_wait(&p->cv, &p->m);
	int done = p->done;
	int rc = p->rc;
	if (done) {
		*status = p->status;
		*timed_out = p->timed_out;
	}
	pthread_mutex_unlock(&p->m);
	if (done && rc < 0 && rc != -ECANCELED)
		return sbx_error_set(err, -ESRCH, "e2b: process %u: %s", p->s.pid,
				     p->err && p->err->msg ? p->err->msg : "stream lost");
	return done ? 1 : 0;
}

int sbx__e2b_proc_signal(void *h, int sig, sbx_error **err)
{
	struct e2b_proc *p = h;
	return sbx__e2b_send_signal(&p->s.conn, p->s.pid, sig, err);
}

void sbx__e2b_proc_free(void *h, int kill)
{
	struct e2b_proc *p = h;
	if (!p)
		return;
	pthread_mutex_lock(&p->m);
	int done = p->done;
	pthread_mutex_unlock(&p->m);
	if (kill && !done)
		sbx__e2b_send_signal(&p->s.conn, p->s.pid, SIGKILL, NULL);
	proc_destroy(p);
}
