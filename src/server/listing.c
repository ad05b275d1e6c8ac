/* SPDX-License-Identifier: MIT */
/*
 * GET /sandboxes and /v2/sandboxes as E2B answers them: newest first
 * unless order=asc; filters metadata ("k=v&k2=v2", each part URL-encoded),
 * state ("running,paused"), template, startedAfter / startedBefore
 * (RFC 3339); v2 pages of `limit` (1..100) with X-Next-Token, which the
 * SDK sends back as nextToken.
 */
#include <ctype.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/str.h"
#include "server_int.h"

int sbx__srv_parse_rfc3339(double *out, const char *s)
{
	int y, mo, d, h, mi, n = 0;
	if (!s || sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d%n", &y, &mo, &d, &h, &mi, &n) != 5 || n != 16)
		return -EINVAL;
	const char *p = s + n;
	double sec = 0;
	if (*p != ':' || !isdigit((unsigned char)p[1]) || !isdigit((unsigned char)p[2]))
		return -EINVAL;
	sec = (p[1] - '0') * 10 + (p[2] - '0');
	p += 3;
	if (*p == '.') {
		double scale = 0.1;
		if (!isdigit((unsigned char)*++p))
			return -EINVAL;
		for (; isdigit((unsigned char)*p); p++, scale /= 10)
			sec += (*p - '0') * scale;
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om, k = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5 || oh > 23 || om > 59)
			return -EINVAL;
		off = (*p == '-' ? -1 : 1) * (oh * 3600L + om * 60L);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec >= 61)
		return -EINVAL;
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi };
	*out = (double)timegm(&tm) + sec - (double)off;
	return 0;
}

static int metadata_match(struct srv_sandbox *s, const char *filter)
{
	if (!filter || !*filter)
		return 1;
	_cleanup_free_ char *f = xstrdup(filter);
	char *save = NULL;
	for (char *p = strtok_r(f, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(p, '=');
		if (eq)
			*eq++ = '\0';
		for (char *c = p; *c; c++)
			if (*c == '+')
				*c = ' ';
		for (char *c = eq; c && *c; c++)
			if (*c == '+')
				*c = ' ';
		MHD_http_unescape(p);
		if (eq)
			MHD_http_unescape(eq);
		const char *v = json_string_value(json_object_get(s->metadata, p));
		if (!v || strcmp(v, eq ? eq : "") != 0)
			return 0;
	}
	return 1;
}

static int state_match(struct srv_sandbox *s, const char *states)
{
	if (!states || !*states)
		return 1;
	const char *mine = s->paused ? "paused" : "running";
	_cleanup_free_ char *f = xstrdup(states);
	char *save = NULL;
	for (char *p = strtok_r(f, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if (strcmp(p, mine) == 0)
			return 1;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct srv_sandbox *x = *(struct srv_sandbox *const *)a, *y = *(struct srv_sandbox *const *)b;
	if (x->started_at != y->started_at)
		return x->started_at < y->started_at ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* An optional RFC 3339 query parameter: 0 (absent: *t untouched) or -EINVAL
 * after replying 400. */
static int time_param(struct srv_req *r, const char *name, double *t)
{
	const char *v = sbx__srv_query(r, name);
	if (!v)
		return 0;
	if (sbx__srv_parse_rfc3339(t, v) < 0) {
		sbx__srv_reply_error(r, 400, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z", name);
		return -EINVAL;
	}
	return 0;
}

static void reply_page(struct srv_req *r, json_t *arr, const char *token)
{
	if (!token) {
		sbx__srv_reply_json(r, 200, arr);
		return;
	}
	char *body = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free);
	MHD_add_response_header(resp, "X-Next-Token", token);
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_queue_response(r->c, 200, resp);
	MHD_destroy_response(resp);
	r->status = 200;
	r->queued = 1;
}

void sbx__srv_list(struct srv_req *r, int v2)
{
	struct server *srv = r->srv;
	const char *meta = sbx__srv_query(r, "metadata"), *states = sbx__srv_query(r, "state");
	const char *limit_s = sbx__srv_query(r, "limit"), *next = sbx__srv_query(r, "nextToken");
	const char *order = sbx__srv_query(r, "order"), *tmpl = sbx__srv_query(r, "template");
	uint64_t limit = 100;
	if (limit_s && (sbx__parse_u64(&limit, limit_s) < 0 || limit == 0 || limit > 100)) {
		sbx__srv_reply_error(r, 400, "limit must be 1..100");
		return;
	}
	if (!v2)
		limit = (uint64_t)-1;
	if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
		sbx__srv_reply_error(r, 400, "order must be asc or desc");
		return;
	}
	double after = -1, before = -1;
	if (time_param(r, "startedAfter", &after) < 0 || time_param(r, "startedBefore", &before) < 0)
		return;
	double after_t = -1;
	char after_id[32] = "";
	if (next && *next && sscanf(next, "%lf_%31[0-9a-z]", &after_t, after_id) != 2) {
		sbx__srv_reply_error(r, 400, "invalid nextToken");
		return;
	}
	int desc = !order || strcmp(order, "desc") == 0; /* E2B: newest first */
	size_t n;
	struct srv_sandbox **v = sbx__srv_sandbox_all(srv, &n);
	qsort(v, n, sizeof(*v), by_start);
	json_t *arr = json_array();
	_cleanup_free_ char *token = NULL;
	uint64_t count = 0;
	struct srv_sandbox *last = NULL;
	for (size_t k = 0; k < n; k++) {
		struct srv_sandbox *s = v[desc ? n - 1 - k : k];
		pthread_mutex_lock(&srv->lock);
		int states_ok = state_match(s, states);
		pthread_mutex_unlock(&srv->lock);
		if (!metadata_match(s, meta) || !states_ok || (tmpl && strcmp(tmpl, s->template_id) != 0) ||
		    (after >= 0 && s->started_at < after) || (before >= 0 && s->started_at > before))
			continue;
		if (after_t >= 0) {
			int c = s->started_at != after_t ? (s->started_at < after_t ? -1 : 1) : strcmp(s->id, after_id);
			if (desc ? c >= 0 : c <= 0)
				continue;
		}
		if (count == limit) {
			token = xasprintf("%.17g_%s", last->started_at, last->id);
			break;
		}
		json_array_append_new(arr, sbx__srv_sandbox_json(srv, s, 0));
		last = s;
		count++;
	}
	for (size_t k = 0; k < n; k++)
		sbx__srv_sandbox_put(srv, v[k]);
	free(v);
	reply_page(r, arr, token);
}
