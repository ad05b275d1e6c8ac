/* SPDX-License-Identifier: MIT */
/*
 * POST /sandboxes/{id}/fork {count, timeout}: `count` new sandboxes whose
 * file systems start as the parent's is now, through sbx_sandbox_fork()
 * (the parent is frozen for the copy and keeps running, its id and
 * deadline untouched; processes and memory are not copied: each child
 * boots its own init). Each child is a record like a create's: its own id,
 * envd token (and traffic token when the parent's ports are private), the
 * parent's template, metadata, envVars, network and lifecycle, and the
 * deadline now + timeout (E2B's default 15 s). The answer is E2B's list of
 * SandboxForkResult, one {sandbox} per child; the library forks all or
 * none, so a failure is one error status for the request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "server_int.h"

#define FORK_COUNT_MAX 64      /* per request (docs/server.md) */
#define FORK_TIMEOUT_DEFAULT 15 /* E2B's SandboxForkRequest default */
#define TTL_BACKSTOP_S 60

/* Optional integer field: 1 set, 0 absent, -1 not an integer in lo..hi. */
static int int_in(json_t *o, const char *k, long long lo, long long hi, long long *out)
{
	json_t *v = json_object_get(o, k);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return -1;
	*out = json_integer_value(v);
	return 1;
}

/* A child's record, from the parent's (its fields read under srv->lock). */
static struct srv_sandbox *child_record(struct server *srv, struct srv_sandbox *p, sbx_sandbox *sb,
					long long timeout)
{
	struct srv_sandbox *c = sbx__srv_sandbox_new(sbx_sandbox_id(sb));
	c->srv = srv;
	c->sb = sb;
	pthread_mutex_lock(&srv->lock);
	c->template_id = xstrdup(p->template_id);
	c->alias = p->alias ? xstrdup(p->alias) : NULL;
	c->metadata = p->metadata ? json_deep_copy(p->metadata) : json_object();
	c->env_vars = p->env_vars ? json_deep_copy(p->env_vars) : json_object();
	c->allow_internet = p->allow_internet;
	c->allow_out = p->allow_out ? json_deep_copy(p->allow_out) : NULL;
	c->deny_out = p->deny_out ? json_deep_copy(p->deny_out) : NULL;
	c->private_traffic = p->private_traffic;
	c->auto_pause = p->auto_pause;
	c->auto_resume = p->auto_resume;
	c->user = p->user ? xstrdup(p->user) : NULL;
	c->workdir = p->workdir ? xstrdup(p->workdir) : NULL;
	pthread_mutex_unlock(&srv->lock);
	sbx__srv_auth_new_token(c->token);
	if (c->private_traffic)
		sbx__srv_auth_new_token(c->traffic_token);
	c->timeout_s = timeout;
	c->started_at = sbx__now_real();
	c->end_at = c->started_at + (double)timeout;
	return c;
}

/* Forks p (op reference and hold taken by the caller) into n children. */
static int fork_children(sbx_sandbox **kids, size_t n, struct server *srv, struct srv_sandbox *p, long long timeout,
			 sbx_error **e)
{
	char **labels = NULL, **env = NULL;
	pthread_mutex_lock(&srv->lock);
	json_t *meta = json_deep_copy(p->metadata), *envs = json_deep_copy(p->env_vars);
	int internet = p->allow_internet;
	/* the parent's egress lists bind its children too (network.c) */
	char **allow = internet ? sbx__srv_egress_strv(p->allow_out) : NULL;
	char **deny = internet ? sbx__srv_egress_strv(p->deny_out) : NULL;
	pthread_mutex_unlock(&srv->lock);
	sbx__srv_create_lists(&labels, &env, srv, p->template_id, meta, envs);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = sbx_provider_host()->name;
	o.cpus = srv->cfg.cpus;
	o.memory_mb = srv->cfg.memory_mb;
	o.storage_mb = srv->cfg.storage_mb;
	o.network = internet ? SBX_NETWORK_INTERNET : SBX_NETWORK_NONE;
	o.allow_out = (const char *const *)allow;
	o.deny_out = (const char *const *)deny;
	o.env = (const char *const *)env;
	o.labels = (const char *const *)labels;
	o.ttl_s = (unsigned)timeout + TTL_BACKSTOP_S;
	o.detach = 1;
	int rc = sbx_sandbox_fork(kids, n, p->sb, &o, e);
	sbx__strv_free(labels);
	sbx__strv_free(env);
	sbx__strv_free(allow);
	sbx__strv_free(deny);
	json_decref(meta);
	json_decref(envs);
	return rc;
}

static void fork_in(struct srv_req *r, struct srv_sandbox *p, json_t *b)
{
	struct server *srv = r->srv;
	long long count = 1, timeout = FORK_TIMEOUT_DEFAULT;
	if (int_in(b, "count", 1, FORK_COUNT_MAX, &count) < 0) {
		sbx__srv_reply_error(r, 400, "invalid fork request: count must be an integer 1..%d", FORK_COUNT_MAX);
		return;
	}
	if (int_in(b, "timeout", 0, 1LL << 31, &timeout) < 0) {
		sbx__srv_reply_error(r, 400, "invalid fork request: timeout must be a non-negative integer (seconds)");
		return;
	}
	if (srv->cfg.max_timeout_s && timeout > srv->cfg.max_timeout_s)
		timeout = srv->cfg.max_timeout_s;
	pthread_mutex_lock(&srv->lock);
	int full = srv->cfg.max_sandboxes && srv->n + srv->creating + (size_t)count > srv->cfg.max_sandboxes;
	if (!full)
		srv->creating += (unsigned)count;
	pthread_mutex_unlock(&srv->lock);
	if (full) {
		sbx__srv_reply_error(r, 429, "sandbox limit reached (%u live): no room for %lld forks",
				     srv->cfg.max_sandboxes, count);
		return;
	}
	double t0 = sbx__now_mono();
	sbx_error *e = NULL;
	sbx_sandbox **kids = xcalloc((size_t)count, sizeof(*kids));
	int rc = sbx__srv_op_begin(p, &e);
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 0, "fork", -ENOENT, e);
		goto out;
	}
	if ((rc = sbx__srv_sandbox_hold(p)) == 0) {
		rc = fork_children(kids, (size_t)count, srv, p, timeout, &e);
		sbx__srv_sandbox_unhold(p);
	}
	sbx__srv_op_end(p);
	if (rc == -EBUSY) {
		sbx__srv_reply_error(r, 409, "sandbox %s is being paused or resumed", p->id);
		goto out;
	}
	if (rc < 0) {
		sbx__srv_metrics_create(srv, sbx__now_mono() - t0, 0);
		sbx__srv_reply_sbx_error(r, 0, "fork", rc, e);
		goto out;
	}
	json_t *arr = json_array();
	for (long long i = 0; i < count; i++) {
		struct srv_sandbox *c = child_record(srv, p, kids[i], timeout);
		sbx__srv_state_save(srv, c);
		c->refs++;
		sbx__srv_sandbox_insert(srv, c);
		sbx__srv_metrics_create(srv, sbx__now_mono() - t0, 1);
		json_array_append_new(arr, json_pack("{s:o}", "sandbox", sbx__srv_sandbox_json(srv, c, -1)));
		sbx__srv_sandbox_put(srv, c);
	}
	SBX_LOGI("serve: sandbox %s forked into %lld in %.1f ms", p->id, count, (sbx__now_mono() - t0) * 1e3);
	sbx__srv_reply_json(r, 201, arr);
out:
	pthread_mutex_lock(&srv->lock);
	srv->creating -= (unsigned)count;
	pthread_mutex_unlock(&srv->lock);
	free(kids);
}

void sbx__srv_fork(struct srv_req *r, struct srv_sandbox *p)
{
	json_t *b = NULL;
	if (r->body.len == 0) {
		b = json_object();
	} else {
		json_error_t je;
		b = json_loadb(r->body.data, r->body.len, 0, &je);
		if (!json_is_object(b)) {
			sbx__srv_reply_error(r, 400, "request body is not a JSON object: %s", b ? "wrong type" : je.text);
			json_decref(b);
			return;
		}
	}
	fork_in(r, p, b);
	json_decref(b);
}
