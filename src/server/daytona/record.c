/* SPDX-License-Identifier: MIT */
/*
 * The Daytona part of a server sandbox record (struct dt_ext): made with
 * defaults or from what an earlier run saved in the record's state row,
 * saved with it (ext.daytonaApi), the deadline it implies (last activity +
 * autoStopInterval (+ autoDeleteInterval when > 0) minutes, capped by
 * --max-timeout; then the sandbox is destroyed), lookup by id or name, and
 * the Sandbox DTO.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona.h"

void sbx__dt_ext_free(void *p)
{
	struct dt_ext *x = p;
	if (!x)
		return;
	sbx__dt_sessions_free(x->sessions);
	json_decref(x->build_info);
	free(x->name);
	free(x->user);
	pthread_mutex_destroy(&x->lk);
	free(x);
}

/* The record's state-row part (called under srv->lock; takes x->lk). */
json_t *sbx__dt_ext_row(void *p)
{
	struct dt_ext *x = p;
	pthread_mutex_lock(&x->lk);
	json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f}", "name", x->name, "user", x->user,
			      "autoStop", (json_int_t)x->auto_stop, "autoArchive", (json_int_t)x->auto_archive,
			      "autoDelete", (json_int_t)x->auto_delete, "createdAt", x->created_at, "lastActivity",
			      x->last_activity, "cpu", x->cpu, "memory", x->memory_gb, "disk", x->disk_gb);
	if (x->build_info)
		json_object_set(o, "buildInfo", x->build_info);
	pthread_mutex_unlock(&x->lk);
	return json_pack("{s:o}", "daytonaApi", o);
}

static double num(json_t *o, const char *k, double def)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : def;
}

/* Defaults, or what an earlier run of the server saved (a restart keeps
 * names and intervals). */
struct dt_ext *sbx__dt_ext_new(struct srv_sandbox *s)
{
	struct dt_ext *x = xcalloc(1, sizeof(*x));
	pthread_mutex_init(&x->lk, NULL);
	json_t *d = json_object_get(s->ext_saved, "daytonaApi");
	const char *name = json_string_value(json_object_get(d, "name"));
	const char *user = json_string_value(json_object_get(d, "user"));
	x->name = xstrdup(name ? name : s->id);
	x->user = xstrdup(user ? user : s->user ? s->user : "root");
	x->auto_stop = (long long)num(d, "autoStop", 15);
	x->auto_archive = (long long)num(d, "autoArchive", 10080);
	x->auto_delete = (long long)num(d, "autoDelete", -1);
	x->created_at = num(d, "createdAt", s->started_at);
	x->last_activity = num(d, "lastActivity", s->started_at);
	/* a sandbox of the E2B API: the server's limits, as control.c reports them */
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = s->sb ? sbx_sandbox_provider(s->sb) : NULL;
	o.cpus = s->srv->cfg.cpus;
	o.memory_mb = s->srv->cfg.memory_mb;
	o.storage_mb = s->srv->cfg.storage_mb;
	sbx_limits lim = { 0 };
	if (!d && sbx_sandbox_limits(&lim, s->srv->rt, &o, NULL) < 0)
		lim = (sbx_limits){ .cpus = o.cpus, .memory_mb = o.memory_mb, .storage_mb = o.storage_mb };
	x->cpu = num(d, "cpu", lim.cpus > 0 ? lim.cpus : 1);
	x->memory_gb = num(d, "memory", lim.memory_mb ? lim.memory_mb / 1024.0 : 1);
	x->disk_gb = num(d, "disk", lim.storage_mb ? lim.storage_mb / 1024.0 : 3);
	json_t *bi = json_object_get(d, "buildInfo");
	x->build_info = json_is_object(bi) ? json_incref(bi) : NULL;
	return x;
}

struct dt_ext *sbx__dt_ext(struct srv_sandbox *s)
{
	pthread_mutex_lock(&s->srv->lock);
	if (!s->ext) {
		s->ext = sbx__dt_ext_new(s);
		s->ext_free = sbx__dt_ext_free;
		s->ext_row = sbx__dt_ext_row;
	}
	struct dt_ext *x = s->ext;
	pthread_mutex_unlock(&s->srv->lock);
	return x;
}

/* The record's deadline from the intervals (the server's timer enforces it),
 * with the provider's TTL as the backstop when the server is gone. */
void sbx__dt_apply_deadline(struct srv_sandbox *s)
{
	struct server *srv = s->srv;
	struct dt_ext *x = sbx__dt_ext(s);
	pthread_mutex_lock(&x->lk);
	double secs = x->auto_stop > 0 ? (double)x->auto_stop * 60 + (x->auto_delete > 0 ? x->auto_delete * 60.0 : 0) : 0;
	double base = x->last_activity;
	pthread_mutex_unlock(&x->lk);
	if (srv->cfg.max_timeout_s && (secs == 0 || secs > srv->cfg.max_timeout_s))
		secs = srv->cfg.max_timeout_s;
	pthread_mutex_lock(&srv->lock);
	s->end_at = secs > 0 ? base + secs : base + DT_NEVER_S;
	double left = s->end_at - sbx__now_real();
	int paused = s->paused;
	pthread_mutex_unlock(&srv->lock);
	/* a frozen init cannot take a new TTL (stop cleared it first) */
	if (!paused && sbx__srv_op_begin(s, NULL) == 0) {
		unsigned ttl = secs == 0 ? 0 : (unsigned)(left > 0 ? left : 0) + DT_TTL_BACKSTOP_S;
		sbx_sandbox_set_timeout(s->sb, ttl, NULL);
		sbx__srv_op_end(s);
	}
	sbx__srv_state_save(srv, s);
	sbx__srv_timer_kick(srv);
}

void sbx__dt_touch(struct srv_sandbox *s)
{
	struct dt_ext *x = sbx__dt_ext(s);
	double now = sbx__now_real();
	pthread_mutex_lock(&x->lk);
	/* deadlines are in minutes: a state write per call is not needed */
	int stale = now - x->last_activity > 10;
	x->last_activity = now;
	pthread_mutex_unlock(&x->lk);
	if (stale)
		sbx__dt_apply_deadline(s);
}

struct srv_sandbox *sbx__dt_find(struct server *srv, const char *id_or_name)
{
	struct srv_sandbox *s = sbx__srv_sandbox_get(srv, id_or_name);
	if (s)
		return s;
	size_t n;
	struct srv_sandbox **v = sbx__srv_sandbox_all(srv, &n);
	for (size_t i = 0; i < n; i++) {
		/* restored records make their part from the saved row on first use */
		struct dt_ext *x = s || (!v[i]->ext && !v[i]->ext_saved) ? NULL : sbx__dt_ext(v[i]);
		if (x) {
			pthread_mutex_lock(&x->lk);
			if (strcmp(x->name, id_or_name) == 0)
				s = v[i];
			pthread_mutex_unlock(&x->lk);
		}
		if (s != v[i])
			sbx__srv_sandbox_put(srv, v[i]);
	}
	free(v);
	return s;
}

static json_t *ts(double t)
{
	char *s = sbx__srv_rfc3339(t);
	json_t *j = json_string(s);
	free(s);
	return j;
}

/* The toolbox base the client reaches this server at: its Host header when
 * that is a plain host[:port], else the loopback address we listen on. */
char *sbx__dt_proxy_url(struct srv_req *r)
{
	const char *host = sbx__srv_header(r, "Host");
	size_t n = host ? strlen(host) : 0;
	if (n == 0 || n > 255 || strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != n)
		return xasprintf("http://127.0.0.1:%u/toolbox", r->srv->port);
	return xasprintf("http://%s/toolbox", host);
}

json_t *sbx__dt_dto(struct srv_req *r, struct srv_sandbox *s, const char *state, int full)
{
	struct dt_ext *x = sbx__dt_ext(s);
	_cleanup_free_ char *proxy = sbx__dt_proxy_url(r);
	pthread_mutex_lock(&r->srv->lock);
	int paused = s->paused;
	double end_at = s->end_at;
	json_t *labels = json_deep_copy(s->metadata); /* put_labels swaps it */
	pthread_mutex_unlock(&r->srv->lock);
	pthread_mutex_lock(&x->lk);
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:b,s:b,s:s,s:f,s:i,s:f,s:f,s:s,s:s,s:s,s:I,s:i,s:I,s:I}",
			      "id", s->id, "organizationId", DT_ORG_ID, "name", x->name, "user", x->user, "labels",
			      labels, "public", 0, "networkBlockAll", !s->allow_internet, "target", sbx_provider_host()->name, "cpu",
			      x->cpu, "gpu", 0, "memory", x->memory_gb, "disk", x->disk_gb, "state",
			      state ? state : paused ? "stopped" : "started", "desiredState",
			      state ? state : paused ? "stopped" : "started", "backupState", "None", "autoStopInterval",
			      (json_int_t)x->auto_stop, "autoPauseInterval", 0, "autoArchiveInterval",
			      (json_int_t)x->auto_archive, "autoDeleteInterval", (json_int_t)x->auto_delete);
	json_object_set_new(o, "snapshot", json_string(s->alias ? s->alias : s->template_id));
	json_object_set_new(o, "createdAt", ts(x->created_at));
	json_object_set_new(o, "updatedAt", ts(x->last_activity));
	json_object_set_new(o, "lastActivityAt", ts(x->last_activity));
	if (end_at - sbx__now_real() < DT_NEVER_S / 2)
		json_object_set_new(o, "autoDestroyAt", ts(end_at));
	if (full) {
		json_object_set(o, "env", s->env_vars);
		if (x->build_info)
			json_object_set(o, "buildInfo", x->build_info);
	}
	pthread_mutex_unlock(&x->lk);
	json_object_set_new(o, "daemonVersion", json_string("sbx-" SBX_VERSION_STRING));
	json_object_set_new(o, "sandboxClass", json_string("container"));
	json_object_set_new(o, "toolboxProxyUrl", json_string(proxy));
	return o;
}
