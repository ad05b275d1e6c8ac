/* SPDX-License-Identifier: MIT */
/*
 * Daytona snapshots in `sbx serve` (docs/server.md, "Daytona API"): a named
 * image of the server's store. `POST /api/snapshots` takes an `imageName`
 * (resolved in the store) or `buildInfo {dockerfileContent, contextHashes}`
 * (the Dockerfile built by the template builder with the context tars from
 * object storage unpacked as its context: snapshot_build.c), answers
 * `pending` and builds in a thread: `building`, then `active`, or
 * `build_failed` / `error` with `errorReason`. Get by id or name, list in
 * pages ({items, total, page, totalPages}), delete. A sandbox created with
 * `snapshot: NAME` starts from the snapshot's image. The records persist in
 * STATE/server/daytona-snapshots.json; a build cut short by a restart comes
 * back as `error`.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona.h"

#define NAME_MAX_LEN 255
#define PAGE_LIMIT_MAX 200u
#define SNAPSHOTS_MAX 4096u
#define LOG_MAX (256u << 10)

struct dt_snap {
	char id[37];
	char *name;
	char *image_name;        /* as requested, or NULL */
	char *image;             /* the store image once active */
	const char *state;       /* a literal */
	char *error_reason;
	json_t *build_info;      /* {dockerfileContent, contextHashes} or NULL */
	double cpu, mem, disk;
	double created, updated;
	sbx_buf log;             /* the build's output (the first LOG_MAX bytes), not persisted */
	pthread_t thread;
	int started;             /* thread to join */
	struct server *srv;
	struct dt_snap *next;
};

static const char *const states[] = { "pending", "building", "active", "error", "build_failed", NULL };

static const char *state_literal(const char *s)
{
	for (size_t i = 0; s && states[i]; i++)
		if (strcmp(states[i], s) == 0)
			return states[i];
	return "error";
}

static void snap_free(struct dt_snap *s)
{
	free(s->name);
	free(s->image_name);
	free(s->image);
	free(s->error_reason);
	json_decref(s->build_info);
	sbx__buf_free(&s->log);
	free(s);
}

static json_t *ts(double t)
{
	char *s = sbx__srv_rfc3339(t);
	json_t *j = json_string(s);
	free(s);
	return j;
}

/* The SnapshotDto (called under st->lk). */
static json_t *dto(const struct dt_snap *s)
{
	json_t *o = json_pack("{s:s,s:s,s:b,s:s,s:s,s:n,s:n,s:f,s:i,s:f,s:f,s:n,s:n,s:s,s:[]}", "id", s->id,
			      "organizationId", DT_ORG_ID, "general", 0, "name", s->name, "state", s->state, "size",
			      "entrypoint", "cpu", s->cpu, "gpu", 0, "mem", s->mem, "disk", s->disk, "lastUsedAt",
			      "sourceSandboxId", "sandboxClass", "container", "regionIds");
	json_object_set_new(o, "imageName", s->image_name ? json_string(s->image_name) : json_null());
	json_object_set_new(o, "errorReason", s->error_reason ? json_string(s->error_reason) : json_null());
	json_object_set_new(o, "createdAt", ts(s->created));
	json_object_set_new(o, "updatedAt", ts(s->updated));
	if (s->image)
		json_object_set_new(o, "ref", json_string(s->image));
	if (s->build_info) {
		json_t *bi = json_deep_copy(s->build_info);
		json_object_set_new(bi, "createdAt", ts(s->created));
		json_object_set_new(bi, "updatedAt", ts(s->updated));
		json_object_set_new(bi, "snapshotRef", json_string(s->image ? s->image : ""));
		json_object_set_new(o, "buildInfo", bi);
	}
	return o;
}

static char *db_path(struct server *srv)
{
	return xasprintf("%s/server/daytona-snapshots.json", srv->cfg.state_dir);
}

/* Rewrites the file (under st->lk). */
static void save(struct server *srv, struct dt_state *st)
{
	json_t *a = json_array();
	for (struct dt_snap *s = st->snaps; s; s = s->next) {
		json_t *o = dto(s);
		if (s->image)
			json_object_set_new(o, "image", json_string(s->image));
		json_array_append_new(a, o);
	}
	_cleanup_free_ char *text = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	_cleanup_free_ char *p = db_path(srv);
	sbx_error *e = NULL;
	if (text && sbx__write_file_atomic(p, text, strlen(text), 0600, &e) < 0)
		fprintf(stderr, "sbx serve: daytona snapshots: %s\n", e->msg);
	sbx_error_free(e);
}

static double num(json_t *o, const char *k, double dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : dflt;
}

/* Reads the file once (under st->lk). */
static void load(struct server *srv, struct dt_state *st)
{
	if (st->loaded)
		return;
	st->loaded = 1;
	_cleanup_free_ char *p = db_path(srv);
	json_t *a = json_load_file(p, 0, NULL);
	size_t i;
	json_t *o;
	int changed = 0;
	struct dt_snap **tail = &st->snaps;
	json_array_foreach(a, i, o) {
		const char *id = json_string_value(json_object_get(o, "id"));
		const char *name = json_string_value(json_object_get(o, "name"));
		if (!id || strlen(id) != 36 || !name)
			continue;
		struct dt_snap *s = xcalloc(1, sizeof(*s));
		sbx__buf_init(&s->log, LOG_MAX);
		memcpy(s->id, id, 37);
		s->srv = srv;
		s->name = xstrdup(name);
		const char *v = json_string_value(json_object_get(o, "imageName"));
		s->image_name = v ? xstrdup(v) : NULL;
		v = json_string_value(json_object_get(o, "image"));
		s->image = v ? xstrdup(v) : NULL;
		s->state = state_literal(json_string_value(json_object_get(o, "state")));
		v = json_string_value(json_object_get(o, "errorReason"));
		s->error_reason = v ? xstrdup(v) : NULL;
		json_t *bi = json_object_get(o, "buildInfo");
		if (json_is_object(bi))
			s->build_info = json_pack("{s:O*,s:O*}", "dockerfileContent", json_object_get(bi, "dockerfileContent"),
						  "contextHashes", json_object_get(bi, "contextHashes"));
		s->cpu = num(o, "cpu", 1), s->mem = num(o, "mem", 1), s->disk = num(o, "disk", 3);
		s->created = s->updated = sbx__now_real();
		if (strcmp(s->state, "pending") == 0 || strcmp(s->state, "building") == 0 ||
		    (strcmp(s->state, "active") == 0 && !s->image)) {
			s->state = "error";
			free(s->error_reason);
			s->error_reason = xstrdup("the server restarted during the build; delete the snapshot and create it again");
			changed = 1;
		}
		*tail = s;
		tail = &s->next;
	}
	json_decref(a);
	if (changed)
		save(srv, st);
}

/* By id or name (under st->lk). */
static struct dt_snap *find(struct dt_state *st, const char *id_or_name)
{
	for (struct dt_snap *s = st->snaps; s; s = s->next)
		if (strcmp(s->id, id_or_name) == 0 || strcmp(s->name, id_or_name) == 0)
			return s;
	return NULL;
}

int sbx__dt_snapshot_image(struct server *srv, const char *name, char **image_out, sbx_error **e)
{
	struct dt_state *st = sbx__dt_state(srv);
	int rc;
	pthread_mutex_lock(&st->lk);
	load(srv, st);
	struct dt_snap *s = find(st, name);
	if (!s)
		rc = -ENOENT;
	else if (strcmp(s->state, "active") == 0 && s->image)
		*image_out = xstrdup(s->image), rc = 0;
	else
		rc = sbx_error_set(e, -EBUSY, "Snapshot %s is %s%s%s", s->name, s->state,
				   s->error_reason ? ": " : "", s->error_reason ? s->error_reason : "");
	pthread_mutex_unlock(&st->lk);
	return rc;
}

static void set_state(struct dt_snap *s, const char *state, const char *image, const char *reason)
{
	struct dt_state *st = s->srv->daytona;
	pthread_mutex_lock(&st->lk);
	s->state = state;
	s->updated = sbx__now_real();
	if (image) {
		free(s->image);
		s->image = xstrdup(image);
	}
	if (reason) {
		free(s->error_reason);
		s->error_reason = xstrdup(reason);
	}
	save(s->srv, st);
	pthread_mutex_unlock(&st->lk);
}

static void on_build_output(int fd, const char *data, size_t len, void *payload)
{
	(void)fd;
	struct dt_snap *s = payload;
	struct dt_state *st = s->srv->daytona;
	pthread_mutex_lock(&st->lk);
	sbx__buf_append_trunc(&s->log, data, len);
	pthread_mutex_unlock(&st->lk);
}

static void *build_main(void *arg)
{
	struct dt_snap *s = arg;
	struct server *srv = s->srv;
	set_state(s, "building", NULL, NULL);
	sbx_error *e = NULL;
	_cleanup_free_ char *image = NULL;
	int rc;
	if (s->image_name) {
		rc = sbx__srv_template_resolve(srv, s->image_name, &image, &e);
		set_state(s, rc == 0 ? "active" : "error", image,
			  rc == 0 ? NULL : e && e->msg ? e->msg : "image not found");
	} else {
		json_t *bi = s->build_info; /* immutable once created */
		rc = sbx__dt_build(srv, json_string_value(json_object_get(bi, "dockerfileContent")),
				   json_object_get(bi, "contextHashes"), "snapshot", &image, on_build_output, s, &e);
		set_state(s, rc == 0 ? "active" : "build_failed", image,
			  rc == 0 ? NULL : e && e->msg ? e->msg : sbx_error_code_name(rc));
	}
	sbx_error_free(e);
	return NULL;
}

static int name_ok(const char *n)
{
	size_t len = strlen(n);
	return len > 0 && len <= NAME_MAX_LEN &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == len;
}

static int hashes_ok(json_t *h)
{
	size_t i;
	json_t *v;
	if (!h || json_is_null(h))
		return 1;
	if (!json_is_array(h) || json_array_size(h) > 64)
		return 0;
	json_array_foreach(h, i, v) {
		const char *x = json_string_value(v);
		if (!x || strlen(x) < 16 || strlen(x) > 128 || strspn(x, "0123456789abcdef") != strlen(x))
			return 0;
	}
	return 1;
}

/* The next snapshot creates answered with Daytona's quota error (tests only). */
static atomic_long fail_left = -1;

static int injected_quota(void)
{
	long left = atomic_load(&fail_left);
	if (left < 0) {
		uint64_t n = 0;
		const char *v = sbx__env("SBX_SERVE_DAYTONA_FAIL_SNAPSHOTS");
		if (!v || sbx__parse_u64(&n, v) < 0 || n > 1000000)
			n = 0;
		long expected = -1;
		atomic_compare_exchange_strong(&fail_left, &expected, (long)n);
	}
	for (left = atomic_load(&fail_left); left > 0;)
		if (atomic_compare_exchange_weak(&fail_left, &left, left - 1))
			return 1;
	return 0;
}

static void create(struct srv_req *r, json_t *b)
{
	struct server *srv = r->srv;
	const char *name = json_string_value(json_object_get(b, "name"));
	json_t *img = json_object_get(b, "imageName"), *bi = json_object_get(b, "buildInfo");
	json_t *df = json_object_get(bi, "dockerfileContent"), *hashes = json_object_get(bi, "contextHashes");
	if (!name || !name_ok(name)) {
		sbx__dt_error(r, 400, "name must be 1..%d bytes of letters, digits and . _ : -", NAME_MAX_LEN);
		return;
	}
	if ((img && !json_is_null(img) && (!json_is_string(img) || json_string_length(img) == 0)) ||
	    (bi && !json_is_null(bi) && (!json_is_object(bi) || !json_is_string(df) || !hashes_ok(hashes)))) {
		sbx__dt_error(r, 400, "imageName must be a non-empty string; buildInfo an object with dockerfileContent "
				      "(a string) and contextHashes (up to 64 lowercase hex hashes)");
		return;
	}
	if (!json_is_string(img) == !json_is_object(bi)) {
		sbx__dt_error(r, 400, "give exactly one of imageName and buildInfo.dockerfileContent");
		return;
	}
	long long vals[3] = { 1, 1, 3 };
	const char *keys[3] = { "cpu", "memory", "disk" };
	for (size_t i = 0; i < 3; i++) {
		json_t *v = json_object_get(b, keys[i]);
		if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0 ||
					      json_integer_value(v) > 1 << 20)) {
			sbx__dt_error(r, 400, "%s must be a non-negative integer (cores or GiB)", keys[i]);
			return;
		}
		if (json_is_integer(v) && json_integer_value(v) > 0)
			vals[i] = json_integer_value(v);
	}
	if (injected_quota()) {
		sbx__dt_error(r, 400, "Snapshot quota exceeded. Maximum allowed: 30");
		return;
	}
	struct dt_state *st = sbx__dt_state(srv);
	pthread_mutex_lock(&st->lk);
	load(srv, st);
	size_t count = 0;
	for (struct dt_snap *x = st->snaps; x; x = x->next)
		count++;
	if (find(st, name)) {
		pthread_mutex_unlock(&st->lk);
		sbx__dt_error(r, 409, "Snapshot with name %s already exists", name);
		return;
	}
	if (count >= SNAPSHOTS_MAX) {
		pthread_mutex_unlock(&st->lk);
		sbx__dt_error(r, 403, "Snapshot quota exceeded. Maximum allowed: %u", SNAPSHOTS_MAX);
		return;
	}
	struct dt_snap *s = xcalloc(1, sizeof(*s));
	char hex[65];
	sbx__srv_auth_new_token(hex);
	snprintf(s->id, sizeof(s->id), "%.8s-%.4s-4%.3s-a%.3s-%.12s", hex, hex + 8, hex + 12, hex + 15, hex + 18);
	s->srv = srv;
	s->name = xstrdup(name);
	s->image_name = json_is_string(img) ? xstrdup(json_string_value(img)) : NULL;
	if (json_is_object(bi))
		s->build_info = json_pack("{s:O,s:o}", "dockerfileContent", df, "contextHashes",
					  json_is_array(hashes) ? json_deep_copy(hashes) : json_array());
	s->state = "pending";
	s->cpu = (double)vals[0], s->mem = (double)vals[1], s->disk = (double)vals[2];
	s->created = s->updated = sbx__now_real();
	sbx__buf_init(&s->log, LOG_MAX);
	s->next = st->snaps;
	st->snaps = s;
	json_t *answer = dto(s);
	int te = pthread_create(&s->thread, NULL, build_main, s);
	if (te == 0) {
		s->started = 1;
	} else {
		s->state = "error";
		s->error_reason = xstrdup("could not start the build thread");
	}
	save(srv, st);
	pthread_mutex_unlock(&st->lk);
	sbx__srv_reply_json(r, 200, answer);
}

static void list(struct srv_req *r)
{
	const char *ps = sbx__srv_query(r, "page"), *ls = sbx__srv_query(r, "limit");
	const char *nq = sbx__srv_query(r, "name");
	uint64_t page = 1, limit = 100;
	if ((ps && (sbx__parse_u64(&page, ps) < 0 || page == 0 || page > 1000000)) ||
	    (ls && (sbx__parse_u64(&limit, ls) < 0 || limit == 0 || limit > PAGE_LIMIT_MAX))) {
		sbx__dt_error(r, 400, "page must be an integer >= 1 and limit 1..%u", PAGE_LIMIT_MAX);
		return;
	}
	struct dt_state *st = sbx__dt_state(r->srv);
	json_t *items = json_array();
	uint64_t total = 0;
	pthread_mutex_lock(&st->lk);
	load(r->srv, st);
	/* newest first, as Daytona lists them */
	for (struct dt_snap *s = st->snaps; s; s = s->next) {
		if (nq && *nq && !strstr(s->name, nq))
			continue;
		if (total >= (page - 1) * limit && total < page * limit)
			json_array_append_new(items, dto(s));
		total++;
	}
	pthread_mutex_unlock(&st->lk);
	sbx__srv_reply_json(r, 200, json_pack("{s:o,s:I,s:I,s:I}", "items", items, "total", (json_int_t)total, "page",
					       (json_int_t)page, "totalPages", (json_int_t)((total + limit - 1) / limit)));
}

static void remove_snap(struct srv_req *r, const char *id)
{
	struct dt_state *st = sbx__dt_state(r->srv);
	pthread_mutex_lock(&st->lk);
	load(r->srv, st);
	struct dt_snap **pp = &st->snaps;
	while (*pp && strcmp((*pp)->id, id) != 0 && strcmp((*pp)->name, id) != 0)
		pp = &(*pp)->next;
	struct dt_snap *s = *pp;
	if (s && (strcmp(s->state, "pending") == 0 || strcmp(s->state, "building") == 0)) {
		pthread_mutex_unlock(&st->lk);
		sbx__dt_error(r, 409, "Snapshot %s is %s; delete it once the build ends", id, s->state);
		return;
	}
	if (s) {
		*pp = s->next;
		save(r->srv, st);
	}
	pthread_mutex_unlock(&st->lk);
	if (!s) {
		sbx__dt_error(r, 404, "Snapshot %s not found", id);
		return;
	}
	/* the image stays in the store: a build of the same recipe finds it cached */
	if (s->started)
		pthread_join(s->thread, NULL);
	snap_free(s);
	sbx__srv_reply_empty(r, 200);
}

/* The build's output so far, then the end (follow=true is answered the
 * same way: the SDK reads until the stream ends and keeps polling the
 * state); or the URL of that. */
static void build_logs(struct srv_req *r, const char *id, int url)
{
	struct dt_state *st = sbx__dt_state(r->srv);
	pthread_mutex_lock(&st->lk);
	load(r->srv, st);
	struct dt_snap *s = find(st, id);
	char *text = s ? xstrndup(s->log.data ? s->log.data : "", s->log.len) : NULL;
	_cleanup_free_ char *sid = s ? xstrdup(s->id) : NULL;
	pthread_mutex_unlock(&st->lk);
	if (!s) {
		sbx__dt_error(r, 404, "Snapshot with ID or name %s not found", id);
		return;
	}
	if (url) {
		free(text);
		_cleanup_free_ char *base = sbx__dt_proxy_url(r); /* http://<Host>/toolbox */
		base[strlen(base) - strlen("/toolbox")] = '\0';
		_cleanup_free_ char *u = xasprintf("%s/api/snapshots/%s/build-logs", base, sid);
		sbx__srv_reply_json(r, 200, json_pack("{s:s}", "url", u));
		return;
	}
	sbx__srv_reply_bytes(r, 200, "text/plain; charset=utf-8", text, strlen(text));
}

void sbx__dt_snapshots(struct srv_req *r, char **seg, size_t n)
{
	const char *m = r->method;
	if (n == 1 && strcmp(m, "POST") == 0) {
		json_t *b = sbx__dt_json_body(r);
		if (b)
			create(r, b);
		json_decref(b);
	} else if (n == 1 && strcmp(m, "GET") == 0) {
		list(r);
	} else if (n == 2 && strcmp(m, "GET") == 0) {
		struct dt_state *st = sbx__dt_state(r->srv);
		pthread_mutex_lock(&st->lk);
		load(r->srv, st);
		struct dt_snap *s = find(st, seg[1]);
		json_t *o = s ? dto(s) : NULL;
		pthread_mutex_unlock(&st->lk);
		if (o)
			sbx__srv_reply_json(r, 200, o);
		else
			sbx__dt_error(r, 404, "Snapshot with ID or name %s not found", seg[1]);
	} else if (n == 2 && strcmp(m, "DELETE") == 0) {
		remove_snap(r, seg[1]);
	} else if (n == 3 && strcmp(m, "GET") == 0 &&
		   (strcmp(seg[2], "build-logs") == 0 || strcmp(seg[2], "build-logs-url") == 0)) {
		build_logs(r, seg[1], strcmp(seg[2], "build-logs-url") == 0);
	} else {
		sbx__dt_error(r, 404, "Cannot %s %s (not implemented by sbx serve)", m, r->url);
	}
}

void sbx__dt_free(struct server *srv)
{
	struct dt_state *st = srv->daytona;
	if (!st)
		return;
	for (struct dt_snap *s = st->snaps; s; s = s->next)
		if (s->started)
			pthread_join(s->thread, NULL);
	while (st->snaps) {
		struct dt_snap *s = st->snaps;
		st->snaps = s->next;
		snap_free(s);
	}
	explicit_bzero(st->creds, sizeof(st->creds));
	pthread_mutex_destroy(&st->lk);
	free(st);
	srv->daytona = NULL;
}
