/* SPDX-License-Identifier: MIT */
/*
 * The policy agent's input and output against the scripted fake model
 * server: SSE replies assembled into the verbatim message, tool mode (plain
 * and streamed, a bad call answered without running), 1 MiB of output
 * capped in the observation, several fences (the first bash one runs), a
 * python fence, and a fake key that reaches the server's Authorization
 * header and nothing else: no record, trajectory, detail or log.
 */
#include "policy_common.h"

static void setup(void)
{
	policy_setup(20);
}

TestSuite(policy_io, .init = setup, .fini = policy_teardown, .timeout = 300);

static const char *msg_str(json_t *msgs, size_t i, const char *k)
{
	return json_string_value(json_object_get(json_array_get(msgs, i), k));
}

Test(policy_io, sse_replies_are_assembled)
{
	const char *extra[] = { "stream=1", NULL };
	sbx_episode_result r = play("pass", "replay", extra);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	json_t *t = traj(&r);
	json_t *msgs = json_object_get(t, "messages");
	cr_assert_str_eq(msg_str(msgs, 2, "role"), "assistant");
	cr_assert_str_eq(msg_str(msgs, 2, "reasoning_content"), "fake reasoning for turn 0");
	cr_assert_not_null(strstr(msg_str(msgs, 2, "content"), "```bash\ncat > /tmp/solve.sh"));
	cr_assert(json_is_true(json_object_get(t, "stream")));
	json_t *rq = requests();
	json_t *b0 = json_object_get(json_array_get(rq, 0), "body");
	cr_assert(json_is_true(json_object_get(b0, "stream")));
	/* what the agent sent back is what it assembled */
	json_t *b1 = json_object_get(json_array_get(rq, 1), "body");
	cr_assert(json_equal(json_array_get(json_object_get(b1, "messages"), 2),
			     json_array_get(msgs, 2)));
	json_decref(rq);
	json_decref(t);
	sbx_episode_result_free(&r);
}

static void tool_mode(const char *stream)
{
	const char *extra[] = { "tool_mode=1", stream, NULL };
	sbx_episode_result r = play("pass", "replay", extra);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	json_t *t = traj(&r);
	cr_assert(json_is_true(json_object_get(t, "tool_mode")));
	json_t *msgs = json_object_get(t, "messages");
	json_t *calls = json_object_get(json_array_get(msgs, 2), "tool_calls");
	cr_assert_eq(json_array_size(calls), 1, "%s", r.trajectory_json);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(calls, 0), "id")), "call_0");
	cr_assert_str_eq(msg_str(msgs, 3, "role"), "tool");
	cr_assert_str_eq(msg_str(msgs, 3, "tool_call_id"), "call_0");
	json_t *rq = requests();
	json_t *tools = json_object_get(json_object_get(json_array_get(rq, 0), "body"), "tools");
	json_t *fn = json_object_get(json_array_get(tools, 0), "function");
	cr_assert_str_eq(json_string_value(json_object_get(fn, "name")), "bash");
	json_decref(rq);
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy_io, tool_mode_runs_bash_calls)
{
	tool_mode(NULL);
}

Test(policy_io, tool_mode_streamed)
{
	tool_mode("stream=1");
}

Test(policy_io, a_bad_tool_call_is_answered_not_run)
{
	const char *extra[] = { "tool_mode=1", NULL };
	sbx_episode_result r = play("pass", "tool_bad", extra);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "tool_calls"), 0);
	json_decref(m);
	json_t *t = traj(&r);
	json_t *msgs = json_object_get(t, "messages");
	cr_assert_str_eq(msg_str(msgs, 3, "role"), "tool");
	cr_assert_not_null(strstr(msg_str(msgs, 3, "content"), "unknown tool"));
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy_io, a_mebibyte_of_output_is_capped)
{
	sbx_episode_result r = play("pass", "big_output", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	json_t *t = traj(&r);
	json_t *turn = json_array_get(json_object_get(t, "turns"), 0);
	cr_assert_eq(strlen(json_string_value(json_object_get(turn, "output"))), 4000);
	cr_assert(json_is_true(json_object_get(turn, "truncated")));
	const char *fed = msg_str(json_object_get(t, "messages"), 3, "content");
	cr_assert_eq(strlen(fed), 4000);
	cr_assert_eq(strspn(fed, "x"), 4000);
	json_decref(t);
	sbx_episode_result_free(&r);
	/* obs_cap changes it */
	const char *extra[] = { "obs_cap=100", NULL };
	r = play("pass", "big_output", extra);
	t = traj(&r);
	cr_assert_eq(strlen(msg_str(json_object_get(t, "messages"), 3, "content")), 100);
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy_io, the_first_bash_fence_runs)
{
	sbx_episode_result r = play("pass", "fences", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	json_t *t = traj(&r);
	json_t *turns = json_object_get(t, "turns");
	cr_assert_eq(json_array_size(turns), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(turns, 0), "command")),
			 "echo first > /tmp/fence");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(turns, 1), "output")),
			 "first\n");
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy_io, a_python_fence_runs_with_python3)
{
	/* busybox has no python3: the command's form is checked here, a real
	 * python3 in integration/policy_tasks */
	sbx_episode_result r = play("pass", "python", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	json_t *t = traj(&r);
	json_t *turn = json_array_get(json_object_get(t, "turns"), 0);
	const char *cmd = json_string_value(json_object_get(turn, "command"));
	const char *want = "python3 - <<'sbx_py_end'\nimport sys\nprint('py', 6 * 7)\n";
	cr_assert(strncmp(cmd, want, strlen(want)) == 0, "%s", cmd);
	cr_assert_eq(json_integer_value(json_object_get(turn, "exit_code")), 127);
	json_decref(t);
	sbx_episode_result_free(&r);
}

/* The fake key in none of: the record, its JSON, the log, the server's
 * request record; and the header it sent was "Bearer <key>". */
static void no_key_anywhere(const sbx_episode_result *r)
{
	char *rec = sbx_episode_result_to_json(r);
	cr_assert_null(strstr(rec, FAKE_KEY), "the key is in the record");
	free(rec);
	if (r->detail)
		cr_assert_null(strstr(r->detail, FAKE_KEY));
	if (r->trajectory_json)
		cr_assert_null(strstr(r->trajectory_json, FAKE_KEY));
	pthread_mutex_lock(&log_lock);
	cr_assert(!log_text || !strstr(log_text, FAKE_KEY), "the key is in the log");
	pthread_mutex_unlock(&log_lock);
	cr_assert_neq(sh("grep -rqF '%s' '%s/requests.jsonl' '%s/state'", FAKE_KEY, tmp, tmp), 0,
		      "the key is in a file the run wrote");
}

Test(policy_io, a_fake_key_reaches_the_server_and_nothing_else)
{
	sbx_episode_result r = play("pass", "replay", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	no_key_anywhere(&r);
	sbx_episode_result_free(&r);
	cr_assert_eq(sh("printf 'Bearer %%s' '%s' | sha256sum | cut -c1-64 > '%s/want' && "
			"grep -c \"$(cat '%s/want')\" '%s/requests.jsonl' | grep -qx 2",
			FAKE_KEY, tmp, tmp, tmp), 0, "the server did not get Bearer <key> twice");
	/* and through POLICY_API_KEY_FILE, on the failure paths too */
	setenv("POLICY_API_KEY_FILE", key_file, 1);
	char base[128];
	snprintf(base, sizeof(base), "api_base=http://127.0.0.1:%d/v1", srv_port);
	const char *args[] = { base, "model=always_500", "max_retries=1", NULL };
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent = "policy";
	o.agent_args = args;
	sbx_task *t = load_task("pass");
	cr_assert_eq(sbx_episode_run(&r, rt, t, &o, NULL), 0);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	no_key_anywhere(&r);
	sbx_episode_result_free(&r);
	/* a key given by value (POLICY_API_KEY) as well */
	unsetenv("POLICY_API_KEY_FILE");
	setenv("POLICY_API_KEY", FAKE_KEY, 1);
	const char *args2[] = { base, "model=bad_request", NULL };
	o.agent_args = args2;
	cr_assert_eq(sbx_episode_run(&r, rt, t, &o, NULL), 0);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	no_key_anywhere(&r);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
	cr_assert_eq(sh("grep -c \"$(cat '%s/want')\" '%s/requests.jsonl' | grep -qx 5", tmp, tmp),
		     0, "the key from the variables did not reach the server");
}

Test(policy_io, a_missing_or_empty_key_file_is_named)
{
	const char *extra[] = { "api_key_file=/nonexistent/policy-key", NULL };
	sbx_episode_result r = play("pass", "replay", extra);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_not_null(strstr(r.detail, "/nonexistent/policy-key"), "%s", r.detail);
	sbx_episode_result_free(&r);
	char empty[600];
	snprintf(empty, sizeof(empty), "api_key_file=%s/empty", tmp);
	cr_assert_eq(sh("printf '\\n' > '%s/empty'", tmp), 0);
	const char *extra2[] = { empty, NULL };
	r = play("pass", "replay", extra2);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_not_null(strstr(r.detail, "is empty"), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(policy_io, the_key_is_not_in_the_sandbox)
{
	setenv("POLICY_API_KEY", FAKE_KEY, 1);
	sbx_episode_result r = play("pass", "env", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	json_t *t = traj(&r);
	const char *out = json_string_value(json_object_get(json_array_get(
		json_object_get(t, "turns"), 0), "output"));
	cr_assert_not_null(strstr(out, "PATH="), "%s", out);
	cr_assert_null(strstr(out, FAKE_KEY), "the key reached the sandbox");
	cr_assert_null(strstr(out, "POLICY_API"), "%s", out);
	json_decref(t);
	no_key_anywhere(&r);
	sbx_episode_result_free(&r);
}

Test(policy_io, an_answer_that_is_not_json_is_an_agent_error)
{
	sbx_episode_result r = play("pass", "garbage", NULL);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_not_null(strstr(r.detail, "choices[0].message"), "%s", r.detail);
	sbx_episode_result_free(&r);
	const char *extra[] = { "stream=1", NULL };
	r = play("pass", "garbage", extra);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_not_null(strstr(r.detail, "event stream"), "%s", r.detail);
	sbx_episode_result_free(&r);
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 2, "a bad answer is not retried");
	json_decref(rq);
}
