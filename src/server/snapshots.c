/* SPDX-License-Identifier: MIT */
/*
 * E2B snapshots on the local provider's named snapshots
 * (sbx_sandbox_snapshot: the sandbox's writable layer frozen copy-on-write;
 * processes and memory are not kept). POST /sandboxes/{id}/snapshots takes
 * one (a paused sandbox too) and answers {snapshotID, names}; the snapshot
 * is then a template: Sandbox.create(snapshotID) starts from it (over the
 * image the sandbox ran), GET /templates and GET /snapshots list it, and
 * DELETE /templates/{id} (the SDK's deleteSnapshot) removes it. Sandboxes
 * made from a snapshot do not depend on it (each starts from its own
 * copy-on-write copy), so deleting one in use is safe.
 *
 * The E2B name (or a generated snap-<hex>) maps to a provider name
 * e2b-<random hex>, kept in server.db's `snapshots` table: the provider's
 * snapshots share one scratch file system across state dirs, so a name a
 * client picks never collides with another server's. Snapshots outlive the
 * sandbox and the server (also --destroy-on-exit) until deleted.
 */
#include <errno.h>
#include <microhttpd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "server_int.h"

#define SNAP_NAME_MAX 64
#define SNAP_PAGE_MAX 100

/* Serializes snapshot creates and deletes (name check, provider call, row). */
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;

/* 1..64 of A-Z a-z 0-9 . _ -, starting with a letter or digit. */
static int name_ok(const char *n)
{
	size_t len = strlen(n);
	if (len < 1 || len > SNAP_NAME_MAX)
		return 0;
	if (!((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z') || (n[0] >= '0' && n[0] <= '9')))
		return 0;
	return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

/* The row of snapshot id (owned JSON object) or NULL. */
static json_t *row_get(struct server *srv, const char *id)
{
	json_t *o = NULL;
	pthread_mutex_lock(&srv->db_lock);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(srv->db, "SELECT data FROM snapshots WHERE id = ?1", -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			o = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&srv->db_lock);
	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* Every row, newest first (a JSON array of objects). */
static json_t *rows_all(struct server *srv)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&srv->db_lock);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(srv->db, "SELECT data FROM snapshots ORDER BY rowid DESC", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			json_t *o = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
			if (json_is_object(o))
				json_array_append_new(arr, o);
			else
				json_decref(o);
		}
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&srv->db_lock);
	return arr;
}

static int row_exec(struct server *srv, const char *sql, const char *a, const char *b)
{
	int r = 0;
	pthread_mutex_lock(&srv->db_lock);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(srv->db, sql, -1, &st, NULL) != SQLITE_OK) {
		r = -EIO;
	} else {
		sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
		if (b)
			sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = -EIO;
	}
	if (r < 0)
		SBX_LOGE("serve: state db (snapshots): %s", sqlite3_errmsg(srv->db));
	sqlite3_finalize(st);
	pthread_mutex_unlock(&srv->db_lock);
	return r;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

int sbx__srv_snapshot_resolve(struct server *srv, const char *template_id, char **image, char **base)
{
	if (!name_ok(template_id))
		return 0;
	json_t *o = row_get(srv, template_id);
	const char *prov = jstr(o, "provider"), *b = jstr(o, "base");
	int found = prov && b;
	if (found) {
		*image = xasprintf("snapshot:%s", prov);
		*base = xstrdup(b);
	}
	json_decref(o);
	return found;
}

/* The request body as an object ({} when empty); NULL after replying 400. */
static json_t *body_object(struct srv_req *r)
{
	if (r->body.len == 0)
		return json_object();
	json_error_t je;
	json_t *j = json_loadb(r->body.data, r->body.len, 0, &je);
	if (!json_is_object(j)) {
		sbx__srv_reply_error(r, 400, "request body is not a JSON object: %s", j ? "wrong type" : je.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

int sbx__srv_sandbox_hold(struct srv_sandbox *s)
{
	struct server *srv = s->srv;
	pthread_mutex_lock(&srv->lock);
	/* a pause or resume under way ends within a freeze: wait for it */
	for (int i = 0; s->transition && i < 3000; i++) {
		pthread_mutex_unlock(&srv->lock);
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
		pthread_mutex_lock(&srv->lock);
	}
	int busy = s->transition;
	if (!busy)
		s->transition = 1;
	pthread_mutex_unlock(&srv->lock);
	return busy ? -EBUSY : 0;
}

void sbx__srv_sandbox_unhold(struct srv_sandbox *s)
{
	pthread_mutex_lock(&s->srv->lock);
	s->transition = 0;
	pthread_mutex_unlock(&s->srv->lock);
}

/* Takes the snapshot under snap_lock: 0 with the row written, or replies. */
static int take(struct srv_req *r, struct srv_sandbox *s, const char *id)
{
	struct server *srv = r->srv;
	json_t *old = row_get(srv, id);
	sbx_image *img = NULL;
	int taken = old || strcmp(id, "base") == 0 || sbx_image_get(&img, srv->rt, id, NULL) == 0;
	json_decref(old);
	sbx_image_free(img);
	if (taken) {
		sbx__srv_reply_error(r, 409, "name '%s' is taken by a snapshot or template already", id);
		return -EEXIST;
	}
	char hex[21];
	sbx__random_hex(hex, 20);
	_cleanup_free_ char *prov = xasprintf("e2b-%s", hex);
	sbx_error *e = NULL;
	char *made = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 0, "snapshot", -ENOENT, e);
		return rc;
	}
	if ((rc = sbx__srv_sandbox_hold(s)) == 0) {
		rc = sbx_sandbox_snapshot(&made, s->sb, prov, &e);
		sbx__srv_sandbox_unhold(s);
	}
	sbx__srv_op_end(s);
	free(made);
	if (rc == -EBUSY) {
		sbx__srv_reply_error(r, 409, "sandbox %s is being paused or resumed", s->id);
		return rc;
	}
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 0, "snapshot", rc, e);
		return rc;
	}
	_cleanup_free_ char *ts = sbx__srv_rfc3339(sbx__now_real());
	json_t *row = json_pack("{s:s,s:s,s:s,s:s,s:s?,s:s}", "snapshotID", id, "provider", prov, "sandboxID", s->id,
				"templateID", s->template_id, "base", s->alias, "createdAt", ts);
	char *data = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	rc = row_exec(srv, "INSERT INTO snapshots (id, data) VALUES (?1, ?2)", id, data);
	free(data);
	if (rc < 0) {
		sbx_snapshot_remove(srv->rt, sbx_provider_host()->name, prov, NULL);
		sbx__srv_reply_error(r, 500, "snapshot %s: saving it in server.db failed", id);
	}
	return rc;
}

void sbx__srv_snapshot_create(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *b = body_object(r);
	if (!b)
		return;
	json_t *jn = json_object_get(b, "name");
	if (jn && !json_is_null(jn) && (!json_is_string(jn) || !name_ok(json_string_value(jn)))) {
		sbx__srv_reply_error(r, 400, "invalid snapshot request: name must be a string of 1..%d characters "
					"A-Z a-z 0-9 . _ - starting with a letter or digit", SNAP_NAME_MAX);
		json_decref(b);
		return;
	}
	char gen[32];
	const char *id = json_string_value(jn);
	if (!id) {
		char hex[17];
		sbx__random_hex(hex, 16);
		snprintf(gen, sizeof(gen), "snap-%s", hex);
		id = gen;
	}
	if (!s->alias) {
		sbx__srv_reply_error(r, 400, "sandbox %s: its image is unknown (created by an older server), so a "
					"snapshot of it could not be started", s->id);
		json_decref(b);
		return;
	}
	pthread_mutex_lock(&snap_lock);
	int rc = take(r, s, id);
	pthread_mutex_unlock(&snap_lock);
	if (rc == 0) {
		SBX_LOGI("serve: sandbox %s snapshotted as %s", s->id, id);
		sbx__srv_reply_json(r, 201, json_pack("{s:s,s:[s]}", "snapshotID", id, "names", id));
	}
	json_decref(b);
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
	sbx__srv_queue(r, 200, resp, "application/json");
}

void sbx__srv_snapshots_list(struct srv_req *r)
{
	const char *sid = sbx__srv_query(r, "sandboxID"), *name = sbx__srv_query(r, "name");
	const char *limit_s = sbx__srv_query(r, "limit"), *next = sbx__srv_query(r, "nextToken");
	uint64_t limit = SNAP_PAGE_MAX, skip = 0;
	if (limit_s && (sbx__parse_u64(&limit, limit_s) < 0 || limit == 0 || limit > SNAP_PAGE_MAX)) {
		sbx__srv_reply_error(r, 400, "limit must be 1..%d", SNAP_PAGE_MAX);
		return;
	}
	if (next && *next && sbx__parse_u64(&skip, next) < 0) {
		sbx__srv_reply_error(r, 400, "invalid nextToken (pass back the X-Next-Token of the previous page)");
		return;
	}
	json_t *rows = rows_all(r->srv), *arr = json_array(), *o;
	size_t i;
	uint64_t seen = 0;
	_cleanup_free_ char *token = NULL;
	json_array_foreach(rows, i, o) {
		const char *id = jstr(o, "snapshotID");
		if (!id || (sid && *sid && strcmp(sid, jstr(o, "sandboxID") ?: "") != 0) ||
		    (name && *name && strcmp(name, id) != 0))
			continue;
		if (seen++ < skip)
			continue;
		if (json_array_size(arr) == limit) {
			token = xasprintf("%llu", (unsigned long long)(skip + limit));
			break;
		}
		json_array_append_new(arr, json_pack("{s:s,s:[s]}", "snapshotID", id, "names", id));
	}
	json_decref(rows);
	reply_page(r, arr, token);
}

int sbx__srv_snapshot_delete(struct srv_req *r, const char *id)
{
	struct server *srv = r->srv;
	if (!name_ok(id))
		return 0;
	pthread_mutex_lock(&snap_lock);
	json_t *o = row_get(srv, id);
	const char *prov = jstr(o, "provider");
	if (!prov) {
		pthread_mutex_unlock(&snap_lock);
		json_decref(o);
		return 0;
	}
	sbx_error *e = NULL;
	/* Sandboxes started from it run on their own copies: they keep working. */
	int rc = sbx_snapshot_remove(srv->rt, sbx_provider_host()->name, prov, &e);
	if (rc == 0 || rc == -ENOENT)
		row_exec(srv, "DELETE FROM snapshots WHERE id = ?1", id, NULL);
	pthread_mutex_unlock(&snap_lock);
	json_decref(o);
	if (rc < 0 && rc != -ENOENT) {
		sbx__srv_reply_sbx_error(r, 0, "delete snapshot", rc, e);
		return 1;
	}
	sbx_error_free(e);
	SBX_LOGI("serve: snapshot %s deleted", id);
	sbx__srv_reply_empty(r, 204);
	return 1;
}

void sbx__srv_snapshot_templates(struct server *srv, json_t *arr)
{
	json_t *rows = rows_all(srv), *o;
	size_t i;
	json_array_foreach(rows, i, o) {
		const char *id = jstr(o, "snapshotID"), *ts = jstr(o, "createdAt") ?: "";
		if (!id)
			continue;
		json_array_append_new(arr, json_pack("{s:s,s:s,s:[s],s:[s],s:i,s:i,s:i,s:b,s:s,s:s,s:s,s:i,s:i,s:s,s:s}",
						     "templateID", id, "buildID", jstr(o, "provider") ?: id, "names",
						     id, "aliases", id, "cpuCount", 2, "memoryMB", 512, "diskSizeMB", 0,
						     "public", 0, "createdAt", ts, "updatedAt", ts, "lastSpawnedAt", ts,
						     "spawnCount", 0, "buildCount", 1, "envdVersion", SRV_ENVD_VERSION,
						     "buildStatus", "ready"));
	}
	json_decref(rows);
}
