/* SPDX-License-Identifier: MIT */
/*
 * The policy agent: the reference framework's agent loop against any
 * OpenAI-compatible chat API (docs/agents.md). The messages start with a
 * system prompt and the task's instruction; each turn is one chat
 * completion whose assistant message goes back into the messages exactly
 * as the server sent it (a session server matches the prefix), then the
 * command it asks for runs through sbx_episode_turn() and its observation
 * is the next user turn (a `tool` message in tool mode). The loop ends on
 * TASK_COMPLETE, a reply with nothing to run, finish_reason "length" (the
 * cut command never runs), the turn limit, or the agent's time; a model API
 * that fails past its retries is an AgentError, never a reward of 0.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sbx/episode.h>
#include <sbx/sys/connector.h>

#include "agents/policy/policy.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/http.h"

struct loop {
	sbx_episode *ep;
	struct policy_cfg cfg;
	json_t *messages;
	json_t *gen_times, *tool_times;
	unsigned turns, tool_calls, retries;
	long prompt_tokens, completion_tokens;
	double gen_total, tool_total;
	const char *end;
	int timed_out;
	int exit_code;
};

/* A message; text that is not UTF-8 (an instruction file can hold
 * anything) goes with its other bytes as '?', never dropped. */
static json_t *msg(const char *role, const char *content)
{
	json_t *c = json_string(content);
	if (!c) {
		_cleanup_free_ char *t = xstrdup(content);
		for (char *p = t; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		c = json_string(t);
	}
	json_t *m = json_object();
	json_object_set_new(m, "role", json_string(role));
	json_object_set_new(m, "content", c);
	return m;
}

static json_t *tools(void)
{
	return json_pack("[{s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s]}}}]",
			 "type", "function", "function", "name", "bash", "description",
			 "Run one shell command in the task's Linux environment and return its "
			 "output (stdout then stderr).",
			 "parameters", "type", "object", "properties", "command", "type", "string",
			 "description", "the command, for /bin/sh -c", "required", "command");
}

static json_t *request(const struct loop *l)
{
	const struct policy_cfg *c = &l->cfg;
	json_t *b = json_object();
	json_object_set_new(b, "model", json_string(c->model));
	json_object_set(b, "messages", l->messages);
	json_object_set_new(b, "temperature", json_real(c->temperature));
	if (c->max_tokens > 0)
		json_object_set_new(b, "max_tokens", json_integer(c->max_tokens));
	if (c->stream)
		json_object_set_new(b, "stream", json_true());
	if (c->tool_mode)
		json_object_set_new(b, "tools", tools());
	if (c->extra_body)
		json_object_update(b, c->extra_body); /* as the OpenAI client's extra_body */
	return b;
}

/* The reply's text: a string content, or the text parts of a list. */
static char *content_text(json_t *m)
{
	json_t *c = json_object_get(m, "content");
	if (json_is_string(c))
		return xstrdup(json_string_value(c));
	_cleanup_free_ char *s = xstrdup("");
	size_t i;
	json_t *part;
	json_array_foreach(c, i, part) {
		json_t *t = json_object_get(part, "text");
		if (json_is_string(t)) {
			char *n = xasprintf("%s%s", s, json_string_value(t));
			free(s);
			s = n;
		}
	}
	return steal_ptr(&s);
}

/* Runs one command as a turn; the observation's text is in o->output.
 * -ETIMEDOUT: the agent's time is over (nothing ran). */
static int exec_turn(struct loop *l, sbx_observation *o, const char *cmd, sbx_error **err)
{
	double t0 = sbx__now_mono();
	int r = sbx_episode_turn(o, l->ep, cmd, l->cfg.command_timeout, err);
	if (r < 0)
		return r;
	double dt = sbx__now_mono() - t0;
	json_array_append_new(l->tool_times, json_real(round(dt * 1000) / 1000));
	l->tool_total += dt;
	l->tool_calls++;
	l->exit_code = o->exit_code;
	return 0;
}

/* Tool mode: every bash call of the reply runs and is answered by a `tool`
 * message; a reply without calls ends the loop. 1 = go on. */
static int tool_calls(struct loop *l, json_t *m, sbx_error **err)
{
	json_t *calls = json_object_get(m, "tool_calls");
	if (!json_is_array(calls) || json_array_size(calls) == 0) {
		_cleanup_free_ char *text = content_text(m);
		const char *s = text + strspn(text, " \t\r\n");
		l->end = strncasecmp(s, "TASK_COMPLETE", 13) == 0 ? "task_complete" : "no_command";
		return 0;
	}
	size_t i;
	json_t *tc;
	json_array_foreach(calls, i, tc) {
		json_t *id = json_object_get(tc, "id");
		json_t *fn = json_object_get(tc, "function");
		const char *name = json_string_value(json_object_get(fn, "name"));
		const char *args = json_string_value(json_object_get(fn, "arguments"));
		json_t *a = args ? json_loads(args, 0, NULL) : NULL;
		const char *cmd = json_string_value(json_object_get(a, "command"));
		sbx_observation o = { 0 };
		_cleanup_free_ char *note = NULL;
		if (!name || strcmp(name, "bash"))
			note = xstrdup("error: unknown tool; the only tool is bash");
		else if (!cmd || !*cmd)
			note = xstrdup("error: the arguments must be a JSON object with a non-empty "
				       "\"command\" string");
		int r = note ? 0 : exec_turn(l, &o, cmd, err);
		json_decref(a);
		if (r < 0)
			return r;
		json_t *reply = msg("tool", note ? note : o.output);
		json_object_set_new(reply, "tool_call_id", json_is_string(id) ? json_incref(id)
							    : json_string(""));
		json_array_append_new(l->messages, reply);
		int done = o.done;
		sbx_observation_free(&o);
		if (done) {
			l->end = "timeout";
			l->timed_out = 1;
			return 0;
		}
	}
	return 1;
}

/* Text mode: the command of the reply runs, its output is the next user
 * turn. 1 = go on. */
static int text_reply(struct loop *l, json_t *m, sbx_error **err)
{
	_cleanup_free_ char *text = content_text(m);
	_cleanup_free_ char *cmd = NULL;
	switch (sbx__policy_command(&cmd, text)) {
	case REPLY_COMPLETE:
		l->end = "task_complete";
		return 0;
	case REPLY_NONE:
		l->end = "no_command";
		return 0;
	case REPLY_COMMAND:
	default:
		break;
	}
	sbx_observation o;
	int r = exec_turn(l, &o, cmd, err);
	if (r < 0)
		return r;
	json_array_append_new(l->messages, msg("user", o.output));
	int done = o.done;
	sbx_observation_free(&o);
	if (done) {
		l->end = "timeout";
		l->timed_out = 1;
		return 0;
	}
	return 1;
}

static int play(struct loop *l, sbx_error **err)
{
	const sbx_agent_inputs *in = sbx_episode_agent_inputs(l->ep);
	json_array_append_new(l->messages, msg("system", l->cfg.system_prompt));
	json_array_append_new(l->messages, msg("user", in->instruction ? in->instruction : ""));
	while (l->turns < l->cfg.max_turns) {
		double left = sbx_episode_agent_remaining(l->ep);
		if (left <= 0) {
			l->end = "timeout";
			l->timed_out = 1;
			return 0;
		}
		l->turns++;
		json_t *body = request(l);
		struct chat_reply rep;
		sbx_error *cerr = NULL;
		double t0 = sbx__now_mono();
		int r = sbx__policy_chat(&rep, &l->cfg, body, t0 + left, &cerr);
		double dt = sbx__now_mono() - t0;
		json_decref(body);
		json_array_append_new(l->gen_times, json_real(round(dt * 1000) / 1000));
		l->gen_total += dt;
		if (r == -ETIMEDOUT) {
			sbx_error_free(cerr);
			l->end = "timeout";
			l->timed_out = 1;
			return 0;
		}
		if (r < 0) {
			l->end = "error";
			*err = cerr;
			return r;
		}
		l->retries += rep.retries;
		if (rep.prompt_tokens >= 0)
			l->prompt_tokens += rep.prompt_tokens;
		if (rep.completion_tokens >= 0)
			l->completion_tokens += rep.completion_tokens;
		json_array_append(l->messages, rep.message);
		if (rep.finish_reason && !strcmp(rep.finish_reason, "length")) {
			/* the reply was cut: its command may be half of one */
			l->end = "length";
			sbx__policy_reply_free(&rep);
			return 0;
		}
		sbx_error *terr = NULL;
		r = l->cfg.tool_mode ? tool_calls(l, rep.message, &terr)
				     : text_reply(l, rep.message, &terr);
		sbx__policy_reply_free(&rep);
		if (r == -ETIMEDOUT) {
			sbx_error_free(terr);
			l->end = "timeout";
			l->timed_out = 1;
			return 0;
		}
		if (r < 0) {
			l->end = "error";
			*err = terr;
			return r;
		}
		if (r == 0)
			return 0;
	}
	l->end = "max_turns";
	return 0;
}

static char *metrics(const struct loop *l)
{
	json_t *m = json_object();
	json_object_set_new(m, "turns", json_integer(l->turns));
	json_object_set_new(m, "tool_calls", json_integer(l->tool_calls));
	json_object_set(m, "gen_times", l->gen_times);
	json_object_set(m, "tool_times", l->tool_times);
	json_object_set_new(m, "total_gen_time", json_real(round(l->gen_total * 1000) / 1000));
	json_object_set_new(m, "total_tool_time", json_real(round(l->tool_total * 1000) / 1000));
	json_object_set_new(m, "retries", json_integer(l->retries));
	json_object_set_new(m, "prompt_tokens", json_integer(l->prompt_tokens));
	json_object_set_new(m, "completion_tokens", json_integer(l->completion_tokens));
	json_object_set_new(m, "timed_out", json_integer(l->timed_out));
	char *s = json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(m);
	return s;
}

static char *trajectory(const struct loop *l)
{
	const struct policy_cfg *c = &l->cfg;
	_cleanup_free_ char *base = c->api_base ? sbx__http_url_for_log(c->api_base) : NULL;
	json_t *t = json_object();
	json_object_set_new(t, "model", c->model ? json_string(c->model) : json_null());
	json_object_set_new(t, "api_base", base ? json_string(base) : json_null());
	json_object_set_new(t, "tool_mode", json_boolean(c->tool_mode));
	json_object_set_new(t, "stream", json_boolean(c->stream));
	json_object_set_new(t, "temperature", json_real(c->temperature));
	json_object_set_new(t, "max_tokens", c->max_tokens > 0 ? json_integer(c->max_tokens)
							       : json_null());
	json_object_set_new(t, "system_prompt", c->system_prompt_from
				? json_string(c->system_prompt_from) : json_null());
	json_object_set_new(t, "end_reason", l->end ? json_string(l->end) : json_null());
	json_object_set(t, "messages", l->messages);
	char *s = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(t);
	return s;
}

static int run(sbx_episode *ep, sbx_agent_outcome *out, sbx_error **err)
{
	struct loop l = { .ep = ep, .exit_code = -1 };
	l.messages = json_array();
	l.gen_times = json_array();
	l.tool_times = json_array();
	int r = sbx__policy_cfg_load(&l.cfg, sbx_episode_agent_args(ep), err);
	if (r == 0)
		r = play(&l, err);
	else
		l.end = "error";
	out->exit_code = l.exit_code;
	out->timed_out = l.timed_out;
	out->end_reason = xstrdup(l.end ? l.end : "error");
	out->detail = xasprintf("%u turn%s, %u command%s, end %s", l.turns, l.turns == 1 ? "" : "s",
				l.tool_calls, l.tool_calls == 1 ? "" : "s", out->end_reason);
	out->metrics_json = metrics(&l);
	out->trajectory_json = trajectory(&l);
	sbx__policy_cfg_free(&l.cfg);
	json_decref(l.messages);
	json_decref(l.gen_times);
	json_decref(l.tool_times);
	return r;
}

const sbx_agent_ops sbx_agent_policy = {
	.version = SBX_AGENT_OPS_VERSION,
	.name = "policy",
	.summary = "an OpenAI-compatible model plays the turns (POLICY_BASE_URL, POLICY_MODEL)",
	.run = run,
};
