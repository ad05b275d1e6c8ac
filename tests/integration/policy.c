/* SPDX-License-Identifier: MIT */
/*
 * The policy agent against the scripted fake model server on loopback,
 * busybox fixture tasks on the local provider: every end reason, the cut
 * command that never runs (the verifier looks for its marker), retries of
 * 429 and the budget of 500s (an AgentError, never a reward of 0), a 400
 * not retried, a model slower than the episode clock, the verbatim echo
 * of assistant messages, metrics and the trajectory.
 */
#include "policy_common.h"

static void setup(void)
{
	policy_setup(20);
}

TestSuite(policy, .init = setup, .fini = policy_teardown, .timeout = 300);

Test(policy, replay_solves_and_echoes_the_assistant_message_verbatim)
{
	sbx_episode_result r = play("pass", "replay", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_str_eq(r.agent, "policy");
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "turns"), 2);
	cr_assert_eq(mint(m, "tool_calls"), 1);
	cr_assert_eq(json_array_size(json_object_get(m, "gen_times")), 2);
	cr_assert_eq(json_array_size(json_object_get(m, "tool_times")), 1);
	cr_assert(json_is_number(json_object_get(m, "reset_time")), "%s", r.agent_metrics_json);
	cr_assert(json_is_number(json_object_get(m, "eval_time")));
	cr_assert(json_is_number(json_object_get(m, "total_gen_time")));
	cr_assert(json_is_number(json_object_get(m, "total_tool_time")));
	cr_assert_eq(mint(m, "prompt_tokens"), 20);
	json_decref(m);

	json_t *t = traj(&r);
	json_t *msgs = json_object_get(t, "messages");
	cr_assert_eq(json_array_size(msgs), 5, "%s", r.trajectory_json);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 0), "role")), "system");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
			 "Write hello to /tmp/answer.\n");
	json_t *turns = json_object_get(t, "turns");
	cr_assert_eq(json_array_size(turns), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(msgs, 3), "content")),
			 json_string_value(json_object_get(json_array_get(turns, 0), "output")));
	cr_assert_str_eq(json_string_value(json_object_get(t, "model")), "replay");
	cr_assert(json_is_false(json_object_get(t, "tool_mode")));

	/* The second request carries the first reply exactly as it was sent:
	 * every field (reasoning_content, the fake's own x_fake_turn). */
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 2);
	json_t *body2 = json_object_get(json_array_get(rq, 1), "body");
	json_t *echoed = json_array_get(json_object_get(body2, "messages"), 2);
	cr_assert(json_equal(echoed, json_array_get(msgs, 2)));
	cr_assert_str_eq(json_string_value(json_object_get(echoed, "reasoning_content")),
			 "fake reasoning for turn 0");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(echoed, "x_fake_turn"), "n")), 0);
	json_t *body1 = json_object_get(json_array_get(rq, 0), "body");
	cr_assert_str_eq(json_string_value(json_object_get(body1, "model")), "replay");
	cr_assert_float_eq(json_number_value(json_object_get(body1, "temperature")), 0.8, 1e-9);
	cr_assert_null(json_object_get(body1, "tools"));
	json_decref(rq);
	json_decref(t);

	char *rec = sbx_episode_result_to_json(&r);
	json_t *j = json_loads(rec, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(j, "end_reason")), "task_complete");
	cr_assert(json_is_object(json_object_get(j, "trajectory")));
	cr_assert(json_is_object(json_object_get(j, "agent_metrics")));
	json_decref(j);
	free(rec);
	sbx_episode_result_free(&r);
}

Test(policy, a_cut_reply_never_runs_its_command)
{
	/* the verifier rewards 1 only when /tmp/length-marker is absent */
	sbx_episode_result r = play("marker", "length", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "length");
	cr_assert_float_eq(r.reward, 1.0, 1e-9, "the cut command ran");
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "turns"), 1);
	cr_assert_eq(mint(m, "tool_calls"), 0);
	json_decref(m);
	json_t *t = traj(&r);
	cr_assert_eq(json_array_size(json_object_get(t, "turns")), 0);
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy, the_same_command_uncut_does_run)
{
	/* the control: the verifier sees the marker when the command runs */
	char script[600];
	snprintf(script, sizeof(script), "%s/script.json", tmp);
	FILE *f = fopen(script, "w");
	cr_assert_not_null(f);
	fputs("[{\"content\": \"```bash\\ntouch /tmp/length-marker\\n```\"},"
	      " {\"content\": \"TASK_COMPLETE\"}]", f);
	fclose(f);
	kill(srv_pid, SIGTERM);
	waitpid(srv_pid, NULL, 0);
	/* restart with the script */
	char port_file[512];
	snprintf(port_file, sizeof(port_file), "%s/port", tmp);
	unlink(port_file);
	srv_pid = fork();
	if (srv_pid == 0) {
		char srvpy[512];
		snprintf(srvpy, sizeof(srvpy), "%s/tests/fakes/openai_server.py",
			 getenv("SBX_SOURCE_ROOT"));
		execl(PY, PY, srvpy, "--tasks-dir", tasks_dir, "--port-file", port_file, "--script",
		      script, (char *)NULL);
		_exit(127);
	}
	srv_port = 0;
	for (int i = 0; i < 400 && !srv_port; i++) {
		usleep(50 * 1000);
		FILE *p = fopen(port_file, "r");
		if (p) {
			if (fscanf(p, "%d", &srv_port) != 1)
				srv_port = 0;
			fclose(p);
		}
	}
	cr_assert_gt(srv_port, 0);
	sbx_episode_result r = play("marker", "script", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	sbx_episode_result_free(&r);
}

Test(policy, an_empty_reply_is_no_command)
{
	sbx_episode_result r = play("pass", "no_command", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "no_command");
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "turns"), 1);
	cr_assert_eq(mint(m, "tool_calls"), 0);
	json_decref(m);
	sbx_episode_result_free(&r);
}

Test(policy, the_turn_limit_is_max_turns)
{
	const char *extra[] = { "max_turns=3", NULL };
	sbx_episode_result r = play("pass", "forever", extra);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "max_turns");
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "turns"), 3);
	cr_assert_eq(mint(m, "tool_calls"), 3);
	json_decref(m);
	json_t *t = traj(&r);
	json_t *turns = json_object_get(t, "turns");
	cr_assert_eq(json_array_size(turns), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(turns, 2), "output")),
			 "turn 2\n");
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy, openenv_max_turns_is_read)
{
	setenv("OPENENV_MAX_TURNS", "2", 1);
	sbx_episode_result r = play("pass", "forever", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "max_turns");
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "turns"), 2);
	json_decref(m);
	sbx_episode_result_free(&r);
}

Test(policy, a_429_is_retried)
{
	sbx_episode_result r = play("pass", "rate_limit_then_ok", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "retries"), 2, "%s", r.agent_metrics_json);
	json_decref(m);
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 4);
	json_decref(rq);
	sbx_episode_result_free(&r);
}

Test(policy, 500s_past_the_retry_budget_are_an_agent_error)
{
	const char *extra[] = { "max_retries=2", NULL };
	sbx_episode_result r = play("pass", "always_500", extra);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_eq(r.has_reward, 0, "an API failure must not score 0");
	cr_assert_eq(r.verifier_ran, 0);
	cr_assert_not_null(strstr(r.detail, "HTTP 500"), "%s", r.detail);
	cr_assert_not_null(strstr(r.detail, "retries exhausted"), "%s", r.detail);
	cr_assert_not_null(strstr(r.detail, "policy"), "%s", r.detail);
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 3, "1 attempt + 2 retries");
	json_decref(rq);
	sbx_episode_result_free(&r);
	cr_assert_eq(sandboxes(), 0, "a sandbox outlived its episode");
}

Test(policy, a_400_is_not_retried)
{
	sbx_episode_result r = play("pass", "bad_request", NULL);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_eq(r.has_reward, 0);
	cr_assert_not_null(strstr(r.detail, "HTTP 400"), "%s", r.detail);
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 1);
	json_decref(rq);
	sbx_episode_result_free(&r);
}

Test(policy, an_unreachable_api_is_an_agent_error)
{
	const char *extra[] = { "api_base=http://127.0.0.1:1/v1", "max_retries=1", NULL };
	sbx_episode_result r = play("pass", "replay", extra);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_eq(r.has_reward, 0);
	sbx_episode_result_free(&r);
}

Test(policy, a_model_slower_than_the_episode_clock_is_a_timeout)
{
	/* the fake sleeps 20 s; the episode has 3 */
	sbx_episode_result r = play_opts("pass", "slow", 3, NULL);
	expect_end(&r, SBX_EPISODE_TIME_LIMIT, "timeout");
	cr_assert_eq(r.has_reward, 1);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	json_t *m = metrics(&r);
	cr_assert_eq(mint(m, "timed_out"), 1);
	cr_assert_eq(mint(m, "tool_calls"), 0);
	json_decref(m);
	sbx_episode_result_free(&r);
	cr_assert_eq(sandboxes(), 0, "a sandbox outlived its episode");
}

Test(policy, bad_agent_args_are_an_agent_error_naming_them)
{
	const char *extra[] = { "temprature=0.5", NULL };
	sbx_episode_result r = play("pass", "replay", extra);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_not_null(strstr(r.detail, "temprature"), "%s", r.detail);
	sbx_episode_result_free(&r);
	const char *extra2[] = { "max_turns=zero", NULL };
	r = play("pass", "replay", extra2);
	cr_assert_not_null(strstr(r.detail, "max_turns"), "%s", r.detail);
	sbx_episode_result_free(&r);
	const char *extra3[] = { "api_base=http://user:pw@127.0.0.1:1/v1", NULL };
	r = play("pass", "replay", extra3);
	cr_assert_not_null(strstr(r.detail, "embeds credentials"), "%s", r.detail);
	cr_assert_null(strstr(r.detail, "pw@"), "%s", r.detail);
	sbx_episode_result_free(&r);
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 0);
	json_decref(rq);
}

Test(policy, request_timeouts_past_the_retry_budget_are_an_agent_error)
{
	/* each request gives up after 0.5 s (the fake sleeps 20): the API failing,
	 * not the agent's time running out */
	const char *extra[] = { "request_timeout=0.5", "max_retries=1", NULL };
	sbx_episode_result r = play("pass", "slow", extra);
	expect_end(&r, SBX_EPISODE_AGENT_ERROR, "error");
	cr_assert_eq(r.has_reward, 0);
	cr_assert_not_null(strstr(r.detail, "retries exhausted"), "%s", r.detail);
	json_t *rq = requests();
	cr_assert_eq(json_array_size(rq), 2);
	json_decref(rq);
	sbx_episode_result_free(&r);
}
