/* SPDX-License-Identifier: MIT */
/*
 * The Harbor connector: everything that is Harbor's convention rather than
 * the episode's. The sandbox gets the task's resources and network, and
 * /logs/{agent,verifier,artifacts} (mode 777, as root); a docker_image task
 * without a Dockerfile gets the other files of environment/ in its workdir.
 * The agent gets instruction.md, solution/ (to /solution, run as
 * /solution/solve.sh with [solution].env) and [agent].timeout_sec/user.
 * Verification uploads tests/ to /tests only now, runs /tests/test.sh as
 * [verifier].user (root) with [verifier].env under [verifier].timeout_sec,
 * and reads /logs/verifier/reward.json or reward.txt (reward.c).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sandbox.h>
#include <sbx/sys/connector.h>

#include "connectors/harbor/harbor.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/str.h"

#define VERIFIER_LOG "/logs/verifier/test-stdout.txt"

static const char *const log_dirs[] = { "/logs/agent", "/logs/verifier", "/logs/artifacts", NULL };

static int spec(sbx_sandbox_opts *so, const sbx_task *t, sbx_error **err)
{
	(void)err;
	so->cpus = t->cpus;
	so->memory_mb = t->memory_mb;
	so->storage_mb = t->storage_mb;
	/* "public" is the internet through NAT, never the host's network (its
	 * loopback services and the keys on its lo); "allowlist" the same with
	 * egress only to the task's allowed_hosts. */
	so->network = strcmp(t->network_mode, "no-network") == 0 ? SBX_NETWORK_NONE : SBX_NETWORK_INTERNET;
	if (strcmp(t->network_mode, "allowlist") == 0)
		so->allow_out = (const char *const *)t->allowed_hosts;
	so->env = (const char *const *)t->env;
	so->workdir = t->workdir;
	return 0;
}

/* docker_image without a Dockerfile: the other files of environment/ go into
 * the workdir, as Harbor does. */
static int upload_env_files(sbx_episode *ep, sbx_error **err)
{
	const sbx_task *t = sbx_episode_task(ep);
	if (t->has_dockerfile || !t->docker_image)
		return 0;
	_cleanup_free_ char *envdir = xasprintf("%s/environment", t->dir);
	_cleanup_closedir_ DIR *d = opendir(envdir);
	if (!d)
		return 0;
	const char *wd = t->workdir ? t->workdir : "/";
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *src = xasprintf("%s/%s", envdir, de->d_name);
		_cleanup_free_ char *dst = xasprintf("%s/%s", strcmp(wd, "/") ? wd : "", de->d_name);
		int r = sbx_sandbox_upload(sbx_episode_sandbox(ep), src, dst, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int prepare(sbx_episode *ep, sbx_error **err)
{
	int r = sbx_episode_root_sh(ep, "mkdir -p /logs/agent /logs/verifier /logs/artifacts && "
				    "chmod 777 /logs/agent /logs/verifier /logs/artifacts", err);
	if (r < 0)
		return sbx_error_prefix(err, r, "create /logs");
	return upload_env_files(ep, err);
}

static int agent_inputs(sbx_agent_inputs *in, const sbx_task *t, sbx_error **err)
{
	(void)err;
	in->instruction = xstrdup(t->instruction);
	in->user = t->agent_user ? xstrdup(t->agent_user) : NULL;
	in->timeout_s = t->agent_timeout_sec;
	in->logs_dir = xstrdup("/logs/agent");
	in->solution_dir = xasprintf("%s/solution", t->dir);
	if (!t->has_solution)
		in->solution_missing = xasprintf("%s/solution/solve.sh is missing", t->dir);
	in->solution_dest = xstrdup("/solution");
	in->solution_entry = xstrdup("/solution/solve.sh");
	in->solution_env = sbx__strv_dup((const char *const *)t->solution_env);
	return 0;
}

/* Reads a file from the sandbox; *present = 0 when it does not exist. */
static int read_opt(sbx_sandbox *sb, const char *path, char **data, size_t *len, int *present,
		    sbx_error **err)
{
	void *p = NULL;
	*present = 0;
	int r = sbx_sandbox_read_file(&p, len, sb, path, SBX_REWARD_MAX_FILE, err);
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

static int read_reward(sbx_episode *ep, sbx_verdict *v, sbx_error **err)
{
	sbx_sandbox *sb = sbx_episode_sandbox(ep);
	_cleanup_free_ char *json = NULL, *txt = NULL;
	size_t jlen = 0, tlen = 0;
	int jp, tp;
	int r = read_opt(sb, "/logs/verifier/reward.json", &json, &jlen, &jp, err);
	if (r == 0)
		r = read_opt(sb, "/logs/verifier/reward.txt", &txt, &tlen, &tp, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "read reward");
	sbx_reward rw;
	sbx__reward_parse(&rw, jp ? json : NULL, jlen, tp ? txt : NULL, tlen);
	if (rw.status == SBX_REWARD_OK) {
		v->kind = SBX_VERDICT_REWARD;
		v->reward = rw.reward;
		v->rewards_json = steal_ptr(&rw.rewards_json);
		v->source = xstrdup(rw.source);
	} else {
		v->kind = SBX_VERDICT_NO_REWARD;
		v->detail = steal_ptr(&rw.detail);
	}
	sbx__reward_free(&rw);
	return 0;
}

static int verify(sbx_episode *ep, sbx_verdict *v, sbx_error **err)
{
	const sbx_task *t = sbx_episode_task(ep);
	_cleanup_free_ char *tests = xasprintf("%s/tests", t->dir);
	/* The agent had the sandbox until now: a /tests it made would take the
	 * upload one level down (tests/ in /tests/tests), and a reward.json it
	 * planted would outrank the reward.txt test.sh writes. Start both clean. */
	int r = sbx_episode_root_sh(ep, "rm -rf /tests /logs/verifier && mkdir -p /logs/verifier && "
				    "chmod 777 /logs/verifier", err);
	if (r < 0)
		return sbx_error_prefix(err, r, "wipe /tests and /logs/verifier");
	r = sbx_sandbox_upload(sbx_episode_sandbox(ep), tests, "/tests", err);
	if (r == 0)
		r = sbx_episode_root_sh(ep, "chmod +x /tests/test.sh", err);
	if (r < 0)
		return sbx_error_prefix(err, r, "upload tests");
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = "(/tests/test.sh) > " VERIFIER_LOG " 2>&1";
	x.user = t->verifier_user ? t->verifier_user : "root";
	x.env = (const char *const *)t->verifier_env;
	x.timeout_s = t->verifier_timeout_sec;
	x.output_max = 65536;
	sbx_exec_result res;
	sbx_episode_limit limit;
	r = sbx_episode_exec(&res, &limit, ep, &x, err);
	if (r < 0)
		return r;
	v->ran = 1;
	v->exit_code = res.exit_code;
	v->timed_out = res.timed_out;
	v->log_path = xstrdup(VERIFIER_LOG);
	sbx_exec_result_free(&res);
	if (v->timed_out) {
		v->kind = limit == SBX_LIMIT_EPISODE ? SBX_VERDICT_CLOCK : SBX_VERDICT_TIMEOUT;
		if (v->kind == SBX_VERDICT_TIMEOUT)
			v->detail = xasprintf("verifier timed out after %.0f s", t->verifier_timeout_sec);
		return 0;
	}
	return read_reward(ep, v, err);
}

const sbx_connector_ops sbx_connector_harbor = {
	.version = SBX_CONNECTOR_OPS_VERSION,
	.name = "harbor",
	.summary = "Harbor task directories (task.toml, instruction.md, environment/, tests/, "
		   "solution/)",
	.probe = sbx__harbor_probe,
	.load = sbx__harbor_load,
	.sandbox_spec = spec,
	.prepare = prepare,
	.agent_inputs = agent_inputs,
	.verify = verify,
	.log_dirs = log_dirs,
};
