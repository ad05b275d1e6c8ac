/* SPDX-License-Identifier: MIT */
/*
 * Harbor episodes through the CLI (sbx run, golden, task check and bake) and
 * tasks whose environment is a Dockerfile (template builds, the cache), with
 * the busybox fixture tasks in tests/fixtures/tasks.
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

/* ---- the CLI ---- */

/* Runs build/src/cli/sbx with args; returns its exit code and output (owned). */
static int sbx_cli(char **out, const char *args)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	const char *src = getenv("SBX_SOURCE_ROOT");
	cr_assert(b && src);
	char *cmd = NULL;
	cr_assert(asprintf(&cmd, "cd '%s' && SBX_STATE_DIR='%s' SBX_IMAGE_DIR='%s' '%s/src/cli/sbx' %s 2>&1",
			   src, sbx_runtime_state_dir(rt), sbx_runtime_image_dir(rt), b, args) > 0);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t cap = 1 << 20, len = 0;
	char *buf = calloc(1, cap);
	size_t n;
	while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0)
		len += n;
	int st = pclose(p);
	free(cmd);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define FIX "--tasks-dir tests/fixtures/tasks"

Test(episode, cli_smoke_pass)
{
	char *out;
	int rc = sbx_cli(&out, "smoke --connector harbor --backend local " FIX " --task pass");
	cr_assert_eq(rc, 0, "%s", out);
	const char *want[] = { "  resolve ", "  create ", "  exec ", "  verify ", "  destroy ",
			       "sbx smoke: result={", "sbx smoke: PASS" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(out, want[i]), "'%s' missing in:\n%s", want[i], out);
	cr_assert_null(strstr(out, "FAIL"), "%s", out);
	free(out);
}

Test(episode, cli_smoke_failures)
{
	char *out;
	int rc = sbx_cli(&out, "smoke --connector harbor --backend local " FIX " --task reward-garbage");
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "sbx smoke: FAIL at verify"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "smoke --connector harbor --backend local " FIX " --task missing-image");
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "sbx smoke: FAIL at resolve"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "smoke --connector harbor --backend local " FIX " --task no-solution");
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "sbx smoke: FAIL at exec"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "smoke --connector harbor --backend local " FIX " --task malformed");
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "malformed/task.toml:6:"), "%s", out);
	free(out);
	const char *bad[] = { "smoke --backend local " FIX, "smoke --connector harbor " FIX,
			      "smoke --connector openenv --backend local " FIX,
			      "smoke --connector harbor --backend local " FIX " --task nope",
			      "smoke --connector harbor --backend local --bogus" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = sbx_cli(&out, bad[i]);
		cr_assert_eq(rc, 2, "%s -> %d: %s", bad[i], rc, out);
		free(out);
	}
}

Test(episode, cli_golden)
{
	char jsonl[] = "/tmp/sbx-golden-test.XXXXXX";
	int fd = mkstemp(jsonl);
	cr_assert_geq(fd, 0);
	close(fd);
	char *args = NULL, *out;
	cr_assert(asprintf(&args, "golden tests/fixtures/tasks --tasks pass,reward-fraction,"
			   "reward-missing,malformed --concurrency 2 --expect 1 --out %s", jsonl) > 0);
	int rc = sbx_cli(&out, args);
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "golden sweep | 4 tasks | concurrency=2"), "%s", out);
	cr_assert_not_null(strstr(out, "  [1] pass "), "%s", out);
	cr_assert_not_null(strstr(out, "  [0] reward-fraction "), "%s", out);
	cr_assert_not_null(strstr(out, "  [ERR] reward-missing "), "%s", out);
	cr_assert_not_null(strstr(out, "  [ERR] malformed "), "%s", out);
	cr_assert_not_null(strstr(out, "golden pass 1/2 scored (2 errored)"), "%s", out);
	free(out);
	json_error_t je;
	json_t *lines = json_load_file(jsonl, JSON_DISABLE_EOF_CHECK, &je);
	cr_assert_not_null(lines, "first line of %s: %s", jsonl, je.text);
	json_decref(lines);
	FILE *f = fopen(jsonl, "r");
	char line[65536];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert_not_null(j, "bad line %s", line);
		cr_assert_not_null(json_object_get(j, "exit_status"));
		json_decref(j);
		n++;
	}
	fclose(f);
	cr_assert_eq(n, 4);
	unlink(jsonl);
	free(args);
	rc = sbx_cli(&out, "golden tests/fixtures/tasks --tasks pass,reward-fraction");
	cr_assert_eq(rc, 1, "default: every task must pass\n%s", out);
	free(out);
	rc = sbx_cli(&out, "golden tests/fixtures/tasks --tasks pass --logs");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "logs: "), "%s", out);
	free(out);
	const char *bad[] = { "golden tests/fixtures/tasks", "golden --all",
			      "golden tests/fixtures/tasks --all --tasks pass",
			      "golden tests/fixtures/tasks --tasks pass --expect 2",
			      "golden tests/fixtures/tasks --tasks pass --concurrency 0",
			      "golden /nonexistent --all" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = sbx_cli(&out, bad[i]);
		cr_assert_eq(rc, 2, "%s -> %d: %s", bad[i], rc, out);
		free(out);
	}
}

Test(episode, cli_task_check_and_bake)
{
	char *out;
	int rc = sbx_cli(&out, "task check tests/fixtures/tasks/pass tests/fixtures/tasks/env");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "ok    pass: schema 1.0 (legacy)"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "task check tests/fixtures/tasks/malformed");
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "malformed/task.toml:6:13: expected ']'"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "task check --strict tests/fixtures/tasks/no-solution");
	cr_assert_eq(rc, 1, "%s", out);
	free(out);
	rc = sbx_cli(&out, "task check");
	cr_assert_eq(rc, 2, "%s", out);
	free(out);
	rc = sbx_cli(&out, "bake tests/fixtures/tasks --tasks pass,env --jobs 2");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "prebuilt"), "%s", out);
	cr_assert_not_null(strstr(out, "bake: 2 ready, 0 failed"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "bake tests/fixtures/tasks --tasks pass,missing-image");
	cr_assert_eq(rc, 1, "%s", out);
	free(out);
}

/* ---- template builds ---- */

Test(episode, dockerfile_task_is_built_then_cached_and_uses_its_workdir)
{
	sbx_episode_result r = run("dockerfile");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_float_eq(r.reward, 1.0, 1e-9, "image WORKDIR is not the cwd, or the RUN step "
			   "did not land (log: %s)", r.verifier_log_tail ? r.verifier_log_tail : "-");
	cr_assert(strcmp(r.image_how, "built") == 0 || strcmp(r.image_how, "cached") == 0, "%s",
		  r.image_how);
	cr_assert(strncmp(r.image, "dockerfile-", 11) == 0, "%s", r.image);
	char *alias = strdup(r.image);
	sbx_episode_result_free(&r);
	r = run("dockerfile");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_str_eq(r.image_how, "cached");
	cr_assert_str_eq(r.image, alias);
	free(alias);
	sbx_episode_result_free(&r);
}

Test(episode, failed_build_is_environment_error)
{
	sbx_episode_result r = run("build-fails");
	expect(&r, SBX_EPISODE_ENV_ERROR);
	cr_assert_eq(r.has_reward, 0);
	cr_assert_null(r.sandbox_id);
	cr_assert_not_null(strstr(r.detail, "resolve: "), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(episode, docker_image_preferred_over_dockerfile_unless_forced)
{
	sbx_episode_result r = run("prebuilt-and-dockerfile");
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_str_eq(r.image_how, "prebuilt");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	sbx_episode_result_free(&r);
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.force_build = 1;
	r = run_opts("prebuilt-and-dockerfile", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_str_eq(r.image_how, "built");
	cr_assert_float_eq(r.reward, 0.5, 1e-9, "force_build must use the Dockerfile");
	sbx_episode_result_free(&r);
}

Test(episode, cli_bake_builds_then_caches)
{
	char *out;
	int rc = sbx_cli(&out, "bake tests/fixtures/tasks --tasks dockerfile,pass");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, "dockerfile-"), "%s", out);
	free(out);
	rc = sbx_cli(&out, "bake tests/fixtures/tasks --tasks dockerfile");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert_not_null(strstr(out, " cached "), "%s", out);
	free(out);
	rc = sbx_cli(&out, "bake tests/fixtures/tasks --tasks build-fails");
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert_not_null(strstr(out, "ERROR"), "%s", out);
	free(out);
}

/* A caller built against version 1 of the opts (which ends at force_build)
 * passes a shorter struct: whatever lies after it in its memory must not
 * be read as agent_args or a pool size. (The Python package's ctypes
 * struct once lacked `pool`, and each episode then kept a random number
 * of sandboxes warm: 115 leaked sandboxes in one test.) */
Test(episode, version_1_opts_read_no_further)
{
	unsigned char mem[sizeof(sbx_episode_opts)];
	memset(mem, 0xff, sizeof(mem));
	sbx_episode_opts v1 = SBX_EPISODE_OPTS_INIT;
	v1.version = 1;
	memcpy(mem, &v1, offsetof(sbx_episode_opts, agent_args));
	sbx_episode_result r = run_opts("pass", (sbx_episode_opts *)mem);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_eq(sbx_pool_ready(rt), 0u, "a version 1 caller got a pool");
	sbx_episode_result_free(&r);
	sbx_episode_opts bad = SBX_EPISODE_OPTS_INIT;
	bad.version = 99;
	sbx_task *t = load("pass");
	sbx_error *err = NULL;
	cr_assert_eq(sbx_episode_run(&r, rt, t, &bad, &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "version"), "%s", err->msg);
	sbx_error_free(err);
	sbx_task_free(t);
}
