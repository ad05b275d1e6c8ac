/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd glue for `sbx serve`: one thread per connection, request
 * bodies (chunked or not, MHD decodes the framing) accumulated into a buffer
 * with a hard cap, response helpers for JSON, bytes and errors, streaming
 * responses whose reader blocks in the connection's thread, and the access
 * log (method, path without query, status, time, sandbox; never a header).
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

#include "../util/alloc.h"
#include "../util/fs.h"
#include "server_int.h"

static int body_cap(const char *url)
{
	return strcmp(url, "/files") == 0 || strncmp(url, "/templates/", 11) == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	(void)version;
	struct server *srv = cls;
	struct srv_req *r = *con_cls;
	if (!r) {
		r = xcalloc(1, sizeof(*r));
		r->srv = srv;
		r->c = c;
		r->method = method;
		r->url = url;
		r->t0 = sbx__now_mono();
		sbx__buf_init(&r->body, body_cap(url) ? SRV_UPLOAD_MAX : SRV_JSON_MAX);
		*con_cls = r;
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (!r->too_big && sbx__buf_append(&r->body, upload_data, *upload_data_size) < 0)
			r->too_big = 1;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->queued)
		return MHD_YES;
	atomic_fetch_add(&srv->m.requests, 1);
	if (r->too_big)
		sbx__srv_reply_error(r, 413, "request body larger than %zu bytes", r->body.max);
	else
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
	if (srv->cfg.access_log) {
		char ts[32];
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(stderr, "{\"ts\":\"%s\",\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,"
				"\"ms\":%.1f,\"sandbox\":\"%s\",\"bytes_in\":%zu%s}\n",
			ts, r->method, r->url, r->status, (sbx__now_mono() - r->t0) * 1e3, r->sandbox_id,
			r->body.len, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : ",\"aborted\":true");
	}
	sbx__buf_free(&r->body);
	free(r);
	*con_cls = NULL;
}

const char *sbx__srv_header(struct srv_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name);
}

const char *sbx__srv_query(struct srv_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name);
}

static void queue(struct srv_req *r, int status, struct MHD_Response *resp, const char *ctype)
{
	if (ctype)
		MHD_add_response_header(resp, "Content-Type", ctype);
	MHD_queue_response(r->c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	r->status = status;
	r->queued = 1;
	sbx__srv_metrics_status(r->srv, status);
}

void sbx__srv_reply_bytes(struct srv_req *r, int status, const char *ctype, void *data, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, data, free);
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
	struct sockaddr_in sa;
	if (parse_addr(&sa, srv->cfg.listen_addr, srv->cfg.port) < 0)
		return sbx_error_set(err, -EINVAL, "listen address '%s' is not an IPv4 address",
				     srv->cfg.listen_addr);
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			 MHD_USE_ERROR_LOG;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, srv->cfg.port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_LIMIT, (unsigned)8192,
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
