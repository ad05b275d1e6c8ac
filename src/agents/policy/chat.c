/* SPDX-License-Identifier: MIT */
/*
 * One chat completion for the policy agent, through the shared HTTP client:
 * POST {api_base}/chat/completions, plain JSON or SSE (`stream: true`, the
 * deltas assembled into one message). 429, 5xx and transport failures are
 * retried with jittered exponential backoff (Retry-After honoured up to the
 * cap) within a bounded number of attempts and the caller's deadline; any
 * other status fails at once. The key travels only in the Authorization
 * header, which the HTTP layer registers for redaction; error messages
 * quote at most a redacted snippet of the server's answer.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "agents/policy/policy.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/str.h"

#define RESP_MAX (16u << 20)
#define SNIPPET 200
#define BACKOFF_BASE_S 0.5
#define BACKOFF_CAP_S 20.0

struct stream {
	sbx_buf line;       /* the SSE line being received */
	sbx_buf raw;        /* a non-200 answer's body, for the message */
	json_t *msg;        /* the message assembled from the deltas */
	char *finish;
	long prompt_tokens, completion_tokens;
	int done, bad;
	double retry_after;
};

/* Strings concatenate (content, reasoning_content, a tool call's
 * arguments), objects merge, anything else replaces. */
static void merge(json_t *dst, json_t *delta)
{
	const char *k;
	json_t *v;
	json_object_foreach(delta, k, v) {
		json_t *cur = json_object_get(dst, k);
		if (json_is_string(v) && json_is_string(cur) && strcmp(k, "role") &&
		    strcmp(k, "id") && strcmp(k, "type")) {
			_cleanup_free_ char *s = xasprintf("%s%s", json_string_value(cur),
							   json_string_value(v));
			json_object_set_new(dst, k, json_string(s));
		} else if (json_is_object(v) && json_is_object(cur)) {
			merge(cur, v);
		} else if (!strcmp(k, "tool_calls") && json_is_array(v)) {
			if (!json_is_array(cur)) {
				cur = json_array();
				json_object_set_new(dst, k, cur);
			}
			size_t i;
			json_t *tc;
			json_array_foreach(v, i, tc) {
				json_t *ix = json_object_get(tc, "index");
				size_t at = json_is_integer(ix) ? (size_t)json_integer_value(ix) : i;
				while (json_array_size(cur) <= at && at < 1024)
					json_array_append_new(cur, json_object());
				json_t *slot = json_array_get(cur, at);
				if (slot) {
					merge(slot, tc);
					json_object_del(slot, "index");
				}
			}
		} else if (!json_is_null(v) || !cur) {
			json_object_set(dst, k, v);
		}
	}
}

static void sse_event(struct stream *s, const char *data)
{
	if (!strcmp(data, "[DONE]")) {
		s->done = 1;
		return;
	}
	json_t *j = json_loads(data, 0, NULL);
	if (!json_is_object(j)) {
		s->bad = 1;
		json_decref(j);
		return;
	}
	json_t *u = json_object_get(j, "usage");
	if (json_is_object(u)) {
		json_t *p = json_object_get(u, "prompt_tokens"), *c = json_object_get(u, "completion_tokens");
		if (json_is_integer(p))
			s->prompt_tokens = (long)json_integer_value(p);
		if (json_is_integer(c))
			s->completion_tokens = (long)json_integer_value(c);
	}
	json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
	json_t *d = json_object_get(ch, "delta");
	if (json_is_object(d)) {
		if (!s->msg)
			s->msg = json_object();
		merge(s->msg, d);
	}
	json_t *fr = json_object_get(ch, "finish_reason");
	if (json_is_string(fr)) {
		free(s->finish);
		s->finish = xstrdup(json_string_value(fr));
	}
	json_decref(j);
}

static int on_stream(sbx_http_req *rq, const char *data, size_t len)
{
	struct stream *s = rq->payload;
	if (rq->status != 200) {
		sbx__buf_append_trunc(&s->raw, data, len);
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n') {
			if (sbx__buf_append(&s->line, data + i, 1) < 0)
				return -E2BIG;
			continue;
		}
		char *l = s->line.data ? s->line.data : "";
		size_t n = s->line.len;
		if (n && l[n - 1] == '\r')
			l[--n] = 0;
		if (!strncmp(l, "data:", 5))
			sse_event(s, l + 5 + (l[5] == ' '));
		s->line.len = 0;
		if (s->line.data)
			s->line.data[0] = 0;
	}
	return 0;
}

static void on_header(sbx_http_req *rq, const char *name, size_t nl, const char *value, size_t vl)
{
	struct stream *s = rq->payload;
	if (name && nl == 11 && !strncasecmp(name, "retry-after", 11)) {
		_cleanup_free_ char *v = xstrndup(value, vl);
		char *end;
		double d = strtod(v, &end);
		if (end != v && d >= 0)
			s->retry_after = d;
	}
}

/* A non-streaming answer: the first choice's message as sent. */
static int parse_plain(struct chat_reply *out, const char *body, sbx_error **err)
{
	json_error_t je;
	json_t *j = json_loads(body, 0, &je);
	json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
	json_t *m = json_object_get(ch, "message");
	if (!json_is_object(m)) {
		json_decref(j);
		return sbx_error_set(err, -EPROTO, "the answer has no choices[0].message");
	}
	out->message = json_incref(m);
	json_t *fr = json_object_get(ch, "finish_reason");
	out->finish_reason = json_is_string(fr) ? xstrdup(json_string_value(fr)) : NULL;
	json_t *u = json_object_get(j, "usage");
	json_t *p = json_object_get(u, "prompt_tokens"), *c = json_object_get(u, "completion_tokens");
	out->prompt_tokens = json_is_integer(p) ? (long)json_integer_value(p) : -1;
	out->completion_tokens = json_is_integer(c) ? (long)json_integer_value(c) : -1;
	json_decref(j);
	return 0;
}

static double jitter(void)
{
	char hex[5];
	sbx__random_hex(hex, 4);
	return 0.5 + (double)strtoul(hex, NULL, 16) / 65536.0 * 0.5;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static char *snippet(const char *body)
{
	_cleanup_free_ char *s = xstrndup(body ? body : "", SNIPPET);
	/* one line of ASCII: a message, not the server's bytes */
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = (unsigned char)*p < 0x20 ? ' ' : '?';
	sbx__redact_inplace(s);
	return steal_ptr(&s);
}

int sbx__policy_chat(struct chat_reply *out, const struct policy_cfg *c, json_t *body,
		     double deadline, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	_cleanup_free_ char *url = xasprintf("%s/chat/completions", c->api_base);
	_cleanup_free_ char *where = sbx__http_url_for_log(url);
	_cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return sbx_error_set(err, -EINVAL, "the request is not JSON");
	char **hdrs = NULL;
	sbx__strv_push(&hdrs, "Content-Type: application/json");
	sbx__strv_push(&hdrs, c->stream ? "Accept: text/event-stream" : "Accept: application/json");
	if (c->key) {
		char *h = xasprintf("Authorization: Bearer %s", c->key);
		sbx__strv_push(&hdrs, h);
		explicit_bzero(h, strlen(h));
		free(h);
	}
	int r = 0;
	for (unsigned attempt = 0;; attempt++) {
		double left = deadline - sbx__now_mono();
		if (left <= 0) {
			r = sbx_error_set(err, -ETIMEDOUT, "no time left for the model");
			break;
		}
		double to = c->request_timeout < left ? c->request_timeout : left;
		struct stream s = { .prompt_tokens = -1, .completion_tokens = -1,
				    .retry_after = -1 };
		sbx__buf_init(&s.line, RESP_MAX);
		sbx__buf_init(&s.raw, c->stream ? 4096 : RESP_MAX);
		sbx_http_req rq = { 0 };
		rq.method = "POST";
		rq.url = url;
		rq.headers = (const char *const *)hdrs;
		rq.timeout_ms = (long)ceil(to * 1000);
		rq.body = text;
		rq.body_len = strlen(text);
		rq.payload = &s;
		rq.on_header = on_header;
		if (c->stream)
			rq.on_data = on_stream;
		else
			rq.resp = &s.raw;
		sbx_error *herr = NULL;
		r = sbx__http_perform(&rq, &herr);
		int retry = 0;
		_cleanup_free_ char *why = NULL;
		if (r < 0) {
			why = xstrdup(herr ? herr->msg : rq.error);
			retry = r != -EPROTO && r != -E2BIG;
		} else if (rq.status == 200) {
			if (!c->stream) {
				r = parse_plain(out, s.raw.data ? s.raw.data : "", &herr);
			} else if (s.msg && !s.bad) {
				out->message = steal_ptr(&s.msg);
				out->finish_reason = steal_ptr(&s.finish);
				out->prompt_tokens = s.prompt_tokens;
				out->completion_tokens = s.completion_tokens;
			} else {
				r = sbx_error_set(&herr, -EPROTO, "the event stream held no message");
			}
			if (r < 0)
				why = xstrdup(herr->msg);
			else if (!json_object_get(out->message, "role"))
				json_object_set_new(out->message, "role", json_string("assistant"));
		} else {
			_cleanup_free_ char *snip = snippet(s.raw.data);
			why = xasprintf("HTTP %ld%s%s", rq.status, *snip ? ": " : "", snip);
			retry = rq.status == 429 || rq.status >= 500;
			r = rq.status == 401 || rq.status == 403 ? -EACCES : -EIO;
		}
		sbx_error_free(herr);
		double ra = s.retry_after;
		sbx__buf_free(&s.line);
		sbx__buf_free(&s.raw);
		json_decref(s.msg);
		free(s.finish);
		if (r == 0) {
			out->retries = attempt;
			break;
		}
		left = deadline - sbx__now_mono();
		if (r == -ETIMEDOUT && left <= 0.05) {
			r = sbx_error_set(err, -ETIMEDOUT, "POST %s: no answer before the "
					  "agent's time ran out", where);
			break;
		}
		if (!retry || attempt >= c->max_retries) {
			/* a request timeout is the API failing, not the agent's time */
			r = sbx_error_set(err, r == -ETIMEDOUT ? -EIO : r, "POST %s: %s%s", where, why,
					  retry ? " (retries exhausted)" : "");
			break;
		}
		double wait = BACKOFF_BASE_S * pow(2, attempt);
		wait = (wait > BACKOFF_CAP_S ? BACKOFF_CAP_S : wait) * jitter();
		if (ra >= 0)
			wait = ra < BACKOFF_CAP_S ? ra : BACKOFF_CAP_S;
		SBX_LOGI("policy agent: POST %s: %s; retry %u of %u in %.1f s", where, why,
			 attempt + 1, c->max_retries, wait);
		if (wait >= left) {
			sleep_s(left > 0 ? left : 0);
			r = sbx_error_set(err, -ETIMEDOUT, "POST %s: %s; no time left to "
					  "retry", where, why);
			break;
		}
		sleep_s(wait);
	}
	sbx__http_headers_free(hdrs);
	return r;
}

void sbx__policy_reply_free(struct chat_reply *r)
{
	json_decref(r->message);
	free(r->finish_reason);
	memset(r, 0, sizeof(*r));
}
