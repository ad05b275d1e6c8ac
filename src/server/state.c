/* SPDX-License-Identifier: MIT */
/*
 * Durable server state: one SQLite table (<state>/server/server.db) with a
 * row per sandbox, rewritten on every state change (create, timeout, pause,
 * resume) and deleted on destroy. On start every row is re-opened: a live
 * sandbox is adopted again (same id, token, deadline), a dead or expired
 * one is destroyed and its row dropped; then every local sandbox labelled
 * sbx.server=<this server> without a row (a crash mid-create) is reaped.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "server_int.h"

int sbx__srv_state_open(struct server *srv, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_sqlite, err) < 0)
		return -ENOSYS;
	_cleanup_free_ char *path = xasprintf("%s/server/server.db", srv->cfg.state_dir);
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		int r = sbx_error_set(err, -EIO, "open %s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return r;
	}
	char *emsg = NULL;
	rc = sqlite3_exec(db,
			  "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;"
			  "CREATE TABLE IF NOT EXISTS sandboxes (id TEXT PRIMARY KEY, data TEXT NOT NULL);"
			  "CREATE TABLE IF NOT EXISTS snapshots (id TEXT PRIMARY KEY, data TEXT NOT NULL);",
			  NULL, NULL, &emsg);
	if (rc != SQLITE_OK) {
		int r = sbx_error_set(err, -EIO, "init %s: %s", path, emsg ? emsg : "?");
		sqlite3_free(emsg);
		sqlite3_close(db);
		return r;
	}
	srv->db = db;
	return 0;
}

void sbx__srv_state_close(struct server *srv)
{
	if (srv->db)
		sqlite3_close(srv->db);
	srv->db = NULL;
}

json_t *sbx__srv_sandbox_to_row(const struct srv_sandbox *s)
{
	json_t *row = json_pack("{s:s,s:s,s:s?,s:s,s:O,s:O,s:f,s:f,s:b,s:b,s:b,s:s?,s:s?}", "id", s->id, "templateID",
				s->template_id, "alias", s->alias, "token", s->token, "metadata", s->metadata,
				"envVars", s->env_vars, "startedAt", s->started_at, "endAt", s->end_at, "paused",
				s->paused, "autoPause", s->auto_pause, "allowInternet", s->allow_internet, "user",
				s->user, "workdir", s->workdir);
	if (row && s->auto_resume)
		json_object_set_new(row, "autoResume", json_true());
	if (row && s->timeout_s > 0)
		json_object_set_new(row, "timeoutS", json_integer(s->timeout_s));
	if (row && s->private_traffic)
		json_object_set_new(row, "trafficToken", json_string(s->traffic_token));
	if (row && s->allow_out)
		json_object_set(row, "allowOut", s->allow_out);
	if (row && s->deny_out)
		json_object_set(row, "denyOut", s->deny_out);
	/* what another API keeps about the sandbox (the Daytona API's name, intervals) */
	if (row && s->ext && s->ext_row)
		json_object_set_new(row, "ext", s->ext_row(s->ext));
	else if (row && s->ext_saved)
		json_object_set(row, "ext", s->ext_saved);
	return row;
}

static void exec_stmt(struct server *srv, const char *sql, const char *a, const char *b)
{
	pthread_mutex_lock(&srv->db_lock);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(srv->db, sql, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
		if (b)
			sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			SBX_LOGE("serve: state db: %s", sqlite3_errmsg(srv->db));
	} else {
		SBX_LOGE("serve: state db: %s", sqlite3_errmsg(srv->db));
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&srv->db_lock);
}

void sbx__srv_state_save(struct server *srv, struct srv_sandbox *s)
{
	pthread_mutex_lock(&srv->lock); /* a consistent deadline and pause state */
	json_t *row = sbx__srv_sandbox_to_row(s);
	pthread_mutex_unlock(&srv->lock);
	char *data = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	exec_stmt(srv, "INSERT OR REPLACE INTO sandboxes (id, data) VALUES (?1, ?2)", s->id, data);
	free(data);
}

void sbx__srv_state_delete(struct server *srv, const char *id)
{
	exec_stmt(srv, "DELETE FROM sandboxes WHERE id = ?1", id, NULL);
}

static char *jstr(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? xstrdup(v) : NULL;
}

static struct srv_sandbox *from_row(const char *id, const char *data)
{
	json_t *o = json_loads(data, 0, NULL);
	if (!o)
		return NULL;
	struct srv_sandbox *s = sbx__srv_sandbox_new(id);
	s->template_id = jstr(o, "templateID");
	if (!s->template_id)
		s->template_id = xstrdup("base");
	s->alias = jstr(o, "alias");
	snprintf(s->token, sizeof(s->token), "%s", json_string_value(json_object_get(o, "token")) ?: "");
	s->metadata = json_incref(json_object_get(o, "metadata"));
	s->env_vars = json_incref(json_object_get(o, "envVars"));
	if (!json_is_object(s->metadata)) {
		json_decref(s->metadata);
		s->metadata = json_object();
	}
	if (!json_is_object(s->env_vars)) {
		json_decref(s->env_vars);
		s->env_vars = json_object();
	}
	s->started_at = json_real_value(json_object_get(o, "startedAt"));
	s->end_at = json_real_value(json_object_get(o, "endAt"));
	s->paused = json_is_true(json_object_get(o, "paused"));
	s->auto_pause = json_is_true(json_object_get(o, "autoPause"));
	s->allow_internet = json_is_true(json_object_get(o, "allowInternet"));
	json_t *ao = json_object_get(o, "allowOut"), *dout = json_object_get(o, "denyOut");
	s->allow_out = json_is_array(ao) ? json_incref(ao) : NULL;
	s->deny_out = json_is_array(dout) ? json_incref(dout) : NULL;
	s->auto_resume = json_is_true(json_object_get(o, "autoResume"));
	s->timeout_s = json_integer_value(json_object_get(o, "timeoutS"));
	const char *tt = json_string_value(json_object_get(o, "trafficToken"));
	if (tt && *tt) { /* a private sandbox stays private across restarts */
		snprintf(s->traffic_token, sizeof(s->traffic_token), "%s", tt);
		s->private_traffic = 1;
	}
	s->user = jstr(o, "user");
	s->workdir = jstr(o, "workdir");
	s->ext_saved = json_incref(json_object_get(o, "ext"));
	json_decref(o);
	return s;
}

static void reap_id(struct server *srv, const char *id, const char *why)
{
	sbx_error *e = NULL;
	int r = sbx_sandbox_destroy_id(srv->rt, sbx_provider_host()->name, id, &e);
	if (r < 0 && r != -ENOENT)
		SBX_LOGW("serve: reap %s: %s", id, e ? e->msg : "?");
	sbx_error_free(e);
	sbx__srv_state_delete(srv, id);
	fprintf(stderr, "sbx serve: reaped sandbox %s (%s)\n", id, why);
}

static void adopt_rows(struct server *srv, size_t *adopted, size_t *reaped)
{
	sqlite3_stmt *st = NULL;
	char **ids = NULL, **datas = NULL;
	size_t n = 0;
	pthread_mutex_lock(&srv->db_lock);
	if (sqlite3_prepare_v2(srv->db, "SELECT id, data FROM sandboxes", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			ids = xrealloc(ids, (n + 1) * sizeof(*ids));
			datas = xrealloc(datas, (n + 1) * sizeof(*datas));
			ids[n] = xstrdup((const char *)sqlite3_column_text(st, 0));
			datas[n] = xstrdup((const char *)sqlite3_column_text(st, 1));
			n++;
		}
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&srv->db_lock);
	double now = sbx__now_real();
	for (size_t i = 0; i < n; i++) {
		struct srv_sandbox *s = from_row(ids[i], datas[i]);
		sbx_error *e = NULL;
		if (s && sbx_sandbox_open(&s->sb, srv->rt, sbx_provider_host()->name, s->id, &e) == 0 &&
		    (s->paused || s->end_at <= 0 || s->end_at > now)) {
			sbx__srv_sandbox_insert(srv, s);
			(*adopted)++;
		} else {
			if (s && s->sb)
				sbx_sandbox_destroy(s->sb, NULL);
			reap_id(srv, ids[i], s && s->sb ? "expired while the server was down" : "not running");
			(*reaped)++;
			if (s)
				sbx__srv_sandbox_put(srv, s);
		}
		sbx_error_free(e);
		free(ids[i]);
		free(datas[i]);
	}
	free(ids);
	free(datas);
}

int sbx__srv_state_reconcile(struct server *srv, sbx_error **err)
{
	size_t adopted = 0, reaped = 0;
	adopt_rows(srv, &adopted, &reaped);
	_cleanup_free_ char *label = xasprintf("sbx.server=%s", srv->server_id);
	const char *filter[] = { label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	int r = sbx_sandbox_list(&v, &n, srv->rt, sbx_provider_host()->name, filter, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		struct srv_sandbox *s = sbx__srv_sandbox_get(srv, v[i].id);
		if (s) {
			sbx__srv_sandbox_put(srv, s);
			continue;
		}
		reap_id(srv, v[i].id, "no record");
		reaped++;
	}
	sbx_sandbox_info_free(v, n);
	if (adopted || reaped)
		fprintf(stderr, "sbx serve: recovered state: %zu sandboxes adopted, %zu reaped\n", adopted, reaped);
	return 0;
}
