/* SPDX-License-Identifier: MIT */
/*
 * The acceptance of `sbx eval`: the policy agent against the scripted model
 * server (tests/fakes/openai_server.py, a fake: a real model API is a cloud
 * unreachable from here) on loopback, over the bundled tasks
 * (examples/tasks), on `local` and on `e2b` through `sbx serve`:
 * `=== pass N/N scored (0 errored) ===`, every record valid and free of the
 * fake key, `--replay` of the records all the same, ERR lines for a model
 * API that always fails and for a reply slower than the episode clock,
 * --samples with pass@k, every end reason and reply shape (length,
 * max_turns, python, 1 MiB of output, fences, tool mode, SSE) giving valid
 * records, and no-command episodes
 * scored 0 (not ERR). The tasks: all of them, or $SBX_EVAL_TASKS (A,B,...;
 * scripts/check.sh gives the ASan pass a few).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/sbx.h>

#include "fixtures.h"
#include "eval_common.h"

#define PY "/usr/bin/python3"

static sbx_runtime *rt;
static pid_t model_pid, serve_pid;
static int model_port, serve_port;
static char images[512], state[512], serve_state[600], tasks_arg[1024];
static size_t n_tasks;
static struct eval_tmp key;

static int run_sh(const char *cmd)
{
	int st = system(cmd); /* test: the CLI end to end */
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The bundled tasks say FROM sbx-tasks:bookworm: the store must have it
 * ($SBX_TEST_TASK_IMAGE_DIR, shared by both passes of `make check`, else
 * BUILD/test-task-images); bootstrapped as scripts/demo.sh does, once. */
static void task_images(void)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	const char *dir = getenv("SBX_TEST_TASK_IMAGE_DIR");
	if (dir && *dir)
		snprintf(images, sizeof(images), "%s", dir);
	else
		snprintf(images, sizeof(images), "%s/test-task-images", b);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; . examples/tasks/base-image.env; export SBX_IMAGE_DIR='%s'; "
		 "export SBX_STATE_DIR='%s/test-state/eval-bootstrap'; "
		 "if ! '%s/src/cli/sbx' image inspect \"$SBX_TASKS_IMAGE\" >/dev/null 2>&1; then "
		 "echo 'eval: bootstrapping the task base image (one time)' >&2; "
		 "'%s/src/cli/sbx' image bootstrap \"$SBX_TASKS_IMAGE\" --suite \"$SBX_TASKS_SUITE\" "
		 "--include \"$SBX_TASKS_PACKAGES\" >&2; fi",
		 src, images, b, b, b);
	cr_assert_eq(run_sh(cmd), 0, "the task base image could not be bootstrapped");
}

/* Which tasks the sweeps run: --all, or --tasks $SBX_EVAL_TASKS. */
static void pick_tasks(void)
{
	const char *list = getenv("SBX_EVAL_TASKS");
	if (list && *list) {
		snprintf(tasks_arg, sizeof(tasks_arg), "--tasks %s", list);
		n_tasks = 1;
		for (const char *p = list; *p; p++)
			n_tasks += *p == ',';
		return;
	}
	snprintf(tasks_arg, sizeof(tasks_arg), "--all");
	char **names = NULL;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/examples/tasks", getenv("SBX_SOURCE_ROOT"));
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_list(&names, &n_tasks, dir, &err), 0, "%s", err ? err->msg : "");
	sbx_task_names_free(names);
	cr_assert_gt(n_tasks, 0);
}

/* Starts `argv` with stdout on a pipe; the first integer after `tag` on a
 * line is the port. */
static pid_t start_server(char *const argv[], const char *tag, const char *until, int *port)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	*port = 0;
	while (fgets(line, sizeof(line), f)) {
		const char *at = *tag ? strstr(line, tag) : line;
		if (!*port && at)
			*port = (int)strtol(at + strlen(tag), NULL, 10);
		if (strstr(line, until))
			break;
	}
	fclose(f);
	cr_assert_gt(*port, 0, "%s did not say its port", argv[1]);
	return pid;
}

static void stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGTERM);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

static void suite_setup(void)
{
	sbx_test_require_root();
	rt = sbx_test_runtime();
	task_images();
	pick_tasks();
	snprintf(state, sizeof(state), "%s", sbx_runtime_state_dir(rt));
	char srv[600], tasks[600];
	snprintf(srv, sizeof(srv), "%s/tests/fakes/openai_server.py", getenv("SBX_SOURCE_ROOT"));
	snprintf(tasks, sizeof(tasks), "%s/examples/tasks", getenv("SBX_SOURCE_ROOT"));
	char *const argv[] = { PY, srv, "--tasks-dir", tasks, NULL };
	model_pid = start_server(argv, "PORT ", "PORT ", &model_port);
	key = eval_fake_key();
}

static void suite_teardown(void)
{
	stop(&serve_pid);
	stop(&model_pid);
	eval_tmp_free(&key);
	if (rt)
		sbx_test_runtime_free(rt);
}

/* `sbx eval` with the policy agent against the fake server. */
static int eval(char **out, const char *env, const char *args)
{
	char *full = NULL;
	cr_assert(asprintf(&full, "eval %s --api-base http://127.0.0.1:%d/v1 --api-key-file %s",
			   args, model_port, key.path) > 0);
	int rc = eval_cli_env(out, env, state, images, full);
	free(full);
	eval_assert_no_secret(*out, &key);
	return rc;
}

/* The whole sweep with the replay script, then --replay of its records. */
static void sweep_and_replay(const char *env, const char *backend)
{
	struct eval_tmp j = eval_tmp_file("jsonl");
	char *args = NULL, *out, want[128];
	cr_assert(asprintf(&args, "examples/tasks %s --model scripted --concurrency 2 --backend %s "
			   "--out %s", tasks_arg, backend, j.path) > 0);
	int rc = eval(&out, env, args);
	snprintf(want, sizeof(want), "=== pass %zu/%zu scored (0 errored) ===", n_tasks, n_tasks);
	cr_assert_not_null(strstr(out, want), "'%s' missing in:\n%s", want, out);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_null(strstr(out, "[ERR]"), "%s", out);
	cr_assert_not_null(strstr(out, "reason=task_complete"), "%s", out);
	free(out);
	free(args);
	eval_check_records(j.path, (int)n_tasks, &key);
	char *text = eval_slurp(j.path);
	char prov[64];
	snprintf(prov, sizeof(prov), "\"provider\":\"%s\"", backend);
	cr_assert_not_null(strstr(text, prov), "%s", text);
	cr_assert_not_null(strstr(text, "\"role\":\"assistant\""), "no messages recorded");
	cr_assert_not_null(strstr(text, "\"x_fake_turn\""), "assistant messages not kept verbatim");
	free(text);
	/* the same commands in fresh sandboxes give the same rewards */
	cr_assert(asprintf(&args, "eval --replay %s --concurrency 2 --backend %s", j.path, backend) > 0);
	rc = eval_cli_env(&out, env, state, images, args);
	snprintf(want, sizeof(want), "=== replay: %zu/%zu same (0 differ, 0 errored, 0 skipped) ===",
		 n_tasks, n_tasks);
	cr_assert_not_null(strstr(out, want), "'%s' missing in:\n%s", want, out);
	cr_assert_eq(rc, 0, "%s", out);
	eval_assert_no_secret(out, &key);
	free(out);
	free(args);
	eval_tmp_free(&j);
}

TestSuite(eval_policy, .init = suite_setup, .fini = suite_teardown, .timeout = 1800);

Test(eval_policy, local_sweep_passes_every_task_and_replays_the_same)
{
	sweep_and_replay(NULL, "local");
}

Test(eval_policy, a_model_api_that_always_fails_is_err_never_0)
{
	struct eval_tmp j = eval_tmp_file("jsonl");
	char *args = NULL, *out;
	cr_assert(asprintf(&args, "examples/tasks --tasks fix-permissions,csv-region-report "
			   "--model always_500 --out %s", j.path) > 0);
	/* the library's whole log too: the key must not be in it */
	int rc = eval(&out, "SBX_LOG=debug", args);
	cr_assert_eq(rc, 1, "%s", out);
	const char *want[] = { "  [ERR] fix-permissions turns=", "  [ERR] csv-region-report turns=",
			       "reason=error", "(AgentError: ", "HTTP 500",
			       "=== pass 0/0 scored (2 errored) ===", "solved: []" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(out, want[i]), "'%s' missing in:\n%s", want[i], out);
	cr_assert_null(strstr(out, "[0]"), "%s", out);
	free(out);
	eval_check_records(j.path, 2, &key);
	char *text = eval_slurp(j.path);
	cr_assert_not_null(strstr(text, "\"scored\":false"), "%s", text);
	cr_assert_null(strstr(text, "\"scored\":true"), "%s", text);
	free(text);
	/* and a replay has nothing to compare: both skipped, exit 0 */
	free(args);
	cr_assert(asprintf(&args, "eval --replay %s", j.path) > 0);
	rc = eval_cli(&out, state, images, args);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "0 differ, 0 errored, 2 skipped"), "%s", out);
	free(out);
	free(args);
	eval_tmp_free(&j);
}

Test(eval_policy, a_reply_slower_than_the_episode_clock_is_err_never_0)
{
	struct eval_tmp j = eval_tmp_file("jsonl");
	char *args = NULL, *out;
	cr_assert(asprintf(&args, "examples/tasks --tasks fix-permissions --model slow "
			   "--max-episode-s 4 --out %s", j.path) > 0);
	int rc = eval(&out, NULL, args);
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "  [ERR] fix-permissions turns=1 reason=timeout "), "%s", out);
	cr_assert_not_null(strstr(out, "(TimeLimitExceeded: "), "%s", out);
	cr_assert_not_null(strstr(out, "=== pass 0/0 scored (1 errored) ==="), "%s", out);
	free(out);
	eval_check_records(j.path, 1, &key);
	/* training's view is kept in the record: reward 0, but not scored */
	char *text = eval_slurp(j.path);
	cr_assert_not_null(strstr(text, "\"status\":\"TimeLimitExceeded\",\"scored\":false"), "%s",
			   text);
	free(text);
	free(args);
	eval_tmp_free(&j);
}

Test(eval_policy, samples_give_pass_at_k_and_no_command_is_a_scored_0)
{
	struct eval_tmp j = eval_tmp_file("jsonl");
	char *args = NULL, *out;
	cr_assert(asprintf(&args, "examples/tasks --tasks fix-permissions,csv-region-report "
			   "--model scripted --samples 2 --temperature 0 --max-turns 5 --out %s",
			   j.path) > 0);
	int rc = eval(&out, NULL, args);
	cr_assert_eq(rc, 0, "%s", out);
	const char *want[] = { "eval | 2 tasks x 2 samples | agent=policy model=scripted",
			       "  [1] fix-permissions sample=0 ", "  [1] fix-permissions sample=1 ",
			       "  [1] csv-region-report sample=0 ", "  [1] csv-region-report sample=1 ",
			       "=== pass 4/4 scored (0 errored) ===",
			       "solved: [csv-region-report, fix-permissions]",
			       "pass@1 = 1.0000 (2 tasks)",
			       "pass@2 = 1.0000 (2 tasks with 2 scored samples)" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(out, want[i]), "'%s' missing in:\n%s", want[i], out);
	free(out);
	eval_check_records(j.path, 4, &key);
	char *text = eval_slurp(j.path);
	cr_assert_not_null(strstr(text, "\"sample\":1"), "%s", text);
	cr_assert_not_null(strstr(text, "\"temperature\":\"0\""), "%s", text);
	cr_assert_not_null(strstr(text, "\"max_turns\":\"5\""), "%s", text);
	free(text);
	free(args);
	/* a model that never gives a command fails the task: 0, not ERR */
	cr_assert(asprintf(&args, "examples/tasks --tasks fix-permissions --model no_command "
			   "--samples 2 --out %s", j.path) > 0);
	rc = eval(&out, NULL, args);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "  [0] fix-permissions sample=0 turns=1 reason=no_command"),
			   "%s", out);
	cr_assert_not_null(strstr(out, "=== pass 0/2 scored (0 errored) ==="), "%s", out);
	cr_assert_not_null(strstr(out, "pass@2 = 0.0000"), "%s", out);
	free(out);
	eval_check_records(j.path, 2, &key);
	free(args);
	eval_tmp_free(&j);
}

/* Every end reason and reply shape the policy agent has makes a record the
 * checker accepts: the trajectory schema holds beyond the happy path. */
Test(eval_policy, every_end_reason_and_reply_shape_gives_valid_records)
{
	const struct {
		const char *args, *line, *in_record;
	} cases[] = {
		{ "--model length", "  [0] fix-permissions turns=1 reason=length ",
		  "\"turns\":[]" /* the cut command never ran */ },
		{ "--model forever --max-turns 2", "  [0] fix-permissions turns=2 reason=max_turns ",
		  "\"command\":\"echo turn 1\"" },
		{ "--model python", "reason=task_complete ", "python3" },
		{ "--model big_output", "reason=task_complete ", "\"truncated\":true" },
		{ "--model fences", "reason=task_complete ", "\"index\":1" },
		{ "--model scripted --agent-arg tool_mode=1", "  [1] fix-permissions turns=2 "
		  "reason=task_complete ", "\"role\":\"tool\"" },
		{ "--model scripted --agent-arg stream=1", "  [1] fix-permissions turns=2 "
		  "reason=task_complete ", "\"x_fake_turn\"" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct eval_tmp j = eval_tmp_file("jsonl");
		char *args = NULL, *out;
		cr_assert(asprintf(&args, "examples/tasks --tasks fix-permissions %s --out %s",
				   cases[i].args, j.path) > 0);
		int rc = eval(&out, NULL, args);
		cr_assert_eq(rc, 0, "%s: %s", cases[i].args, out);
		cr_assert_not_null(strstr(out, cases[i].line), "%s: '%s' missing in:\n%s", cases[i].args,
				   cases[i].line, out);
		free(out);
		eval_check_records(j.path, 1, &key);
		char *text = eval_slurp(j.path);
		cr_assert_not_null(strstr(text, cases[i].in_record), "%s: '%s' not in the record:\n%.2000s",
				   cases[i].args, cases[i].in_record, text);
		free(text);
		free(args);
		eval_tmp_free(&j);
	}
}

/* ---- e2b through `sbx serve` ---- */

static void e2b_setup(void)
{
	suite_setup();
	const char *b = getenv("SBX_BUILD_ROOT");
	snprintf(serve_state, sizeof(serve_state), "%s/test-state/eval-serve-%d", b, (int)getpid());
	char bin[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	char *const argv[] = { bin, "serve", "--listen", "127.0.0.1:0", "--print-port",
			       "--state-dir", serve_state, "--image-dir", images,
			       "--destroy-on-exit", "--no-access-log", NULL };
	serve_pid = start_server(argv, "", "ready url=", &serve_port);
}

TestSuite(eval_e2b, .init = e2b_setup, .fini = suite_teardown, .timeout = 3600);

Test(eval_e2b, sweep_through_sbx_serve_passes_every_task_and_replays_the_same)
{
	char env[1400], key_file[700], base[64];
	snprintf(key_file, sizeof(key_file), "%s/server/api-key", serve_state);
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", serve_port);
	/* the server's key by file, never by value */
	snprintf(env, sizeof(env), "env -u E2B_API_KEY -u E2B_DOMAIN E2B_API_URL=%s E2B_SANDBOX_URL=%s "
		 "E2B_API_KEY_FILE='%s'", base, base, key_file);
	sweep_and_replay(env, "e2b");
	/* nothing left behind on the server */
	setenv("E2B_API_URL", base, 1);
	setenv("E2B_SANDBOX_URL", base, 1);
	setenv("E2B_API_KEY_FILE", key_file, 1);
	unsetenv("E2B_API_KEY");
	unsetenv("E2B_DOMAIN");
	char cstate[700];
	snprintf(cstate, sizeof(cstate), "%s-client", serve_state);
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = cstate;
	o.default_provider = "e2b";
	sbx_runtime *c = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&c, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, c, "e2b", NULL, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(n, 0, "%zu sandboxes left on the server", n);
	sbx_sandbox_info_free(v, n);
	sbx_runtime_free(c);
}
