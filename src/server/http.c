/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd glue for `sbx serve` (docs/server.md, "Threads"). MHD runs
 * in epoll mode with one event thread (MHD_USE_EPOLL_INTERNAL_THREAD) and
 * suspend/resume: that thread parses requests and writes replies for every
 * connection, so an idle keep-alive connection or a live stream costs a
 * socket and MHD's buffers, never a thread. It never blocks:
 *
 * - a JSON body is copied into its capped buffer on it;
 * - everything else runs on the worker pool (workers.c) while the
 *   connection is suspended, which is what lets a handler queue its reply
 *   from another thread: the headers' checks (router.c, before any body
 *   byte is read) with an upload's or proxied request's set-up (MHD 0.9.75
 *   repeats the first call once resumed: `recall`),
 *   each body chunk of an upload (copied: MHD moves the rest of its buffer
 *   once the call returns; nothing more is read until the worker is done
 *   with it), and the handler itself (sbx__srv_route) once the
 *   body is in. So handlers keep the blocking style: any of them may wait
 *   on a sandbox; the pool bounds how many do at once (--workers);
 * - streaming replies (process output, WatchDir, proxied bodies) are read
 *   through content readers that return what is buffered and, with nothing
 *   buffered, park the connection (suspend it) until a producer, a timer
 *   or an fd watched by the notifier (loop.c) wakes it (park.c).
 *
 * Idle connections are closed after --idle-timeout of inactivity (MHD
 * stops the clock of a suspended connection), at most --max-connections
 * (--max-connections-per-ip from one address). A declared body past its
 * cap is answered 413 at once, a received one ends the connection. The
 * access log (method, path without query, status, time, sandbox; never a
 * header) is one JSON object per line with every string escaped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

char *sbx__srv_log_escape(const char *s, int json)
{
	if (!s)
		s = "";
	sbx_buf b;
	sbx__buf_init(&b, strlen(s) * 6 + 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];
		const char *out = esc;
		size_t n = 2;
		esc[0] = '\\';
		if (*p == '\n')
			esc[1] = 'n';
		else if (*p == '\r')
			esc[1] = 'r';
		else if (*p == '\t')
			esc[1] = 't';
		else if (*p == '\\' || (json && *p == '"'))
			esc[1] = (char)*p;
		else if (*p < 0x20 || *p >= 0x7f)
			n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *p);
		else {
			out = (const char *)p;
			n = 1;
		}
		sbx__buf_append(&b, out, n);
	}
	char *r = sbx__buf_steal(&b, NULL);
	return r ? r : xstrdup("");
}

/* 1 when the request declares a body larger than the cap. */
static int declared_too_big(struct MHD_Connection *c, uint64_t cap)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	uint64_t n;
	return cl && sbx__parse_u64(&n, cl) == 0 && n > cap;
}

static void resume(struct srv_req *r)
{
	atomic_store(&r->busy, 0);
	MHD_resume_connection(r->c);
}

/* The headers: authorized (router.c; answering now makes MHD skip the body
 * and close the connection after the reply: nothing of it is read, let
 * alone buffered), a declared body past its cap refused, and an upload's
 * or proxied request's consumer set up (a connect into the sandbox, a file
 * opened there) before the body. */
static void head_job(void *arg)
{
	struct srv_req *r = arg;
	if (sbx__srv_authorize(r)) {
		if (r->proxy_port) /* streamed both ways, never buffered: no cap */
			sbx__srv_proxy_begin(r);
		else if (declared_too_big(r->c, r->body_cap))
			sbx__srv_reply_error(r, 413, "request body larger than %llu bytes",
					     (unsigned long long)r->body_cap);
		else if (r->upload)
			sbx__srv_route_begin(r);
	}
	r->recall = !r->queued;
	resume(r);
}

static void feed_job(void *arg)
{
	struct srv_req *r = arg;
	r->feed(r, r->chunk, r->chunk_n);
	resume(r);
}

static void final_job(void *arg)
{
	struct srv_req *r = arg;
	sbx__srv_route(r);
	if (!r->queued)
		sbx__srv_reply_error(r, 500, "no response");
	r->final_done = 1;
	resume(r);
}

/* Hands a phase to a worker; the connection stays suspended until it
 * resumes it. Not once the server is stopping (MHD must not stop with a
 * connection suspended): then 503. */
static void run_on_worker(struct srv_req *r, void (*fn)(void *))
{
	if (atomic_load(&r->srv->stopping)) {
		if (!r->queued)
			sbx__srv_reply_error(r, 503, "server shutting down");
		r->final_done = 1;
		return;
	}
	atomic_store(&r->busy, 1);
	MHD_suspend_connection(r->c);
	sbx__srv_pool_submit(r->srv, fn, r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	(void)version;
	struct server *srv = cls;
	struct srv_req *r = *con_cls;
	if (!r) { /* no URI callback ran (cannot happen with ours): a fresh record */
		r = xcalloc(1, sizeof(*r));
		*con_cls = r;
	}
	if (!r->begun) {
		r->begun = 1;
		r->srv = srv;
		r->c = c;
		r->method = method;
		r->url = url;
		r->t0 = sbx__now_mono();
		/* Uploads are streamed (only their consumers' small buffers are
		 * held); every other body is JSON, buffered. */
		r->upload = sbx__srv_is_upload(method, url);
		r->body_cap = r->upload ? SRV_UPLOAD_MAX : SRV_JSON_MAX;
		sbx__buf_init(&r->body, r->upload ? 0 : SRV_JSON_MAX);
		atomic_fetch_add(&srv->m.requests, 1);
		/* The headers are checked on a worker too: the router's checks
		 * may block (an autoResume wakes a paused sandbox). */
		run_on_worker(r, head_job);
		return MHD_YES;
	}
	/* MHD goes on feeding the bytes it holds (the next chunk of a chunked
	 * body) in the pass that suspended the connection: left unconsumed,
	 * they come again once it is resumed. MHD's own flag, not busy: the
	 * worker clears busy before its resume reaches MHD's thread, and a
	 * second suspend of a suspended connection corrupts MHD's lists (it
	 * aborts: "Resumed connection was already in EREADY set"). Only this
	 * thread changes that flag, so reading it here is exact. */
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_SUSPENDED);
	if (atomic_load(&r->busy) || (ci && ci->suspended == MHD_YES))
		return MHD_YES;
	if (*upload_data_size) {
		/* MHD cannot answer in the middle of a body: a chunked body past
		 * the cap ends the connection, without reading the rest. */
		size_t n = *upload_data_size;
		if (n > r->body_cap - r->body_in) {
			r->too_big = 1;
			return MHD_NO;
		}
		r->body_in += n;
		*upload_data_size = 0;
		if (r->upload) {
			if (r->feed && !atomic_load(&srv->stopping)) {
				/* Copied (MHD moves what is left of its buffer once this
				 * returns) and consumed on a worker; the connection reads
				 * nothing more until it is done: back-pressure. */
				if (r->chunk_cap < n) {
					r->chunk = xrealloc(r->chunk, n);
					r->chunk_cap = n;
				}
				memcpy(r->chunk, upload_data, n);
				r->chunk_n = n;
				run_on_worker(r, feed_job);
			} /* else refused already: dropped */
			return MHD_YES;
		}
		if (sbx__buf_append(&r->body, upload_data, n) < 0) {
			r->too_big = 1;
			return MHD_NO;
		}
		return MHD_YES;
	}
	if (r->recall) { /* the first call again, after the begin job */
		r->recall = 0;
		return MHD_YES;
	}
	if (r->queued)
		return MHD_YES;
	if (r->final_done) {
		sbx__srv_reply_error(r, 500, "no response");
		return MHD_YES;
	}
	run_on_worker(r, final_job);
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)c;
	struct server *srv = cls;
	struct srv_req *r = *con_cls;
	if (!r)
		return;
	if (srv->cfg.access_log && r->begun) {
		char ts[32];
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
		char *m = sbx__srv_log_escape(r->method, 1), *u = sbx__srv_log_escape(r->url, 1);
		char *sb = sbx__srv_log_escape(r->sandbox_id, 1);
		fprintf(stderr, "{\"ts\":\"%s\",\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,"
				"\"ms\":%.1f,\"sandbox\":\"%s\",\"bytes_in\":%zu%s}\n",
			ts, m, u, r->status, (sbx__now_mono() - r->t0) * 1e3, sb, (size_t)r->body_in,
			toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : ",\"aborted\":true");
		free(m);
		free(u);
		free(sb);
	}
	if (r->up_free)
		r->up_free(r);
	sbx__srv_sandbox_put(srv, r->sb);
	sbx__buf_free(&r->body);
	free(r->chunk);
	free(r->raw_uri);
	free(r);
	*con_cls = NULL;
}

/* Runs on the request line, before anything is unescaped: the request
 * target as sent (with its query) is what a proxied request forwards. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)cls;
	(void)c;
	struct srv_req *r = xcalloc(1, sizeof(*r));
	r->raw_uri = xstrdup(uri ? uri : "/");
	return r;
}

const char *sbx__srv_header(struct srv_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name);
}

const char *sbx__srv_query(struct srv_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name);
}

/* Counts as activity for the idle timeout: MHD measures it from the last
 * byte moved, so a reply (or stream event) produced after a long wait would
 * otherwise be cut before it is sent. Resetting from 0 restarts the clock. */
void sbx__srv_conn_touch(struct MHD_Connection *c, unsigned idle_s)
{
	if (!idle_s)
		return;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, idle_s);
}

static void queue(struct srv_req *r, int status, struct MHD_Response *resp, const char *ctype)
{
	sbx__srv_conn_touch(r->c, r->srv->cfg.idle_timeout_s);
	if (ctype)
		MHD_add_response_header(resp, "Content-Type", ctype);
	MHD_queue_response(r->c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	r->status = status;
	r->queued = 1;
	sbx__srv_metrics_status(r->srv, status);
}

void sbx__srv_queue(struct srv_req *r, int status, struct MHD_Response *resp, const char *ctype)
{
	queue(r, status, resp, ctype);
}

void sbx__srv_touch(struct srv_req *r)
{
	sbx__srv_conn_touch(r->c, r->srv->cfg.idle_timeout_s);
}

void sbx__srv_reply_bytes(struct srv_req *r, int status, const char *ctype, void *data, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, data, free);
	queue(r, status, resp, ctype);
}

struct fd_body {
	int fd;
};

static ssize_t fd_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fd_body *f = cls;
	ssize_t n;
	do
		n = pread(f->fd, buf, max, (off_t)pos);
	while (n < 0 && errno == EINTR);
	/* Shorter than announced (truncated meanwhile): end the connection. */
	return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void fd_free(void *cls)
{
	struct fd_body *f = cls;
	close(f->fd);
	free(f);
}

void sbx__srv_reply_fd(struct srv_req *r, int status, const char *ctype, int fd, uint64_t size)
{
	if (size == 0) {
		close(fd);
		sbx__srv_reply_bytes(r, status, ctype, xstrdup(""), 0);
		return;
	}
	struct fd_body *f = xcalloc(1, sizeof(*f));
	f->fd = fd;
	struct MHD_Response *resp = MHD_create_response_from_callback(size, 256 * 1024, fd_read, f, fd_free);
	queue(r, status, resp, ctype);
}

void sbx__srv_reply_text(struct srv_req *r, int status, const char *ctype, const char *text)
{
	sbx__srv_reply_bytes(r, status, ctype, xstrdup(text), strlen(text));
}

void sbx__srv_reply_json(struct srv_req *r, int status, json_t *body)
{
	char *s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!s)
		s = xstrdup("{}");
	sbx__srv_reply_bytes(r, status, "application/json", s, strlen(s));
}

void sbx__srv_reply_empty(struct srv_req *r, int status)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	queue(r, status, resp, NULL);
}

void sbx__srv_reply_error(struct srv_req *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	sbx__srv_reply_json(r, status, json_pack("{s:i,s:s}", "code", status, "message", msg));
	free(msg);
}

void sbx__srv_reply_connect_error(struct srv_req *r, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	sbx__srv_reply_json(r, sbx__srv_connect_http_status(code), json_pack("{s:s,s:s}", "code", code, "message", msg));
	free(msg);
}

static int parse_addr(struct sockaddr_in *sa, const char *addr, unsigned port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (strcmp(addr, "localhost") == 0)
		addr = "127.0.0.1";
	return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

int sbx__srv_http_start(struct server *srv, void **daemon_out, unsigned *port_out, sbx_error **err)
{
	/* zlib and libcrypto too: no request should be the first to find one missing */
	if (sbx__lazy_load(&sbx__lazy_mhd, err) < 0 || sbx__lazy_load(&sbx__lazy_zlib, err) < 0 ||
	    sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	struct sockaddr_in sa;
	if (parse_addr(&sa, srv->cfg.listen_addr, srv->cfg.port) < 0)
		return sbx_error_set(err, -EINVAL, "listen address '%s' is not an IPv4 address",
				     srv->cfg.listen_addr);
	/* One event thread (epoll: no FD_SETSIZE limit); suspend/resume hands
	 * connections to the workers and parks streams. */
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_UPGRADE;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, srv->cfg.port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
		MHD_OPTION_CONNECTION_LIMIT,
		srv->cfg.max_connections ? srv->cfg.max_connections : SRV_MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->cfg.max_connections_per_ip,
		MHD_OPTION_CONNECTION_TIMEOUT, srv->cfg.idle_timeout_s,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)4096, MHD_OPTION_THREAD_STACK_SIZE,
		(size_t)(1u << 20), MHD_OPTION_END);
	if (!d)
		return sbx_error_set(err, -EADDRINUSE, "cannot listen on %s:%u (in use or not permitted)",
				     srv->cfg.listen_addr, srv->cfg.port);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*port_out = info ? info->port : srv->cfg.port;
	*daemon_out = d;
	return 0;
}

/* MHD must not stop while a connection is suspended: streams are woken
 * (their fills see srv->stopping and end), no new job is taken
 * (run_on_worker answers 503), and the jobs in flight resume theirs. A
 * job stuck in a sandbox keeps this from returning (server.c bounds it). */
void sbx__srv_http_stop(struct server *srv, void *daemon)
{
	if (!daemon)
		return;
	for (;;) {
		sbx__srv_parks_wake_all(srv);
		if (sbx__srv_pool_wait_idle(srv, sbx__now_mono() + 0.2))
			break;
	}
	sbx__srv_parks_wake_all(srv);
	MHD_stop_daemon(daemon);
}
