/* SPDX-License-Identifier: MIT */
/*
 * Harbor episodes on the local provider with the busybox fixture tasks in
 * tests/fixtures/tasks: every exit status, reward.json over reward.txt,
 * tests invisible during the agent phase, the verifier after an agent
 * timeout, env tables, workdir, kept logs and batches (the CLI commands
 * and template builds: episode_cli.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/pool.h>
#include <sbx/task.h>

#include "common.h"
#include "episode_common.h"

TestSuite(episode, .init = setup, .fini = teardown, .timeout = 300);

struct stages {
	int begun[SBX_EPISODE_STAGES];
	int ended[SBX_EPISODE_STAGES];
	int ok[SBX_EPISODE_STAGES];
};

static void on_stage(const char *task, sbx_episode_stage s, int done, int ok, double sec,
		     const char *detail, void *payload)
{
	(void)task; (void)sec; (void)detail;
	struct stages *st = payload;
	if (done) {
		st->ended[s]++;
		st->ok[s] = ok;
	} else {
		st->begun[s]++;
	}
}


Test(episode, passing_task_legacy_schema)
{
	struct stages st = { 0 };
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.on_stage = on_stage;
	o.payload = &st;
	sbx_episode_result r = run_opts("pass", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_eq(r.has_reward, 1);
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_str_eq(r.reward_source, "reward.txt");
	cr_assert_str_eq(r.image, "busybox");
	cr_assert_str_eq(r.image_how, "prebuilt");
	cr_assert_eq(r.agent_exit_code, 0);
	cr_assert_eq(r.verifier_ran, 1);
	for (int i = 0; i < SBX_EPISODE_STAGES; i++) {
		cr_assert_eq(st.begun[i], 1, "stage %d begun %d", i, st.begun[i]);
		cr_assert_eq(st.ended[i], 1);
		cr_assert_eq(st.ok[i], 1, "stage %s failed", sbx_episode_stage_name(i));
	}
	cr_assert_gt(r.total_seconds, 0);
	char *j = sbx_episode_result_to_json(&r);
	json_t *o2 = json_loads(j, 0, NULL);
	cr_assert_not_null(o2, "%s", j);
	cr_assert_str_eq(json_string_value(json_object_get(o2, "exit_status")), "Submitted");
	cr_assert_float_eq(json_real_value(json_object_get(o2, "reward")), 1.0, 1e-9);
	cr_assert(json_is_object(json_object_get(o2, "seconds")));
	json_decref(o2);
	free(j);
	sbx_episode_result_free(&r);
}

Test(episode, reward_json_beats_reward_txt)
{
	sbx_episode_result r = run("reward-json-wins");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_str_eq(r.reward_source, "reward.json");
	cr_assert_str_eq(r.rewards_json, "{\"accuracy\":0.5,\"reward\":1}");
	sbx_episode_result_free(&r);
}

Test(episode, fractional_reward)
{
	sbx_episode_result r = run("reward-fraction");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 0.25, 1e-9);
	sbx_episode_result_free(&r);
}

Test(episode, missing_empty_garbage_reward_are_verifier_errors)
{
	const char *names[] = { "reward-missing", "reward-empty", "reward-garbage" };
	const char *words[] = { "no reward file", "empty", "not a number" };
	for (int i = 0; i < 3; i++) {
		sbx_episode_result r = run(names[i]);
		expect(&r, SBX_EPISODE_VERIFIER_ERROR);
		cr_assert_eq(r.has_reward, 0, "%s must not score", names[i]);
		cr_assert_not_null(strstr(r.detail, words[i]), "%s: %s", names[i], r.detail);
		cr_assert_eq(r.verifier_exit_code, 0);
		sbx_episode_result_free(&r);
	}
}

Test(episode, agent_timeout_still_runs_the_verifier)
{
	sbx_episode_result r = run("agent-timeout");
	expect(&r, SBX_EPISODE_TIME_LIMIT);
	cr_assert_eq(r.agent_timed_out, 1);
	cr_assert_eq(r.verifier_ran, 1);
	cr_assert_eq(r.has_reward, 1);
	cr_assert_float_eq(r.reward, 1.0, 1e-9, "the verifier's reward is kept");
	cr_assert_str_eq(r.reward_source, "reward.txt");
	cr_assert_lt(r.stage_seconds[SBX_STAGE_AGENT], 10);
	cr_assert_not_null(strstr(r.detail, "agent timed out"), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(episode, agent_timeout_override)
{
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent_timeout_s = 1;
	sbx_episode_result r = run_opts("slow", &o);
	expect(&r, SBX_EPISODE_TIME_LIMIT);
	cr_assert_eq(r.agent_timed_out, 1);
	cr_assert_eq(r.verifier_ran, 1);
	sbx_episode_result_free(&r);
}

Test(episode, episode_wall_clock)
{
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.max_episode_s = 3;
	sbx_episode_result r = run_opts("slow", &o);
	expect(&r, SBX_EPISODE_TIME_LIMIT);
	cr_assert_eq(r.has_reward, 1);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	cr_assert_eq(r.verifier_ran, 0, "no verification after the wall clock ran out");
	cr_assert_lt(r.total_seconds, 30);
	cr_assert_not_null(strstr(r.detail, "wall clock"), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(episode, wall_clock_from_environment)
{
	setenv("SBX_MAX_EPISODE_S", "2", 1);
	sbx_episode_result r = run("slow");
	unsetenv("SBX_MAX_EPISODE_S");
	expect(&r, SBX_EPISODE_TIME_LIMIT);
	cr_assert_eq(r.verifier_ran, 0);
	sbx_episode_result_free(&r);
}

Test(episode, tests_are_invisible_while_the_agent_runs)
{
	sbx_episode_result r = run("tests-invisible");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 1.0, 1e-9, "solve.sh saw /tests (log: %s)",
			   r.verifier_log_tail ? r.verifier_log_tail : "-");
	sbx_episode_result_free(&r);
}

Test(episode, verifier_timeout)
{
	sbx_episode_result r = run("verifier-timeout");
	expect(&r, SBX_EPISODE_VERIFIER_ERROR);
	cr_assert_eq(r.verifier_timed_out, 1);
	cr_assert_eq(r.has_reward, 0, "a reward written before the timeout does not count");
	cr_assert_not_null(strstr(r.detail, "verifier timed out"), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(episode, verifier_and_solution_env)
{
	setenv("SBX_TEST_HOST_VALUE", "from-host", 1);
	sbx_episode_result r = run("env");
	unsetenv("SBX_TEST_HOST_VALUE");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 1.0, 1e-9, "env did not reach the scripts: %s", r.verifier_log_tail ? r.verifier_log_tail : "-");
	sbx_episode_result_free(&r);
}

Test(episode, workdir_is_the_cwd_of_agent_and_verifier)
{
	sbx_episode_result r = run("workdir");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	sbx_episode_result_free(&r);
}

Test(episode, oracle_nonzero_exit_is_recorded_not_fatal)
{
	sbx_episode_result r = run("oracle-fails");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_eq(r.agent_exit_code, 3);
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_not_null(r.agent_log_tail);
	cr_assert_not_null(strstr(r.agent_log_tail, "failing on purpose"), "%s", r.agent_log_tail);
	sbx_episode_result_free(&r);
}

Test(episode, oracle_without_solution_is_agent_error)
{
	sbx_episode_result r = run("no-solution");
	expect(&r, SBX_EPISODE_AGENT_ERROR);
	cr_assert_eq(r.has_reward, 0);
	cr_assert_eq(r.verifier_ran, 0);
	cr_assert_not_null(r.sandbox_id, "the sandbox was created and destroyed");
	sbx_episode_result_free(&r);
}

Test(episode, nop_agent_lets_the_verifier_decide)
{
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent = "nop";
	sbx_episode_result r = run_opts("pass", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	sbx_episode_result_free(&r);
}

Test(episode, missing_image_is_environment_error)
{
	struct stages st = { 0 };
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.on_stage = on_stage;
	o.payload = &st;
	sbx_episode_result r = run_opts("missing-image", &o);
	expect(&r, SBX_EPISODE_ENV_ERROR);
	cr_assert_eq(r.has_reward, 0);
	cr_assert_null(r.sandbox_id);
	cr_assert_eq(st.ended[SBX_STAGE_RESOLVE], 1);
	cr_assert_eq(st.ok[SBX_STAGE_RESOLVE], 0);
	cr_assert_eq(st.begun[SBX_STAGE_CREATE], 0);
	sbx_episode_result_free(&r);
}

Test(episode, unknown_agent_is_einval)
{
	sbx_task *t = load("pass");
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent = "claude";
	sbx_episode_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_episode_run(&r, rt, t, &o, &err), -EINVAL);
	cr_assert_not_null(err);
	sbx_error_free(err);
	sbx_task_free(t);
}

Test(episode, sandboxes_are_destroyed)
{
	sbx_episode_result r = run("agent-timeout");
	sbx_episode_result_free(&r);
	r = run("no-solution");
	sbx_episode_result_free(&r);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	const char *filter[] = { "sbx.agent=oracle", NULL };
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, filter, NULL), 0);
	cr_assert_eq(n, 0, "%zu episode sandboxes left", n);
	sbx_sandbox_info_free(v, n);
}

Test(episode, logs_are_kept)
{
	char dir[] = "/tmp/sbx-episode-logs.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char logs[512];
	snprintf(logs, sizeof(logs), "%s/run", dir);
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.logs_dir = logs;
	sbx_episode_result r = run_opts("oracle-fails", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_str_eq(r.logs_dir, logs);
	const char *files[] = { "agent/oracle.txt", "agent/exit-code.txt",
				"verifier/test-stdout.txt", "verifier/reward.txt", "result.json" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[700];
		snprintf(p, sizeof(p), "%s/%s", logs, files[i]);
		cr_assert_eq(access(p, F_OK), 0, "%s missing", p);
	}
	char p[700];
	snprintf(p, sizeof(p), "%s/result.json", logs);
	json_t *j = json_load_file(p, 0, NULL);
	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(j, "task")), "oracle-fails");
	json_decref(j);
	sbx_episode_result_free(&r);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

static void count_done(size_t i, const sbx_episode_result *r, void *payload)
{
	(void)i; (void)r;
	(*(int *)payload)++;
}

Test(episode, batch_runs_concurrently)
{
	const char *names[] = { "pass", "reward-fraction", "reward-missing", "agent-timeout" };
	sbx_task *tasks[4];
	for (int i = 0; i < 4; i++)
		tasks[i] = load(names[i]);
	sbx_episode_result res[4];
	int done = 0;
	sbx_batch_opts o = SBX_BATCH_OPTS_INIT;
	o.concurrency = 3;
	o.on_done = count_done;
	o.payload = &done;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_episode_run_batch(res, rt, tasks, 4, &o, &err), 0);
	cr_assert_eq(done, 4);
	expect(&res[0], SBX_EPISODE_SUBMITTED);
	expect(&res[1], SBX_EPISODE_SUBMITTED);
	expect(&res[2], SBX_EPISODE_VERIFIER_ERROR);
	expect(&res[3], SBX_EPISODE_TIME_LIMIT);
	for (int i = 0; i < 4; i++) {
		cr_assert_str_eq(res[i].task, names[i]);
		sbx_episode_result_free(&res[i]);
		sbx_task_free(tasks[i]);
	}
}
