/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd glue for `sbx serve`: one thread per connection, idle
 * connections closed after --idle-timeout of inactivity, at most
 * --max-connections (--max-connections-per-ip from one address).
 * Credentials are checked from the headers before any body byte is read
 * (router.c); a body is then (chunked or not, MHD decodes the framing)
 * streamed to an upload's consumer, or accumulated into a buffer for JSON,
 * capped per endpoint: a declared size past the cap is answered 413 at
 * once, a received one ends the connection. Response helpers for JSON,
 * bytes, files (streamed from an fd) and errors, streaming responses whose
 * reader blocks in the connection's thread, and the access log (method,
 * path without query, status, time, sandbox; never a header), one JSON
 * object per line with every string escaped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
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
		/* Answering now makes MHD skip the body and close the connection
		 * after the reply: nothing of it is read, let alone buffered. */
		if (!sbx__srv_authorize(r))
			return MHD_YES;
		if (r->proxy_port) { /* streamed both ways, never buffered: no cap */
			sbx__srv_proxy_begin(r);
			return MHD_YES;
		}
		if (declared_too_big(c, r->body_cap)) {
			sbx__srv_reply_error(r, 413, "request body larger than %llu bytes", (unsigned long long)r->body_cap);
			return MHD_YES;
		}
		if (r->upload)
			sbx__srv_route_begin(r);
		return MHD_YES;
	}
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
			if (r->feed)
				r->feed(r, upload_data, n); /* else refused already: dropped */
		} else if (sbx__buf_append(&r->body, upload_data, n) < 0) {
			r->too_big = 1;
			return MHD_NO;
		}
		return MHD_YES;
	}
	if (r->queued)
		return MHD_YES;
	sbx__srv_route(r);
	if (!r->queued)
		sbx__srv_reply_error(r, 500, "no response");
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
static void touch(struct MHD_Connection *c, unsigned idle_s)
{
	if (!idle_s)
		return;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, idle_s);
}

static void queue(struct srv_req *r, int status, struct MHD_Response *resp, const char *ctype)
{
	touch(r->c, r->srv->cfg.idle_timeout_s);
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
	touch(r->c, r->srv->cfg.idle_timeout_s);
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

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct srv_stream *s = cls;
	while (s->off >= s->out.len) {
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		s->out.len = 0;
		s->off = 0;
		if (s->out.data)
			s->out.data[0] = '\0';
		if (s->fill(s))
			s->done = 1;
	}
	size_t n = s->out.len - s->off;
	if (n > max)
		n = max;
	memcpy(buf, s->out.data + s->off, n);
	s->off += n;
	touch(s->c, s->srv->cfg.idle_timeout_s);
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct srv_stream *s = cls;
	if (s->fini)
		s->fini(s);
	sbx__buf_free(&s->out);
	free(s);
}

void sbx__srv_reply_stream(struct srv_req *r, struct srv_stream *s)
{
	s->srv = r->srv;
	s->c = r->c;
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read,
								       s, stream_free);
	queue(r, 200, resp, "application/connect+json");
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
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			 MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, srv->cfg.port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
		MHD_OPTION_CONNECTION_LIMIT,
		srv->cfg.max_connections ? srv->cfg.max_connections : SRV_MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->cfg.max_connections_per_ip,
		MHD_OPTION_CONNECTION_TIMEOUT, srv->cfg.idle_timeout_s,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024, MHD_OPTION_THREAD_STACK_SIZE,
		(size_t)(1u << 20), MHD_OPTION_END);
	if (!d)
		return sbx_error_set(err, -EADDRINUSE, "cannot listen on %s:%u (in use or not permitted)",
				     srv->cfg.listen_addr, srv->cfg.port);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*port_out = info ? info->port : srv->cfg.port;
	*daemon_out = d;
	return 0;
}

void sbx__srv_http_stop(void *daemon)
{
	if (daemon)
		MHD_stop_daemon(daemon);
}
