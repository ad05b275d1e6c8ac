/* SPDX-License-Identifier: MIT */
/*
 * One Harbor-faithful episode: resolve the task's image (task_image.c),
 * create a sandbox with the task's resources, make /logs/{agent,verifier,
 * artifacts}, run the agent (the oracle replays solution/) under the agent
 * timeout, only then upload tests/ and run /tests/test.sh, read the reward
 * file, keep the logs, destroy.
 * The whole episode is bounded by a wall clock; docs/tasks.md has the rules.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sbx/sandbox.h>

#include "tasks/task_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
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

struct ep {
	sbx_runtime *rt;
	const sbx_task *t;
	const sbx_episode_opts *o;
	sbx_episode_result *res;
	sbx_sandbox *sb;
	double deadline;
	double stage_t0;
	int status_set;        /* res->status is final */
	int clock_expired;     /* the episode wall clock cut a phase */
	int agent_timed_out;
	sbx_reward reward;
	int reward_read;
};

static void set_status(struct ep *e, sbx_episode_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_status(struct ep *e, sbx_episode_status st, const char *fmt, ...)
{
	if (e->status_set)
		return;
	va_list ap;
	va_start(ap, fmt);
	e->res->status = st;
	free(e->res->detail);
	e->res->detail = xvasprintf(fmt, ap);
	va_end(ap);
	e->status_set = 1;
}

static void stage_begin(struct ep *e, sbx_episode_stage s)
{
	e->stage_t0 = sbx__now_mono();
	if (e->o->on_stage)
		e->o->on_stage(e->t->name, s, 0, 1, 0, NULL, e->o->payload);
}

static void stage_end(struct ep *e, sbx_episode_stage s, int ok, const char *detail)
{
	double d = sbx__now_mono() - e->stage_t0;
	e->res->stage_seconds[s] = d;
	if (e->o->on_stage)
		e->o->on_stage(e->t->name, s, 1, ok, d, detail, e->o->payload);
}

static double remaining(const struct ep *e)
{
	return e->deadline - sbx__now_mono();
}

/* Phase timeout bounded by the episode clock; *by_clock says which bound won. */
static double bounded(const struct ep *e, double phase_s, int *by_clock)
{
	double rem = remaining(e);
	if (rem < 0.001)
		rem = 0.001;
	*by_clock = phase_s <= 0 || rem < phase_s;
	return *by_clock ? rem : phase_s;
}

static int sh(struct ep *e, sbx_exec_result *r, const char *cmd, const char *user,
	      char *const *env, double timeout_s, sbx_error **err)
{
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = cmd;
	x.user = user;
	x.env = (const char *const *)env;
	x.timeout_s = timeout_s;
	x.output_max = 65536;
	memset(r, 0, sizeof(*r));
	return sbx_sandbox_exec(r, e->sb, &x, err);
}

/* Runs a short root command that must succeed. */
static int root_sh(struct ep *e, const char *cmd, sbx_error **err)
{
	sbx_exec_result r;
	int rc = sh(e, &r, cmd, "root", NULL, 120, err);
	if (rc == 0 && (r.exit_code != 0 || r.timed_out))
		rc = sbx_error_set(err, -EIO, "'%s' failed (exit %d): %.200s", cmd, r.exit_code,
				   r.err ? r.err : "");
	sbx_exec_result_free(&r);
	return rc;
}

static int stage_resolve(struct ep *e, sbx_task_image *img)
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
		int by_clock;
		double to = bounded(e, e->t->build_timeout_sec, &by_clock);
		r = sbx__task_resolve(img, e->rt, e->t, e->o->force_build, to, NULL, NULL,
				      e->o->provider, &err);
	}
	if (r < 0) {
		set_status(e, SBX_EPISODE_ENV_ERROR, "resolve: %s", err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_RESOLVE, 0, err ? err->msg : NULL);
		sbx_error_free(err);
		return r;
	}
	e->res->image = xstrdup(img->image);
	e->res->image_how = xstrdup(img->how);
	_cleanup_free_ char *d = xasprintf("%s (%s)", img->image, img->how);
	stage_end(e, SBX_STAGE_RESOLVE, 1, d);
	return 0;
}

/* docker_image without a Dockerfile: the other files of environment/ go into
 * the workdir, as Harbor does. */
static int upload_env_files(struct ep *e, sbx_error **err)
{
	if (e->t->has_dockerfile || !e->t->docker_image)
		return 0;
	_cleanup_free_ char *envdir = xasprintf("%s/environment", e->t->dir);
	_cleanup_closedir_ DIR *d = opendir(envdir);
	if (!d)
		return 0;
	const char *wd = e->t->workdir ? e->t->workdir : "/";
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *src = xasprintf("%s/%s", envdir, de->d_name);
		_cleanup_free_ char *dst = xasprintf("%s/%s", strcmp(wd, "/") ? wd : "", de->d_name);
		int r = sbx_sandbox_upload(e->sb, src, dst, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int stage_create(struct ep *e, const sbx_task_image *img)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_CREATE);
	char **labels = NULL;
	_cleanup_free_ char *l1 = xasprintf("sbx.task=%s", e->t->name);
	_cleanup_free_ char *l2 = xasprintf("sbx.agent=%s", e->res->agent);
	sbx__strv_push(&labels, l1);
	sbx__strv_push(&labels, l2);
	for (size_t i = 0; e->o->labels && e->o->labels[i]; i++)
		sbx__strv_push(&labels, e->o->labels[i]);
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.provider = e->o->provider;
	so.image = img->image;
	so.cpus = e->t->cpus;
	so.memory_mb = e->t->memory_mb;
	so.storage_mb = e->t->storage_mb;
	/* "public" is the internet through NAT, never the host's network (its
	 * loopback services and the keys on its lo); "allowlist" the same with
	 * egress only to the task's allowed_hosts. */
	so.network = strcmp(e->t->network_mode, "no-network") == 0 ? SBX_NETWORK_NONE : SBX_NETWORK_INTERNET;
	if (strcmp(e->t->network_mode, "allowlist") == 0)
		so.allow_out = (const char *const *)e->t->allowed_hosts;
	so.env = (const char *const *)e->t->env;
	so.workdir = e->t->workdir;
	so.labels = (const char *const *)labels;
	so.ttl_s = (unsigned)ceil(remaining(e)) + 300;
	/* The create pipeline bounds the create by the episode clock (a late
	 * sandbox is destroyed, never leaked) and keeps the TTL renewed while
	 * the episode runs; if this process dies, the TTL reclaims it. */
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.task = e->t->name;
	ctl.timeout_s = remaining(e) > 0 ? remaining(e) : 0.001;
	ctl.keepalive = 1;
	int r = sbx_sandbox_create_ex(&e->sb, e->rt, &so, &ctl, &err);
	/* Safe also on -ETIMEDOUT with the create still running: it works on its
	 * own copy of `so` (the image name, the task's strings, these labels). */
	sbx__strv_free(labels);
	if (r == 0) {
		e->res->sandbox_id = xstrdup(sbx_sandbox_id(e->sb));
		r = root_sh(e, "mkdir -p /logs/agent /logs/verifier /logs/artifacts && "
			    "chmod 777 /logs/agent /logs/verifier /logs/artifacts", &err);
		if (r < 0)
			sbx_error_prefix(&err, r, "create /logs");
	}
	if (r == 0)
		r = upload_env_files(e, &err);
	if (r < 0) {
		if (r == -ETIMEDOUT && !e->sb)
			set_status(e, SBX_EPISODE_TIME_LIMIT, "create: episode time limit reached");
		else
			set_status(e, SBX_EPISODE_ENV_ERROR, "create: %s", err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_CREATE, 0, err ? err->msg : NULL);
		sbx_error_free(err);
		return r;
	}
	stage_end(e, SBX_STAGE_CREATE, 1, e->res->sandbox_id);
	return 0;
}

static void stage_agent(struct ep *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_AGENT);
	if (strcmp(e->res->agent, "nop") == 0) {
		stage_end(e, SBX_STAGE_AGENT, 1, "nop agent");
		return;
	}
	if (!e->t->has_solution) {
		set_status(e, SBX_EPISODE_AGENT_ERROR, "oracle: %s/solution/solve.sh is missing",
			   e->t->dir);
		stage_end(e, SBX_STAGE_AGENT, 0, e->res->detail);
		return;
	}
	_cleanup_free_ char *sol = xasprintf("%s/solution", e->t->dir);
	int r = sbx_sandbox_upload(e->sb, sol, "/solution", &err);
	if (r == 0)
		r = root_sh(e, "chmod +x /solution/solve.sh", &err);
	if (r < 0) {
		set_status(e, SBX_EPISODE_AGENT_ERROR, "oracle: upload solution: %s",
			   err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_AGENT, 0, e->res->detail);
		sbx_error_free(err);
		return;
	}
	char **env = NULL;
	sbx__strv_push(&env, "DEBIAN_FRONTEND=noninteractive");
	for (size_t i = 0; e->t->solution_env[i]; i++)
		sbx__strv_setenv(&env, e->t->solution_env[i]);
	double agent_to = e->o->agent_timeout_s > 0 ? e->o->agent_timeout_s : e->t->agent_timeout_sec;
	int by_clock;
	double to = bounded(e, agent_to, &by_clock);
	sbx_exec_result x;
	r = sh(e, &x, "(/solution/solve.sh) > /logs/agent/oracle.txt 2>&1", e->t->agent_user, env,
	       to, &err);
	sbx__strv_free(env);
	if (r < 0) {
		set_status(e, SBX_EPISODE_AGENT_ERROR, "oracle: %s", err ? err->msg : "exec failed");
		stage_end(e, SBX_STAGE_AGENT, 0, e->res->detail);
		sbx_error_free(err);
		return;
	}
	e->res->agent_exit_code = x.exit_code;
	e->res->agent_timed_out = x.timed_out;
	_cleanup_free_ char *d = NULL;
	if (x.timed_out && by_clock) {
		e->clock_expired = 1;
		set_status(e, SBX_EPISODE_TIME_LIMIT, "episode wall clock (%.0f s) ran out during the "
			   "agent phase", e->o->max_episode_s);
		d = xstrdup(e->res->detail);
	} else if (x.timed_out) {
		e->agent_timed_out = 1;
		d = xasprintf("agent timed out after %.0f s", to);
	} else {
		d = xasprintf("solve.sh exit %d", x.exit_code);
		if (x.exit_code != 0) {
			_cleanup_free_ char *code = xasprintf("%d\n", x.exit_code);
			sbx_sandbox_write_file(e->sb, "/logs/agent/exit-code.txt", code, strlen(code),
					       0644, NULL);
		}
	}
	int ok = !x.timed_out;
	sbx_exec_result_free(&x);
	stage_end(e, SBX_STAGE_AGENT, ok, d);
}

/* Reads a file from the sandbox; *present = 0 when it does not exist. */
static int read_opt(struct ep *e, const char *path, char **data, size_t *len, int *present,
		    sbx_error **err)
{
	void *p = NULL;
	*present = 0;
	int r = sbx_sandbox_read_file(&p, len, e->sb, path, SBX_REWARD_MAX_FILE, err);
	if (r == -ENOENT) {
		if (err) {
			sbx_error_free(*err);
			*err = NULL;
		}
		return 0;
	}
	if (r < 0)
		return r;
	*data = p;
	*present = 1;
	return 0;
}

static void stage_verify(struct ep *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_VERIFY);
	_cleanup_free_ char *tests = xasprintf("%s/tests", e->t->dir);
	int r = sbx_sandbox_upload(e->sb, tests, "/tests", &err);
	if (r == 0)
		r = root_sh(e, "chmod +x /tests/test.sh", &err);
	if (r < 0) {
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "verify: upload tests: %s",
			   err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res->detail);
		sbx_error_free(err);
		return;
	}
	int by_clock;
	double to = bounded(e, e->t->verifier_timeout_sec, &by_clock);
	sbx_exec_result x;
	e->res->verifier_ran = 1;
	r = sh(e, &x, "(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1",
	       e->t->verifier_user ? e->t->verifier_user : "root", e->t->verifier_env, to, &err);
	if (r < 0) {
		e->res->verifier_ran = 0;
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "verify: %s", err ? err->msg : "exec failed");
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res->detail);
		sbx_error_free(err);
		return;
	}
	e->res->verifier_exit_code = x.exit_code;
	e->res->verifier_timed_out = x.timed_out;
	int timed_out = x.timed_out;
	sbx_exec_result_free(&x);
	if (timed_out) {
		if (by_clock) {
			e->clock_expired = 1;
			set_status(e, SBX_EPISODE_TIME_LIMIT, "episode wall clock (%.0f s) ran out during "
				   "verification", e->o->max_episode_s);
		} else {
			set_status(e, SBX_EPISODE_VERIFIER_ERROR, "verifier timed out after %.0f s", to);
		}
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res->detail);
		return;
	}
	_cleanup_free_ char *json = NULL, *txt = NULL;
	size_t jlen = 0, tlen = 0;
	int jp, tp;
	r = read_opt(e, "/logs/verifier/reward.json", &json, &jlen, &jp, &err);
	if (r == 0)
		r = read_opt(e, "/logs/verifier/reward.txt", &txt, &tlen, &tp, &err);
	if (r < 0) {
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "verify: read reward: %s",
			   err ? err->msg : "failed");
		stage_end(e, SBX_STAGE_VERIFY, 0, e->res->detail);
		sbx_error_free(err);
		return;
	}
	sbx__reward_parse(&e->reward, jp ? json : NULL, jlen, tp ? txt : NULL, tlen);
	e->reward_read = 1;
	if (e->reward.status != SBX_REWARD_OK) {
		stage_end(e, SBX_STAGE_VERIFY, 0, e->reward.detail);
		return;
	}
	_cleanup_free_ char *d = xasprintf("reward %g (%s)", e->reward.reward, e->reward.source);
	stage_end(e, SBX_STAGE_VERIFY, 1, d);
}

static char *tail_of(struct ep *e, const char *path)
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

static void keep_logs(struct ep *e, sbx_error **err)
{
	const char *dir = e->o->logs_dir;
	int r = sbx__mkdir_p(dir, 0755, err);
	const char *subs[] = { "agent", "verifier", "artifacts" };
	for (size_t i = 0; r == 0 && i < SBX_ARRAY_SIZE(subs); i++) {
		_cleanup_free_ char *dst = xasprintf("%s/%s", dir, subs[i]);
		_cleanup_free_ char *src = xasprintf("/logs/%s", subs[i]);
		sbx__rm_rf(dst, NULL);
		r = sbx_sandbox_download(e->sb, src, dst, err);
		if (r == -ENOENT) {
			sbx_error_free(*err);
			*err = NULL;
			r = 0;
		}
	}
	if (r == 0)
		e->res->logs_dir = xstrdup(dir);
}

static void stage_destroy(struct ep *e)
{
	sbx_error *err = NULL;
	stage_begin(e, SBX_STAGE_DESTROY);
	if (strcmp(e->res->agent, "oracle") == 0)
		e->res->agent_log_tail = tail_of(e, "/logs/agent/oracle.txt");
	if (e->res->verifier_ran)
		e->res->verifier_log_tail = tail_of(e, "/logs/verifier/test-stdout.txt");
	int ok = 1;
	_cleanup_free_ char *d = NULL;
	if (e->o->logs_dir) {
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
		char *nd = e->res->detail ? xasprintf("%s; %s", e->res->detail, d) : xstrdup(d);
		free(e->res->detail);
		e->res->detail = nd;
	}
	stage_end(e, SBX_STAGE_DESTROY, ok, d);
}

/* Status and reward from what happened. */
static void conclude(struct ep *e)
{
	sbx_episode_result *res = e->res;
	if (e->clock_expired) {
		res->has_reward = 1;
		res->reward = 0;
		return;
	}
	if (e->status_set && res->status != SBX_EPISODE_VERIFIER_ERROR)
		return;
	if (e->agent_timed_out) {
		char *prev = res->detail;
		const char *why = e->reward_read && e->reward.status != SBX_REWARD_OK ? e->reward.detail
										     : prev;
		double to = e->o->agent_timeout_s > 0 ? e->o->agent_timeout_s : e->t->agent_timeout_sec;
		res->detail = why ? xasprintf("agent timed out after %.0f s; verifier: %s", to, why)
				  : xasprintf("agent timed out after %.0f s", to);
		free(prev);
		res->status = SBX_EPISODE_TIME_LIMIT;
		res->has_reward = 1;
		res->reward = e->reward_read && e->reward.status == SBX_REWARD_OK ? e->reward.reward : 0;
	} else if (e->status_set) {
		return;
	} else if (e->reward_read && e->reward.status != SBX_REWARD_OK) {
		set_status(e, SBX_EPISODE_VERIFIER_ERROR, "%s", e->reward.detail);
		return;
	} else if (e->reward_read) {
		res->status = SBX_EPISODE_SUBMITTED;
		res->has_reward = 1;
		res->reward = e->reward.reward;
	}
	if (e->reward_read && e->reward.status == SBX_REWARD_OK) {
		res->rewards_json = steal_ptr(&e->reward.rewards_json);
		res->reward_source = xstrdup(e->reward.source);
	}
}

static void write_result(struct ep *e)
{
	if (!e->res->logs_dir)
		return;
	_cleanup_free_ char *path = xasprintf("%s/result.json", e->res->logs_dir);
	_cleanup_free_ char *j = sbx_episode_result_to_json(e->res);
	_cleanup_free_ char *line = xasprintf("%s\n", j);
	sbx__write_file_atomic(path, line, strlen(line), 0644, NULL);
}

int sbx_episode_run(sbx_episode_result *out, sbx_runtime *rt, const sbx_task *task,
		    const sbx_episode_opts *opts, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	if (opts) {
		if (opts->version != SBX_EPISODE_OPTS_VERSION)
			return sbx_error_set(err, -EINVAL, "episode opts: unknown version %u",
					     opts->version);
		o = *opts;
	}
	if (!rt || !task)
		return sbx_error_set(err, -EINVAL, "episode: runtime and task are required");
	if (o.agent && strcmp(o.agent, "oracle") && strcmp(o.agent, "nop"))
		return sbx_error_set(err, -EINVAL, "unknown agent \"%s\" (known: oracle, nop)", o.agent);
	if (o.max_episode_s <= 0)
		o.max_episode_s = sbx__episode_default_max_s();
	double t0 = sbx__now_mono();
	out->task = xstrdup(task->name);
	out->agent = xstrdup(o.agent ? o.agent : "oracle");
	out->agent_exit_code = -1;
	out->verifier_exit_code = -1;
	struct ep e = { .rt = rt, .t = task, .o = &o, .res = out, .deadline = t0 + o.max_episode_s };
	sbx_task_image img = { 0 };
	if (stage_resolve(&e, &img) == 0 && stage_create(&e, &img) == 0) {
		stage_agent(&e);
		int go = !e.clock_expired && !(e.status_set && out->status == SBX_EPISODE_AGENT_ERROR);
		if (go && remaining(&e) <= 0) {
			e.clock_expired = 1;
			set_status(&e, SBX_EPISODE_TIME_LIMIT, "episode wall clock (%.0f s) ran out "
				   "before verification", o.max_episode_s);
			go = 0;
		}
		if (go)
			stage_verify(&e);
	}
	if (e.sb)
		stage_destroy(&e);
	sbx_task_image_free(&img);
	conclude(&e);
	sbx__reward_free(&e.reward);
	out->total_seconds = sbx__now_mono() - t0;
	write_result(&e);
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
	memset(r, 0, sizeof(*r));
}
