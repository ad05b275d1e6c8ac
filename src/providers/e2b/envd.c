/* SPDX-License-Identifier: MIT */
/*
 * The envd data plane over the Connect protocol with the JSON codec: request
 * headers (routing, access token, Basic user), the incremental parser of
 * 5-byte envelopes used by server-streaming calls, process events, the
 * end-stream frame, unary calls, and the filesystem.Filesystem RPCs.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


#include "../../util/alloc.h"
#include "../../util/base64.h"
#include "../../util/cleanup.h"
#include "../../util/http.h"
#include "../../util/str.h"
#include "e2b_int.h"

#define UNARY_TIMEOUT_MS 120000L

void sbx__e2b_conn_copy(struct e2b_conn *dst, const struct e2b_conn *src)
{
	dst->base = xstrdup(src->base);
	dst->id = xstrdup(src->id);
	dst->token = src->token ? xstrdup(src->token) : NULL;
}

void sbx__e2b_conn_clear(struct e2b_conn *c)
{
	free(c->base);
	free(c->id);
	free(c->token);
	memset(c, 0, sizeof(*c));
}

char **sbx__e2b_envd_headers(const struct e2b_conn *c, const char *content_type, const char *user,
			     long timeout_ms, int stream)
{
	char **lines = xcalloc(10, sizeof(*lines));
	size_t n = 0;
	lines[n++] = xasprintf("E2b-Sandbox-Id: %s", c->id);
	lines[n++] = xasprintf("E2b-Sandbox-Port: %d", E2B_ENVD_PORT);
	if (c->token)
		lines[n++] = xasprintf("X-Access-Token: %s", c->token);
	if (content_type)
		lines[n++] = xasprintf("Content-Type: %s", content_type);
	lines[n++] = xstrdup("Connect-Protocol-Version: 1");
	lines[n++] = xstrdup("Expect:");
	if (timeout_ms > 0)
		lines[n++] = xasprintf("Connect-Timeout-Ms: %ld", timeout_ms);
	if (stream)
		lines[n++] = xstrdup("Keepalive-Ping-Interval: 30");
	if (user && *user) {
		_cleanup_free_ char *up = xasprintf("%s:", user);
		_cleanup_free_ char *b = sbx__base64_encode(up, strlen(up), SBX_B64_STD);
		lines[n++] = xasprintf("Authorization: Basic %s", b);
	}
	return lines;
}

/* ---- envelopes ---- */

void sbx__e2b_envelopes_init(struct e2b_envelopes *p)
{
	sbx__buf_init(&p->pending, E2B_ENVELOPE_MAX + 5);
	p->ended = 0;
}

void sbx__e2b_envelopes_free(struct e2b_envelopes *p)
{
	sbx__buf_free(&p->pending);
}

int sbx__e2b_envelopes_feed(struct e2b_envelopes *p, const char *data, size_t len,
			    int (*fn)(unsigned flags, const char *msg, size_t len, void *ud), void *ud)
{
	while (len > 0) {
		if (p->ended)
			return -EPROTO;
		/* Take what completes the header or the current frame. */
		size_t have = p->pending.len, need;
		if (have < 5) {
			need = 5 - have;
		} else {
			const unsigned char *h = (const unsigned char *)p->pending.data;
			uint32_t l = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
			need = 5 + (size_t)l - have;
		}
		size_t k = need < len ? need : len;
		if (sbx__buf_append(&p->pending, data, k) < 0)
			return -EPROTO;
		data += k, len -= k;
		if (p->pending.len < 5)
			continue;
		const unsigned char *h = (const unsigned char *)p->pending.data;
		uint32_t l = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
		if ((h[0] & 0x01) || l > E2B_ENVELOPE_MAX)
			return -EPROTO;
		if (p->pending.len < 5 + (size_t)l)
			continue;
		unsigned flags = h[0];
		if (flags & 0x02)
			p->ended = 1;
		int r = fn(flags, p->pending.data + 5, l, ud);
		p->pending.len = 0;
		if (r < 0)
			return r;
	}
	return 0;
}

char *sbx__e2b_envelope(const char *json, size_t len, size_t *out_len)
{
	char *r = xmalloc(len + 5);
	r[0] = 0;
	r[1] = (char)((len >> 24) & 0xff);
	r[2] = (char)((len >> 16) & 0xff);
	r[3] = (char)((len >> 8) & 0xff);
	r[4] = (char)(len & 0xff);
	memcpy(r + 5, json, len);
	*out_len = len + 5;
	return r;
}

/* ---- events ---- */

void sbx__e2b_event_clear(struct e2b_event *e)
{
	free(e->data);
	free(e->status);
	free(e->error);
	memset(e, 0, sizeof(*e));
}

static long long num(json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

int sbx__e2b_event_parse(struct e2b_event *out, const char *json, size_t len)
{
	memset(out, 0, sizeof(*out));
	json_t *j = json_loadb(json, len, 0, NULL);
	json_t *ev = json_object_get(j, "event");
	int r = 0;
	json_t *x;
	if (!json_is_object(ev)) {
		r = -EPROTO;
	} else if ((x = json_object_get(ev, "start"))) {
		out->type = E2B_EV_START;
		out->pid = (unsigned)num(json_object_get(x, "pid"));
	} else if ((x = json_object_get(ev, "data"))) {
		out->type = E2B_EV_DATA;
		json_t *s = json_object_get(x, "stdout");
		out->fd = 1;
		if (!s) {
			s = json_object_get(x, "stderr");
			out->fd = 2;
		}
		if (!s) {
			s = json_object_get(x, "pty");
			out->fd = 1;
		}
		const char *b = json_string_value(s);
		size_t bl = b ? strlen(b) : 0;
		sbx_buf raw;
		sbx__buf_init(&raw, sbx__base64_decoded_max(bl));
		/* protobuf JSON bytes: either alphabet, padded or not */
		if (!b || sbx__base64_decode_buf(&raw, b, bl, SBX_B64_ANY_ALPHABET |
						 SBX_B64_PAD_OPTIONAL) < 0)
			r = -EPROTO;
		else
			out->data = sbx__buf_steal(&raw, &out->len);
		sbx__buf_free(&raw);
	} else if ((x = json_object_get(ev, "end"))) {
		out->type = E2B_EV_END;
		json_t *ec = json_object_get(x, "exitCode");
		if (!ec)
			ec = json_object_get(x, "exit_code");
		out->exit_code = (int)num(ec);
		out->exited = json_is_true(json_object_get(x, "exited"));
		const char *s = json_string_value(json_object_get(x, "status"));
		out->status = s ? xstrdup(s) : NULL;
		s = json_string_value(json_object_get(x, "error"));
		out->error = s ? xstrdup(s) : NULL;
	} else if (json_object_get(ev, "keepalive")) {
		out->type = E2B_EV_KEEPALIVE;
	} else {
		out->type = E2B_EV_NONE;
	}
	json_decref(j);
	if (r < 0)
		sbx__e2b_event_clear(out);
	return r;
}

int sbx__e2b_end_stream(const char *json, size_t len, const char *what, sbx_error **err)
{
	json_t *j = json_loadb(json, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return sbx_error_set(err, -EPROTO, "e2b: %s: malformed end of stream", what);
	}
	json_t *e = json_object_get(j, "error");
	int r = 0;
	if (json_is_object(e)) {
		const char *code = json_string_value(json_object_get(e, "code"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		r = sbx_error_set(err, sbx__e2b_map_connect_code(code), "e2b: %s: %s: %s", what,
				  code ? code : "unknown", msg ? msg : "");
	}
	json_decref(j);
	return r;
}

int sbx__e2b_status_signal(const char *status)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "killed", 9 }, { "terminated", 15 }, { "interrupt", 2 }, { "hangup", 1 },
		{ "aborted", 6 }, { "segmentation fault", 11 }, { "broken pipe", 13 },
		{ "alarm clock", 14 }, { "quit", 3 }, { "user defined signal 1", 10 },
		{ "user defined signal 2", 12 }, { "bus error", 7 }, { "floating point exception", 8 },
	};
	if (!status || !sbx__str_startswith(status, "signal: "))
		return 0;
	const char *n = status + 8;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sbx__str_startswith(n, sigs[i].name))
			return sigs[i].sig;
	return 9;
}

/* ---- unary ---- */

int sbx__e2b_unary(json_t **out, const struct e2b_conn *c, const char *method, json_t *req,
		   const char *user, const char *what, sbx_error **err)
{
	if (out)
		*out = NULL;
	_cleanup_free_ char *url = xasprintf("%s/%s", c->base, method);
	_cleanup_free_ char *body = json_dumps(req, JSON_COMPACT);
	char **h = sbx__e2b_envd_headers(c, "application/json", user, 0, 0);
	sbx_buf resp;
	sbx__buf_init(&resp, E2B_BODY_MAX);
	struct e2b_req rq = { .method = "POST", .url = url, .headers = (const char *const *)h, .body = body,
			      .body_len = strlen(body), .body_fd = -1, .timeout_ms = UNARY_TIMEOUT_MS,
			      .resp = &resp };
	int r = sbx__e2b_http(&rq, err);
	sbx__http_headers_free(h);
	if (r < 0) {
		sbx_error_prefix(err, r, "e2b: %s", what);
		goto out;
	}
	json_t *j = resp.len ? json_loadb(resp.data, resp.len, 0, NULL) : NULL;
	if (rq.status != 200) {
		const char *code = json_string_value(json_object_get(j, "code"));
		const char *msg = json_string_value(json_object_get(j, "message"));
		if (code) {
			r = sbx_error_set(err, sbx__e2b_map_connect_code(code), "e2b: %s: %s: %s", what, code,
					  msg ? msg : "");
		} else {
			r = sbx__e2b_map_http(rq.status, resp.data, resp.len, what, err);
			if (r == 0)
				r = sbx_error_set(err, -EIO, "e2b: %s: HTTP %ld", what, rq.status);
		}
		json_decref(j);
		goto out;
	}
	if (!j) {
		r = sbx_error_set(err, -EPROTO, "e2b: %s: reply is not JSON", what);
		goto out;
	}
	if (out)
		*out = j;
	else
		json_decref(j);
out:
	sbx__buf_free(&resp);
	return r;
}

/* ---- filesystem ---- */

int sbx__e2b_entry_parse(sbx_file_info *out, json_t *o)
{
	memset(out, 0, sizeof(*out));
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *path = json_string_value(json_object_get(o, "path"));
	if (!path)
		return -EPROTO;
	out->path = xstrdup(path);
	if (!name) {
		const char *s = strrchr(path, '/');
		name = s && s[1] ? s + 1 : path;
	}
	out->name = xstrdup(name);
	json_t *t = json_object_get(o, "type");
	const char *ts = json_string_value(t);
	long long tn = json_is_integer(t) ? json_integer_value(t) : -1;
	if ((ts && !strcmp(ts, "FILE_TYPE_FILE")) || tn == 1)
		out->type = SBX_FILE_REGULAR;
	else if ((ts && !strcmp(ts, "FILE_TYPE_DIRECTORY")) || tn == 2)
		out->type = SBX_FILE_DIR;
	else if ((ts && !strcmp(ts, "FILE_TYPE_SYMLINK")) || tn == 3)
		out->type = SBX_FILE_SYMLINK;
	else
		out->type = SBX_FILE_OTHER;
	out->size = num(json_object_get(o, "size"));
	out->mode = (unsigned)num(json_object_get(o, "mode")) & 07777;
	const char *s = json_string_value(json_object_get(o, "owner"));
	out->owner = s ? xstrdup(s) : NULL;
	s = json_string_value(json_object_get(o, "group"));
	out->group = s ? xstrdup(s) : NULL;
	s = json_string_value(json_object_get(o, "modifiedTime"));
	out->mtime = sbx__e2b_parse_time(s);
	s = json_string_value(json_object_get(o, "symlinkTarget"));
	out->symlink_target = s ? xstrdup(s) : NULL;
	if (out->owner && !strcmp(out->owner, "root"))
		out->uid = 0;
	return 0;
}

int sbx__e2b_fs_stat(sbx_file_info *out, const struct e2b_conn *c, const char *path, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	json_t *req = json_pack("{s:s}", "path", path);
	json_t *j = NULL;
	_cleanup_free_ char *what = xasprintf("stat %s", path);
	int r = sbx__e2b_unary(&j, c, "filesystem.Filesystem/Stat", req, "root", what, err);
	json_decref(req);
	if (r == 0 && sbx__e2b_entry_parse(out, json_object_get(j, "entry")) < 0)
		r = sbx_error_set(err, -EPROTO, "e2b: %s: reply without entry", what);
	json_decref(j);
	return r;
}

int sbx__e2b_fs_list(sbx_file_info **out, size_t *n_out, const struct e2b_conn *c, const char *dir,
		     unsigned depth, sbx_error **err)
{
	*out = NULL;
	*n_out = 0;
	json_t *req = json_pack("{s:s, s:i}", "path", dir, "depth", (int)depth);
	json_t *j = NULL;
	_cleanup_free_ char *what = xasprintf("list %s", dir);
	int r = sbx__e2b_unary(&j, c, "filesystem.Filesystem/ListDir", req, "root", what, err);
	json_decref(req);
	if (r < 0)
		return r;
	json_t *arr = json_object_get(j, "entries");
	size_t n = json_array_size(arr), k = 0;
	sbx_file_info *v = xcalloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		if (sbx__e2b_entry_parse(&v[k], json_array_get(arr, i)) == 0)
			k++;
	json_decref(j);
	*out = v;
	*n_out = k;
	return 0;
}

static int simple(const struct e2b_conn *c, const char *method, json_t *req, const char *what,
		  sbx_error **err)
{
	int r = sbx__e2b_unary(NULL, c, method, req, "root", what, err);
	json_decref(req);
	return r;
}

int sbx__e2b_fs_mkdir(const struct e2b_conn *c, const char *path, sbx_error **err)
{
	_cleanup_free_ char *what = xasprintf("mkdir %s", path);
	return simple(c, "filesystem.Filesystem/MakeDir", json_pack("{s:s}", "path", path), what, err);
}

int sbx__e2b_fs_move(const struct e2b_conn *c, const char *from, const char *to, sbx_error **err)
{
	_cleanup_free_ char *what = xasprintf("rename %s", from);
	return simple(c, "filesystem.Filesystem/Move",
		      json_pack("{s:s, s:s}", "source", from, "destination", to), what, err);
}

int sbx__e2b_fs_remove(const struct e2b_conn *c, const char *path, sbx_error **err)
{
	_cleanup_free_ char *what = xasprintf("remove %s", path);
	return simple(c, "filesystem.Filesystem/Remove", json_pack("{s:s}", "path", path), what, err);
}
