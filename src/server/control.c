/* SPDX-License-Identifier: MIT */
/*
 * The E2B control plane for sandboxes: create (v1 and v2), detail, kill,
 * timeout, refreshes, connect (v1 and v2), pause and resume (listing is
 * listing.c). Bodies are validated before anything changes; errors are
 * {"code":<status>,...}.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

#define TTL_BACKSTOP_S 60

char *sbx__srv_rfc3339(double t)
{
	time_t sec = (time_t)t;
	struct tm tm;
	gmtime_r(&sec, &tm);
	char buf[40];
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return xasprintf("%s.%03dZ", buf, (int)((t - (double)sec) * 1000));
}

/* The body as a JSON object ({} when empty); NULL after replying 400. */
static json_t *json_body(struct srv_req *r)
{
	if (r->body.len == 0)
		return json_object();
	json_error_t je;
	json_t *j = json_loadb(r->body.data, r->body.len, 0, &je);
	if (!j || !json_is_object(j)) {
		sbx__srv_reply_error(r, 400, "request body is not a JSON object: %s", j ? "wrong type" : je.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

json_t *sbx__srv_json_object_body(struct srv_req *r)
{
	return json_body(r);
}

static int string_map(json_t *v)
{
	const char *k;
	json_t *x;
	if (!v)
		return 1;
	if (!json_is_object(v))
		return 0;
	json_object_foreach(v, k, x)
		if (!json_is_string(x))
			return 0;
	return 1;
}

/* Optional non-negative integer field: 1 set, 0 absent, -1 invalid. */
static int int_field(json_t *o, const char *k, long long *out)
{
	json_t *v = json_object_get(o, k);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = json_integer_value(v);
	return 1;
}

/* Sets the provider's TTL backstop from the deadline; the caller holds an op
 * reference (the call goes into the sandbox, so no lock is held across it). */
static void sync_ttl(struct srv_sandbox *s)
{
	pthread_mutex_lock(&s->srv->lock);
	double left = s->end_at - sbx__now_real();
	int paused = s->paused;
	pthread_mutex_unlock(&s->srv->lock);
	unsigned ttl = paused ? 0 : (unsigned)(left > 0 ? left : 0) + TTL_BACKSTOP_S;
	sbx_sandbox_set_timeout(s->sb, ttl, NULL);
}

/* The limits a sandbox of this server gets, as its provider enforces them
 * (sbx_sandbox_limits: --cpus/--memory-mb/--storage-mb, else the provider's
 * defaults), and for "unlimited" what that means on this host. */
void sbx__srv_sandbox_limits(const struct server *srv, const struct srv_sandbox *s, long *cpus, long long *mem_mb,
			     long long *disk_mb)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = s->sb ? sbx_sandbox_provider(s->sb) : NULL;
	o.cpus = srv->cfg.cpus;
	o.memory_mb = srv->cfg.memory_mb;
	o.storage_mb = srv->cfg.storage_mb;
	sbx_limits lim;
	sbx_error *e = NULL;
	if (sbx_sandbox_limits(&lim, srv->rt, &o, &e) < 0) {
		sbx_error_free(e); /* a provider that cannot say: what was asked */
		lim = (sbx_limits){ .cpus = o.cpus, .memory_mb = o.memory_mb, .storage_mb = o.storage_mb };
	}
	*cpus = lim.cpus > 0 ? (long)(lim.cpus + 0.999) : sysconf(_SC_NPROCESSORS_ONLN);
	long long host_mb = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) >> 20;
	*mem_mb = lim.memory_mb ? lim.memory_mb : host_mb;
	*disk_mb = lim.storage_mb;
}

json_t *sbx__srv_sandbox_json(struct server *srv, struct srv_sandbox *s, int detail)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "templateID", s->template_id, "sandboxID", s->id, "clientID",
			      SRV_CLIENT_ID, "envdVersion", SRV_ENVD_VERSION);
	char *domain = sbx__srv_proxy_domain(srv);
	if (s->alias)
		json_object_set_new(o, "alias", json_string(s->alias));
	if (detail < 0) { /* create / connect */
		json_object_set_new(o, "envdAccessToken", json_string(s->token));
		json_object_set_new(o, "domain", json_string_nocheck(domain));
		json_object_set_new(o, "trafficAccessToken",
				    s->private_traffic ? json_string(s->traffic_token) : json_null());
		free(domain);
		return o;
	}
	pthread_mutex_lock(&srv->lock);
	double end_at = s->end_at;
	int paused = s->paused;
	pthread_mutex_unlock(&srv->lock);
	char *st = sbx__srv_rfc3339(s->started_at), *en = sbx__srv_rfc3339(end_at);
	long cpus;
	long long mem_mb, disk_mb;
	sbx__srv_sandbox_limits(srv, s, &cpus, &mem_mb, &disk_mb);
	json_object_set_new(o, "startedAt", json_string(st));
	json_object_set_new(o, "endAt", json_string(en));
	json_object_set_new(o, "cpuCount", json_integer(cpus));
	json_object_set_new(o, "memoryMB", json_integer(mem_mb));
	json_object_set_new(o, "diskSizeMB", json_integer(disk_mb));
	json_object_set_new(o, "state", json_string(paused ? "paused" : "running"));
	json_object_set(o, "metadata", s->metadata);
	free(st);
	free(en);
	if (detail > 0) {
		json_object_set_new(o, "envdAccessToken", json_string(s->token));
		json_object_set_new(o, "domain", json_string_nocheck(domain));
		json_object_set_new(o, "allowInternetAccess", json_boolean(s->allow_internet));
		json_t *net = json_pack("{s:b}", "allowPublicTraffic", !s->private_traffic);
		sbx__srv_egress_json(net, s);
		json_object_set_new(o, "network", net);
		json_object_set_new(o, "lifecycle",
				    json_pack("{s:s,s:b}", "onTimeout", s->auto_pause ? "pause" : "kill", "autoResume",
						      s->auto_resume));
	}
	free(domain);
	return o;
}

void sbx__srv_create_lists(char ***labels, char ***env, const struct server *srv, const char *template_id,
			   json_t *meta, json_t *envs)
{
	char *l = xasprintf("sbx.server=%s", srv->server_id);
	sbx__strv_push(labels, l);
	free(l);
	l = xasprintf("e2b.template=%s", template_id);
	sbx__strv_push(labels, l);
	free(l);
	const char *k;
	json_t *x;
	json_object_foreach(meta, k, x) {
		l = xasprintf("e2b.meta.%s=%s", k, json_string_value(x));
		sbx__strv_push(labels, l);
		free(l);
	}
	json_object_foreach(envs, k, x) {
		l = xasprintf("%s=%s", k, json_string_value(x));
		sbx__strv_push(env, l);
		free(l);
	}
}

static void create(struct srv_req *r, int v2)
{
	struct server *srv = r->srv;
	json_t *b = json_body(r);
	if (!b)
		return;
	long long timeout = v2 ? 300 : 15;
	json_t *tid = json_object_get(b, "templateID");
	json_t *meta = json_object_get(b, "metadata"), *envs = json_object_get(b, "envVars");
	json_t *inet = json_object_get(b, "allow_internet_access");
	json_t *apause = json_object_get(b, "autoPause");
	json_t *aresume = json_object_get(b, "autoResume");
	json_t *net = json_object_get(b, "network");
	json_t *pub = json_is_object(net) ? json_object_get(net, "allowPublicTraffic") : NULL;
	if (pub && !json_is_boolean(pub) && !json_is_null(pub)) {
		sbx__srv_reply_error(r, 400, "invalid sandbox spec: network.allowPublicTraffic must be a boolean");
		json_decref(b);
		return;
	}
	json_t *allow_out = NULL, *deny_out = NULL;
	if (sbx__srv_egress_parse(r, net, &allow_out, &deny_out) < 0) {
		json_decref(b);
		return;
	}
	int resume = 0;
	if (sbx__srv_parse_auto_resume(r, aresume, json_is_true(apause), &resume) < 0) {
		json_decref(allow_out);
		json_decref(deny_out);
		json_decref(b);
		return;
	}
	if (!tid) {
		/* The API requires it; every SDK sends it ("base" by default). */
		sbx__srv_reply_error(r, 400, "invalid sandbox spec: templateID is required");
		json_decref(allow_out);
		json_decref(deny_out);
		json_decref(b);
		return;
	}
	if (!json_is_string(tid) || int_field(b, "timeout", &timeout) < 0 || !string_map(meta) ||
	    !string_map(envs) || (inet && !json_is_boolean(inet) && !json_is_null(inet)) ||
	    (apause && !json_is_boolean(apause) && !json_is_null(apause))) {
		sbx__srv_reply_error(r, 400, "invalid sandbox spec: templateID must be a string, timeout a non-negative "
					"integer, metadata and envVars maps of strings, allow_internet_access and "
					"autoPause booleans");
		json_decref(allow_out);
		json_decref(deny_out);
		json_decref(b);
		return;
	}
	if (srv->cfg.max_timeout_s && timeout > srv->cfg.max_timeout_s)
		timeout = srv->cfg.max_timeout_s;
	const char *template_id = json_string_value(tid);
	pthread_mutex_lock(&srv->lock);
	int full = srv->cfg.max_sandboxes && srv->n + srv->creating >= srv->cfg.max_sandboxes;
	if (!full)
		srv->creating++;
	pthread_mutex_unlock(&srv->lock);
	if (full) {
		sbx__srv_reply_error(r, 429, "sandbox limit reached (%u live)", srv->cfg.max_sandboxes);
		json_decref(allow_out);
		json_decref(deny_out);
		json_decref(b);
		return;
	}
	double t0 = sbx__now_mono();
	sbx_error *e = NULL;
	_cleanup_free_ char *image = NULL;
	char **labels = NULL, **env = NULL, **allow_v = NULL, **deny_v = NULL;
	sbx_image *img = NULL;
	struct srv_sandbox *s = NULL;
	/* A snapshot (snapshots.c) starts from its frozen layer over its image. */
	_cleanup_free_ char *base = NULL;
	int rc = 0;
	if (!sbx__srv_snapshot_resolve(srv, template_id, &image, &base))
		rc = sbx__srv_template_resolve(srv, template_id, &image, &e);
	if (rc == 0)
		rc = sbx_image_get(&img, srv->rt, base ? base : image, &e);
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 0, "template", rc, e);
		goto out;
	}
	sbx__srv_create_lists(&labels, &env, srv, template_id, meta, envs);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = sbx_provider_host()->name;
	o.image = image;
	o.cpus = srv->cfg.cpus;
	o.memory_mb = srv->cfg.memory_mb; /* 0: the provider's default, which limits() reports */
	o.storage_mb = srv->cfg.storage_mb;
	/* E2B's default is true; only --allow-internet grants it, and then as
	 * the sandbox's own NATed network, never the host's (which would hand
	 * it the host's loopback and the server's own traffic). */
	int want = inet && !json_is_null(inet) ? json_is_true(inet) : 1;
	int internet = want && srv->cfg.allow_internet;
	o.network = internet ? SBX_NETWORK_INTERNET : SBX_NETWORK_NONE;
	if (internet) { /* without a network of its own the sandbox reaches nothing anyway */
		allow_v = sbx__srv_egress_strv(allow_out);
		deny_v = sbx__srv_egress_strv(deny_out);
		o.allow_out = (const char *const *)allow_v;
		o.deny_out = (const char *const *)deny_v;
	}
	o.env = (const char *const *)env;
	o.labels = (const char *const *)labels;
	o.ttl_s = (unsigned)timeout + TTL_BACKSTOP_S;
	o.detach = !sbx__srv_pooled(srv, &o); /* a warm pool's are never detached (pool.c) */
	s = sbx__srv_sandbox_new("");
	s->srv = srv;
	rc = sbx_sandbox_create(&s->sb, srv->rt, &o, &e);
	if (rc < 0) {
		sbx__srv_metrics_create(srv, sbx__now_mono() - t0, 0);
		sbx__srv_reply_sbx_error(r, 0, "create sandbox", rc, e);
		goto out;
	}
	snprintf(s->id, sizeof(s->id), "%s", sbx_sandbox_id(s->sb));
	s->template_id = xstrdup(template_id);
	s->alias = xstrdup(base ? base : image);
	sbx__srv_auth_new_token(s->token);
	/* allowPublicTraffic: false makes its user ports need this token
	 * (proxy_route.c); E2B's default is public. */
	s->private_traffic = pub && json_is_false(pub);
	if (s->private_traffic)
		sbx__srv_auth_new_token(s->traffic_token);
	s->metadata = meta ? json_copy(meta) : json_object();
	s->env_vars = envs ? json_copy(envs) : json_object();
	s->started_at = sbx__now_real();
	s->end_at = s->started_at + (double)timeout;
	s->allow_internet = internet;
	s->allow_out = allow_out;
	s->deny_out = deny_out;
	allow_out = deny_out = NULL;
	s->auto_pause = json_is_true(apause);
	s->auto_resume = resume;
	s->timeout_s = timeout;
	s->user = img->config.user && *img->config.user ? xstrdup(img->config.user) : sbx__srv_default_user(s);
	s->workdir = img->config.workdir && *img->config.workdir ? xstrdup(img->config.workdir) : NULL;
	sbx__srv_state_save(srv, s);
	s->refs++;
	sbx__srv_sandbox_insert(srv, s);
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s->id);
	sbx__srv_metrics_create(srv, sbx__now_mono() - t0, 1);
	sbx__srv_reply_json(r, 201, sbx__srv_sandbox_json(srv, s, -1));
out:
	pthread_mutex_lock(&srv->lock);
	srv->creating--;
	pthread_mutex_unlock(&srv->lock);
	sbx__srv_sandbox_put(srv, s);
	sbx_image_free(img);
	sbx__strv_free(labels);
	sbx__strv_free(env);
	sbx__strv_free(allow_v);
	sbx__strv_free(deny_v);
	json_decref(allow_out);
	json_decref(deny_out);
	json_decref(b);
}

/* How long connect/resume waits for a pause or resume in flight: 30 s in
 * 10 ms steps (a cgroup freeze takes milliseconds). */
#define TRANSITION_WAIT_STEPS 3000

/* Pause or resume: flags change under srv->lock, the freeze or thaw runs
 * with an op reference and no lock; a second one meanwhile gets 409. */
static int set_paused(struct srv_sandbox *s, int pause, sbx_error **e)
{
	int rc;
	if (pause) {
		pthread_mutex_lock(&s->srv->lock);
		s->paused = 1;
		pthread_mutex_unlock(&s->srv->lock);
		sync_ttl(s); /* no TTL while frozen; sent while init still answers */
		rc = sbx_sandbox_pause(s->sb, e);
	} else {
		rc = sbx_sandbox_resume(s->sb, e);
		if (rc == -EALREADY)
			rc = 0;
	}
	pthread_mutex_lock(&s->srv->lock);
	if (rc == 0 || pause)
		s->paused = rc == 0 ? pause : 0;
	s->transition = 0;
	pthread_mutex_unlock(&s->srv->lock);
	if (!pause || rc < 0)
		sync_ttl(s);
	return rc;
}

int sbx__srv_sandbox_pause(struct srv_sandbox *s, sbx_error **err)
{
	pthread_mutex_lock(&s->srv->lock);
	int busy = s->transition, already = s->paused;
	if (!busy && !already)
		s->transition = 1;
	pthread_mutex_unlock(&s->srv->lock);
	if (busy || already)
		return busy ? -EBUSY : -EALREADY;
	int rc = set_paused(s, 1, err);
	if (rc == 0)
		sbx__srv_state_save(s->srv, s);
	return rc;
}

static long long capped(const struct server *srv, long long secs)
{
	return srv->cfg.max_timeout_s && secs > srv->cfg.max_timeout_s ? srv->cfg.max_timeout_s : secs;
}

int sbx__srv_sandbox_wake(struct srv_sandbox *s, long long secs, int resume_only, sbx_error **err)
{
	struct server *srv = s->srv;
	double now = sbx__now_real();
	pthread_mutex_lock(&srv->lock);
	/* A pause in flight (the timer's auto-pause, or a client's) ends
	 * within a freeze: E2B's connect waits for it rather than failing,
	 * and an SDK that saw state 'paused' connects at once. */
	for (int i = 0; s->transition && i < TRANSITION_WAIT_STEPS; i++) {
		pthread_mutex_unlock(&srv->lock);
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
		pthread_mutex_lock(&srv->lock);
	}
	int busy = s->transition, was_paused = s->paused;
	int go = !busy && !(resume_only && !was_paused);
	if (go && (now + (double)secs > s->end_at || resume_only))
		s->end_at = now + (double)secs;
	if (go && was_paused)
		s->transition = 1;
	pthread_mutex_unlock(&srv->lock);
	if (busy)
		return -EBUSY;
	if (!go)
		return -EALREADY;
	int rc = was_paused ? set_paused(s, 0, err) : 0;
	if (rc < 0)
		return rc;
	if (!was_paused)
		sync_ttl(s);
	sbx__srv_state_save(srv, s);
	return was_paused;
}

/* POST /sandboxes/{id}/{op}; the caller holds an op reference on s. */
static void sandbox_op_in(struct srv_req *r, struct srv_sandbox *s, const char *op, json_t *b)
{
	struct server *srv = r->srv;
	long long secs = 0;
	int has;
	double now = sbx__now_real();
	sbx_error *e = NULL;
	if (strcmp(op, "timeout") == 0) {
		if ((has = int_field(b, "timeout", &secs)) <= 0) {
			sbx__srv_reply_error(r, 400, "timeout (seconds, non-negative integer) is required");
			return;
		}
		pthread_mutex_lock(&srv->lock);
		s->end_at = now + (double)capped(srv, secs);
		pthread_mutex_unlock(&srv->lock);
		sync_ttl(s);
		sbx__srv_state_save(srv, s);
		sbx__srv_timer_kick(srv);
		sbx__srv_reply_empty(r, 204);
	} else if (strcmp(op, "refreshes") == 0) {
		if ((has = int_field(b, "duration", &secs)) < 0 || secs > 3600) {
			sbx__srv_reply_error(r, 400, "duration must be an integer 0..3600");
			return;
		}
		if (!has)
			secs = 15;
		pthread_mutex_lock(&srv->lock);
		int later = now + (double)secs > s->end_at;
		if (later)
			s->end_at = now + (double)secs;
		pthread_mutex_unlock(&srv->lock);
		if (later) {
			sync_ttl(s);
			sbx__srv_state_save(srv, s);
		}
		sbx__srv_reply_empty(r, 204);
	} else if (strcmp(op, "pause") == 0) {
		int rc = sbx__srv_sandbox_pause(s, &e);
		if (rc == -EBUSY)
			sbx__srv_reply_error(r, 409, "sandbox %s is being paused or resumed", s->id);
		else if (rc == -EALREADY)
			sbx__srv_reply_error(r, 409, "sandbox %s is already paused", s->id);
		else if (rc < 0)
			sbx__srv_reply_sbx_error(r, 0, "pause", rc, e);
		else
			sbx__srv_reply_empty(r, 204);
	} else { /* connect, resume */
		int resume_only = strcmp(op, "resume") == 0;
		secs = resume_only ? 15 : 300;
		if (int_field(b, "timeout", &secs) < 0) {
			sbx__srv_reply_error(r, 400, "timeout must be a non-negative integer");
			return;
		}
		int rc = sbx__srv_sandbox_wake(s, capped(srv, secs), resume_only, &e);
		if (rc == -EBUSY)
			sbx__srv_reply_error(r, 409, "sandbox %s is being paused or resumed", s->id);
		else if (rc == -EALREADY)
			sbx__srv_reply_error(r, 409, "sandbox %s is already running", s->id);
		else if (rc < 0)
			sbx__srv_reply_sbx_error(r, 0, "resume", rc, e);
		else
			sbx__srv_reply_json(r, rc == 1 ? 201 : 200, sbx__srv_sandbox_json(srv, s, -1));
	}
}

static void sandbox_op(struct srv_req *r, struct srv_sandbox *s, const char *op)
{
	json_t *b = json_body(r);
	if (!b)
		return;
	if (sbx__srv_op_begin(s, NULL) < 0) {
		sbx__srv_reply_error(r, 404, "sandbox %s not found", s->id);
	} else {
		sandbox_op_in(r, s, op, b);
		sbx__srv_op_end(s);
	}
	json_decref(b);
}

void sbx__srv_control(struct srv_req *r, char **seg, size_t nseg)
{
	int v2 = strcmp(seg[0], "v2") == 0;
	char **s = v2 ? seg + 1 : seg;
	size_t n = v2 ? nseg - 1 : nseg;
	const char *m = r->method;
	if (n == 1) {
		if (strcmp(m, "POST") == 0)
			create(r, v2);
		else if (strcmp(m, "GET") == 0)
			sbx__srv_list(r, v2);
		else
			sbx__srv_reply_error(r, 405, "method %s not allowed on %s", m, r->url);
		return;
	}
	struct srv_sandbox *sb = sbx__srv_sandbox_get(r->srv, s[1]);
	if (!sb) {
		sbx__srv_reply_error(r, 404, "sandbox %s not found", s[1]);
		return;
	}
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", sb->id);
	if (n == 2 && strcmp(m, "GET") == 0) {
		sbx__srv_reply_json(r, 200, sbx__srv_sandbox_json(r->srv, sb, 1));
	} else if (n == 2 && strcmp(m, "DELETE") == 0) {
		if (sbx__srv_sandbox_kill(r->srv, sb, "killed") == 0)
			sbx__srv_reply_empty(r, 204);
		else
			sbx__srv_reply_error(r, 404, "sandbox %s not found", sb->id);
	} else if (n == 3 && strcmp(m, "PUT") == 0 && strcmp(s[2], "network") == 0) {
		sbx__srv_network_update(r, sb);
	} else if (n == 3 && strcmp(m, "GET") == 0 && strcmp(s[2], "metrics") == 0) {
		sbx__srv_metrics_sandbox(r, sb);
	} else if (n == 3 && strcmp(m, "GET") == 0 && strcmp(s[2], "logs") == 0) {
		sbx__srv_reply_json(r, 200, json_pack("{s:[],s:[]}", "logs", "logEntries"));
	} else if (n == 3 && strcmp(m, "POST") == 0 && strcmp(s[2], "snapshots") == 0) {
		sbx__srv_snapshot_create(r, sb);
	} else if (n == 3 && strcmp(m, "POST") == 0 && strcmp(s[2], "fork") == 0) {
		sbx__srv_fork(r, sb);
	} else if (n == 3 && strcmp(m, "POST") == 0 &&
		   (strcmp(s[2], "timeout") == 0 || strcmp(s[2], "refreshes") == 0 || strcmp(s[2], "pause") == 0 ||
		    strcmp(s[2], "resume") == 0 || strcmp(s[2], "connect") == 0)) {
		sandbox_op(r, sb, s[2]);
	} else {
		sbx__srv_reply_error(r, 404, "no endpoint %s %s", m, r->url);
	}
	sbx__srv_sandbox_put(r->srv, sb);
}
