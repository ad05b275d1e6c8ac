/* SPDX-License-Identifier: MIT */
/*
 * Commands on envd: one process.Process/Start server stream per command,
 * parsed incrementally (start event first, base64 stdout/stderr, end event,
 * mandatory end-stream frame; keepalives ignored). The stream runs on the
 * calling thread for a blocking exec and on a thread of its own for a
 * streamed process (proc.c). stdin is fed by a small thread through
 * SendInput and CloseStdin once the process has a pid.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


#include "../../util/alloc.h"
#include "../../util/base64.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/http.h"
#include "../../util/str.h"
#include "e2b_int.h"

#define OUTPUT_MAX_DEFAULT (16u << 20)
#define STDIN_CHUNK (256u << 10)
/* Slack past the process deadline before the client gives up on the server. */
#define DEADLINE_SLACK_MS 15000L

char *sbx__e2b_shq(const char *s)
{
	sbx_buf b;
	sbx__buf_init(&b, strlen(s) * 4 + 3);
	sbx__buf_append(&b, "'", 1);
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			sbx__buf_append(&b, "'\\''", 4);
		else
			sbx__buf_append(&b, p, 1);
	}
	sbx__buf_append(&b, "'", 1);
	return sbx__buf_steal(&b, NULL);
}

static json_t *process_config(const struct e2b_sb *sb, const sbx_exec_opts *o)
{
	json_t *args = json_array();
	const char *cmd;
	if (o->shell) {
		cmd = "/bin/sh";
		json_array_append_new(args, json_string("-c"));
		json_array_append_new(args, json_string(o->shell));
	} else {
		cmd = o->argv[0];
		for (size_t i = 1; o->argv[i]; i++)
			json_array_append_new(args, json_string(o->argv[i]));
	}
	json_t *pc = json_pack("{s:s, s:o}", "cmd", cmd, "args", args);
	if (o->env && o->env[0]) {
		json_t *envs = json_object();
		for (size_t i = 0; o->env[i]; i++) {
			const char *eq = strchr(o->env[i], '=');
			if (!eq)
				continue;
			_cleanup_free_ char *k = xstrndup(o->env[i], (size_t)(eq - o->env[i]));
			json_object_set_new(envs, k, json_string(eq + 1));
		}
		json_object_set_new(pc, "envs", envs);
	}
	const char *cwd = o->cwd ? o->cwd : sb->workdir;
	if (cwd)
		json_object_set_new(pc, "cwd", json_string(cwd));
	return pc;
}

void sbx__e2b_stream_init(struct e2b_stream *s, const struct e2b_sb *sb, const sbx_exec_opts *o,
			  int want_stdin)
{
	memset(s, 0, sizeof(*s));
	sbx__e2b_conn_copy(&s->conn, &sb->conn);
	/* sbx's default is root (or the spec's user); envd's own default is the
	 * template's `user` when it has one (E2B's base image, sbx serve). */
	const char *user = o->user ? o->user : sb->user ? sb->user : "root";
	s->user = user ? xstrdup(user) : NULL;
	json_t *req = json_pack("{s:o, s:b}", "process", process_config(sb, o), "stdin", want_stdin);
	_cleanup_free_ char *js = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	s->body = sbx__e2b_envelope(js, strlen(js), &s->body_len);
	s->timeout_s = o->timeout_s;
	s->timeout_ms = o->timeout_s > 0 ? (long)(o->timeout_s * 1000.0) : 0;
	if (o->timeout_s > 0 && s->timeout_ms == 0)
		s->timeout_ms = 1;
	sbx__e2b_envelopes_init(&s->env);
	sbx__buf_init(&s->raw, 65536);
}

void sbx__e2b_stream_clear(struct e2b_stream *s)
{
	sbx__e2b_conn_clear(&s->conn);
	free(s->user);
	free(s->body);
	free(s->end_status);
	free(s->end_error);
	free(s->rpc_msg);
	sbx__e2b_envelopes_free(&s->env);
	sbx__buf_free(&s->raw);
	memset(s, 0, sizeof(*s));
}

static int on_frame(unsigned flags, const char *msg, size_t len, void *ud)
{
	struct e2b_stream *s = ud;
	if (flags & 0x02) {
		s->got_end_stream = 1;
		sbx_error *e = NULL;
		s->rpc_rc = sbx__e2b_end_stream(msg, len, "process", &e);
		if (e) {
			s->rpc_msg = steal_ptr(&e->msg);
			sbx_error_free(e);
		}
		return 0;
	}
	struct e2b_event ev;
	if (sbx__e2b_event_parse(&ev, msg, len) < 0)
		return -EPROTO;
	int r = 0;
	if (!s->started && ev.type != E2B_EV_START && ev.type != E2B_EV_KEEPALIVE) {
		r = -EPROTO;
	} else if (ev.type == E2B_EV_START) {
		s->started = 1;
		s->pid = ev.pid;
		if (s->on_start)
			r = s->on_start(s);
	} else if (ev.type == E2B_EV_DATA) {
		if (ev.len && s->on_data)
			r = s->on_data(s, ev.fd, ev.data, ev.len);
	} else if (ev.type == E2B_EV_END) {
		s->got_end = 1;
		s->exit_code = ev.exit_code;
		s->end_status = steal_ptr(&ev.status);
		s->end_error = steal_ptr(&ev.error);
	}
	sbx__e2b_event_clear(&ev);
	return r;
}

static int on_bytes(const char *d, size_t n, void *ud)
{
	struct e2b_stream *s = ud;
	if (!s->is_stream && s->ctype && sbx__str_startswith(s->ctype, "application/connect+json"))
		s->is_stream = 1;
	if (!s->is_stream) {
		sbx__buf_append_trunc(&s->raw, d, n);
		return 0;
	}
	return sbx__e2b_envelopes_feed(&s->env, d, n, on_frame, s);
}

int sbx__e2b_stream_run(struct e2b_stream *s, sbx_error **err)
{
	_cleanup_free_ char *url = xasprintf("%s/process.Process/Start", s->conn.base);
	char **h = sbx__e2b_envd_headers(&s->conn, "application/connect+json", s->user, s->timeout_ms, 1);
	struct e2b_req rq = { .method = "POST", .url = url, .headers = (const char *const *)h, .body = s->body,
			      .body_len = s->body_len, .body_fd = -1, .on_data = on_bytes, .payload = s,
			      .cancel = &s->cancel };
	rq.timeout_ms = s->timeout_ms ? s->timeout_ms + DEADLINE_SLACK_MS : 0;
	s->ctype = rq.content_type;
	s->t0 = sbx__now_mono();
	int r = sbx__e2b_http(&rq, err);
	s->t1 = sbx__now_mono();
	s->ctype = NULL;
	sbx__http_headers_free(h);
	if (r == -EPROTO)
		return sbx_error_set(err, r, "e2b: exec in sandbox %s: malformed process stream%s", s->conn.id,
				     s->started ? "" : " (expected the start event first)");
	if (r < 0)
		return sbx_error_prefix(err, r, "exec in sandbox %s", s->conn.id);
	if (rq.status != 200 || !s->is_stream) {
		_cleanup_free_ char *what = xasprintf("exec in sandbox %s", s->conn.id);
		r = sbx__e2b_map_http(rq.status == 200 ? 502 : rq.status, s->raw.data, s->raw.len, what, err);
		/* E2B's edge (and sbx serve) answer 502 "sandbox ... not found" for
		 * a sandbox that expired or was killed: gone, like a 404. */
		int gone = r == -ENOENT || (rq.status == 502 && s->raw.data &&
					    memmem(s->raw.data, s->raw.len, "not found", 9));
		if (gone) {
			sbx_error_free(err ? *err : NULL);
			if (err)
				*err = NULL;
			r = sbx_error_set(err, -ESRCH, "e2b: sandbox %s is gone", s->conn.id);
		}
		return r;
	}
	if (!s->got_end_stream)
		return sbx_error_set(err, -EPROTO, "e2b: exec in sandbox %s: stream ended without its end-of-stream frame",
				     s->conn.id);
	return 0;
}

int sbx__e2b_stream_start_failed(const struct e2b_stream *s, int rc)
{
	return rc == 0 && !s->started && s->rpc_rc &&
	       (s->rpc_rc == -ENOENT || s->rpc_rc == -EINVAL || s->rpc_rc == -EIO);
}

void sbx__e2b_stream_status(const struct e2b_stream *s, int *status, int *timed_out)
{
	int sig = s->got_end ? sbx__e2b_status_signal(s->end_status) : 0;
	int code = s->exit_code;
	double took = s->t1 - s->t0;
	*timed_out = s->timeout_s > 0 &&
		     (s->rpc_rc == -ETIMEDOUT || (took >= s->timeout_s - 0.05 && (sig || !s->got_end)));
	if (*timed_out && !sig)
		sig = SIGKILL;
	if (!s->got_end && !sig)
		sig = SIGKILL;
	if (sig)
		*status = sig & 0x7f;
	else
		*status = (code & 0xff) << 8;
}

int sbx__e2b_send_signal(const struct e2b_conn *c, unsigned pid, int sig, sbx_error **err)
{
	json_t *sj = sig == SIGKILL ? json_string("SIGNAL_SIGKILL")
		   : sig == SIGTERM ? json_string("SIGNAL_SIGTERM") : json_integer(sig);
	json_t *req = json_pack("{s:{s:I}, s:o}", "process", "pid", (json_int_t)pid, "signal", sj);
	_cleanup_free_ char *what = xasprintf("signal process %u", pid);
	int r = sbx__e2b_unary(NULL, c, "process.Process/SendSignal", req, "root", what, err);
	json_decref(req);
	return r;
}

/* ---- stdin ---- */

static int send_input(const struct e2b_feeder *f, const char *d, size_t n)
{
	_cleanup_free_ char *b = sbx__base64_encode(d, n, SBX_B64_STD);
	json_t *req = json_pack("{s:{s:I}, s:{s:s}}", "process", "pid", (json_int_t)f->pid, "input",
				"stdin", b);
	int r = sbx__e2b_unary(NULL, f->conn, "process.Process/SendInput", req, "root", "send stdin", NULL);
	json_decref(req);
	return r;
}

static void *feeder_main(void *u)
{
	struct e2b_feeder *f = u;
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	int ok = 1;
	if (f->data) {
		for (size_t off = 0; ok && off < f->len && !*f->cancel; off += STDIN_CHUNK)
			ok = send_input(f, f->data + off, f->len - off < STDIN_CHUNK ? f->len - off : STDIN_CHUNK) == 0;
	} else if (f->fd >= 0) {
		_cleanup_free_ char *buf = xmalloc(STDIN_CHUNK);
		while (ok && !*f->cancel) {
			struct pollfd p = { .fd = f->fd, .events = POLLIN };
			int pr = poll(&p, 1, 200);
			if (pr == 0 || (pr < 0 && errno == EINTR))
				continue;
			ssize_t n = read(f->fd, buf, STDIN_CHUNK);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0)
				break;
			ok = send_input(f, buf, (size_t)n) == 0;
		}
	}
	if (ok && !*f->cancel) {
		json_t *req = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)f->pid);
		sbx__e2b_unary(NULL, f->conn, "process.Process/CloseStdin", req, "root", "close stdin", NULL);
		json_decref(req);
	}
	return NULL;
}

void sbx__e2b_feeder_start(struct e2b_feeder *f)
{
	if (f->running || (!f->data && f->fd < 0))
		return;
	f->running = pthread_create(&f->thr, NULL, feeder_main, f) == 0;
}

void sbx__e2b_feeder_join(struct e2b_feeder *f)
{
	if (f->running)
		pthread_join(f->thr, NULL);
	f->running = 0;
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* ---- blocking exec ---- */

struct capture {
	const sbx_exec_opts *o;
	sbx_buf out, err;
	int out_trunc, err_trunc;
	struct e2b_feeder feeder;
};

static int exec_start(struct e2b_stream *s)
{
	struct capture *c = s->ud;
	c->feeder.pid = s->pid;
	sbx__e2b_feeder_start(&c->feeder);
	return 0;
}

static int exec_data(struct e2b_stream *s, int fd, const char *d, size_t n)
{
	struct capture *c = s->ud;
	if (c->o->on_output)
		c->o->on_output(fd, d, n, c->o->payload);
	int to = fd == 1 ? c->o->stdout_fd : c->o->stderr_fd;
	if (to > 0) {
		sbx__write_all(to, d, n);
		return 0;
	}
	if (sbx__buf_append_trunc(fd == 1 ? &c->out : &c->err, d, n))
		*(fd == 1 ? &c->out_trunc : &c->err_trunc) = 1;
	return 0;
}

int sbx__e2b_exec(sbx_exec_result *out, struct e2b_sb *sb, const sbx_exec_opts *o, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	int want_stdin = o->stdin_fd > 0 || o->stdin_data;
	struct capture c = { .o = o };
	size_t max = o->output_max ? o->output_max : OUTPUT_MAX_DEFAULT;
	sbx__buf_init(&c.out, max);
	sbx__buf_init(&c.err, max);
	struct e2b_stream s;
	sbx__e2b_stream_init(&s, sb, o, want_stdin);
	c.feeder = (struct e2b_feeder){ .conn = &s.conn, .fd = -1, .cancel = &s.cancel };
	if (o->stdin_fd > 0)
		c.feeder.fd = fcntl(o->stdin_fd, F_DUPFD_CLOEXEC, 3);
	else if (o->stdin_data) {
		c.feeder.data = o->stdin_data;
		c.feeder.len = o->stdin_len;
	}
	s.on_start = exec_start;
	s.on_data = exec_data;
	s.ud = &c;
	int r = sbx__e2b_stream_run(&s, err);
	if (r < 0 && s.started && !s.got_end) {
		/* The client gave up (deadline slack) or the stream broke: end the process. */
		sbx__e2b_send_signal(&s.conn, s.pid, SIGKILL, NULL);
	}
	s.cancel = 1;
	sbx__e2b_feeder_join(&c.feeder);
	if (r == -ETIMEDOUT && s.started && o->timeout_s > 0) {
		sbx_error_free(err ? *err : NULL);
		if (err)
			*err = NULL;
		r = 0;
		s.rpc_rc = -ETIMEDOUT;
	}
	if (sbx__e2b_stream_start_failed(&s, r)) {
		out->exit_code = 127;
		_cleanup_free_ char *m = xasprintf("%s\n", s.rpc_msg ? s.rpc_msg : "command could not be started");
		sbx__buf_append_trunc(&c.err, m, strlen(m));
	} else if (r == 0 && s.rpc_rc && s.rpc_rc != -ETIMEDOUT && !s.got_end) {
		r = sbx_error_set(err, s.rpc_rc, "%s", s.rpc_msg ? s.rpc_msg : "e2b: exec failed");
	} else if (r == 0) {
		int st, to;
		sbx__e2b_stream_status(&s, &st, &to);
		out->timed_out = to;
		if (WIFSIGNALED(st)) {
			out->signal = WTERMSIG(st);
			out->exit_code = 128 + out->signal;
		} else {
			out->exit_code = WEXITSTATUS(st);
		}
	}
	out->seconds = s.t1 - s.t0;
	out->out = sbx__buf_steal(&c.out, &out->out_len);
	out->err = sbx__buf_steal(&c.err, &out->err_len);
	out->out_truncated = c.out_trunc;
	out->err_truncated = c.err_trunc;
	if (r < 0)
		sbx_exec_result_free(out);
	sbx__buf_free(&c.out);
	sbx__buf_free(&c.err);
	sbx__e2b_stream_clear(&s);
	return r;
}

int sbx__e2b_root_sh(struct e2b_sb *sb, const char *cmd, double timeout_s, sbx_error **err)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	o.user = "root";
	o.cwd = "/";
	o.timeout_s = timeout_s;
	o.output_max = 65536;
	sbx_exec_result res;
	int r = sbx__e2b_exec(&res, sb, &o, err);
	if (r == 0 && (res.exit_code != 0 || res.timed_out))
		r = sbx_error_set(err, -EIO, "e2b: sandbox %s: command failed (exit %d): %.300s", sb->conn.id,
				  res.exit_code, res.err ? res.err : "");
	sbx_exec_result_free(&res);
	return r;
}
