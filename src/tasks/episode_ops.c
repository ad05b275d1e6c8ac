/* SPDX-License-Identifier: MIT */
/*
 * What connectors and agents may do with a running episode
 * (include/sbx/sys/connector.h): read its task, sandbox and inputs, run
 * commands bounded by the episode's clocks, run agent turns. The limits are
 * computed here, once, so that every agent and connector gets the same
 * timeout rules (docs/tasks.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/episode_int.h"
#include "util/alloc.h"
#include "util/fs.h"
#include "util/str.h"

#define STEP_OUTPUT_MAX 65536

const sbx_task *sbx_episode_task(const sbx_episode *ep)
{
	return ep->t;
}

sbx_runtime *sbx_episode_runtime(const sbx_episode *ep)
{
	return ep->rt;
}

sbx_sandbox *sbx_episode_sandbox(const sbx_episode *ep)
{
	return ep->sb;
}

const sbx_agent_inputs *sbx_episode_agent_inputs(const sbx_episode *ep)
{
	return &ep->in;
}

const char *const *sbx_episode_agent_args(const sbx_episode *ep)
{
	return ep->o.agent_args;
}

double sbx_episode_remaining(const sbx_episode *ep)
{
	return ep->deadline - sbx__now_mono();
}

double sbx_episode_agent_remaining(const sbx_episode *ep)
{
	double now = sbx__now_mono();
	double rem = ep->deadline - now;
	if (ep->phase == SBX__PHASE_AGENT && ep->agent_deadline > 0 && ep->agent_deadline - now < rem)
		rem = ep->agent_deadline - now;
	return rem;
}

/* The nearest of the command's own limit (0 = none), the agent limit
 * (0 = none) and the episode clock; a tie goes to the narrower limit, so
 * the clock is blamed only when it is strictly nearer. */
static double nearest(const sbx_episode *e, double command_s, double agent_deadline,
		      sbx_episode_limit *which)
{
	double now = sbx__now_mono();
	double to = e->deadline - now;
	if (to < 0.001)
		to = 0.001;
	*which = SBX_LIMIT_EPISODE;
	if (agent_deadline > 0) {
		double a = agent_deadline - now;
		if (a < 0.001)
			a = 0.001;
		if (a <= to) {
			to = a;
			*which = SBX_LIMIT_AGENT;
		}
	}
	if (command_s > 0 && command_s <= to) {
		to = command_s;
		*which = SBX_LIMIT_COMMAND;
	}
	return to;
}

static int bounded_exec(sbx_exec_result *out, sbx_episode_limit *limit_out, sbx_episode *e,
			const sbx_exec_opts *x, double agent_deadline, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	*limit_out = SBX_LIMIT_NONE;
	if (!e->sb)
		return sbx_error_set(err, -EINVAL, "episode of %s: no sandbox", e->t->name);
	sbx_exec_opts o = *x;
	sbx_episode_limit which;
	o.timeout_s = nearest(e, x->timeout_s, agent_deadline, &which);
	int r = sbx_sandbox_exec(out, e->sb, &o, err);
	if (r == 0 && out->timed_out)
		*limit_out = which;
	return r;
}

int sbx_episode_exec(sbx_exec_result *out, sbx_episode_limit *limit_out, sbx_episode *ep,
		     const sbx_exec_opts *x, sbx_error **err)
{
	return bounded_exec(out, limit_out, ep, x, 0, err);
}

int sbx_episode_root_sh(sbx_episode *ep, const char *cmd, sbx_error **err)
{
	if (!ep->sb)
		return sbx_error_set(err, -EINVAL, "episode of %s: no sandbox", ep->t->name);
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = cmd;
	x.user = "root";
	x.timeout_s = 120;
	x.output_max = 65536;
	sbx_exec_result r;
	memset(&r, 0, sizeof(r));
	int rc = sbx_sandbox_exec(&r, ep->sb, &x, err);
	if (rc == 0 && (r.exit_code != 0 || r.timed_out))
		rc = sbx_error_set(err, -EIO, "'%s' failed (exit %d): %.200s", cmd, r.exit_code,
				   r.err ? r.err : "");
	sbx_exec_result_free(&r);
	return rc;
}

int sbx_episode_step(sbx_exec_result *out, sbx_episode_limit *limit_out, sbx_episode *ep,
		     const sbx_step_opts *o, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	*limit_out = SBX_LIMIT_NONE;
	if (!o || o->version != SBX_STEP_OPTS_VERSION || !o->command)
		return sbx_error_set(err, -EINVAL, "episode step: missing command or unknown opts "
				     "version %u", o ? o->version : 0);
	if (ep->phase != SBX__PHASE_AGENT)
		return sbx_error_set(err, -EINVAL, "episode of %s: steps run only during the agent "
				     "phase", ep->t->name);
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = o->command;
	x.user = o->user ? o->user : ep->in.user;
	x.env = o->env;
	x.timeout_s = o->timeout_s;
	x.output_max = o->output_max ? o->output_max : STEP_OUTPUT_MAX;
	int r = bounded_exec(out, limit_out, ep, &x, ep->agent_deadline, err);
	ep->steps++;
	if (r == 0) {
		ep->last_exit_code = out->exit_code;
		if (*limit_out > ep->agent_cut && *limit_out >= SBX_LIMIT_AGENT)
			ep->agent_cut = *limit_out;
	}
	return r;
}

void sbx__agent_inputs_free(sbx_agent_inputs *in)
{
	free(in->instruction);
	free(in->user);
	free(in->logs_dir);
	free(in->solution_dir);
	free(in->solution_missing);
	free(in->solution_dest);
	free(in->solution_entry);
	sbx__strv_free(in->solution_env);
	memset(in, 0, sizeof(*in));
}

void sbx__agent_outcome_free(sbx_agent_outcome *oc)
{
	free(oc->detail);
	free(oc->log_path);
	free(oc->end_reason);
	free(oc->metrics_json);
	free(oc->trajectory_json);
	memset(oc, 0, sizeof(*oc));
	oc->exit_code = -1;
}

void sbx__verdict_free(sbx_verdict *v)
{
	free(v->rewards_json);
	free(v->source);
	free(v->detail);
	free(v->log_path);
	memset(v, 0, sizeof(*v));
	v->exit_code = -1;
}
