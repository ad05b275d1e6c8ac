/* SPDX-License-Identifier: MIT */
/*
 * The oracle agent (Harbor's OracleAgent; `golden` in the CLI): replays the
 * task's reference solution. Its files go to the sandbox, the entry script
 * is made executable as root and run as one agent step, as the agent user,
 * with DEBIAN_FRONTEND=noninteractive and the connector's solution env, its
 * output in <agent logs>/oracle.txt. A non-zero exit is recorded
 * (exit-code.txt next to the log), never fatal: the verifier decides.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/connector.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/str.h"

static int run(sbx_episode *ep, sbx_agent_outcome *out, sbx_error **err)
{
	const sbx_agent_inputs *in = sbx_episode_agent_inputs(ep);
	if (in->solution_missing || !in->solution_dir || !in->solution_dest || !in->solution_entry)
		return sbx_error_set(err, -ENOENT, "%s", in->solution_missing ? in->solution_missing
					: "the task has no reference solution");
	sbx_sandbox *sb = sbx_episode_sandbox(ep);
	int r = sbx_sandbox_upload(sb, in->solution_dir, in->solution_dest, err);
	if (r == 0) {
		_cleanup_free_ char *chmod = xasprintf("chmod +x %s", in->solution_entry);
		r = sbx_episode_root_sh(ep, chmod, err);
	}
	if (r < 0)
		return sbx_error_prefix(err, r, "upload solution");
	const char *logs = in->logs_dir ? in->logs_dir : "/tmp";
	_cleanup_free_ char *log = xasprintf("%s/oracle.txt", logs);
	_cleanup_free_ char *cmd = xasprintf("(%s) > %s 2>&1", in->solution_entry, log);
	char **env = NULL;
	sbx__strv_push(&env, "DEBIAN_FRONTEND=noninteractive");
	for (size_t i = 0; in->solution_env && in->solution_env[i]; i++)
		sbx__strv_setenv(&env, in->solution_env[i]);
	sbx_step_opts so = SBX_STEP_OPTS_INIT;
	so.command = cmd;
	so.env = (const char *const *)env;
	sbx_exec_result x;
	sbx_episode_limit limit;
	r = sbx_episode_step(&x, &limit, ep, &so, err);
	sbx__strv_free(env);
	if (r < 0)
		return r;
	out->log_path = steal_ptr(&log);
	out->exit_code = x.exit_code;
	const char *base = strrchr(in->solution_entry, '/');
	out->detail = xasprintf("%s exit %d", base ? base + 1 : in->solution_entry, x.exit_code);
	if (!x.timed_out && x.exit_code != 0) {
		_cleanup_free_ char *path = xasprintf("%s/exit-code.txt", logs);
		_cleanup_free_ char *code = xasprintf("%d\n", x.exit_code);
		sbx_sandbox_write_file(sb, path, code, strlen(code), 0644, NULL);
	}
	sbx_exec_result_free(&x);
	return 0;
}

static const char *const aliases[] = { "golden", NULL };

const sbx_agent_ops sbx_agent_oracle = {
	.version = SBX_AGENT_OPS_VERSION,
	.name = "oracle",
	.aliases = aliases,
	.summary = "replays the task's reference solution (Harbor's oracle)",
	.run = run,
};
