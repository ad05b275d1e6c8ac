/* SPDX-License-Identifier: MIT */
/*
 * The daytona provider's pure parts, unit-tested on canned bodies: the
 * create body (an image NAME goes as the one-line Dockerfile `FROM NAME`, as
 * the SDK sends it; a snapshot by name; sizes in GiB; the auto-stop and
 * auto-delete intervals from the episode clock so an orphan dies by
 * itself), the Sandbox DTO, state polling, error mapping (Daytona's quota
 * and capacity errors are throttles) and multipart bodies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/str.h"
#include "daytona_int.h"

void sbx__dtn_info_clear(struct dtn_info *i)
{
	if (!i)
		return;
	free(i->id);
	free(i->state);
	free(i->snapshot);
	free(i->toolbox_url);
	free(i->error_reason);
	sbx__strv_free(i->labels);
	memset(i, 0, sizeof(*i));
}

static char *opt_str(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? xstrdup(v) : NULL;
}

static double parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *e = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	return e ? (double)timegm(&tm) : 0;
}

int sbx__dtn_info_parse(struct dtn_info *out, json_t *o, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const char *id = json_string_value(json_object_get(o, "id"));
	if (!json_is_object(o) || !id || !*id)
		return sbx_error_set(err, -EPROTO, "daytona: sandbox object without id");
	out->id = xstrdup(id);
	out->state = opt_str(o, "state");
	out->snapshot = opt_str(o, "snapshot");
	out->toolbox_url = opt_str(o, "toolboxProxyUrl");
	out->error_reason = opt_str(o, "errorReason");
	out->created_at = parse_time(json_string_value(json_object_get(o, "createdAt")));
	out->expires_at = parse_time(json_string_value(json_object_get(o, "autoDestroyAt")));
	json_int_t stop = json_integer_value(json_object_get(o, "autoStopInterval"));
	double last = parse_time(json_string_value(json_object_get(o, "lastActivityAt")));
	if (!out->expires_at && stop > 0 && last > 0)
		out->expires_at = last + 60.0 * (double)stop;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(o, "labels"), k, v) {
		if (!json_is_string(v))
			continue;
		_cleanup_free_ char *kv = xasprintf("%s=%s", k, json_string_value(v));
		sbx__strv_push(&out->labels, kv);
	}
	if (!out->labels)
		out->labels = xcalloc(1, sizeof(char *));
	return 0;
}

unsigned sbx__dtn_minutes(unsigned ttl_s)
{
	return ttl_s ? (ttl_s + 59) / 60 : 0;
}

static unsigned gib(unsigned mb)
{
	return (mb + 1023) / 1024;
}

static json_t *kv_object(const char *const *kv)
{
	json_t *o = json_object();
	for (size_t i = 0; kv && kv[i]; i++) {
		const char *eq = strchr(kv[i], '=');
		if (!eq)
			continue;
		_cleanup_free_ char *k = xstrndup(kv[i], (size_t)(eq - kv[i]));
		json_object_set_new(o, k, json_string(eq + 1));
	}
	return o;
}

json_t *sbx__dtn_create_body(const struct dtn_create *cr)
{
	json_t *b = json_object();
	const char *img = cr->image;
	if (img && strncmp(img, "snapshot:", 9) == 0) {
		json_object_set_new(b, "snapshot", json_string(img + 9));
	} else if (img && *img) {
		/* an image goes as the one-line Dockerfile the SDK sends for image: NAME */
		_cleanup_free_ char *df = strchr(img, '\n') ? xstrdup(img) : xasprintf("FROM %s\n", img);
		json_t *bi = json_object();
		json_object_set_new(bi, "dockerfileContent", json_string(df));
		json_object_set_new(bi, "contextHashes", json_array());
		json_object_set_new(b, "buildInfo", bi);
	}
	json_object_set_new(b, "labels", kv_object(cr->labels));
	json_object_set_new(b, "env", kv_object(cr->env));
	if (cr->user)
		json_object_set_new(b, "user", json_string(cr->user));
	if (cr->target && *cr->target)
		json_object_set_new(b, "target", json_string(cr->target));
	if (cr->cpus > 0)
		json_object_set_new(b, "cpu", json_integer((json_int_t)(cr->cpus + 0.999)));
	if (cr->memory_mb)
		json_object_set_new(b, "memory", json_integer(gib(cr->memory_mb)));
	if (cr->disk_mb)
		json_object_set_new(b, "disk", json_integer(gib(cr->disk_mb)));
	/* The episode clock: idle past the TTL stops it, and a stopped orphan is
	 * deleted at once (autoDeleteInterval 0), so nothing outlives its owner. */
	unsigned m = sbx__dtn_minutes(cr->ttl_s);
	json_object_set_new(b, "autoStopInterval", json_integer(m));
	json_object_set_new(b, "autoDeleteInterval", json_integer(m ? 0 : -1));
	json_object_set_new(b, "autoArchiveInterval", json_integer(m ? m : 10080));
	json_object_set_new(b, "public", json_false());
	return b;
}

int sbx__dtn_state_step(const char *state)
{
	if (!state || !*state)
		return 0;
	if (!strcmp(state, "started"))
		return 1;
	static const char *const bad[] = { "error", "build_failed", "destroyed", "destroying", "archived", NULL };
	for (size_t i = 0; bad[i]; i++)
		if (!strcmp(state, bad[i]))
			return -EIO;
	return 0;
}

/* Daytona's quota and capacity errors, which clear when sandboxes end. */
static const char *const quota_words[] = {
	"total disk limit exceeded", "disk limit", "snapshot quota", "snapshot limit",
	"sandbox resource limit reached", "concurrency limit", "total cpu limit exceeded",
	"total memory limit exceeded", "quota exceeded", "too many requests", "no available runners",
	NULL,
};

int sbx__dtn_is_quota(const char *msg)
{
	for (size_t i = 0; msg && quota_words[i]; i++)
		if (strcasestr(msg, quota_words[i]))
			return 1;
	return 0;
}

int sbx__dtn_map_http(long status, const char *body, size_t len, const char *what, sbx_error **err)
{
	if (status >= 200 && status < 300)
		return 0;
	_cleanup_free_ char *msg = NULL;
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *m = json_object_get(j, "message");
	if (json_is_string(m))
		msg = xstrdup(json_string_value(m));
	else if (json_is_array(m) && json_is_string(json_array_get(m, 0)))
		msg = xstrdup(json_string_value(json_array_get(m, 0)));
	json_decref(j);
	if (!msg)
		msg = xstrndup(body ? body : "", len > 200 ? 200 : len);
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	int code;
	if (status == 429 || sbx__dtn_is_quota(msg))
		code = -EAGAIN;
	else if (status == 401 || status == 403)
		code = -EACCES;
	else if (status == 404)
		code = -ENOENT;
	else if (status == 409)
		code = -EEXIST;
	else if (status == 408)
		code = -ETIMEDOUT;
	else if (status == 400 || status == 422)
		code = -EINVAL;
	else
		code = -EIO;
	int r = sbx_error_set(err, code, "daytona: %s: HTTP %ld: %s", what, status, msg);
	if (err && *err)
		(*err)->http_status = code == -EAGAIN ? 429 : (int)status;
	return r;
}

char *sbx__dtn_part_head(const char *boundary, const char *name, const char *filename)
{
	if (filename)
		return xasprintf("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
				 "Content-Type: application/octet-stream\r\n\r\n",
				 boundary, name, filename);
	return xasprintf("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n", boundary, name);
}

static const char *memmem_s(const char *h, size_t hl, const char *n)
{
	return memmem(h, hl, n, strlen(n));
}

/* name="..." in a header line, into out (owned) or NULL. */
static char *param(const char *hdr, size_t hl, const char *key)
{
	_cleanup_free_ char *pat = xasprintf("%s=\"", key);
	const char *p = hdr;
	while ((p = memmem_s(p, hl - (size_t)(p - hdr), pat))) {
		if (p == hdr || p[-1] == ' ' || p[-1] == ';') {
			p += strlen(pat);
			const char *q = memchr(p, '"', hl - (size_t)(p - hdr));
			return q ? xstrndup(p, (size_t)(q - p)) : NULL;
		}
		p++;
	}
	return NULL;
}

int sbx__dtn_multipart_parse(const char *body, size_t len, const char *ctype,
			     int (*fn)(const char *, const char *, const char *, size_t, void *), void *ud)
{
	const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
	if (!b)
		return -EPROTO;
	b += 9;
	size_t bl = strcspn(b, ";");
	if (bl >= 2 && b[0] == '"')
		b++, bl = strcspn(b, "\"");
	if (!bl || bl > 200)
		return -EPROTO;
	_cleanup_free_ char *delim = xasprintf("--%.*s", (int)bl, b);
	_cleanup_free_ char *next = xasprintf("\r\n--%.*s", (int)bl, b);
	const char *p = memmem_s(body, len, delim);
	if (!p)
		return -EPROTO;
	const char *end = body + len;
	p += strlen(delim);
	for (;;) {
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return 0;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			return -EPROTO;
		p += 2;
		const char *he = memmem_s(p, (size_t)(end - p), "\r\n\r\n");
		if (!he)
			return -EPROTO;
		const char *data = he + 4;
		const char *de = memmem_s(data, (size_t)(end - data), next);
		if (!de)
			return -EPROTO;
		_cleanup_free_ char *name = param(p, (size_t)(he - p), "name");
		_cleanup_free_ char *fname = param(p, (size_t)(he - p), "filename");
		int r = fn(name ? name : "", fname, data, (size_t)(de - data), ud);
		if (r < 0)
			return r;
		p = de + strlen(next);
	}
}
