/* SPDX-License-Identifier: MIT */
/*
 * The Daytona control plane: JSON over REST on the shared HTTP client with
 * `Authorization: Bearer <key>` (plus X-Daytona-Organization-ID for a JWT).
 * Create polls the sandbox until `started` within a deadline: one stuck in
 * `creating` is deleted and the failure is a throttle, so the core's
 * backoff retries it. Create's 429 and quota errors also go back to the
 * core; other calls retry a 429 here a few times.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/backend.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/http.h"
#include "../../util/str.h"
#include "daytona_int.h"

#define API_TIMEOUT_MS 120000L
#define RETRIES 3

static double now_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static char *dup_env(const char *name)
{
	const char *v = sbx__env(name);
	return v && *v ? xstrdup(v) : NULL;
}

int sbx__dtn_ctx_new(struct dtn_ctx **out, sbx_runtime *rt, sbx_error **err)
{
	sbx_credential cred = { 0 };
	int r = sbx_credential_resolve(&cred, "daytona", err);
	if (r < 0)
		return r;
	struct dtn_ctx *c = xcalloc(1, sizeof(*c));
	c->rt = rt;
	c->key = xstrdup(cred.n_values && cred.values[0] ? sbx__str_trim(cred.values[0]) : "");
	sbx_credential_clear(&cred);
	c->api_url = dup_env("DAYTONA_API_URL");
	if (!c->api_url)
		c->api_url = xstrdup(DTN_DEFAULT_URL);
	size_t n = strlen(c->api_url);
	while (n && c->api_url[n - 1] == '/')
		c->api_url[--n] = '\0';
	c->target = dup_env("DAYTONA_TARGET");
	c->org_id = dup_env("DAYTONA_ORGANIZATION_ID");
	double d = 0;
	const char *cd = sbx__env("SBX_DAYTONA_CREATE_TIMEOUT_S");
	if (!cd || sbx__parse_duration(&d, cd) < 0 || d <= 0)
		d = 300;
	c->create_deadline_s = d;
	const char *mode = sbx__env("SBX_DAYTONA_EXEC");
	c->exec_execute = mode && strcmp(mode, "execute") == 0;
	*out = c;
	return 0;
}

void sbx__dtn_ctx_free(struct dtn_ctx *c)
{
	if (!c)
		return;
	if (c->key)
		explicit_bzero(c->key, strlen(c->key));
	free(c->key);
	free(c->api_url);
	free(c->target);
	free(c->org_id);
	free(c);
}

struct hdrs {
	char *auth, *org, *ct;
	const char *lines[6];
};

static void hdrs_make(struct hdrs *h, const struct dtn_ctx *c, const char *ctype)
{
	memset(h, 0, sizeof(*h));
	size_t i = 0;
	h->auth = xasprintf("Authorization: Bearer %s", c->key);
	h->lines[i++] = h->auth;
	if (c->org_id) {
		h->org = xasprintf("X-Daytona-Organization-ID: %s", c->org_id);
		h->lines[i++] = h->org;
	}
	if (ctype) {
		h->ct = xasprintf("Content-Type: %s", ctype);
		h->lines[i++] = h->ct;
	}
	h->lines[i++] = "Expect:";
	h->lines[i] = NULL;
}

static void hdrs_clear(struct hdrs *h)
{
	if (h->auth)
		explicit_bzero(h->auth, strlen(h->auth));
	free(h->auth);
	free(h->org);
	free(h->ct);
}

struct ctcap {
	char *buf;
	size_t cap;
};

static void on_header(sbx_http_req *rq, const char *name, size_t nl, const char *v, size_t vl)
{
	struct ctcap *c = rq->payload;
	if (!c || !c->buf || !name || nl != 12 || strncasecmp(name, "content-type", 12) != 0)
		return;
	size_t k = vl < c->cap - 1 ? vl : c->cap - 1;
	memcpy(c->buf, v, k);
	c->buf[k] = '\0';
}

int sbx__dtn_raw(sbx_buf *resp, char *ctype_out, size_t ctype_cap, struct dtn_ctx *c, const char *method,
		 const char *url, const char *ctype, const void *body, size_t body_len, long timeout_ms,
		 const char *what, sbx_error **err)
{
	struct hdrs h;
	hdrs_make(&h, c, ctype);
	struct ctcap cc = { ctype_out, ctype_cap };
	if (ctype_out && ctype_cap)
		ctype_out[0] = '\0';
	int r = 0;
	for (int attempt = 0;; attempt++) {
		resp->len = 0;
		sbx_http_req rq = { .method = method, .url = url, .headers = h.lines, .body = body,
				    .body_len = body_len, .timeout_ms = timeout_ms, .resp = resp,
				    .on_header = on_header, .payload = &cc };
		r = sbx__http_perform(&rq, err);
		if (r < 0) {
			sbx_error_prefix(err, r, "daytona: %s", what);
			break;
		}
		int create = strcmp(what, "create sandbox") == 0;
		if (rq.status == 429 && !create && attempt < RETRIES) {
			sleep_s(0.5 * (1 << attempt));
			continue;
		}
		r = sbx__dtn_map_http(rq.status, resp->data, resp->len, what, err);
		break;
	}
	hdrs_clear(&h);
	return r;
}

int sbx__dtn_call(json_t **out, struct dtn_ctx *c, const char *method, const char *path, json_t *body,
		  long timeout_ms, const char *what, sbx_error **err)
{
	if (out)
		*out = NULL;
	_cleanup_free_ char *url = strncmp(path, "http", 4) == 0 ? xstrdup(path) : xasprintf("%s%s", c->api_url, path);
	_cleanup_free_ char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
	sbx_buf resp;
	sbx__buf_init(&resp, DTN_BODY_MAX);
	int r = sbx__dtn_raw(&resp, NULL, 0, c, method, url, payload ? "application/json" : NULL, payload,
			     payload ? strlen(payload) : 0, timeout_ms ? timeout_ms : API_TIMEOUT_MS, what, err);
	if (r == 0 && out && resp.len) {
		json_error_t je;
		*out = json_loadb(resp.data, resp.len, 0, &je);
		if (!*out)
			r = sbx_error_set(err, -EPROTO, "daytona: %s: reply is not JSON: %s", what, je.text);
	}
	sbx__buf_free(&resp);
	return r;
}

static int parse_into(struct dtn_info *out, json_t *j, int r, sbx_error **err)
{
	if (r == 0)
		r = sbx__dtn_info_parse(out, j, err);
	json_decref(j);
	return r;
}

int sbx__dtn_get(struct dtn_info *out, struct dtn_ctx *c, const char *id, sbx_error **err)
{
	_cleanup_free_ char *q = sbx__http_escape(id);
	_cleanup_free_ char *path = xasprintf("/sandbox/%s", q);
	json_t *j = NULL;
	int r = sbx__dtn_call(&j, c, "GET", path, NULL, 0, "get sandbox", err);
	return parse_into(out, j, r, err);
}

int sbx__dtn_delete(struct dtn_ctx *c, const char *id, sbx_error **err)
{
	_cleanup_free_ char *q = sbx__http_escape(id);
	_cleanup_free_ char *path = xasprintf("/sandbox/%s", q);
	return sbx__dtn_call(NULL, c, "DELETE", path, NULL, 0, "delete sandbox", err);
}

int sbx__dtn_create(struct dtn_info *out, struct dtn_ctx *c, const struct dtn_create *cr, sbx_error **err)
{
	json_t *body = sbx__dtn_create_body(cr);
	json_t *j = NULL;
	int r = sbx__dtn_call(&j, c, "POST", "/sandbox", body, 0, "create sandbox", err);
	json_decref(body);
	r = parse_into(out, j, r, err);
	if (r < 0)
		return r;
	double until = now_mono() + c->create_deadline_s, wait = 0.1;
	int step;
	while ((step = sbx__dtn_state_step(out->state)) == 0 && now_mono() < until) {
		sleep_s(wait);
		wait = wait < 1 ? wait * 2 : 1;
		struct dtn_info in;
		sbx_error *e = NULL;
		if (sbx__dtn_get(&in, c, out->id, &e) == 0) {
			sbx__dtn_info_clear(out);
			*out = in;
		}
		sbx_error_free(e);
	}
	if (step == 1)
		return 0;
	/* stuck or failed: delete it, and let a stuck create be retried */
	_cleanup_free_ char *id = xstrdup(out->id), *state = xstrdup(out->state ? out->state : "?");
	_cleanup_free_ char *why = xstrdup(out->error_reason ? out->error_reason : "");
	sbx__dtn_info_clear(out);
	sbx__dtn_delete(c, id, NULL);
	if (step == 0) {
		r = sbx_error_set(err, -EAGAIN, "daytona: sandbox %s still %s after %.0f s: deleted, retrying", id,
				  state, c->create_deadline_s);
		if (err && *err)
			(*err)->http_status = 503;
		return r;
	}
	return sbx_error_set(err, -EIO, "daytona: sandbox %s ended in state %s%s%s", id, state, *why ? ": " : "", why);
}

int sbx__dtn_activity(struct dtn_ctx *c, const char *id, unsigned ttl_s, sbx_error **err)
{
	_cleanup_free_ char *q = sbx__http_escape(id);
	_cleanup_free_ char *stop = xasprintf("/sandbox/%s/autostop/%u", q, sbx__dtn_minutes(ttl_s));
	int r = sbx__dtn_call(NULL, c, "POST", stop, NULL, 0, "set auto-stop", err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = xasprintf("/sandbox/%s/last-activity", q);
	return sbx__dtn_call(NULL, c, "POST", path, NULL, 0, "refresh activity", err);
}

int sbx__dtn_list(struct dtn_info **out, size_t *n_out, struct dtn_ctx *c, sbx_error **err)
{
	struct dtn_info *v = NULL;
	size_t n = 0, cap = 0;
	_cleanup_free_ char *cursor = NULL;
	int r = 0;
	for (int page = 0; page < 10000; page++) {
		_cleanup_free_ char *cq = cursor ? sbx__http_escape(cursor) : NULL;
		_cleanup_free_ char *path = xasprintf("/sandbox?limit=100%s%s", cq ? "&cursor=" : "", cq ? cq : "");
		json_t *j = NULL;
		r = sbx__dtn_call(&j, c, "GET", path, NULL, 0, "list sandboxes", err);
		if (r < 0)
			break;
		json_t *items = json_is_array(j) ? j : json_object_get(j, "items");
		size_t i;
		json_t *it;
		json_array_foreach(items, i, it) {
			struct dtn_info in;
			if (sbx__dtn_info_parse(&in, it, NULL) < 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				v = xrealloc(v, cap * sizeof(*v));
			}
			v[n++] = in;
		}
		const char *next = json_string_value(json_object_get(j, "nextCursor"));
		free(cursor);
		cursor = next && *next ? xstrdup(next) : NULL;
		json_decref(j);
		if (!cursor)
			break;
	}
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			sbx__dtn_info_clear(&v[i]);
		free(v);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}
