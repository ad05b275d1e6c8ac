/* SPDX-License-Identifier: MIT */
/*
 * The Daytona control plane on the server's sandbox records: create (from
 * `snapshot` = an image of the store, or `buildInfo.dockerfileContent`: a
 * lone `FROM NAME` resolves NAME in the store, anything longer goes through
 * the template builder first), get, list (labels filter, cursor pages),
 * delete, labels, last-activity, the interval setters, start/stop and the
 * toolbox URL. A sandbox is `started` once created (creates are
 * synchronous); stop freezes it (`stopped`), start thaws it. The Daytona
 * part of a record, its deadline and the DTO are in record.c.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/provider.h>
#include <sbx/template.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona.h"

#define LIST_LIMIT_MAX 200u
#define INTERVAL_MAX (1ll << 24)   /* minutes (~31 years): minutes * 60 fits a TTL */
#define CPU_MAX 1024ll
#define GIB_MAX (1ll << 20)        /* memory and disk, GiB */

static int string_map(json_t *v)
{
	const char *k;
	json_t *x;
	if (!v || json_is_null(v))
		return 1;
	if (!json_is_object(v))
		return 0;
	json_object_foreach(v, k, x)
		if (!json_is_string(x))
			return 0;
	return 1;
}

/* Labels become the local sandbox's "k=v" labels: keys 1..255 bytes without
 * '=', values up to 4096 bytes, no control characters in either. */
static int labels_ok(json_t *v)
{
	const char *k;
	json_t *x;
	if (!v || json_is_null(v))
		return 1;
	if (!string_map(v))
		return 0;
	json_object_foreach(v, k, x) {
		size_t kl = strlen(k), vl = json_string_length(x);
		const char *val = json_string_value(x);
		if (kl == 0 || kl > 255 || strchr(k, '=') || vl > 4096 || strlen(val) != vl)
			return 0;
		for (const char *c = k; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return 0;
		for (const char *c = val; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return 0;
	}
	return 1;
}

/* An optional integer field in min..max: 1 set, 0 absent, -1 invalid. */
static int int_field(json_t *o, const char *k, long long min, long long max, long long *out)
{
	json_t *v = json_object_get(o, k);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return -1;
	*out = json_integer_value(v);
	return 1;
}

/* The next creates answered with Daytona's quota error (tests only). */
static atomic_long fail_left = -1;
static atomic_int fail_status;

static int injected_failure(struct srv_req *r)
{
	long left = atomic_load(&fail_left);
	if (left < 0) {
		const char *v = sbx__env("SBX_SERVE_DAYTONA_FAIL_CREATES");
		unsigned long long n = 0;
		char kind[8] = "";
		if (v && *v && sscanf(v, "%llu:%7s", &n, kind) < 1)
			n = 0;
		atomic_store(&fail_status, strcmp(kind, "429") == 0 ? 429 : 400);
		long expected = -1;
		atomic_compare_exchange_strong(&fail_left, &expected, (long)n);
	}
	for (left = atomic_load(&fail_left); left > 0;)
		if (atomic_compare_exchange_weak(&fail_left, &left, left - 1)) {
			if (atomic_load(&fail_status) == 429) {
				struct MHD_Response *resp;
				char *body = xasprintf("{\"statusCode\":429,\"message\":\"ThrottlerException: Too Many "
						       "Requests\",\"error\":\"Too Many Requests\"}");
				resp = MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free);
				MHD_add_response_header(resp, "Content-Type", "application/json");
				MHD_add_response_header(resp, "Retry-After", "1");
				MHD_add_response_header(resp, "X-RateLimit-Remaining-sandbox-create", "0");
				MHD_queue_response(r->c, 429, resp);
				MHD_destroy_response(resp);
				r->status = 429;
				r->queued = 1;
			} else {
				sbx__dt_error(r, 400, "Total disk limit exceeded. Maximum allowed: 30GiB");
			}
			return 1;
		}
	return 0;
}

/* The image to start from: snapshot (a Daytona snapshot, else an image of
 * the store), or the Dockerfile's lone FROM, or a build of the whole
 * Dockerfile with its contexts (snapshot_build.c). Owned name in *image. */
static int create_image(char **image, struct server *srv, json_t *snapshot, const char *dockerfile, json_t *hashes,
			sbx_error **e)
{
	if (json_is_string(snapshot)) {
		int rc = sbx__dt_snapshot_image(srv, json_string_value(snapshot), image, e);
		if (rc != -ENOENT)
			return rc;
		return sbx__srv_template_resolve(srv, json_string_value(snapshot), image, e);
	}
	if (!dockerfile)
		return sbx__srv_template_resolve(srv, "base", image, e);
	char from[512], extra[2];
	if (json_array_size(hashes) == 0 &&
	    (sscanf(dockerfile, " FROM %511s %1s", from, extra) == 1 || sscanf(dockerfile, " from %511s %1s", from, extra) == 1))
		return sbx__srv_template_resolve(srv, from, image, e);
	/* a longer Dockerfile: built into the store, cached by its digest */
	return sbx__dt_build(srv, dockerfile, hashes, "dockerfile", image, NULL, NULL, e);
}

static const char *const bad_spec =
	"invalid sandbox spec: name (1..255 bytes), snapshot, user must be strings; env a map of strings; "
	"labels a map of strings (keys 1..255 bytes without '=', values up to 4096, no control characters); "
	"buildInfo an object with dockerfileContent; cpu (<= 1024), memory and disk (GiB, <= 1048576), "
	"autoStopInterval and autoArchiveInterval (minutes, <= 16777216) non-negative integers; "
	"autoDeleteInterval an integer -1..16777216";

static void create(struct srv_req *r, json_t *b)
{
	struct server *srv = r->srv;
	json_t *name = json_object_get(b, "name"), *snapshot = json_object_get(b, "snapshot");
	json_t *user = json_object_get(b, "user"), *env = json_object_get(b, "env");
	json_t *labels = json_object_get(b, "labels"), *bi = json_object_get(b, "buildInfo");
	json_t *df = bi ? json_object_get(bi, "dockerfileContent") : NULL;
	long long cpu = 0, mem = 0, disk = 0, astop = 15, aarch = 10080, adel = -1;
	if ((name && !json_is_null(name) &&
	     (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > 255)) ||
	    (snapshot && !json_is_null(snapshot) && !json_is_string(snapshot)) ||
	    (user && !json_is_null(user) && !json_is_string(user)) || !string_map(env) || !labels_ok(labels) ||
	    (bi && !json_is_null(bi) && (!json_is_object(bi) || !json_is_string(df))) ||
	    int_field(b, "cpu", 0, CPU_MAX, &cpu) < 0 || int_field(b, "memory", 0, GIB_MAX, &mem) < 0 ||
	    int_field(b, "disk", 0, GIB_MAX, &disk) < 0 ||
	    int_field(b, "autoStopInterval", 0, INTERVAL_MAX, &astop) < 0 ||
	    int_field(b, "autoArchiveInterval", 0, INTERVAL_MAX, &aarch) < 0 ||
	    int_field(b, "autoDeleteInterval", -1, INTERVAL_MAX, &adel) < 0) {
		sbx__dt_error(r, 400, "%s", bad_spec);
		return;
	}
	if (json_is_string(name)) {
		struct srv_sandbox *dup = sbx__dt_find(srv, json_string_value(name));
		if (dup) {
			sbx__srv_sandbox_put(srv, dup);
			sbx__dt_error(r, 409, "Sandbox with name %s already exists", json_string_value(name));
			return;
		}
	}
	if (injected_failure(r))
		return;
	pthread_mutex_lock(&srv->lock);
	int full = srv->cfg.max_sandboxes && srv->n + srv->creating >= srv->cfg.max_sandboxes;
	if (!full)
		srv->creating++;
	pthread_mutex_unlock(&srv->lock);
	if (full) {
		sbx__dt_error(r, 429, "Sandbox resource limit reached (%u), please try again later.", srv->cfg.max_sandboxes);
		return;
	}
	double t0 = sbx__now_mono();
	sbx_error *e = NULL;
	_cleanup_free_ char *image = NULL;
	char **lv = NULL, **ev = NULL;
	sbx_image *img = NULL;
	struct srv_sandbox *s = NULL;
	int rc = create_image(&image, srv, snapshot, json_string_value(df), bi ? json_object_get(bi, "contextHashes") : NULL, &e);
	if (rc == 0)
		rc = sbx_image_get(&img, srv->rt, image, &e);
	if (rc < 0) {
		int st = rc == -ENOENT || rc == -EBUSY ? 400 : rc == -EINVAL || rc == -EIO ? 400 : sbx__srv_http_status(rc);
		sbx__dt_error(r, st, "%s%s", rc == -EIO || rc == -EINVAL ? "failed to build image (build_failed): " : "",
			      e && e->msg ? e->msg : sbx_error_code_name(rc));
		sbx_error_free(e);
		goto out;
	}
	/* the same labels as an E2B create: both APIs list and reap alike */
	sbx__srv_create_lists(&lv, &ev, srv, image, labels, env);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = sbx_provider_host()->name;
	o.image = image;
	o.cpus = cpu ? (double)cpu : srv->cfg.cpus;
	o.memory_mb = mem ? (unsigned)(mem * 1024) : srv->cfg.memory_mb;
	o.storage_mb = disk ? (unsigned)(disk * 1024) : srv->cfg.storage_mb;
	o.network = srv->cfg.allow_internet ? SBX_NETWORK_INTERNET : SBX_NETWORK_NONE;
	o.env = (const char *const *)ev;
	o.labels = (const char *const *)lv;
	o.ttl_s = astop ? (unsigned)astop * 60 + DT_TTL_BACKSTOP_S : 0;
	o.detach = 1;
	sbx_limits lim = { 0 };
	if (sbx_sandbox_limits(&lim, srv->rt, &o, NULL) < 0)
		lim = (sbx_limits){ .cpus = o.cpus, .memory_mb = o.memory_mb, .storage_mb = o.storage_mb };
	s = sbx__srv_sandbox_new("");
	s->srv = srv;
	rc = sbx_sandbox_create(&s->sb, srv->rt, &o, &e);
	if (rc < 0) {
		sbx__srv_metrics_create(srv, sbx__now_mono() - t0, 0);
		sbx__dt_error(r, sbx__srv_http_status(rc), "create sandbox: %s", e && e->msg ? e->msg : sbx_error_code_name(rc));
		sbx_error_free(e);
		goto out;
	}
	snprintf(s->id, sizeof(s->id), "%s", sbx_sandbox_id(s->sb));
	s->template_id = xstrdup(image);
	s->alias = xstrdup(image);
	sbx__srv_auth_new_token(s->token);
	s->metadata = labels && json_is_object(labels) ? json_copy(labels) : json_object();
	s->env_vars = env && json_is_object(env) ? json_copy(env) : json_object();
	s->started_at = sbx__now_real();
	s->allow_internet = srv->cfg.allow_internet;
	/* Daytona's `user` is who the toolbox runs things as: else the image's */
	if (json_is_string(user) && *json_string_value(user))
		s->user = xstrdup(json_string_value(user));
	else
		s->user = img->config.user && *img->config.user ? xstrdup(img->config.user) : NULL;
	s->workdir = img->config.workdir && *img->config.workdir ? xstrdup(img->config.workdir) : NULL;
	struct dt_ext *x = sbx__dt_ext_new(s);
	if (json_is_string(name)) {
		free(x->name);
		x->name = xstrdup(json_string_value(name));
	}
	if (json_is_string(user)) {
		free(x->user);
		x->user = xstrdup(json_string_value(user));
	}
	x->auto_stop = astop;
	x->auto_archive = aarch;
	x->auto_delete = adel;
	x->cpu = lim.cpus > 0 ? lim.cpus : 1;
	x->memory_gb = lim.memory_mb ? lim.memory_mb / 1024.0 : 1;
	x->disk_gb = lim.storage_mb ? lim.storage_mb / 1024.0 : 3;
	x->build_info = bi && json_is_object(bi) ? json_copy(bi) : NULL;
	s->ext = x;
	s->ext_free = sbx__dt_ext_free;
	s->ext_row = sbx__dt_ext_row;
	s->end_at = s->started_at + (astop ? (double)astop * 60 + (adel > 0 ? adel * 60.0 : 0) : DT_NEVER_S);
	sbx__srv_state_save(srv, s);
	s->refs++;
	sbx__srv_sandbox_insert(srv, s);
	sbx__dt_apply_deadline(s); /* --max-timeout caps the intervals */
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s->id);
	sbx__srv_metrics_create(srv, sbx__now_mono() - t0, 1);
	sbx__srv_reply_json(r, 200, sbx__dt_dto(r, s, NULL, 1));
out:
	pthread_mutex_lock(&srv->lock);
	srv->creating--;
	pthread_mutex_unlock(&srv->lock);
	sbx__srv_sandbox_put(srv, s);
	sbx_image_free(img);
	sbx__strv_free(lv);
	sbx__strv_free(ev);
}

static int by_start(const void *a, const void *b)
{
	const struct srv_sandbox *x = *(struct srv_sandbox *const *)a, *y = *(struct srv_sandbox *const *)b;
	if (x->started_at != y->started_at)
		return x->started_at < y->started_at ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int labels_match(struct srv_sandbox *s, json_t *want)
{
	const char *k;
	json_t *v;
	int ok = 1;
	pthread_mutex_lock(&s->srv->lock);
	json_object_foreach(want, k, v) {
		const char *have = json_string_value(json_object_get(s->metadata, k));
		if (!have || strcmp(have, json_string_value(v)) != 0)
			ok = 0;
	}
	pthread_mutex_unlock(&s->srv->lock);
	return ok;
}

/* states=started,stopped (one value or comma-separated; the first of repeated ones) */
static int state_match(struct srv_sandbox *s, const char *states)
{
	if (!states || !*states)
		return 1;
	pthread_mutex_lock(&s->srv->lock);
	const char *mine = s->paused ? "stopped" : "started";
	pthread_mutex_unlock(&s->srv->lock);
	size_t n = strlen(mine);
	for (const char *p = states; *p; p += strcspn(p, ","), p += *p == ',') {
		if (strncmp(p, mine, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return 1;
	}
	return 0;
}

static void list(struct srv_req *r)
{
	struct server *srv = r->srv;
	const char *lq = sbx__srv_query(r, "labels"), *cursor = sbx__srv_query(r, "cursor");
	const char *limit_s = sbx__srv_query(r, "limit"), *idq = sbx__srv_query(r, "id");
	const char *states = sbx__srv_query(r, "states");
	uint64_t limit = 100;
	if (limit_s && (sbx__parse_u64(&limit, limit_s) < 0 || limit == 0 || limit > LIST_LIMIT_MAX)) {
		sbx__dt_error(r, 400, "limit must be an integer 1..%u", LIST_LIMIT_MAX);
		return;
	}
	json_t *want = NULL;
	if (lq && *lq) {
		want = json_loads(lq, 0, NULL);
		if (!want || !string_map(want)) {
			json_decref(want);
			sbx__dt_error(r, 400, "labels must be a JSON object of strings, e.g. {\"k\":\"v\"}");
			return;
		}
	}
	double after_t = -1;
	char after_id[32] = "";
	if (cursor && *cursor && sscanf(cursor, "%lf_%31[0-9a-zA-Z-]", &after_t, after_id) != 2) {
		json_decref(want);
		sbx__dt_error(r, 400, "invalid cursor");
		return;
	}
	size_t n;
	struct srv_sandbox **v = sbx__srv_sandbox_all(srv, &n);
	qsort(v, n, sizeof(*v), by_start);
	json_t *items = json_array();
	json_t *next = json_null();
	uint64_t count = 0;
	struct srv_sandbox *last = NULL;
	for (size_t i = 0; i < n; i++) {
		struct srv_sandbox *s = v[i];
		if ((want && !labels_match(s, want)) || (idq && *idq && !sbx__str_startswith(s->id, idq)) ||
		    !state_match(s, states))
			continue;
		if (after_t >= 0) {
			int c = s->started_at != after_t ? (s->started_at < after_t ? -1 : 1) : strcmp(s->id, after_id);
			if (c <= 0)
				continue;
		}
		if (count == limit) {
			char *tok = xasprintf("%.17g_%s", last->started_at, last->id);
			json_decref(next);
			next = json_string(tok);
			free(tok);
			break;
		}
		json_array_append_new(items, sbx__dt_dto(r, s, NULL, 0));
		last = s;
		count++;
	}
	for (size_t i = 0; i < n; i++)
		sbx__srv_sandbox_put(srv, v[i]);
	free(v);
	json_decref(want);
	sbx__srv_reply_json(r, 200, json_pack("{s:o,s:o}", "items", items, "nextCursor", next));
}

/* stop = freeze (state stopped), start = thaw; the caller holds an op. */
static int set_stopped(struct srv_sandbox *s, int stop, sbx_error **e)
{
	pthread_mutex_lock(&s->srv->lock);
	int busy = s->transition, same = s->paused == stop;
	if (!busy && !same)
		s->transition = 1;
	pthread_mutex_unlock(&s->srv->lock);
	if (busy)
		return sbx_error_set(e, -EBUSY, "sandbox %s is being started or stopped", s->id);
	if (same)
		return 0;
	if (stop) /* no TTL while frozen: sent while init still answers */
		sbx_sandbox_set_timeout(s->sb, 0, NULL);
	int rc = stop ? sbx_sandbox_pause(s->sb, e) : sbx_sandbox_resume(s->sb, e);
	if (rc == -EALREADY)
		rc = 0;
	pthread_mutex_lock(&s->srv->lock);
	if (rc == 0)
		s->paused = stop;
	s->transition = 0;
	pthread_mutex_unlock(&s->srv->lock);
	return rc;
}

/* POST /sandbox/{id}/{op}[/{arg}] */
static void post_op(struct srv_req *r, struct srv_sandbox *s, const char *op, const char *arg)
{
	struct dt_ext *x = sbx__dt_ext(s);
	long long *field = strcmp(op, "autostop") == 0 ? &x->auto_stop : strcmp(op, "autodelete") == 0 ? &x->auto_delete
					 : strcmp(op, "autoarchive") == 0 ? &x->auto_archive : NULL;
	if (field || strcmp(op, "autopause") == 0 || strcmp(op, "ttl") == 0) {
		char *end = NULL;
		long long min = arg ? strtoll(arg, &end, 10) : -2;
		if (!arg || !*arg || *end || min < (field == &x->auto_delete ? -1 : 0) || min > INTERVAL_MAX) {
			sbx__dt_error(r, 400, "%s needs an interval in minutes in the path, e.g. /%s/30", op, op);
			return;
		}
		pthread_mutex_lock(&x->lk);
		if (field)
			*field = min;
		else if (strcmp(op, "ttl") == 0 && min > 0) /* a hard lifetime: stop counting activity */
			x->auto_stop = min, x->auto_delete = 0;
		pthread_mutex_unlock(&x->lk);
		sbx__dt_apply_deadline(s);
		sbx__srv_reply_empty(r, 200);
		return;
	}
	if (arg) {
		sbx__dt_error(r, 404, "Cannot POST %s (not implemented by sbx serve)", r->url);
		return;
	}
	if (strcmp(op, "last-activity") == 0) {
		pthread_mutex_lock(&x->lk);
		x->last_activity = sbx__now_real();
		pthread_mutex_unlock(&x->lk);
		sbx__dt_apply_deadline(s);
		sbx__srv_reply_empty(r, 201);
	} else if (strcmp(op, "start") == 0 || strcmp(op, "stop") == 0) {
		sbx_error *e = NULL;
		int rc = sbx__srv_op_begin(s, &e);
		if (rc == 0) {
			rc = set_stopped(s, strcmp(op, "stop") == 0, &e);
			sbx__srv_op_end(s);
		}
		if (rc < 0) {
			sbx__dt_error(r, rc == -EBUSY ? 409 : sbx__srv_http_status(rc), "%s: %s", op,
				      e && e->msg ? e->msg : sbx_error_code_name(rc));
			sbx_error_free(e);
			return;
		}
		pthread_mutex_lock(&x->lk);
		x->last_activity = sbx__now_real();
		pthread_mutex_unlock(&x->lk);
		sbx__dt_apply_deadline(s);
		sbx__srv_reply_json(r, 200, sbx__dt_dto(r, s, NULL, 1));
	} else {
		sbx__dt_error(r, 404, "Cannot POST %s (not implemented by sbx serve)", r->url);
	}
}

static void put_labels(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *b = sbx__dt_json_body(r);
	if (!b)
		return;
	json_t *l = json_object_get(b, "labels");
	if (!l || !json_is_object(l) || !labels_ok(l)) {
		sbx__dt_error(r, 400, "labels must be an object of strings (keys 1..255 bytes without '=', values up "
				      "to 4096, no control characters)");
		json_decref(b);
		return;
	}
	pthread_mutex_lock(&r->srv->lock);
	json_t *old = s->metadata;
	s->metadata = json_copy(l);
	pthread_mutex_unlock(&r->srv->lock);
	json_decref(old);
	sbx__srv_state_save(r->srv, s);
	sbx__srv_reply_json(r, 200, json_pack("{s:O}", "labels", l));
	json_decref(b);
}

/* seg[0] = "sandbox" */
void sbx__dt_sandbox(struct srv_req *r, char **seg, size_t n)
{
	const char *m = r->method;
	if (n == 1) {
		if (strcmp(m, "POST") == 0) {
			json_t *b = sbx__dt_json_body(r);
			if (b)
				create(r, b);
			json_decref(b);
		} else if (strcmp(m, "GET") == 0) {
			list(r);
		} else {
			sbx__dt_error(r, 405, "method %s not allowed on %s", m, r->url);
		}
		return;
	}
	struct srv_sandbox *s = sbx__dt_find(r->srv, seg[1]);
	if (!s) {
		sbx__dt_error(r, 404, "Sandbox with ID or name %s not found", seg[1]);
		return;
	}
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s->id);
	if (n == 2 && strcmp(m, "GET") == 0) {
		sbx__srv_reply_json(r, 200, sbx__dt_dto(r, s, NULL, 1));
	} else if (n == 2 && strcmp(m, "DELETE") == 0) {
		json_t *o = sbx__dt_dto(r, s, "destroyed", 1);
		if (sbx__srv_sandbox_kill(r->srv, s, "deleted") == 0) {
			sbx__srv_reply_json(r, 200, o);
		} else {
			json_decref(o);
			sbx__dt_error(r, 404, "Sandbox with ID or name %s not found", seg[1]);
		}
	} else if (n == 3 && strcmp(m, "PUT") == 0 && strcmp(seg[2], "labels") == 0) {
		put_labels(r, s);
	} else if (n == 3 && strcmp(m, "GET") == 0 && strcmp(seg[2], "toolbox-proxy-url") == 0) {
		_cleanup_free_ char *u = sbx__dt_proxy_url(r);
		sbx__srv_reply_json(r, 200, json_pack("{s:s}", "url", u));
	} else if ((n == 3 || n == 4) && strcmp(m, "POST") == 0) {
		post_op(r, s, seg[2], n == 4 ? seg[3] : NULL);
	} else {
		sbx__dt_error(r, 404, "Cannot %s %s (not implemented by sbx serve)", m, r->url);
	}
	sbx__srv_sandbox_put(r->srv, s);
}
