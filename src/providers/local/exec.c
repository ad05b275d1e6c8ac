/* SPDX-License-Identifier: MIT */
/*
 * Host side of exec. The caller's pipes (or its own fds) are handed to init
 * with SCM_RIGHTS, so output flows straight from the command to us; init
 * only reports the start and the exit status on the control connection.
 * No setns and no fork here: safe from any thread of any process.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "local_int.h"
#include "proto.h"

#define DEFAULT_OUTPUT_MAX (16u << 20)

struct stream {
	int fd;           /* our read end, -1 when done */
	sbx_buf buf;
	int truncated;
	int which;        /* 1 or 2 */
};

static int build_request(struct sbx_msg *m, const sbx_exec_opts *o)
{
	if (o->shell) {
		sbx__msg_add_str(m, T_ARG, "/bin/sh");
		sbx__msg_add_str(m, T_ARG, "-c");
		sbx__msg_add_str(m, T_ARG, o->shell);
	} else {
		for (size_t i = 0; o->argv[i]; i++)
			sbx__msg_add_str(m, T_ARG, o->argv[i]);
	}
	for (size_t i = 0; o->env && o->env[i]; i++)
		sbx__msg_add_str(m, T_ENV, o->env[i]);
	if (o->cwd)
		sbx__msg_add_str(m, T_CWD, o->cwd);
	if (o->user)
		sbx__msg_add_str(m, T_USER, o->user);
	if (o->timeout_s > 0) {
		uint64_t ms = (uint64_t)(o->timeout_s * 1000.0);
		sbx__msg_add_u64(m, T_TIMEOUT_MS, ms ? ms : 1);
	}
	return m->overflow ? -E2BIG : 0;
}

static void pump(struct stream *s, const sbx_exec_opts *o, size_t max)
{
	char chunk[65536];
	ssize_t n = read(s->fd, chunk, sizeof(chunk));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
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

/* Parses M_STARTED / M_EXITED / M_ERROR records into the fields we use. */
static void read_fields(const char *buf, size_t n, uint64_t *status, uint64_t *timed_out, int *e,
		       char *msg, size_t msglen)
{
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	while (sbx__msg_next(buf, n, &off, &tag, &d, &dl) == 1) {
		if (tag == T_STATUS)
			*status = sbx__msg_u64(d, dl);
		else if (tag == T_TIMED_OUT)
			*timed_out = sbx__msg_u64(d, dl);
		else if (tag == T_ERRNO)
			*e = (int)sbx__msg_u64(d, dl);
		else if (tag == T_MSG && msg)
			snprintf(msg, msglen, "%.*s", (int)dl, d);
	}
}

static void set_status(sbx_exec_result *out, uint64_t status)
{
	int st = (int)status;
	if (WIFSIGNALED(st)) {
		out->signal = WTERMSIG(st);
		out->exit_code = 128 + out->signal;
	} else {
		out->exit_code = WEXITSTATUS(st);
	}
}

int sbx__local_exec(sbx_exec_result *out, struct local_sb *sb, const sbx_exec_opts *o,
		    sbx_error **err)
{
	size_t max = o->output_max ? o->output_max : DEFAULT_OUTPUT_MAX;
	_cleanup_free_ char *mbuf = xmalloc(SBX_MSG_MAX);
	struct sbx_msg m;
	sbx__msg_init(&m, mbuf, SBX_MSG_MAX, M_EXEC);
	if (build_request(&m, o) < 0)
		return sbx_error_set(err, -E2BIG, "exec: argv and env exceed %u bytes", SBX_MSG_MAX);

	struct stream out_s = { .fd = -1, .which = 1 }, err_s = { .fd = -1, .which = 2 };
	sbx__buf_init(&out_s.buf, max);
	sbx__buf_init(&err_s.buf, max);
	int child_fds[3] = { -1, -1, -1 };
	int in_w = -1, conn = -1, r = 0;
	const char *in_data = o->stdin_data;
	size_t in_left = o->stdin_data ? o->stdin_len : 0;
	double t0 = sbx__now_mono();

	if (o->stdin_fd >= 0) {
		child_fds[0] = fcntl(o->stdin_fd, F_DUPFD_CLOEXEC, 3);
	} else if (o->stdin_data) {
		/* A socket, not a pipe: send(MSG_NOSIGNAL) cannot raise SIGPIPE in
		 * the caller's process when the command stops reading. */
		int p[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
			goto sys_fail;
		shutdown(p[0], SHUT_WR);
		child_fds[0] = p[0];
		in_w = p[1];
	} else {
		child_fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	struct stream *ss[2] = { &out_s, &err_s };
	int given[2] = { o->stdout_fd, o->stderr_fd };
	for (int i = 0; i < 2; i++) {
		if (given[i] >= 0) {
			child_fds[i + 1] = fcntl(given[i], F_DUPFD_CLOEXEC, 3);
			continue;
		}
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			goto sys_fail;
		ss[i]->fd = p[0];
		child_fds[i + 1] = p[1];
		fcntl(p[0], F_SETFL, O_NONBLOCK);
	}
	for (int i = 0; i < 3; i++)
		if (child_fds[i] < 0)
			goto sys_fail;

	r = sbx__local_connect(sb, &conn, err);
	if (r < 0)
		goto out;
	r = sbx__msg_send(conn, &m, child_fds, 3);
	for (int i = 0; i < 3; i++) {
		close(child_fds[i]);
		child_fds[i] = -1;
	}
	if (r < 0) {
		r = sbx_error_setsys(err, r, -r, "send exec to sandbox %s", sb->id);
		goto out;
	}

	char rbuf[2048];
	int rfds[SBX_MSG_MAX_FDS], nr;
	int started = 0, exited = 0;
	uint64_t status = 0, timed_out = 0;
	double drain_until = 0;
	while (!exited || out_s.fd >= 0 || err_s.fd >= 0) {
		struct pollfd p[4];
		int np = 0, ci = -1, oi = -1, ei = -1, ii = -1;
		if (!exited) {
			ci = np;
			p[np++] = (struct pollfd){ .fd = conn, .events = POLLIN };
		}
		if (out_s.fd >= 0) {
			oi = np;
			p[np++] = (struct pollfd){ .fd = out_s.fd, .events = POLLIN };
		}
		if (err_s.fd >= 0) {
			ei = np;
			p[np++] = (struct pollfd){ .fd = err_s.fd, .events = POLLIN };
		}
		if (in_w >= 0 && started) {
			ii = np;
			p[np++] = (struct pollfd){ .fd = in_w, .events = POLLOUT };
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
		int k = poll(p, (nfds_t)np, timeout);
		if (k < 0 && errno != EINTR)
			goto sys_fail;
		if (k <= 0)
			continue;
		if (oi >= 0 && p[oi].revents)
			pump(&out_s, o, max);
		if (ei >= 0 && p[ei].revents)
			pump(&err_s, o, max);
		if (ii >= 0 && p[ii].revents) {
			ssize_t w = send(in_w, in_data, in_left > 65536 ? 65536 : in_left,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0) {
				in_data += w;
				in_left -= (size_t)w;
			}
			if (in_left == 0 || (w < 0 && errno != EAGAIN && errno != EINTR)) {
				close(in_w);
				in_w = -1;
			}
		}
		if (ci >= 0 && p[ci].revents) {
			long n = sbx__msg_recv(conn, rbuf, sizeof(rbuf), rfds, &nr);
			for (int i = 0; i < nr; i++)
				close(rfds[i]);
			if (n <= 0) {
				r = sbx_error_set(err, -ESRCH, "exec: sandbox %s went away while the command ran",
						  sb->id);
				goto out;
			}
			uint32_t type = sbx__msg_type(rbuf);
			if (type == M_STARTED) {
				started = 1;
				if (in_w >= 0 && in_left == 0) {
					close(in_w);
					in_w = -1;
				}
			} else if (type == M_EXITED) {
				read_fields(rbuf, (size_t)n, &status, &timed_out, &(int){ 0 }, NULL, 0);
				set_status(out, status);
				out->timed_out = (int)timed_out;
				exited = 1;
				drain_until = sbx__now_mono() + 0.05;
			} else if (type == M_ERROR) {
				int e = EIO;
				uint64_t code = 0;
				char msg[1024] = "";
				read_fields(rbuf, (size_t)n, &code, &timed_out, &e, msg, sizeof(msg));
				if (code) {
					/* not found / not executable: a result, like a shell's */
					out->exit_code = (int)code;
					sbx__buf_printf(&err_s.buf, "sbx: %s\n", msg);
					if (o->on_output)
						o->on_output(2, err_s.buf.data, err_s.buf.len, o->payload);
					exited = 1;
					drain_until = sbx__now_mono();
				} else {
					r = sbx_error_set(err, -e, "exec: %s", msg);
					goto out;
				}
			}
		}
	}
	out->seconds = sbx__now_mono() - t0;
	out->out = sbx__buf_steal(&out_s.buf, &out->out_len);
	out->err = sbx__buf_steal(&err_s.buf, &out->err_len);
	out->out_truncated = out_s.truncated;
	out->err_truncated = err_s.truncated;
	goto out;
sys_fail:
	r = sbx_error_setsys(err, -errno, errno, "exec in sandbox %s", sb->id);
out:
	for (int i = 0; i < 3; i++)
		if (child_fds[i] >= 0)
			close(child_fds[i]);
	if (in_w >= 0)
		close(in_w);
	if (out_s.fd >= 0)
		close(out_s.fd);
	if (err_s.fd >= 0)
		close(err_s.fd);
	if (conn >= 0)
		close(conn);
	sbx__buf_free(&out_s.buf);
	sbx__buf_free(&err_s.buf);
	return r;
}
