/* SPDX-License-Identifier: MIT */
/*
 * The episode driver, the same for every connector and agent: resolve the
 * task's image (task_image.c), create a sandbox with the connector's spec
 * and let it prepare the sandbox, run the agent phase under the agent
 * timeout, only then let the connector verify, keep the logs, destroy.
 * The whole episode is bounded by a wall clock. The driver alone decides
 * statuses and the reward from what the connector and the agent report;
 * docs/tasks.md has the rules. Split into start / steps / finish
 * (episode_int.h) so that a caller can drive the agent phase turn by turn.
 */
#include <errno.h>
#include <stddef.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/pool.h>
#include <sbx/sandbox.h>

#include "tasks/episode_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/str.h"

#define TAIL_MAX 4096
#define LOG_READ_MAX (64u << 20)

static const char *const status_names[] = { "Submitted", "TimeLimitExceeded", "AgentError",
					    "VerifierError", "EnvironmentError" };
static const char *const stage_names[] = { "resolve", "create", "exec", "verify", "destroy" };

const char *sbx_episode_status_name(sbx_episode_status s)
{
	return (unsigned)s < SBX_ARRAY_SIZE(status_names) ? status_names[s] : "?";
}

const char *sbx_episode_stage_name(sbx_episode_stage s)
{
	return (unsigned)s < SBX_ARRAY_SIZE(stage_names) ? stage_names[s] : "?";
}

double sbx__episode_default_max_s(void)
{
	const char *vars[] = { "SBX_MAX_EPISODE_S", "OPENENV_MAX_ROLLOUT_TIME_SECONDS" };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(vars); i++) {
		const char *v = sbx__env_dyn(vars[i]);
		double d;
		if (v && *v && sbx__parse_duration(&d, v) == 0 && d > 0)
			return d;
	}
	return 3600;
}

/* ---- the episode ---- */

static void set_status(sbx_episode *e, sbx_episode_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_status(sbx_episode *e, sbx_episode_status st, const char *fmt, ...)
{
	if (e->status_set)
		return;
	va_list ap;
	va_start(ap, fmt);
	e->res.status = st;
	free(e->res.detail);
	e->res.detail = xvasprintf(fmt, ap);
	va_end(ap);
	e->status_set = 1;
}

static void stage_begin(sbx_episode *e, sbx_episode_stage s)
{
	e->stage_t0 = sbx__now_mono();
	if (e->o.on_stage)
		e->o.on_stage(e->t->name, s, 0, 1, 0, NULL, e->o.payload);
}

static void stage_end(sbx_episode *e, sbx_episode_stage s, int ok, const char *detail)
{
	double d = sbx__now_mono() - e->stage_t0;
	e->res.stage_seconds[s] = d;
	if (e->o.on_stage)
		e->o.on_stage(e->t->name, s, 1, ok, d, detail, e->o.payload);
}

static int stage_resolve(sbx_episode *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_RESOLVE);
	int r = 0;
	if (strcmp(e->t->os, "linux") != 0)
		r = sbx_error_set(&err, -EINVAL, "os \"%s\" is not supported", e->t->os);
	else if (strcmp(e->t->network_mode, "allowlist") == 0)
		r = sbx_error_set(&err, -EINVAL, "network_mode \"allowlist\" cannot be enforced by "
				  "this provider");
	else if (e->t->gpus)
		r = sbx_error_set(&err, -EINVAL, "the task needs %u GPU(s)", e->t->gpus);
	if (r == 0) {
		double to = e->t->build_timeout_sec;
		double rem = sbx_episode_remaining(e);
		if (rem < 0.001)
			rem = 0.001;
		if (to <= 0 || rem < to)
			to = rem;
		r = sbx__task_resolve(&e->img, e->rt, e->t, e->o.force_build, to, NULL, NULL,
				      e->o.provider, &err);
	}
	if (r < 0) {
		e->setup_rc = r;
		set_status(e, SBX_EPISODE_ENV_ERROR, "resolve: %s", err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_RESOLVE, 0, err ? err->msg : NULL);
		sbx_error_free(err);
		return r;
	}
	e->res.image = xstrdup(e->img.image);
	e->res.image_how = xstrdup(e->img.how);
	_cleanup_free_ char *d = xasprintf("%s (%s)", e->img.image, e->img.how);
	stage_end(e, SBX_STAGE_RESOLVE, 1, d);
	return 0;
}

static int stage_create(sbx_episode *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_CREATE);
	char **labels = NULL;
	_cleanup_free_ char *l1 = xasprintf("sbx.task=%s", e->t->name);
	_cleanup_free_ char *l2 = xasprintf("sbx.agent=%s", e->res.agent);
	sbx__strv_push(&labels, l1);
	sbx__strv_push(&labels, l2);
	for (size_t i = 0; e->o.labels && e->o.labels[i]; i++)
		sbx__strv_push(&labels, e->o.labels[i]);
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	int r = e->conn->sandbox_spec(&so, e->t, &err);
	so.provider = e->o.provider;
	so.image = e->img.image;
	so.labels = (const char *const *)labels;
	so.ttl_s = (unsigned)ceil(sbx_episode_remaining(e)) + 300;
	/* The create pipeline bounds the create by the episode clock (a late
	 * sandbox is destroyed, never leaked) and keeps the TTL renewed while
	 * the episode runs; if this process dies, the TTL reclaims it. */
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.task = e->t->name;
	ctl.timeout_s = sbx_episode_remaining(e) > 0 ? sbx_episode_remaining(e) : 0.001;
	ctl.keepalive = 1;
	if (r == 0 && e->o.pool) {
		/* Warms the next episodes of this task; this one creates as usual. */
		sbx_pool_opts po = SBX_POOL_OPTS_INIT;
		po.spec = &so;
		po.size = e->o.pool;
		po.task = e->t->name;
		sbx_error *pe = NULL;
		if (sbx_pool_add(e->rt, &po, &pe) < 0)
			SBX_LOGW("episode %s: no warm pool: %s", e->t->name, pe ? pe->msg : "?");
		sbx_error_free(pe);
	}
	if (r == 0)
		r = sbx_sandbox_create_ex(&e->sb, e->rt, &so, &ctl, &err);
	/* Safe also on -ETIMEDOUT with the create still running: it works on its
	 * own copy of `so` (the image name, the task's strings, these labels). */
	sbx__strv_free(labels);
	if (r == 0) {
		e->res.sandbox_id = xstrdup(sbx_sandbox_id(e->sb));
		if (e->conn->prepare)
			r = e->conn->prepare(e, &err);
	}
	if (r < 0) {
		e->setup_rc = r;
		if (r == -ETIMEDOUT && !e->sb)
			set_status(e, SBX_EPISODE_TIME_LIMIT, "create: episode time limit reached");
		else
			set_status(e, SBX_EPISODE_ENV_ERROR, "create: %s", err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_CREATE, 0, err ? err->msg : NULL);
		sbx_error_free(err);
		return r;
	}
	stage_end(e, SBX_STAGE_CREATE, 1, e->res.sandbox_id);
	return 0;
}

/* The agent phase begins: the connector's inputs, the agent's clock. */
static void begin_agent(sbx_episode *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_AGENT);
	int r = e->conn->agent_inputs(&e->in, e->t, &err);
	if (r < 0) {
		e->setup_rc = r;
		set_status(e, SBX_EPISODE_AGENT_ERROR, "%s: agent inputs: %s", e->agent->name,
			   err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_AGENT, 0, e->res.detail);
		sbx_error_free(err);
		e->phase = SBX__PHASE_AGENT_END;
		return;
	}
	e->agent_timeout_s = e->o.agent_timeout_s > 0 ? e->o.agent_timeout_s : e->in.timeout_s;
	e->agent_deadline = e->agent_timeout_s > 0 ? sbx__now_mono() + e->agent_timeout_s : 0;
	e->phase = SBX__PHASE_AGENT;
}

void sbx__episode_end_agent(sbx_episode *e, sbx_agent_outcome *oc, int rc, const sbx_error *err)
{
	if (e->phase != SBX__PHASE_AGENT)
		return;
	e->phase = SBX__PHASE_AGENT_END;
	sbx_agent_outcome none = { .exit_code = e->last_exit_code };
	if (!oc)
		oc = &none;
	free(e->agent_log);
	e->agent_log = steal_ptr(&oc->log_path);
	e->res.end_reason = steal_ptr(&oc->end_reason);
	e->res.agent_metrics_json = steal_ptr(&oc->metrics_json);
	free(e->agent_traj);
	e->agent_traj = steal_ptr(&oc->trajectory_json);
	if (rc < 0) {
		set_status(e, SBX_EPISODE_AGENT_ERROR, "%s: %s", e->agent->name,
			   err && err->msg ? err->msg : "failed");
		stage_end(e, SBX_STAGE_AGENT, 0, e->res.detail);
		sbx__agent_outcome_free(oc);
		return;
	}
	int timed_out = e->agent_cut >= SBX_LIMIT_AGENT || oc->timed_out;
	e->res.agent_exit_code = oc->exit_code;
	e->res.agent_timed_out = timed_out;
	_cleanup_free_ char *d = NULL;
	if (e->agent_cut == SBX_LIMIT_EPISODE) {
		e->clock_expired = 1;
		set_status(e, SBX_EPISODE_TIME_LIMIT, "episode wall clock (%.0f s) ran out during the "
			   "agent phase", e->o.max_episode_s);
		d = xstrdup(e->res.detail);
	} else if (timed_out) {
		e->agent_timed_out = 1;
		d = e->agent_timeout_s > 0 ? xasprintf("agent timed out after %.0f s", e->agent_timeout_s)
					   : xstrdup("agent timed out");
	} else if (oc->detail) {
		d = steal_ptr(&oc->detail);
	}
	stage_end(e, SBX_STAGE_AGENT, !timed_out, d);
	sbx__agent_outcome_free(oc);
}

static void stage_verify(sbx_episode *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_VERIFY);
	sbx_verdict *v = &e->verdict;
	v->exit_code = -1;
	int r = e->conn->verify(e, v, &err);
	e->res.verifier_ran = v->ran;
	e->res.verifier_exit_code = v->ran ? v->exit_code : -1;
	e->res.verifier_timed_out = v->ran && v->timed_out;
	if (r < 0) {
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "verify: %s", err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res.detail);
		sbx_error_free(err);
		return;
	}
	switch (v->kind) {
	case SBX_VERDICT_CLOCK:
		e->clock_expired = 1;
		set_status(e, SBX_EPISODE_TIME_LIMIT, "episode wall clock (%.0f s) ran out during "
			   "verification", e->o.max_episode_s);
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res.detail);
		return;
	case SBX_VERDICT_TIMEOUT:
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "%s", v->detail ? v->detail
									: "verifier timed out");
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res.detail);
		return;
	case SBX_VERDICT_NO_REWARD:
		e->verdict_read = 1;
		if (!v->detail)
			v->detail = xstrdup("the verifier left no reward");
		stage_end(e, SBX_STAGE_VERIFY, 0, v->detail);
		return;
	case SBX_VERDICT_REWARD:
	default:
		break;
	}
	e->verdict_read = 1;
	v->kind = SBX_VERDICT_REWARD;
	_cleanup_free_ char *d = xasprintf("reward %g (%s)", v->reward, v->source ? v->source : "?");
	stage_end(e, SBX_STAGE_VERIFY, 1, d);
}

static char *tail_of(sbx_episode *e, const char *path)
{
	void *p = NULL;
	size_t len = 0;
	if (sbx_sandbox_read_file(&p, &len, e->sb, path, LOG_READ_MAX, NULL) < 0)
		return NULL;
	char *s = p;
	size_t off = len > TAIL_MAX ? len - TAIL_MAX : 0;
	char *t = xstrndup(s + off, len - off);
	free(p);
	return t;
}

static void keep_logs(sbx_episode *e, sbx_error **err)
{
	const char *dir = e->o.logs_dir;
	int r = sbx__mkdir_p(dir, 0755, err);
	for (size_t i = 0; r == 0 && e->conn->log_dirs && e->conn->log_dirs[i]; i++) {
		const char *src = e->conn->log_dirs[i];
		const char *base = strrchr(src, '/');
		_cleanup_free_ char *dst = xasprintf("%s/%s", dir, base ? base + 1 : src);
		sbx__rm_rf(dst, NULL);
		r = sbx_sandbox_download(e->sb, src, dst, err);
		if (r == -ENOENT) {
			sbx_error_free(*err);
			*err = NULL;
			r = 0;
		}
	}
	if (r == 0)
		e->res.logs_dir = xstrdup(dir);
}

static void stage_destroy(sbx_episode *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_DESTROY);
	if (e->agent_log)
		e->res.agent_log_tail = tail_of(e, e->agent_log);
	if (e->res.verifier_ran && e->verdict.log_path)
		e->res.verifier_log_tail = tail_of(e, e->verdict.log_path);
	int ok = 1;
	_cleanup_free_ char *d = NULL;
	if (e->o.logs_dir) {
		keep_logs(e, &err);
		if (err) {
			d = xasprintf("keep logs: %s", err->msg);
			sbx_error_free(err);
			err = NULL;
			ok = 0;
		}
	}
	if (sbx_sandbox_destroy(e->sb, &err) < 0) {
		free(d);
		d = xasprintf("destroy: %s", err ? err->msg : "failed");
		ok = 0;
		sbx_error_free(err);
	}
	sbx_sandbox_free(e->sb);
	e->sb = NULL;
	if (!ok) {
		char *nd = e->res.detail ? xasprintf("%s; %s", e->res.detail, d) : xstrdup(d);
		free(e->res.detail);
		e->res.detail = nd;
	}
	stage_end(e, SBX_STAGE_DESTROY, ok, d);
}

/* Status and reward from what happened. */
static void conclude(sbx_episode *e)
{
	sbx_episode_result *res = &e->res;
	sbx_verdict *v = &e->verdict;
	int no_reward = e->verdict_read && v->kind == SBX_VERDICT_NO_REWARD;
	if (e->clock_expired) {
		res->has_reward = 1;
		res->reward = 0;
		return;
	}
	if (e->status_set && res->status != SBX_EPISODE_VERIFIER_ERROR)
		return;
	if (e->agent_timed_out) {
		char *prev = res->detail;
		const char *why = no_reward ? v->detail : prev;
		double to = e->agent_timeout_s;
		res->detail = why ? xasprintf("agent timed out after %.0f s; verifier: %s", to, why)
				  : xasprintf("agent timed out after %.0f s", to);
		free(prev);
		res->status = SBX_EPISODE_TIME_LIMIT;
		res->has_reward = 1;
		res->reward = e->verdict_read && !no_reward ? v->reward : 0;
	} else if (e->status_set) {
		return;
	} else if (no_reward) {
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "%s", v->detail);
		return;
	} else if (e->verdict_read) {
		res->status = SBX_EPISODE_SUBMITTED;
		res->has_reward = 1;
		res->reward = v->reward;
	}
	if (e->verdict_read && !no_reward) {
		res->rewards_json = steal_ptr(&v->rewards_json);
		res->reward_source = steal_ptr(&v->source);
	}
}

static void write_result(sbx_episode *e)
{
	if (!e->res.logs_dir)
		return;
	_cleanup_free_ char *path = xasprintf("%s/result.json", e->res.logs_dir);
	_cleanup_free_ char *j = sbx_episode_result_to_json(&e->res);
	_cleanup_free_ char *line = xasprintf("%s\n", j);
	sbx__write_file_atomic(path, line, strlen(line), 0644, NULL);
}

int sbx__episode_opts_copy(sbx_episode_opts *o, const sbx_episode_opts *in, sbx_error **err)
{
	*o = (sbx_episode_opts)SBX_EPISODE_OPTS_INIT;
	if (!in)
		return 0;
	if (in->version == 1) {
		/* A caller built against version 1 passed a struct that ends at
		 * force_build: read no further. */
		memcpy(o, in, offsetof(sbx_episode_opts, agent_args));
		o->version = SBX_EPISODE_OPTS_VERSION;
		return 0;
	}
	if (in->version != SBX_EPISODE_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "episode opts: unknown version %u", in->version);
	*o = *in;
	return 0;
}

int sbx__episode_start(sbx_episode **out, sbx_runtime *rt, const sbx_task *task,
		       const sbx_episode_opts *opts, sbx_error **err)
{
	*out = NULL;
	sbx_episode_opts o;
	int rc = sbx__episode_opts_copy(&o, opts, err);
	if (rc < 0)
		return rc;
	if (!rt || !task)
		return sbx_error_set(err, -EINVAL, "episode: runtime and task are required");
	const sbx_agent_ops *agent = sbx__agent_default();
	int r = o.agent ? sbx_agent_lookup(&agent, o.agent, err) : 0;
	if (r < 0)
		return r;
	return sbx__episode_start_as(out, rt, task, opts, agent, err);
}

/* agent_args are "key=value"; obs_cap is the core's own (the observation
 * every turn returns), the rest are the agent's. */
static int parse_agent_args(size_t *obs_cap, const char *const *args, sbx_error **err)
{
	*obs_cap = 4000;
	for (size_t i = 0; args && args[i]; i++) {
		const char *eq = strchr(args[i], '=');
		if (!eq || eq == args[i])
			return sbx_error_set(err, -EINVAL, "agent_args[%zu] \"%.60s\": expected "
					     "key=value", i, args[i]);
		if (strncmp(args[i], "obs_cap=", 8) == 0) {
			uint64_t v;
			if (sbx__parse_u64(&v, eq + 1) < 0 || v == 0 || v > (1u << 24))
				return sbx_error_set(err, -EINVAL, "agent_args obs_cap \"%.40s\": "
						     "expected characters, 1 to 16777216", eq + 1);
			*obs_cap = (size_t)v;
		}
	}
	return 0;
}

int sbx__episode_start_as(sbx_episode **out, sbx_runtime *rt, const sbx_task *task,
			  const sbx_episode_opts *opts, const sbx_agent_ops *agent,
			  sbx_error **err)
{
	*out = NULL;
	sbx_episode_opts o;
	int rc = sbx__episode_opts_copy(&o, opts, err);
	if (rc < 0)
		return rc;
	if (!rt || !task || !agent)
		return sbx_error_set(err, -EINVAL, "episode: runtime, task and agent are required");
	size_t obs_cap;
	int r = parse_agent_args(&obs_cap, o.agent_args, err);
	if (r < 0)
		return r;
	if (o.max_episode_s <= 0)
		o.max_episode_s = sbx__episode_default_max_s();
	sbx_episode *e = xcalloc(1, sizeof(*e));
	e->rt = rt;
	e->t = task;
	e->conn = task->connector ? task->connector : sbx__connector_default();
	e->agent = agent;
	e->o = o;
	e->t0 = sbx__now_mono();
	e->deadline = e->t0 + o.max_episode_s;
	e->res.task = xstrdup(task->name);
	e->res.agent = xstrdup(agent->name);
	e->res.agent_exit_code = -1;
	e->res.verifier_exit_code = -1;
	e->last_exit_code = -1;
	e->obs_cap = obs_cap;
	if (stage_resolve(e) == 0 && stage_create(e) == 0)
		begin_agent(e);
	*out = e;
	return 0;
}

void sbx__episode_finish(sbx_episode *e, sbx_episode_result *out)
{
	sbx__episode_end_agent(e, NULL, 0, NULL);
	if (e->phase == SBX__PHASE_AGENT_END) {
		int go = !e->clock_expired &&
			 !(e->status_set && e->res.status == SBX_EPISODE_AGENT_ERROR);
		if (go && sbx_episode_remaining(e) <= 0) {
			e->clock_expired = 1;
			set_status(e, SBX_EPISODE_TIME_LIMIT, "episode wall clock (%.0f s) ran out "
				   "before verification", e->o.max_episode_s);
			go = 0;
		}
		if (go)
			stage_verify(e);
	}
	if (e->sb)
		stage_destroy(e);
	sbx_task_image_free(&e->img);
	conclude(e);
	if (e->conn->record)
		e->res.extra_json = e->conn->record(e);
	e->res.trajectory_json = sbx__episode_trajectory(e);
	sbx__episode_metrics_finish(e);
	e->res.total_seconds = sbx__now_mono() - e->t0;
	write_result(e);
	e->phase = SBX__PHASE_DONE;
	*out = e->res;
	memset(&e->res, 0, sizeof(e->res));
}

void sbx__episode_free(sbx_episode *e)
{
	if (!e)
		return;
	if (e->phase != SBX__PHASE_DONE) {
		sbx_episode_result r;
		sbx__episode_finish(e, &r);
		sbx_episode_result_free(&r);
	}
	sbx__agent_inputs_free(&e->in);
	sbx__verdict_free(&e->verdict);
	free(e->agent_log);
	free(e->agent_traj);
	json_decref(e->turns);
	free(e);
}

int sbx_episode_run(sbx_episode_result *out, sbx_runtime *rt, const sbx_task *task,
		    const sbx_episode_opts *opts, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	sbx_episode *e = NULL;
	int r = sbx__episode_start(&e, rt, task, opts, err);
	if (r < 0)
		return r;
	if (e->phase == SBX__PHASE_AGENT) {
		sbx_agent_outcome oc = { .exit_code = -1 };
		sbx_error *aerr = NULL;
		int rc = e->agent->run(e, &oc, &aerr);
		sbx__episode_end_agent(e, &oc, rc, aerr);
		sbx_error_free(aerr);
	}
	sbx__episode_finish(e, out);
	sbx__episode_free(e);
	return 0;
}

void sbx_episode_result_free(sbx_episode_result *r)
{
	if (!r)
		return;
	free(r->task);
	free(r->agent);
	free(r->rewards_json);
	free(r->reward_source);
	free(r->detail);
	free(r->image);
	free(r->image_how);
	free(r->sandbox_id);
	free(r->logs_dir);
	free(r->agent_log_tail);
	free(r->verifier_log_tail);
	free(r->end_reason);
	free(r->agent_metrics_json);
	free(r->extra_json);
	free(r->trajectory_json);
	memset(r, 0, sizeof(*r));
}
