/* SPDX-License-Identifier: MIT */
/*
 * `sbx eval` end to end through the CLI on the local provider: argument
 * errors, the sweep's lines, summary, pass@k and exit status, the
 * trajectory records (every JSONL written here is checked by
 * tests/trajectories/check.py, with a fake key that must appear nowhere),
 * --json, and --replay of records. The policy agent against the scripted
 * model server (tests/fakes/openai_server.py) and the e2b runs are in
 * eval_policy.c.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "eval_common.h"

TestSuite(eval, .init = setup, .fini = teardown, .timeout = 600);

/* Runs the CLI on the fixture tasks with the test runtime's stores. */
static int cli(char **out, const char *args)
{
	return eval_cli(out, sbx_runtime_state_dir(rt), sbx_runtime_image_dir(rt), args);
}

Test(eval, bad_arguments_are_usage_errors)
{
	struct eval_tmp k = eval_fake_key();
	char *missing_key = NULL;
	cr_assert(asprintf(&missing_key, "eval tests/fixtures/tasks --all --api-key-file %s.nope",
			   k.path) > 0);
	const struct { const char *args, *says; } bad[] = {
		{ "eval", "expected one TASKS_DIR" },
		{ "eval tests/fixtures/tasks", "give exactly one of --tasks" },
		{ "eval tests/fixtures/tasks --all --tasks pass", "give exactly one of --tasks" },
		{ "eval tests/fixtures/tasks --all --samples 0", "--samples: expected a whole number" },
		{ "eval tests/fixtures/tasks --all --samples x", "--samples: expected a whole number" },
		{ "eval tests/fixtures/tasks --all --concurrency 999", "--concurrency: expected" },
		{ "eval tests/fixtures/tasks --all --temperature 3", "--temperature: expected a number 0..2" },
		{ "eval tests/fixtures/tasks --all --temperature hot", "--temperature" },
		{ "eval tests/fixtures/tasks --all --max-turns -1", "--max-turns" },
		{ "eval tests/fixtures/tasks --all --agent-arg novalue", "--agent-arg: expected KEY=VALUE" },
		{ "eval tests/fixtures/tasks --all --agent claude", "--agent: unknown agent 'claude'" },
		{ "eval tests/fixtures/tasks --all --backend nope", "nope" },
		{ "eval tests/fixtures/tasks --all --bogus", "unknown option '--bogus'" },
		{ "eval tests/fixtures/tasks --all --max-episode-s soon", "--max-episode-s" },
		{ "eval /nonexistent --all", "/nonexistent" },
		{ "eval --replay x.jsonl --model m", "--replay takes only" },
		{ "eval --replay x.jsonl a b", "at most one TASKS_DIR" },
		{ missing_key, "--api-key-file: " },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out;
		int rc = cli(&out, bad[i].args);
		cr_assert_eq(rc, 2, "%s -> %d: %s", bad[i].args, rc, out);
		cr_assert_not_null(strstr(out, bad[i].says), "%s: '%s' not in:\n%s", bad[i].args,
				   bad[i].says, out);
		free(out);
	}
	char *out;
	int rc = cli(&out, "eval --replay /nonexistent/x.jsonl");
	cr_assert_eq(rc, 3, "%s", out);
	cr_assert_not_null(strstr(out, "/nonexistent/x.jsonl"), "%s", out);
	free(out);
	rc = cli(&out, "eval --help");
	cr_assert_eq(rc, 0);
	cr_assert_not_null(strstr(out, "pass@"), "%s", out);
	free(out);
	free(missing_key);
	eval_tmp_free(&k);
}

/* The harness itself, with the oracle as the agent (no model): lines,
 * summary, pass@k, ERR for a verifier that writes no reward and for a task
 * that does not load, the exit status, and a checked record per episode. */
Test(eval, oracle_sweep_lines_passk_and_records)
{
	struct eval_tmp k = eval_fake_key();
	struct eval_tmp j = eval_tmp_file("jsonl");
	char *args = NULL, *out;
	cr_assert(asprintf(&args, "eval tests/fixtures/tasks --tasks pass,reward-fraction,"
			   "reward-missing,malformed --agent oracle --samples 2 --concurrency 2 "
			   "--api-base http://user:pw@127.0.0.1:9/v1?key=zz --model m1 "
			   "--api-key-file %s --out %s", k.path, j.path) > 0);
	int rc = cli(&out, args);
	cr_assert_eq(rc, 1, "ERR episodes make the exit status 1\n%s", out);
	const char *want[] = {
		"eval | 4 tasks x 2 samples | agent=oracle model=m1 | concurrency=2",
		"  [1] pass sample=0 turns=0 reason=- ", "  [1] pass sample=1 ",
		"  [0] reward-fraction sample=0 ", "  [0] reward-fraction sample=1 ",
		"  [ERR] reward-missing sample=0 ", "(VerifierError: ",
		"  [ERR] malformed  load: ",
		"=== pass 2/4 scored (4 errored) ===", "solved: [pass]\n",
		"pass@1 = 0.5000 (2 tasks)", "pass@2 = 0.5000 (2 tasks with 2 scored samples)",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(out, want[i]), "'%s' missing in:\n%s", want[i], out);
	eval_assert_no_secret(out, &k);
	free(out);
	/* reward-missing's records exist (not scored); malformed has no episode */
	eval_check_records(j.path, 6, &k);
	char *text = eval_slurp(j.path);
	cr_assert_null(strstr(text, "user:pw"), "the URL's password was recorded");
	cr_assert_null(strstr(text, k.path), "the key file's path was recorded");
	cr_assert_not_null(strstr(text, "\"api_base\":\"http://127.0.0.1:9/v1\""), "%s", text);
	cr_assert_not_null(strstr(text, "\"scored\":false"), "%s", text);
	free(text);
	free(args);
	eval_tmp_free(&j);
	eval_tmp_free(&k);
}

/* The progress bar is for a person: on a terminal only. */
Test(eval, progress_bar_only_on_a_terminal)
{
	char *out, *args = NULL;
	int rc = cli(&out, "eval tests/fixtures/tasks --tasks pass --agent oracle --samples 2");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_null(strstr(out, "\033["), "escape sequences without a terminal:\n%s", out);
	free(out);
	/* script(1) (bsdutils, essential in Debian) gives the CLI a terminal */
	cr_assert(asprintf(&args, "cd '%s' && SBX_STATE_DIR='%s' SBX_IMAGE_DIR='%s' script -qec "
			   "\"'%s/src/cli/sbx' eval tests/fixtures/tasks --tasks pass --agent oracle "
			   "--samples 2\" /dev/null", getenv("SBX_SOURCE_ROOT"), sbx_runtime_state_dir(rt),
			   sbx_runtime_image_dir(rt), getenv("SBX_BUILD_ROOT")) > 0);
	FILE *p = popen(args, "r");
	cr_assert_not_null(p);
	out = eval_read_all(p);
	int st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	cr_assert_not_null(strstr(out, "\r\033[Keval ["), "no progress bar on a terminal:\n%s", out);
	cr_assert_not_null(strstr(out, "] 2/2"), "%s", out);
	cr_assert_not_null(strstr(out, "=== pass 2/2 scored (0 errored) ==="), "%s", out);
	free(out);
	free(args);
}

Test(eval, json_summary)
{
	char *out;
	int rc = cli(&out, "eval tests/fixtures/tasks --tasks pass,reward-fraction --agent oracle "
		     "--samples 3 --json");
	cr_assert_eq(rc, 0, "%s", out);
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	cr_assert_not_null(j, "not one JSON object (%s):\n%s", je.text, out);
	cr_assert_eq(json_integer_value(json_object_get(j, "episodes")), 6);
	cr_assert_eq(json_integer_value(json_object_get(j, "passed")), 3);
	cr_assert_eq(json_integer_value(json_object_get(j, "scored")), 6);
	cr_assert_eq(json_integer_value(json_object_get(j, "errored")), 0);
	cr_assert_float_eq(json_real_value(json_object_get(j, "pass_at_1")), 0.5, 1e-9);
	cr_assert_float_eq(json_real_value(json_object_get(j, "pass_at_3")), 0.5, 1e-9);
	cr_assert_eq(json_array_size(json_object_get(j, "results")), 6);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "solved"), 0)), "pass");
	json_decref(j);
	free(out);
}

/* A record line for the fixture task `pass` (reward 1 iff /tmp/answer is
 * "hello") with the given turns. */
static void put_record(FILE *f, const char *task_dir, bool scored, const char *reward,
		       const char *const *cmds)
{
	fprintf(f, "{\"schema\":\"sbx.trajectory/1\",\"sbx_version\":\"0\",\"run\":\"eval\","
		   "\"task\":\"pass\",\"task_dir\":\"%s\",\"sample\":0,\"agent\":\"policy\","
		   "\"model\":\"m\",\"api_base\":null,\"settings\":{},\"provider\":\"local\","
		   "\"sandbox_id\":null,\"image\":null,\"status\":\"%s\",\"scored\":%s,"
		   "\"reward\":%s,\"rewards\":null,\"end_reason\":\"task_complete\",\"detail\":null,"
		   "\"turns\":[", task_dir, scored ? "Submitted" : "AgentError",
		scored ? "true" : "false", reward);
	for (size_t i = 0; cmds[i]; i++)
		fprintf(f, "%s{\"index\":%zu,\"command\":\"%s\",\"exit_code\":0,\"timed_out\":false,"
			   "\"limit\":null,\"output\":\"(no output)\",\"truncated\":false,"
			   "\"started\":0,\"seconds\":0}", i ? "," : "", i, cmds[i]);
	fprintf(f, "],\"messages\":[],\"metrics\":{},\"agent_timed_out\":false,"
		   "\"verifier\":{\"ran\":true,\"exit_code\":0,\"timed_out\":false},"
		   "\"seconds\":{\"resolve\":0,\"create\":0,\"agent\":0,\"verify\":0,\"destroy\":0,"
		   "\"total\":0}}\n");
}

Test(eval, replay_says_same_diff_skip_and_err)
{
	char *dir = NULL;
	cr_assert(asprintf(&dir, "%s/tests/fixtures/tasks/pass", getenv("SBX_SOURCE_ROOT")) > 0);
	struct eval_tmp in = eval_tmp_file("jsonl"), again = eval_tmp_file("jsonl");
	FILE *f = fopen(in.path, "w");
	const char *const solve[] = { "echo hel > /tmp/x", "echo \\\"$(cat /tmp/x)lo\\\" > /tmp/answer",
				      NULL };
	const char *const wrong[] = { "echo bye > /tmp/answer", NULL };
	const char *const none[] = { NULL };
	put_record(f, dir, true, "1", solve);   /* same: 1 -> 1 */
	put_record(f, dir, true, "1", wrong);   /* DIFF: 1 -> 0 */
	put_record(f, dir, false, "null", none); /* skip: nothing to compare */
	fprintf(f, "{\"schema\":\"other/1\"}\n");  /* ERR: another schema */
	fprintf(f, "not json\n");                 /* ERR: not JSON */
	fclose(f);
	char *args = NULL, *out;
	cr_assert(asprintf(&args, "eval --replay %s --concurrency 2 --out %s", in.path, again.path) > 0);
	int rc = cli(&out, args);
	cr_assert_eq(rc, 1, "%s", out);
	const char *want[] = {
		"replay | 5 records | concurrency=2",
		"  [same] pass sample=0 reward=1 -> 1 commands=2 ",
		"  [DIFF] pass sample=0 reward=1 -> 0 commands=1 ",
		"  [skip] pass sample=0 reward=- -> - commands=0 ",
		":4: schema: expected \"sbx.trajectory/1\", got other/1",
		":5: not JSON: ",
		"=== replay: 1/4 same (1 differ, 2 errored, 1 skipped) ===",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(out, want[i]), "'%s' missing in:\n%s", want[i], out);
	free(out);
	/* the replayed episodes' own records are valid records too */
	eval_check_records(again.path, 2, NULL);
	char *text = eval_slurp(again.path);
	cr_assert_not_null(strstr(text, "\"run\":\"replay\""), "%s", text);
	cr_assert_not_null(strstr(text, "\"command\":\"echo bye > /tmp/answer\""), "%s", text);
	free(text);
	/* only the deterministic record: exit 0 */
	f = fopen(in.path, "w");
	put_record(f, dir, true, "1", solve);
	fclose(f);
	free(args);
	cr_assert(asprintf(&args, "eval --replay %s", in.path) > 0);
	rc = cli(&out, args);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "=== replay: 1/1 same (0 differ, 0 errored, 0 skipped) ==="),
			   "%s", out);
	free(out);
	/* TASKS_DIR wins over the record's task_dir */
	free(args);
	cr_assert(asprintf(&args, "eval --replay %s /nonexistent-tasks --json", in.path) > 0);
	rc = cli(&out, args);
	cr_assert_eq(rc, 1, "%s", out);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(j, "errored")), 1, "%s", out);
	json_decref(j);
	free(out);
	free(args);
	free(dir);
	eval_tmp_free(&in);
	eval_tmp_free(&again);
}

/* --pool: the samples of a task after its first start from a warm pool; the
 * run's result is the same and no pooled sandbox outlives the CLI. */
Test(eval, pool_keeps_results_and_leaves_nothing)
{
	char *out;
	int rc = cli(&out, "eval tests/fixtures/tasks --tasks pass --agent oracle --samples 4 "
		     "--concurrency 1 --pool 2 --json");
	cr_assert_eq(rc, 0, "%s", out);
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	cr_assert_not_null(j, "not one JSON object (%s):\n%s", je.text, out);
	cr_assert_eq(json_integer_value(json_object_get(j, "passed")), 4, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(j, "errored")), 0, "%s", out);
	json_decref(j);
	free(out);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, &err), 0);
	for (size_t i = 0; i < n; i++)
		for (size_t l = 0; v[i].labels && v[i].labels[l]; l++)
			cr_assert(strncmp(v[i].labels[l], "sbx.pool=", 9), "pooled sandbox %s left", v[i].id);
	sbx_sandbox_info_free(v, n);
}
