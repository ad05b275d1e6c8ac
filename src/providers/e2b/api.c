/* SPDX-License-Identifier: MIT */
/*
 * The E2B control plane: JSON over REST with X-API-KEY. Create prefers
 * POST /v2/sandboxes and falls back to POST /sandboxes on 404/405 (AgentENV);
 * get, connect, delete, timeout, pause, and list with a metadata filter and
 * X-Next-Token pagination. Replies map to sbx codes in codec.c; 429/503 on
 * anything but create are retried here honouring an integer Retry-After
 * (create's throttles go back to the core's backoff with http_status set).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/backend.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/str.h"
#include "e2b_int.h"

#define API_TIMEOUT_MS 120000L
#define THROTTLE_RETRIES 3

int sbx__e2b_ctx_new(struct e2b_ctx **out, sbx_runtime *rt, sbx_error **err)
{
	sbx_credential cred = { 0 };
	int r = sbx_credential_resolve(&cred, "e2b", err);
	if (r < 0)
		return r;
	struct e2b_ctx *c = xcalloc(1, sizeof(*c));
	c->rt = rt;
	sbx__e2b_cfg_from_env(&c->cfg, NULL);
	c->cfg.api_key = xstrdup(cred.n_values && cred.values[0] ? sbx__str_trim(cred.values[0]) : "");
	sbx_credential_clear(&cred);
	*out = c;
	return 0;
}

void sbx__e2b_ctx_free(struct e2b_ctx *c)
{
	if (!c)
		return;
	sbx__e2b_cfg_clear(&c->cfg);
	free(c);
}

void sbx__e2b_info_clear(struct e2b_info *i)
{
	if (!i)
		return;
	free(i->id);
	free(i->template_id);
	free(i->token);
	free(i->domain);
	free(i->envd_version);
	free(i->state);
	sbx__strv_free(i->metadata);
	memset(i, 0, sizeof(*i));
}

static char *opt_str(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? xstrdup(v) : NULL;
}

int sbx__e2b_info_parse(struct e2b_info *out, json_t *o, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const char *id = json_string_value(json_object_get(o, "sandboxID"));
	if (!json_is_object(o) || !id || !*id)
		return sbx_error_set(err, -EPROTO, "e2b: sandbox object without sandboxID");
	out->id = xstrdup(id);
	out->template_id = opt_str(o, "templateID");
	out->token = opt_str(o, "envdAccessToken");
	out->domain = opt_str(o, "domain");
	out->envd_version = opt_str(o, "envdVersion");
	out->state = opt_str(o, "state");
	out->started_at = sbx__e2b_parse_time(json_string_value(json_object_get(o, "startedAt")));
	out->end_at = sbx__e2b_parse_time(json_string_value(json_object_get(o, "endAt")));
	json_t *md = json_object_get(o, "metadata");
	const char *k;
	json_t *v;
	json_object_foreach(md, k, v) {
		if (!json_is_string(v))
			continue;
		_cleanup_free_ char *kv = xasprintf("%s=%s", k, json_string_value(v));
		sbx__strv_push(&out->metadata, kv);
	}
	return 0;
}

static double retry_delay(const struct e2b_req *rq, int attempt)
{
	char *end;
	long s = strtol(rq->retry_after, &end, 10);
	if (rq->retry_after[0] && *end == '\0' && s >= 0)
		return s > 30 ? 30 : (double)s;
	return attempt < 3 ? 0.5 * (1 << attempt) : 2;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int sbx__e2b_api(json_t **out, struct e2b_ctx *c, const char *method, const char *path, json_t *body,
		 const char *what, struct e2b_req *rq_out, sbx_error **err)
{
	if (out)
		*out = NULL;
	_cleanup_free_ char *url = xasprintf("%s%s", c->cfg.api_url, path);
	_cleanup_free_ char *key = xasprintf("X-API-KEY: %s", c->cfg.api_key);
	const char *lines[] = { key, "Content-Type: application/json", "Accept: application/json",
				"Expect:", NULL };
	_cleanup_free_ char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
	sbx_buf resp;
	sbx__buf_init(&resp, E2B_BODY_MAX);
	struct e2b_req rq = { .method = method, .url = url, .headers = lines, .body = payload,
			      .body_len = payload ? strlen(payload) : 0, .body_fd = -1,
			      .timeout_ms = API_TIMEOUT_MS, .resp = &resp };
	int retry = strcmp(what, "create sandbox") != 0;
	int r;
	for (int attempt = 0;; attempt++) {
		resp.len = 0;
		if (resp.data)
			resp.data[0] = '\0';
		r = sbx__e2b_http(&rq, err);
		if (r < 0) {
			sbx_error_prefix(err, r, "e2b: %s", what);
			break;
		}
		if ((rq.status == 429 || rq.status == 503) && retry && attempt < THROTTLE_RETRIES) {
			sleep_s(retry_delay(&rq, attempt));
			continue;
		}
		r = sbx__e2b_map_http(rq.status, resp.data, resp.len, what, err);
		if (r == -EAGAIN && rq.retry_after[0] && err && *err)
			sbx_error_prefix(err, r, "retry after %ss", rq.retry_after);
		break;
	}
	explicit_bzero(key, strlen(key));
	rq.headers = NULL;
	if (rq_out)
		*rq_out = rq;
	if (r == 0 && out && resp.len) {
		json_error_t je;
		*out = json_loadb(resp.data, resp.len, 0, &je);
		if (!*out)
			r = sbx_error_set(err, -EPROTO, "e2b: %s: reply is not JSON: %s", what, je.text);
	}
	sbx__buf_free(&resp);
	return r;
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

static int sandbox_reply(struct e2b_info *out, json_t *j, const char *what, sbx_error **err)
{
	if (!j)
		return sbx_error_set(err, -EPROTO, "e2b: %s: empty reply", what);
	return sbx__e2b_info_parse(out, j, err);
}

int sbx__e2b_api_create(struct e2b_info *out, struct e2b_ctx *c, const struct e2b_create *cr,
			sbx_error **err)
{
	json_t *body = json_pack("{s:s, s:I, s:o, s:o, s:b, s:b, s:b}", "templateID", cr->template_id,
				 "timeout", (json_int_t)cr->timeout_s, "metadata", kv_object(cr->metadata),
				 "envVars", kv_object(cr->env), "secure", 1, "allow_internet_access",
				 cr->internet, "autoPause", 0);
	json_t *j = NULL;
	sbx_error *e2 = NULL;
	int r = sbx__e2b_api(&j, c, "POST", "/v2/sandboxes", body, "create sandbox", NULL, &e2);
	if (r < 0 && e2 && (e2->http_status == 404 || e2->http_status == 405)) {
		sbx_error_free(e2);
		e2 = NULL;
		r = sbx__e2b_api(&j, c, "POST", "/sandboxes", body, "create sandbox", NULL, &e2);
	}
	json_decref(body);
	if (r < 0) {
		if (err && !*err)
			*err = e2;
		else
			sbx_error_free(e2);
		return r;
	}
	r = sandbox_reply(out, j, "create sandbox", err);
	json_decref(j);
	return r;
}

int sbx__e2b_api_get(struct e2b_info *out, struct e2b_ctx *c, const char *id, sbx_error **err)
{
	_cleanup_free_ char *eid = sbx__e2b_urlenc(id);
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s", eid);
	_cleanup_free_ char *what = xasprintf("get sandbox %s", id);
	json_t *j = NULL;
	int r = sbx__e2b_api(&j, c, "GET", path, NULL, what, NULL, err);
	if (r == 0)
		r = sandbox_reply(out, j, what, err);
	json_decref(j);
	return r;
}

int sbx__e2b_api_connect(struct e2b_info *out, struct e2b_ctx *c, const char *id, unsigned timeout_s,
			 sbx_error **err)
{
	_cleanup_free_ char *eid = sbx__e2b_urlenc(id);
	_cleanup_free_ char *p2 = xasprintf("/v2/sandboxes/%s/connect", eid);
	_cleanup_free_ char *p1 = xasprintf("/sandboxes/%s/connect", eid);
	_cleanup_free_ char *what = xasprintf("connect sandbox %s", id);
	json_t *body = json_pack("{s:I}", "timeout", (json_int_t)timeout_s);
	json_t *j = NULL;
	sbx_error *e2 = NULL;
	int r = sbx__e2b_api(&j, c, "POST", p2, body, what, NULL, &e2);
	if (r < 0 && e2 && e2->http_status == 405) {
		sbx_error_free(e2);
		e2 = NULL;
		r = sbx__e2b_api(&j, c, "POST", p1, body, what, NULL, &e2);
	}
	json_decref(body);
	if (r < 0) {
		if (err && !*err)
			*err = e2;
		else
			sbx_error_free(e2);
		return r;
	}
	r = sandbox_reply(out, j, what, err);
	json_decref(j);
	return r;
}

int sbx__e2b_api_delete(struct e2b_ctx *c, const char *id, sbx_error **err)
{
	_cleanup_free_ char *eid = sbx__e2b_urlenc(id);
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s", eid);
	_cleanup_free_ char *what = xasprintf("delete sandbox %s", id);
	return sbx__e2b_api(NULL, c, "DELETE", path, NULL, what, NULL, err);
}

int sbx__e2b_api_timeout(struct e2b_ctx *c, const char *id, unsigned timeout_s, sbx_error **err)
{
	_cleanup_free_ char *eid = sbx__e2b_urlenc(id);
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s/timeout", eid);
	_cleanup_free_ char *what = xasprintf("set timeout of sandbox %s", id);
	json_t *body = json_pack("{s:I}", "timeout", (json_int_t)timeout_s);
	int r = sbx__e2b_api(NULL, c, "POST", path, body, what, NULL, err);
	json_decref(body);
	return r;
}

int sbx__e2b_api_pause(struct e2b_ctx *c, const char *id, sbx_error **err)
{
	_cleanup_free_ char *eid = sbx__e2b_urlenc(id);
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s/pause", eid);
	_cleanup_free_ char *what = xasprintf("pause sandbox %s", id);
	json_t *body = json_object();
	int r = sbx__e2b_api(NULL, c, "POST", path, body, what, NULL, err);
	json_decref(body);
	return r;
}

char *sbx__e2b_metadata_query(const char *const *kv)
{
	sbx_buf q;
	sbx__buf_init(&q, 1u << 20);
	for (size_t i = 0; kv && kv[i]; i++) {
		const char *eq = strchr(kv[i], '=');
		if (!eq)
			continue;
		_cleanup_free_ char *k = xstrndup(kv[i], (size_t)(eq - kv[i]));
		_cleanup_free_ char *ek = sbx__e2b_urlenc(k);
		_cleanup_free_ char *ev = sbx__e2b_urlenc(eq + 1);
		sbx__buf_printf(&q, "%s%s=%s", q.len ? "&" : "", ek, ev);
	}
	char *r = sbx__buf_steal(&q, NULL);
	return r ? r : xstrdup("");
}

int sbx__e2b_api_list(struct e2b_info **out, size_t *n_out, struct e2b_ctx *c,
		      const char *const *filter, sbx_error **err)
{
	*out = NULL;
	*n_out = 0;
	_cleanup_free_ char *md = sbx__e2b_metadata_query(filter);
	_cleanup_free_ char *emd = sbx__e2b_urlenc(md);
	char *token = NULL;
	struct e2b_info *v = NULL;
	size_t n = 0;
	int r = 0;
	for (int page = 0; page < 1000; page++) {
		_cleanup_free_ char *et = token ? sbx__e2b_urlenc(token) : NULL;
		_cleanup_free_ char *path = xasprintf("/v2/sandboxes?state=running,paused&limit=100%s%s%s%s",
						      *md ? "&metadata=" : "", *md ? emd : "",
						      et ? "&nextToken=" : "", et ? et : "");
		free(token);
		token = NULL;
		json_t *j = NULL;
		struct e2b_req rq;
		r = sbx__e2b_api(&j, c, "GET", path, NULL, "list sandboxes", &rq, err);
		if (r < 0)
			break;
		size_t i;
		json_t *o;
		json_array_foreach(j, i, o) {
			v = xrealloc(v, (n + 1) * sizeof(*v));
			if (sbx__e2b_info_parse(&v[n], o, NULL) == 0)
				n++;
		}
		json_decref(j);
		if (!rq.next_token[0])
			break;
		token = xstrdup(rq.next_token);
	}
	free(token);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			sbx__e2b_info_clear(&v[i]);
		free(v);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}
