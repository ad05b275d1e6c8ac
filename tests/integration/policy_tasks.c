/* SPDX-License-Identifier: MIT */
/*
 * The bundled tasks (examples/tasks) played by the policy agent against
 * the fake's replay script: every task's solution comes back as a bash
 * block, runs as a turn, and the verifier gives reward 1 (12/12). The ASan
 * pass plays a subset (the sanitizer looks for memory errors, not scale).
 * Also a real python3 fence and tool mode over SSE on a task image.
 *
 * The tasks say FROM sbx-tasks:bookworm: the image store is the test's own,
 * $SBX_TEST_TASK_IMAGE_DIR (scripts/check.sh shares the plain build's with
 * the ASan pass) else BUILD/test-task-images, bootstrapped once as
 * scripts/demo.sh does when the base image is missing.
 */
#include "policy_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define SUBSET 3
#else
#define SUBSET 0
#endif

static char images[512];

static void setup(void)
{
	sbx_test_require_root();
	if (access(PY, X_OK) != 0)
		sbx_test_skip("%s is missing", PY);
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	const char *env = getenv("SBX_TEST_TASK_IMAGE_DIR");
	if (env && *env)
		snprintf(images, sizeof(images), "%s", env);
	else
		snprintf(images, sizeof(images), "%s/test-task-images", b);
	snprintf(tmp, sizeof(tmp), "%s/test-state/policy-tasks-%d", b, (int)getpid());
	snprintf(tasks_dir, sizeof(tasks_dir), "%s/examples/tasks", src);
	snprintf(key_file, sizeof(key_file), "%s/key", tmp);
	snprintf(record_path, sizeof(record_path), "%s/requests.jsonl", tmp);
	cr_assert_eq(sh("rm -rf '%s' && mkdir -p '%s' && printf '%%s\\n' '%s' > '%s'", tmp, tmp,
			FAKE_KEY, key_file), 0);
	cr_assert_eq(sh("set -e; cd '%s'; . examples/tasks/base-image.env; export SBX_IMAGE_DIR='%s'; "
			"export SBX_STATE_DIR='%s/state-bootstrap'; "
			"if ! '%s/src/cli/sbx' image inspect \"$SBX_TASKS_IMAGE\" >/dev/null 2>&1; then "
			"echo 'policy_tasks: bootstrapping the task base image (one time)' >&2; "
			"'%s/src/cli/sbx' image bootstrap \"$SBX_TASKS_IMAGE\" --suite "
			"\"$SBX_TASKS_SUITE\" --include \"$SBX_TASKS_PACKAGES\" >&2; fi",
			src, images, tmp, b, b), 0, "the task base image could not be bootstrapped");
	char state[600];
	snprintf(state, sizeof(state), "%s/state", tmp);
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	o.log = on_log;
	o.log_level = SBX_LOG_INFO;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	srv_start(20);
}

TestSuite(policy_tasks, .init = setup, .fini = policy_teardown, .timeout = 3600);

Test(policy_tasks, every_bundled_task_is_solved_by_the_replay_script)
{
	char **names = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_list(&names, &n, tasks_dir, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(n, 12, "examples/tasks has %zu tasks", n);
	if (SUBSET && n > SUBSET)
		n = SUBSET;
	sbx_task **tasks = calloc(n, sizeof(*tasks)); /* checksrc: allow (test) */
	for (size_t i = 0; i < n; i++)
		tasks[i] = load_task(names[i]);
	char base[128], key[600];
	snprintf(base, sizeof(base), "api_base=http://127.0.0.1:%d/v1", srv_port);
	snprintf(key, sizeof(key), "api_key_file=%s", key_file);
	const char *args[] = { base, "model=scripted", key, NULL };
	sbx_batch_opts bo = SBX_BATCH_OPTS_INIT;
	bo.episode.agent = "policy";
	bo.episode.agent_args = args;
	bo.concurrency = 2;
	sbx_episode_result *res = calloc(n, sizeof(*res)); /* checksrc: allow (test) */
	cr_assert_eq(sbx_episode_run_batch(res, rt, tasks, n, &bo, &err), 0, "%s",
		     err ? err->msg : "");
	size_t solved = 0;
	for (size_t i = 0; i < n; i++) {
		const sbx_episode_result *r = &res[i];
		int ok = r->status == SBX_EPISODE_SUBMITTED && r->has_reward && r->reward == 1.0 &&
			 r->end_reason && !strcmp(r->end_reason, "task_complete");
		if (!ok)
			fprintf(stderr, "policy_tasks: %s: %s reward %g end %s (%s)\n%s\n", r->task,
				sbx_episode_status_name(r->status), r->reward,
				r->end_reason ? r->end_reason : "-", r->detail ? r->detail : "-",
				r->trajectory_json ? r->trajectory_json : "");
		solved += (size_t)ok;
		char *rec = sbx_episode_result_to_json(r);
		cr_assert_null(strstr(rec, FAKE_KEY));
		free(rec);
	}
	fprintf(stderr, "policy_tasks: %zu/%zu solved by the policy agent (replay script)\n",
		solved, n);
	cr_assert_eq(solved, n, "%zu of %zu tasks solved", solved, n);
	for (size_t i = 0; i < n; i++) {
		sbx_episode_result_free(&res[i]);
		sbx_task_free(tasks[i]);
	}
	free(res);
	free(tasks);
	sbx_task_names_free(names);
}

Test(policy_tasks, a_python_fence_runs_with_a_real_python3)
{
	sbx_episode_result r = play("fix-python-pricing", "python", NULL);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	json_t *t = traj(&r);
	json_t *turn = json_array_get(json_object_get(t, "turns"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(turn, "output")), "py 42\n");
	cr_assert_eq(json_integer_value(json_object_get(turn, "exit_code")), 3);
	json_decref(t);
	sbx_episode_result_free(&r);
}

Test(policy_tasks, tool_mode_over_sse_solves_a_task)
{
	const char *extra[] = { "tool_mode=1", "stream=1", NULL };
	sbx_episode_result r = play("jq-team-directory", "replay", extra);
	expect_end(&r, SBX_EPISODE_SUBMITTED, "task_complete");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	sbx_episode_result_free(&r);
}
