/* SPDX-License-Identifier: MIT */
/*
 * Blocking exec for the local provider, built on the streamed process
 * (process.c): start, then pump stdin/stdout/stderr and wait for the exit
 * status on one poll loop. No setns and no fork here: safe from any thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/fs.h"
#include "local_int.h"

#define DEFAULT_OUTPUT_MAX (16u << 20)

struct stream {
	int fd;           /* read end, -1 when done */
	sbx_buf buf;
	int truncated;
	int which;        /* 1 or 2 */
};

static void pump(struct stream *s, const sbx_exec_opts *o, size_t max)
{
	char chunk[65536];
	ssize_t n = read(s->fd, chunk, sizeof(chunk));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		s->fd = -1; /* owned by the process handle, closed there */
		return;
	}
	if (o->on_output)
		o->on_output(s->which, chunk, (size_t)n, o->payload);
	if (s->buf.len < max) {
		if (sbx__buf_append_trunc(&s->buf, chunk, (size_t)n))
			s->truncated = 1;
	} else {
		s->truncated = 1;
	}
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
	struct stream so = { .fd = tty ? fds.tty_fd : fds.out_fd, .which = 1 }, se = { .fd = fds.err_fd, .which = 2 };
	sbx__buf_init(&so.buf, max);
	sbx__buf_init(&se.buf, max);
	int in_w = tty && o->stdin_data ? fds.tty_fd : fds.in_fd;
	const char *in_data = o->stdin_data;
	size_t in_left = o->stdin_data ? o->stdin_len : 0;
	if (in_w >= 0 && in_left == 0) {
		if (!tty)
			shutdown(in_w, SHUT_WR);
		in_w = -1;
	}
	int exited = 0, status = 0, timed_out = 0;
	double drain_until = 0;
	while (!exited || so.fd >= 0 || se.fd >= 0) {
		struct pollfd pf[4];
		int np = 0, ci = -1, oi = -1, ei = -1, ii = -1;
		if (!exited) {
			ci = np;
			pf[np++] = (struct pollfd){ .fd = fds.status_fd, .events = POLLIN };
		}
		if (so.fd >= 0) {
			oi = np;
			pf[np++] = (struct pollfd){ .fd = so.fd, .events = POLLIN };
		}
		if (se.fd >= 0) {
			ei = np;
			pf[np++] = (struct pollfd){ .fd = se.fd, .events = POLLIN };
		}
		if (in_w >= 0) {
			ii = np;
			pf[np++] = (struct pollfd){ .fd = in_w, .events = POLLOUT };
		}
		int timeout = -1;
		if (exited) {
			/* The command is gone; background children may still hold the
			 * pipes. Take what is already there, then stop. */
			double left = drain_until - sbx__now_mono();
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
		if (oi >= 0 && pf[oi].revents)
			pump(&so, o, max);
		if (ei >= 0 && pf[ei].revents)
			pump(&se, o, max);
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
				not_started(out, o, start_exit, msg, t0);
				r = 0;
				goto out;
			}
			if (r < 0)
				goto out;
			if (r == 1) {
				exited = 1;
				drain_until = sbx__now_mono() + 0.05;
			}
			r = 0;
		}
	}
	set_status(out, status);
	out->timed_out = timed_out;
	out->seconds = sbx__now_mono() - t0;
	out->out = sbx__buf_steal(&so.buf, &out->out_len);
	out->err = sbx__buf_steal(&se.buf, &out->err_len);
	out->out_truncated = so.truncated;
	out->err_truncated = se.truncated;
out:
	sbx__buf_free(&so.buf);
	sbx__buf_free(&se.buf);
	sbx__local_proc_free(p, 1);
	return r;
}
