/* SPDX-License-Identifier: MIT */
/*
 * The OpenEnv protocol of `sbx openenv serve` over WebSocket sessions: reset,
 * step (exec, evaluate, close), state and close messages, their validation,
 * and the observation frames, shaped as OpenEnv's Terminal-Bench 2
 * environment shapes them (docs/openenv.md). The episode itself is the
 * public turn API (sbx/episode.h): reset = sbx_episode_begin, exec =
 * sbx_episode_turn, evaluate = sbx_episode_end (the Harbor connector keeps
 * tests/ outside the sandbox until then), close = sbx_episode_abort.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/str.h"
#include "openenv_int.h"

static const char *const action_types[] = { "exec", "write", "view", "wait", "kill",
					     "write_file", "evaluate", "close", NULL };
static const char *const action_fields[] = { "action_type", "command", "session_id", "block",
					      "wait_seconds", "file_path", "content", "metadata",
					      "timeout_s", NULL };

/* A JSON string of S, or null; bytes that are not UTF-8 (a log tail cut
 * mid-character, a task file in Latin-1) become '?', since jansson refuses
 * the whole string otherwise. */
static json_t *jstr(const char *s)
{
	if (!s)
		return json_null();
	size_t n = strlen(s);
	if (sbx__oe_utf8_valid((const unsigned char *)s, n))
		return json_stringn(s, n);
	_cleanup_free_ char *t = xstrdup(s);
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)t[i];
		size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
		if (k && k <= n - i && sbx__oe_utf8_valid((const unsigned char *)t + i, k)) {
			i += k;
		} else {
			t[i++] = '?';
		}
	}
	return json_stringn(t, n);
}

static char *dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(j);
	if (!s)
		s = xstrdup("{\"type\":\"error\",\"data\":{\"message\":\"cannot encode the reply\","
			    "\"code\":\"EXECUTION_ERROR\"}}");
	return s;
}

char *sbx__oe_error_frame(const char *code, const char *message, json_t *extra)
{
	json_t *data = json_pack("{s:o, s:s}", "message", jstr(message), "code", code);
	if (extra) {
		json_object_update(data, extra);
		json_decref(extra);
	}
	return dump(json_pack("{s:s, s:o}", "type", "error", "data", data));
}

static void send_error(struct oe_conn *c, const char *code, const char *message)
{
	char *f = sbx__oe_error_frame(code, message, NULL);
	sbx__oe_send_text(c, f);
	free(f);
}

void sbx__oe_session_clear(struct oe_session *s)
{
	sbx_task_free(s->task);
	s->task = NULL;
	free(s->last_action_type);
	free(s->last_command);
	free(s->last_output);
	s->last_action_type = s->last_command = s->last_output = NULL;
}

/* Keeps at most MAX bytes of V, never cutting a UTF-8 character. */
static void set_str(char **dst, const char *v, size_t max)
{
	free(*dst);
	*dst = NULL;
	if (!v)
		return;
	size_t n = strnlen(v, max + 1);
	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
			n--;
	}
	*dst = xstrndup(v, n);
}

/* The observation of OpenEnv's tbench2 environment; reward and done are
 * lifted next to it as its serializer does. */
static json_t *observation(const sbx_task *t, const char *action, const char *output, int success,
			   const char *error, json_t *info)
{
	json_t *o = json_object();
	json_object_set_new(o, "instruction", jstr(t ? t->instruction : NULL));
	json_object_set_new(o, "output", jstr(output ? output : ""));
	json_object_set_new(o, "success", json_boolean(success));
	json_object_set_new(o, "error", jstr(error ? error : ""));
	json_object_set_new(o, "task_id", jstr(t ? t->name : NULL));
	json_object_set_new(o, "task_path", jstr(t ? t->dir : NULL));
	json_object_set_new(o, "session_id", json_null());
	json_object_set_new(o, "action_type", jstr(action));
	json_object_set_new(o, "info", info ? info : json_object());
	return o;
}

static char *obs_reply(int ws, json_t *obs, json_t *reward, int done)
{
	json_t *d = json_pack("{s:o, s:o, s:b}", "observation", obs, "reward", reward ? reward : json_null(),
			      "done", done);
	if (!ws)
		return dump(d);
	return dump(json_pack("{s:s, s:o}", "type", "observation", "data", d));
}

static char *err_text(sbx_error *e, const char *fallback)
{
	char *m = xstrdup(e && e->msg ? e->msg : fallback);
	sbx_error_free(e);
	return m;
}

static int load_task(sbx_task **out, struct oe_server *s, const char *task_id, char **msg)
{
	sbx_error *e = NULL;
	_cleanup_free_ char *dir = xasprintf("%s/%s", s->cfg->tasks_dir, task_id);
	int rc = sbx_task_load(out, dir, &e);
	if (rc < 0)
		*msg = err_text(e, "cannot load the task");
	return rc;
}

static void opts_init(struct oe_session *ss, struct oe_server *s, uint64_t serial)
{
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.provider = s->cfg->backend;
	/* Not the episode id, which a client may choose (and repeat). */
	snprintf(ss->label, sizeof(ss->label), "sbx.openenv=%d-%llu", (int)getpid(),
		 (unsigned long long)serial);
	ss->labels[0] = ss->label;
	ss->labels[1] = NULL;
	o.labels = ss->labels;
	ss->opts = o;
}

static void job_reset(struct oe_server *s, struct oe_job *j)
{
	struct oe_session *ss = &j->conn->sess;
	char *msg = NULL;
	sbx_task *task = NULL;
	sbx_error *e = NULL;
	if (ss->ep) {
		sbx_episode_abort(ss->ep);
		ss->ep = NULL;
	}
	if (load_task(&task, s, j->task_id, &msg) < 0)
		goto fail;
	sbx__oe_session_clear(ss);
	ss->task = task;
	if (j->command) /* the client's episode_id */
		snprintf(ss->id, sizeof(ss->id), "%s", j->command);
	else
		sbx__random_hex(ss->id, 32);
	opts_init(ss, s, j->conn->serial);
	if (sbx_episode_begin(&ss->ep, s->rt, task, &ss->opts, &e) < 0) {
		ss->ep = NULL;
		msg = err_text(e, "cannot start the episode");
		goto fail;
	}
	ss->step_count = 0;
	ss->done = 0;
	set_str(&ss->last_action_type, "reset", 64);
	j->reply = obs_reply(1, observation(task, "reset", "", 1, "", NULL), json_real(0.0), 0);
	return;
fail:
	{
		_cleanup_free_ char *m = xasprintf("reset %s: %s", j->task_id, msg);
		j->reply = sbx__oe_error_frame("EXECUTION_ERROR", m, NULL);
		free(msg);
	}
}

static void note_step(struct oe_session *ss, const char *action, const char *command, const char *output)
{
	ss->step_count++;
	set_str(&ss->last_action_type, action, 64);
	set_str(&ss->last_command, command, OE_LAST_OUTPUT_MAX);
	set_str(&ss->last_output, output, OE_LAST_OUTPUT_MAX);
}

static void job_exec(struct oe_job *j)
{
	struct oe_session *ss = &j->conn->sess;
	sbx_observation o = { 0 };
	sbx_error *e = NULL;
	int rc = sbx_episode_turn(&o, ss->ep, j->command, j->timeout_s, &e);
	if (rc < 0) {
		_cleanup_free_ char *m = err_text(e, "the command could not run");
		note_step(ss, "exec", j->command, "");
		json_t *info = json_pack("{s:b}", "agent_phase_over", rc == -ETIMEDOUT);
		j->reply = obs_reply(1, observation(ss->task, "exec", "", 0, m, info), NULL, 0);
		return;
	}
	json_t *info = json_pack("{s:i, s:b, s:b, s:f, s:b}", "exit_code", o.exit_code, "timed_out",
				 o.timed_out, "truncated", o.truncated, "seconds", o.seconds,
				 "agent_phase_over", o.done);
	_cleanup_free_ char *err = o.timed_out ? xstrdup("command timed out")
			       : o.exit_code ? xasprintf("exit code %d", o.exit_code) : NULL;
	note_step(ss, "exec", j->command, o.output);
	j->reply = obs_reply(1, observation(ss->task, "exec", o.output, o.exit_code == 0 && !o.timed_out,
					    err, info), NULL, 0);
	sbx_observation_free(&o);
}

static void job_evaluate(struct oe_job *j)
{
	struct oe_session *ss = &j->conn->sess;
	sbx_episode_result r = { 0 };
	sbx_error *e = NULL;
	int rc = sbx_episode_end(&r, ss->ep, &e);
	ss->ep = NULL; /* ended (and freed) whatever the outcome */
	if (rc < 0) {
		_cleanup_free_ char *m = err_text(e, "evaluation failed");
		note_step(ss, "evaluate", NULL, "");
		j->reply = obs_reply(1, observation(ss->task, "evaluate", "", 0, m, NULL), NULL, 0);
		return;
	}
	const char *tail = r.verifier_log_tail ? r.verifier_log_tail : "";
	json_t *info = json_pack("{s:s, s:o, s:b, s:i, s:f}", "status", sbx_episode_status_name(r.status),
				 "detail", jstr(r.detail), "verifier_timed_out", r.verifier_timed_out,
				 "verifier_exit_code", r.verifier_exit_code, "seconds", r.total_seconds);
	note_step(ss, "evaluate", NULL, tail);
	if (r.status == SBX_EPISODE_SUBMITTED && r.has_reward) {
		json_t *metrics = r.rewards_json ? json_loads(r.rewards_json, 0, NULL) : NULL;
		json_object_set_new(info, "harness", json_string("tests/test.sh"));
		json_object_set_new(info, "tests_passed", json_boolean(r.reward == 1.0));
		json_object_set_new(info, "reward_source", r.reward_source ? json_string(r.reward_source)
									   : json_null());
		json_object_set_new(info, "rewards", metrics ? metrics : json_null());
		ss->done = 1;
		j->reply = obs_reply(1, observation(ss->task, "evaluate", tail, 1, "", info),
				     json_real(r.reward), 1);
	} else {
		/* No verdict is a scoring failure, not a 0: reward null, done false
		 * and an error, so a trainer can drop the episode (as OpenEnv's
		 * tbench2 environment does). */
		_cleanup_free_ char *m = xasprintf("no verdict: %s%s%s", sbx_episode_status_name(r.status),
						   r.detail ? ": " : "", r.detail ? r.detail : "");
		j->reply = obs_reply(1, observation(ss->task, "evaluate", tail, 0, m, info), NULL, 0);
	}
	sbx_episode_result_free(&r);
}

static void job_http_reset(struct oe_server *s, struct oe_job *j)
{
	char *msg = NULL;
	sbx_task *task = NULL;
	sbx_episode *ep = NULL;
	sbx_error *e = NULL;
	struct oe_session tmp = { 0 };
	j->http_status = 500;
	if (load_task(&task, s, j->task_id, &msg) < 0)
		goto fail;
	sbx__random_hex(tmp.id, 32);
	opts_init(&tmp, s, j->conn->serial);
	/* Stateless, as OpenEnv's POST /reset: make the env, reset it, close it. */
	if (sbx_episode_begin(&ep, s->rt, task, &tmp.opts, &e) < 0) {
		msg = err_text(e, "cannot start the episode");
		goto fail;
	}
	sbx_episode_abort(ep);
	j->http_status = 200;
	j->reply = obs_reply(0, observation(task, "reset", "", 1, "", NULL), json_real(0.0), 0);
	sbx_task_free(task);
	return;
fail:
	j->reply = dump(json_pack("{s:o}", "detail", jstr(msg)));
	free(msg);
	sbx_task_free(task);
}

/* Destroys the sandboxes labelled LABEL (the one of a session whose client
 * left while its step runs); the step then fails and returns. */
static void job_kill(struct oe_server *s, const char *label)
{
	const char *filter[] = { label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *e = NULL;
	if (sbx_sandbox_list(&v, &n, s->rt, s->cfg->backend, filter, &e) < 0) {
		SBX_LOGW("openenv: list sandboxes %s: %s", label, e && e->msg ? e->msg : "failed");
		sbx_error_free(e);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (sbx_sandbox_destroy_id(s->rt, s->cfg->backend, v[i].id, &e) < 0) {
			SBX_LOGW("openenv: destroy %s: %s", v[i].id, e && e->msg ? e->msg : "failed");
			sbx_error_free(e);
			e = NULL;
		}
	}
	sbx_sandbox_info_free(v, n);
}

void sbx__oe_env_run_job(struct oe_server *s, struct oe_job *j)
{
	if (j->kind == OE_JOB_KILL) {
		job_kill(s, j->task_id);
		return;
	}
	struct oe_session *ss = &j->conn->sess;
	switch (j->kind) {
	case OE_JOB_RESET: job_reset(s, j); break;
	case OE_JOB_EXEC: job_exec(j); break;
	case OE_JOB_EVALUATE: job_evaluate(j); break;
	case OE_JOB_CLOSE:
	case OE_JOB_ABORT:
		sbx_episode_abort(ss->ep);
		ss->ep = NULL;
		if (j->kind == OE_JOB_CLOSE) {
			note_step(ss, "close", NULL, "Closed the episode; its sandbox is destroyed.");
			ss->done = 1;
			j->reply = obs_reply(1, observation(ss->task, "close", ss->last_output, 1, "", NULL),
					     NULL, 1);
		}
		break;
	case OE_JOB_HTTP_RESET: job_http_reset(s, j); break;
	case OE_JOB_KILL:
	default: break;
	}
}

void sbx__oe_env_open(struct oe_conn *c)
{
	struct oe_server *s = c->srv;
	if (s->active_sessions >= s->cfg->max_sessions) {
		_cleanup_free_ char *m = xasprintf("server at capacity: %u/%u sessions (--max-sessions)",
						   s->active_sessions, s->cfg->max_sessions);
		char *f = sbx__oe_error_frame("CAPACITY_REACHED", m,
					      json_pack("{s:i, s:i}", "active_sessions", s->active_sessions,
							"max_sessions", s->cfg->max_sessions));
		sbx__oe_send_text(c, f);
		free(f);
		sbx__oe_ws_close(c, OE_WS_CLOSE_NORMAL, NULL);
		return;
	}
	c->has_session = 1;
	s->active_sessions++;
}

/* A task name is one path component of --tasks-dir holding task.toml. */
static const char *bad_task_id(struct oe_server *s, const char *id)
{
	if (!*id || strlen(id) > 255 || strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, ".."))
		return "data.task_id: expected the name of a task directory under --tasks-dir";
	_cleanup_free_ char *p = xasprintf("%s/%s/task.toml", s->cfg->tasks_dir, id);
	struct stat st;
	if (stat(p, &st) < 0 || !S_ISREG(st.st_mode))
		return "data.task_id: no such task under --tasks-dir";
	return NULL;
}

static struct oe_job *job_new(struct oe_conn *c, enum oe_job_kind kind)
{
	struct oe_job *j = xcalloc(1, sizeof(*j));
	j->kind = kind;
	j->conn = c;
	return j;
}

/* Validates a reset's data; NULL when fine, else the message. */
const char *sbx__oe_reset_args(struct oe_server *s, json_t *data, const char **task_id, const char **episode_id)
{
	json_t *t = json_object_get(data, "task_id");
	if (!t)
		t = json_object_get(data, "task_name");
	json_t *eid = json_object_get(data, "episode_id"), *seed = json_object_get(data, "seed");
	if (!t || !json_is_string(t))
		return "data.task_id: expected a string, the name of a task under --tasks-dir";
	if (eid && !json_is_null(eid) && (!json_is_string(eid) || json_string_length(eid) > 32 ||
					  !json_string_length(eid)))
		return "data.episode_id: expected a string of 1 to 32 characters";
	if (seed && !json_is_null(seed) && (!json_is_integer(seed) || json_integer_value(seed) < 0))
		return "data.seed: expected an integer >= 0";
	*task_id = json_string_value(t);
	*episode_id = json_is_string(eid) ? json_string_value(eid) : NULL;
	return bad_task_id(s, *task_id);
}

static void on_reset(struct oe_conn *c, json_t *data)
{
	const char *task_id = NULL, *eid = NULL;
	const char *bad = data && !json_is_object(data) ? "data: expected an object"
			: sbx__oe_reset_args(c->srv, data, &task_id, &eid);
	if (bad) {
		send_error(c, "VALIDATION_ERROR", bad);
		return;
	}
	struct oe_job *j = job_new(c, OE_JOB_RESET);
	j->task_id = xstrdup(task_id);
	j->command = eid ? xstrdup(eid) : NULL;
	sbx__oe_submit(c->srv, j);
}

/* Validates a step's action as a Tbench2Action (extra fields forbidden);
 * NULL when fine, else the message. */
const char *sbx__oe_action_check(json_t *a, const char **type, const char **command, double *timeout)
{
	const char *k;
	json_t *v;
	if (!json_is_object(a))
		return "data: expected an object (the action)";
	json_object_foreach(a, k, v) {
		if (!sbx__strv_contains((char *const *)action_fields, k))
			return "data: unknown action field (expected action_type, command, session_id, block, "
			       "wait_seconds, file_path, content, metadata, timeout_s)";
	}
	json_t *at = json_object_get(a, "action_type"), *cmd = json_object_get(a, "command");
	json_t *to = json_object_get(a, "timeout_s");
	*type = at ? json_string_value(at) : "exec";
	if (!*type || !sbx__strv_contains((char *const *)action_types, *type))
		return "data.action_type: expected one of exec, write, view, wait, kill, write_file, "
		       "evaluate, close";
	if (cmd && !json_is_string(cmd))
		return "data.command: expected a string";
	*command = cmd ? json_string_value(cmd) : "";
	if (to && !json_is_null(to) && (!json_is_number(to) || json_number_value(to) <= 0))
		return "data.timeout_s: expected a number > 0";
	*timeout = to && json_is_number(to) ? json_number_value(to) : 0;
	if (!strcmp(*type, "exec") && !**command)
		return "data.command: an exec step needs a non-empty command";
	return NULL;
}

static void on_step(struct oe_conn *c, json_t *data)
{
	struct oe_session *ss = &c->sess;
	const char *type, *command;
	double timeout;
	const char *bad = sbx__oe_action_check(data, &type, &command, &timeout);
	if (bad) {
		send_error(c, "VALIDATION_ERROR", bad);
		return;
	}
	if (!ss->ep && strcmp(type, "close") != 0) {
		send_error(c, "EXECUTION_ERROR", ss->task ? "the episode is over: send reset to start another"
							  : "no episode: send reset first");
		return;
	}
	struct oe_job *j = NULL;
	if (!strcmp(type, "exec")) {
		j = job_new(c, OE_JOB_EXEC);
		j->command = xstrdup(command);
		j->timeout_s = timeout > 0 ? timeout : c->srv->cfg->step_timeout_s;
	} else if (!strcmp(type, "evaluate")) {
		j = job_new(c, OE_JOB_EVALUATE);
	} else if (!strcmp(type, "close")) {
		j = job_new(c, OE_JOB_CLOSE);
	} else {
		_cleanup_free_ char *m = xasprintf("action_type %s is not supported by sbx: use exec", type);
		ss->step_count++;
		char *r = obs_reply(1, observation(ss->task, type, "", 0, m, NULL), NULL, 0);
		sbx__oe_send_text(c, r);
		free(r);
		return;
	}
	sbx__oe_submit(c->srv, j);
}

static void on_state(struct oe_conn *c)
{
	struct oe_session *ss = &c->sess;
	json_t *d = json_pack("{s:o, s:i, s:o, s:o, s:n, s:b, s:o, s:o, s:o}",
			      "episode_id", jstr(ss->task ? ss->id : NULL), "step_count", (int)ss->step_count,
			      "task_id", jstr(ss->task ? ss->task->name : NULL),
			      "task_path", jstr(ss->task ? ss->task->dir : NULL), "session_id",
			      "terminal_ready", ss->ep != NULL, "last_action_type", jstr(ss->last_action_type),
			      "last_command", jstr(ss->last_command), "last_output", jstr(ss->last_output));
	char *f = dump(json_pack("{s:s, s:o}", "type", "state", "data", d));
	sbx__oe_send_text(c, f);
	free(f);
}

void sbx__oe_env_message(struct oe_conn *c, const char *text, size_t len)
{
	json_error_t je;
	json_t *m = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!m) {
		_cleanup_free_ char *msg = xasprintf("Invalid JSON: %s (line %d, column %d)", je.text, je.line,
						     je.column);
		send_error(c, "INVALID_JSON", msg);
		return;
	}
	json_t *type = json_is_object(m) ? json_object_get(m, "type") : NULL;
	json_t *data = json_is_object(m) ? json_object_get(m, "data") : NULL;
	const char *t = json_string_value(type);
	if (!json_is_object(m)) {
		send_error(c, "VALIDATION_ERROR", "expected a JSON object with \"type\"");
	} else if (!t) {
		send_error(c, "UNKNOWN_TYPE", "Unknown message type: expected \"type\" reset, step, state or close");
	} else if (!strcmp(t, "reset")) {
		on_reset(c, data);
	} else if (!strcmp(t, "step")) {
		if (!data)
			send_error(c, "VALIDATION_ERROR", "data: a step needs the action as data");
		else
			on_step(c, data);
	} else if (!strcmp(t, "state")) {
		on_state(c);
	} else if (!strcmp(t, "close")) {
		/* The loop destroys the sandbox as the connection goes. */
		sbx__oe_ws_close(c, OE_WS_CLOSE_NORMAL, NULL);
	} else {
		_cleanup_free_ char *msg = xasprintf("Unknown message type: %.64s (expected reset, step, state "
						     "or close)", t);
		send_error(c, "UNKNOWN_TYPE", msg);
	}
	json_decref(m);
}

char *sbx__oe_http_obs(const sbx_task *t, const char *action, const char *error)
{
	return obs_reply(0, observation(t, action, "", error == NULL, error, NULL), NULL, 0);
}
