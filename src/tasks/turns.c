/* SPDX-License-Identifier: MIT */
/*
 * The turn-by-turn episode API (include/sbx/episode.h) over the episode
 * driver: begin = start with the caller as the agent, a turn = one agent
 * step whose output becomes the observation a model is fed and a row of
 * the trajectory, end = finish, abort = finish without verifying. The
 * policy agent plays its turns through sbx_episode_turn() too, so every
 * turn of every episode is recorded the same way.
 *
 * The observation follows the reference loop: stdout then stderr, "(no
 * output)" when both are empty, then the head of it up to the cap (the
 * reference keeps output[:4000], no tail). The cap counts characters
 * (UTF-8 code points), never splitting one; bytes that are not UTF-8 (and
 * NUL) become U+FFFD so the text is a valid JSON string and C string.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/episode.h>

#include "tasks/episode_int.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fs.h"

#define NO_OUTPUT "(no output)"

/* The caller is the agent: this table names it in the record and the
 * sandbox's label; its run() is never called. */
static const sbx_agent_ops external_agent = {
	.version = SBX_AGENT_OPS_VERSION,
	.name = "external",
	.summary = "the caller plays the turns (sbx_episode_turn)",
};

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Appends up to *left characters of s[0..n) to b as valid UTF-8; returns 1
 * when characters were left out. */
static int append_chars(sbx_buf *b, const char *s, size_t n, size_t *left)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < n) {
		if (*left == 0)
			return 1;
		size_t l = utf8_seq(p + i, n - i);
		if (l)
			sbx__buf_append(b, p + i, l);
		else
			sbx__buf_append(b, "\xef\xbf\xbd", 3);
		i += l ? l : 1;
		(*left)--;
	}
	return 0;
}

char *sbx__episode_text(const char *s, size_t n, size_t cap, int *truncated)
{
	sbx_buf b;
	sbx__buf_init(&b, SIZE_MAX);
	size_t left = cap;
	*truncated = append_chars(&b, s, n, &left);
	if (!b.data)
		sbx__buf_append(&b, "", 0);
	return sbx__buf_steal(&b, NULL);
}

/* stdout then stderr, capped (a stream cut by the exec's own output cap is
 * longer than the observation cap, so it counts as truncated anyway). */
static char *observe(const sbx_exec_result *x, size_t cap, int *truncated, size_t *len)
{
	sbx_buf b;
	sbx__buf_init(&b, SIZE_MAX);
	size_t left = cap;
	int cut = append_chars(&b, x->out ? x->out : "", x->out ? x->out_len : 0, &left);
	if (!cut)
		cut = append_chars(&b, x->err ? x->err : "", x->err ? x->err_len : 0, &left);
	*truncated = cut || x->out_truncated || x->err_truncated;
	if (b.len == 0)
		sbx__buf_append(&b, NO_OUTPUT, strlen(NO_OUTPUT));
	return sbx__buf_steal(&b, len);
}

static double ms(double s)
{
	return round(s * 1000) / 1000;
}

static const char *limit_name(sbx_episode_limit l)
{
	switch (l) {
	case SBX_LIMIT_COMMAND: return "command";
	case SBX_LIMIT_AGENT: return "agent";
	case SBX_LIMIT_EPISODE: return "episode";
	case SBX_LIMIT_NONE:
	default: return NULL;
	}
}

static void record(sbx_episode *e, const char *command, const sbx_observation *o,
		   sbx_episode_limit limit, double started)
{
	if (!e->turns)
		e->turns = json_array();
	int cut;
	_cleanup_free_ char *cmd = sbx__episode_text(command, strlen(command), SIZE_MAX, &cut);
	json_t *t = json_object();
	json_object_set_new(t, "index", json_integer((json_int_t)json_array_size(e->turns)));
	json_object_set_new(t, "command", json_string(cmd));
	json_object_set_new(t, "exit_code", o->exit_code >= 0 ? json_integer(o->exit_code)
							      : json_null());
	json_object_set_new(t, "timed_out", json_boolean(o->timed_out));
	const char *ln = limit_name(limit);
	json_object_set_new(t, "limit", ln ? json_string(ln) : json_null());
	json_object_set_new(t, "output", json_stringn(o->output, o->output_len));
	json_object_set_new(t, "truncated", json_boolean(o->truncated));
	json_object_set_new(t, "started", json_real(ms(started - e->t0)));
	json_object_set_new(t, "seconds", json_real(ms(o->seconds)));
	json_array_append_new(e->turns, t);
}

/* The agent phase ran out between turns: blame the limit that passed, as a
 * cut step would, so the record says which. */
static void note_expired(sbx_episode *e)
{
	sbx_episode_limit l = sbx_episode_remaining(e) <= 0 ? SBX_LIMIT_EPISODE : SBX_LIMIT_AGENT;
	if (l > e->agent_cut)
		e->agent_cut = l;
	e->turns_done = 1;
}

int sbx_episode_turn(sbx_observation *out, sbx_episode *ep, const char *command,
		     double timeout_s, sbx_error **err)
{
	if (!out)
		return sbx_error_set(err, -EINVAL, "episode turn: no observation to fill");
	memset(out, 0, sizeof(*out));
	out->exit_code = -1;
	if (!ep || !command || !*command)
		return sbx_error_set(err, -EINVAL, "episode turn: %s", ep ? "the command is empty"
									: "no episode");
	if (ep->phase != SBX__PHASE_AGENT)
		return sbx_error_set(err, -EINVAL, "episode of %s: turns run only during the agent "
				     "phase", ep->t->name);
	if (!ep->turns_done && sbx_episode_agent_remaining(ep) <= 0)
		note_expired(ep);
	if (ep->turns_done) {
		out->done = 1;
		return sbx_error_set(err, -ETIMEDOUT, "episode of %s: the agent phase is over (%s "
				     "ran out)", ep->t->name, ep->agent_cut == SBX_LIMIT_EPISODE
				     ? "the episode wall clock" : "the agent time limit");
	}
	sbx_step_opts so = SBX_STEP_OPTS_INIT;
	so.command = command;
	so.timeout_s = timeout_s > 0 ? timeout_s : 0;
	/* The head of each stream is all the observation can hold. */
	so.output_max = ep->obs_cap * 4 + 4;
	sbx_exec_result x;
	sbx_episode_limit limit;
	double started = sbx__now_mono();
	int r = sbx_episode_step(&x, &limit, ep, &so, err);
	if (r < 0)
		return r;
	out->output = observe(&x, ep->obs_cap, &out->truncated, &out->output_len);
	out->exit_code = x.timed_out ? -1 : x.exit_code;
	out->timed_out = x.timed_out;
	out->seconds = x.seconds;
	if (limit >= SBX_LIMIT_AGENT)
		ep->turns_done = 1;
	else if (sbx_episode_agent_remaining(ep) <= 0)
		note_expired(ep);
	out->done = ep->turns_done;
	record(ep, command, out, limit, started);
	sbx_exec_result_free(&x);
	return 0;
}

void sbx_observation_free(sbx_observation *o)
{
	if (!o)
		return;
	free(o->output);
	memset(o, 0, sizeof(*o));
}

void sbx__episode_metrics_finish(sbx_episode *e)
{
	json_t *m = e->res.agent_metrics_json ? json_loads(e->res.agent_metrics_json, 0, NULL)
					       : NULL;
	if (!json_is_object(m) || !json_object_get(m, "turns")) {
		json_decref(m);
		return;
	}
	/* The reference's reset (a sandbox up) and evaluate (the verifier) times,
	 * which only the driver saw; its total tool time includes both. */
	double reset = e->res.stage_seconds[SBX_STAGE_RESOLVE] + e->res.stage_seconds[SBX_STAGE_CREATE];
	double eval = e->res.stage_seconds[SBX_STAGE_VERIFY];
	json_object_set_new(m, "reset_time", json_real(ms(reset)));
	json_object_set_new(m, "eval_time", json_real(ms(eval)));
	json_t *tt = json_object_get(m, "total_tool_time");
	if (json_is_number(tt))
		json_object_set_new(m, "total_tool_time",
				    json_real(ms(json_number_value(tt) + reset + eval)));
	char *s = json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(m);
	if (s) {
		free(e->res.agent_metrics_json);
		e->res.agent_metrics_json = s;
	}
}

char *sbx__episode_trajectory(const sbx_episode *e)
{
	json_t *agent = e->agent_traj ? json_loads(e->agent_traj, 0, NULL) : NULL;
	if (agent && !json_is_object(agent)) {
		json_decref(agent);
		agent = NULL;
	}
	if (!e->turns && !agent)
		return NULL;
	json_t *o = json_object();
	json_object_set_new(o, "turns", e->turns ? json_incref(e->turns) : json_array());
	const char *k;
	json_t *v;
	/* The core's turns win over an agent's key of the same name. */
	json_object_foreach(agent, k, v)
		if (!json_object_get(o, k))
			json_object_set(o, k, v);
	json_decref(agent);
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(o);
	return s ? s : xstrdup("{}");
}

int sbx_episode_begin(sbx_episode **out, sbx_runtime *rt, const sbx_task *task,
		      const sbx_episode_opts *opts, sbx_error **err)
{
	if (!out)
		return sbx_error_set(err, -EINVAL, "episode begin: nowhere to put the episode");
	*out = NULL;
	sbx_episode *e = NULL;
	int r = sbx__episode_start_as(&e, rt, task, opts, &external_agent, err);
	if (r < 0)
		return r;
	if (e->phase != SBX__PHASE_AGENT) {
		/* Finishing destroys whatever was made: nothing is left behind. */
		int code = e->setup_rc < 0 ? e->setup_rc : -EIO;
		sbx_episode_result res;
		sbx__episode_finish(e, &res);
		r = sbx_error_set(err, code, "episode of %s: %s", task->name,
				  res.detail ? res.detail : "setup failed");
		sbx_episode_result_free(&res);
		sbx__episode_free(e);
		return r;
	}
	e->turns = json_array();
	*out = e;
	return 0;
}

int sbx_episode_end(sbx_episode_result *out, sbx_episode *ep, sbx_error **err)
{
	if (out)
		memset(out, 0, sizeof(*out));
	if (!ep || !out)
		return sbx_error_set(err, -EINVAL, "episode end: %s", ep ? "no result to fill"
									: "no episode");
	sbx__episode_finish(ep, out);
	sbx__episode_free(ep);
	return 0;
}

void sbx_episode_abort(sbx_episode *ep)
{
	if (!ep)
		return;
	if (ep->phase == SBX__PHASE_AGENT) {
		sbx_error *why = NULL;
		sbx_error_set(&why, -ECANCELED, "aborted by the caller");
		/* An AgentError: the driver then never verifies, only destroys. */
		sbx__episode_end_agent(ep, NULL, -ECANCELED, why);
		sbx_error_free(why);
	}
	sbx__episode_free(ep);
}
