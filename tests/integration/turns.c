/* SPDX-License-Identifier: MIT */
/*
 * The turn-by-turn episode API on the local provider with the busybox
 * fixture tasks: begin → turns → end gives the verifier's reward and a
 * trajectory of the turns; the observation (stdout then stderr, "(no
 * output)", the cap in characters); abort and a failed begin leave no
 * sandbox; a turn after the agent limit is -ETIMEDOUT with done = 1.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/episode.h>
#include <sbx/sys/connector.h>

#include "common.h"

TestSuite(turns, .init = setup, .fini = teardown, .timeout = 300);

static sbx_task *load(const char *name)
{
	const char *src = getenv("SBX_SOURCE_ROOT");
	cr_assert_not_null(src, "SBX_SOURCE_ROOT not set");
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/tasks/%s", src, name);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, &err), 0, "load %s: %s", dir, err ? err->msg : "?");
	return t;
}

static size_t sandboxes(void)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	sbx_sandbox_info_free(v, n);
	return n;
}

static sbx_episode *begin(const sbx_task *t, const sbx_episode_opts *o)
{
	sbx_episode *ep = NULL;
	sbx_error *err = NULL;
	int r = sbx_episode_begin(&ep, rt, t, o, &err);
	cr_assert_eq(r, 0, "begin %s: %s", t->name, err ? err->msg : "?");
	cr_assert_not_null(ep);
	return ep;
}

static sbx_observation turn(sbx_episode *ep, const char *cmd, double timeout_s)
{
	sbx_observation o;
	sbx_error *err = NULL;
	int r = sbx_episode_turn(&o, ep, cmd, timeout_s, &err);
	cr_assert_eq(r, 0, "turn '%s': %s", cmd, err ? err->msg : "?");
	return o;
}

Test(turns, begin_turns_end_gives_the_reward_and_the_trajectory)
{
	sbx_task *t = load("pass");
	size_t before = sandboxes();
	sbx_episode *ep = begin(t, NULL);
	cr_assert_eq(sandboxes(), before + 1);

	sbx_observation o = turn(ep, "echo out; echo err >&2; exit 3", 0);
	cr_assert_str_eq(o.output, "out\nerr\n");
	cr_assert_eq(o.output_len, 8);
	cr_assert_eq(o.exit_code, 3);
	cr_assert_eq(o.timed_out, 0);
	cr_assert_eq(o.truncated, 0);
	cr_assert_eq(o.done, 0);
	sbx_observation_free(&o);

	o = turn(ep, "printf hello > /tmp/answer", 0);
	cr_assert_str_eq(o.output, "(no output)");
	cr_assert_eq(o.exit_code, 0);
	sbx_observation_free(&o);

	sbx_episode_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_episode_end(&r, ep, &err), 0);
	cr_assert_eq(r.status, SBX_EPISODE_SUBMITTED, "%s", r.detail ? r.detail : "");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_str_eq(r.agent, "external");
	cr_assert_eq(r.agent_exit_code, 0);
	cr_assert_eq(sandboxes(), before);

	cr_assert_not_null(r.trajectory_json);
	json_t *j = json_loads(r.trajectory_json, 0, NULL);
	json_t *turns = json_object_get(j, "turns");
	cr_assert_eq(json_array_size(turns), 2, "%s", r.trajectory_json);
	json_t *t0 = json_array_get(turns, 0);
	cr_assert_eq(json_integer_value(json_object_get(t0, "index")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(t0, "command")),
			 "echo out; echo err >&2; exit 3");
	cr_assert_eq(json_integer_value(json_object_get(t0, "exit_code")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(t0, "output")), "out\nerr\n");
	cr_assert(json_is_false(json_object_get(t0, "truncated")));
	cr_assert(json_is_false(json_object_get(t0, "timed_out")));
	cr_assert(json_is_number(json_object_get(t0, "seconds")));
	cr_assert(json_is_number(json_object_get(t0, "started")));
	json_decref(j);

	char *rec = sbx_episode_result_to_json(&r);
	j = json_loads(rec, 0, NULL);
	cr_assert(json_is_object(json_object_get(j, "trajectory")), "%s", rec);
	json_decref(j);
	free(rec);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
}

Test(turns, observation_is_capped_in_characters)
{
	sbx_task *t = load("pass");
	const char *args[] = { "obs_cap=10", NULL };
	sbx_episode_opts eo = SBX_EPISODE_OPTS_INIT;
	eo.agent_args = args;
	sbx_episode *ep = begin(t, &eo);
	/* 1 MiB of output: only the head reaches the observation */
	sbx_observation o = turn(ep, "head -c 1048576 /dev/zero | tr '\\0' x", 0);
	cr_assert_str_eq(o.output, "xxxxxxxxxx");
	cr_assert_eq(o.truncated, 1);
	sbx_observation_free(&o);
	/* multi-byte characters are never split; bad bytes become U+FFFD */
	o = turn(ep, "printf '\\303\\251\\303\\251\\377ab'; printf 'cdefghij' >&2", 0);
	cr_assert_str_eq(o.output, "\xc3\xa9\xc3\xa9\xef\xbf\xbd" "abcdefg");
	cr_assert_eq(o.truncated, 1);
	sbx_observation_free(&o);
	o = turn(ep, "printf 0123456789", 0);
	cr_assert_str_eq(o.output, "0123456789");
	cr_assert_eq(o.truncated, 0);
	sbx_observation_free(&o);
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_end(&r, ep, NULL), 0);
	cr_assert_eq(r.status, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
}

Test(turns, default_cap_is_4000_characters)
{
	sbx_task *t = load("pass");
	sbx_episode *ep = begin(t, NULL);
	sbx_observation o = turn(ep, "head -c 1048576 /dev/zero | tr '\\0' y; echo tail >&2", 0);
	cr_assert_eq(o.output_len, 4000);
	cr_assert_eq(strspn(o.output, "y"), 4000);
	cr_assert_eq(o.truncated, 1);
	sbx_observation_free(&o);
	sbx_episode_abort(ep);
	sbx_task_free(t);
}

Test(turns, command_timeout_is_not_the_end)
{
	sbx_task *t = load("pass");
	sbx_episode *ep = begin(t, NULL);
	sbx_observation o = turn(ep, "sleep 30", 0.5);
	cr_assert_eq(o.timed_out, 1);
	cr_assert_eq(o.exit_code, -1);
	cr_assert_eq(o.done, 0);
	sbx_observation_free(&o);
	o = turn(ep, "echo still here", 0);
	cr_assert_str_eq(o.output, "still here\n");
	sbx_observation_free(&o);
	sbx_episode_abort(ep);
	sbx_task_free(t);
}

Test(turns, abort_leaves_no_sandbox)
{
	sbx_task *t = load("pass");
	size_t before = sandboxes();
	sbx_episode *ep = begin(t, NULL);
	sbx_observation o = turn(ep, "printf hello > /tmp/answer", 0);
	sbx_observation_free(&o);
	cr_assert_eq(sandboxes(), before + 1);
	sbx_episode_abort(ep);
	cr_assert_eq(sandboxes(), before);
	sbx_episode_abort(NULL);
	sbx_task_free(t);
}

Test(turns, a_turn_after_the_agent_limit_is_etimedout)
{
	sbx_task *t = load("agent-timeout"); /* [agent].timeout_sec = 1 */
	sbx_episode *ep = begin(t, NULL);
	sbx_observation o = turn(ep, "sleep 10", 0);
	cr_assert_eq(o.timed_out, 1);
	cr_assert_eq(o.done, 1);
	sbx_observation_free(&o);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_episode_turn(&o, ep, "echo late", 0, &err), -ETIMEDOUT);
	cr_assert_eq(o.done, 1);
	cr_assert_null(o.output);
	cr_assert_not_null(err);
	cr_assert_not_null(strstr(err->msg, "agent time limit"), "%s", err->msg);
	sbx_error_free(err);
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_end(&r, ep, NULL), 0);
	cr_assert_eq(r.status, SBX_EPISODE_TIME_LIMIT, "%s", sbx_episode_status_name(r.status));
	cr_assert_eq(r.agent_timed_out, 1);
	cr_assert_eq(r.verifier_ran, 1);
	json_t *j = json_loads(r.trajectory_json, 0, NULL);
	json_t *t0 = json_array_get(json_object_get(j, "turns"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(t0, "limit")), "agent");
	cr_assert_eq(json_array_size(json_object_get(j, "turns")), 1);
	json_decref(j);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
}

Test(turns, a_begin_that_cannot_resolve_fails_cleanly)
{
	sbx_task *t = load("missing-image");
	size_t before = sandboxes();
	sbx_episode *ep = (sbx_episode *)t; /* must be reset */
	sbx_error *err = NULL;
	int r = sbx_episode_begin(&ep, rt, t, NULL, &err);
	cr_assert_lt(r, 0);
	cr_assert_null(ep);
	cr_assert_not_null(err);
	cr_assert_not_null(strstr(err->msg, "resolve"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "missing-image"), "%s", err->msg);
	sbx_error_free(err);
	cr_assert_eq(sandboxes(), before);
	sbx_task_free(t);
}

Test(turns, bad_input_is_einval)
{
	sbx_task *t = load("pass");
	sbx_error *err = NULL;
	sbx_episode *ep = NULL;
	const char *bad[] = { "obs_cap", NULL };
	sbx_episode_opts eo = SBX_EPISODE_OPTS_INIT;
	eo.agent_args = bad;
	cr_assert_eq(sbx_episode_begin(&ep, rt, t, &eo, &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "agent_args[0]"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	const char *bad_cap[] = { "obs_cap=lots", NULL };
	eo.agent_args = bad_cap;
	cr_assert_eq(sbx_episode_begin(&ep, rt, t, &eo, &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "obs_cap"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	ep = begin(t, NULL);
	sbx_observation o;
	cr_assert_eq(sbx_episode_turn(&o, ep, "", 0, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_episode_turn(&o, NULL, "true", 0, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_episode_end(NULL, ep, &err), -EINVAL);
	sbx_error_free(err);
	sbx_episode_abort(ep);
	sbx_observation_free(NULL);
	sbx_task_free(t);
}

Test(turns, oracle_records_have_no_trajectory)
{
	sbx_task *t = load("pass");
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_run(&r, rt, t, NULL, NULL), 0);
	cr_assert_null(r.trajectory_json);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
}

Test(turns, many_turns_are_all_recorded)
{
	/* also prints the turn API's cost per turn (a figure, not asserted) */
	sbx_task *t = load("pass");
	sbx_episode *ep = begin(t, NULL);
	enum { N = 200 };
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < N; i++) {
		sbx_observation o = turn(ep, "true", 0);
		cr_assert_eq(o.exit_code, 0);
		sbx_observation_free(&o);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double per = ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9) / N;
	/* the same command as a bare exec in the same sandbox: the difference
	 * is what a turn adds (bounds, observation, record) */
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = "true";
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < N; i++) {
		sbx_exec_result er;
		cr_assert_eq(sbx_sandbox_exec(&er, sbx_episode_sandbox(ep), &x, NULL), 0);
		sbx_exec_result_free(&er);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double bare = ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9) / N;
	fprintf(stderr, "turns: %d turns of 'true': %.3f ms per turn, %.3f ms per bare exec\n", N,
		per * 1000, bare * 1000);
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_end(&r, ep, NULL), 0);
	json_t *j = json_loads(r.trajectory_json, 0, NULL);
	json_t *turns = json_object_get(j, "turns");
	cr_assert_eq(json_array_size(turns), N);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(turns, N - 1), "index")), N - 1);
	json_decref(j);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
}
