/* SPDX-License-Identifier: MIT */
/*
 * `sbx pool` (src/cli/cmd_pool.c, xpool.c): warm pools kept by a keeper
 * process and taken by other sbx processes. The real CLI on the test's state
 * dir: takes are atomic across concurrent CLIs, the keeper refills, stop
 * leaves nothing, a keeper killed with SIGKILL leaves its sandboxes (idle
 * ones, and one `sbx run` killed and left for it to clean up) to `sbx gc`, and a spec that differs from the pool's is a cold create.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "memcg.h"

static void pool_setup(void)
{
	setup();
	setenv("SBX_STATE_DIR", sbx_runtime_state_dir(rt), 1);
	setenv("SBX_IMAGE_DIR", sbx_runtime_image_dir(rt), 1);
}

static int cli(char *out, size_t cap, const char *const *argv);

static void pool_teardown(void)
{
	/* What a failed test left: the keepers destroy what they hold. */
	cli(NULL, 0, (const char *[]){ "sbx", "pool", "stop", "--all", NULL });
	teardown();
}

TestSuite(cli_pool, .init = pool_setup, .fini = pool_teardown);

/* Runs the CLI; its exit code, and its stdout (one line, no newline) in out. */
static int cli(char *out, size_t cap, const char *const *argv)
{
	char sbx[512];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	int o[2];
	cr_assert_eq(pipe(o), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (dup2(null, 0) < 0 || dup2(o[1], 1) < 0)
			_exit(126);
		close(o[0]);
		close(o[1]);
		execv(sbx, (char *const *)argv);
		_exit(127);
	}
	close(o[1]);
	size_t n = 0;
	ssize_t k;
	char sink[256];
	while ((k = read(o[0], out ? out + n : sink, out ? cap - n - 1 : sizeof(sink))) > 0)
		n += out ? (size_t)k : 0;
	close(o[0]);
	if (out) {
		out[n] = '\0';
		while (n && out[n - 1] == '\n')
			out[--n] = '\0';
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Sandboxes labelled with pool `name` now. */
static size_t pooled(const char *name)
{
	char label[96];
	snprintf(label, sizeof(label), "sbx.xpool=%s", name);
	const char *filter[] = { label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, "local", filter, &err), 0, "list: %s", err ? err->msg : "?");
	sbx_sandbox_info_free(v, n);
	return n;
}

static int has_label(const char *id, const char *label)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	const char *filter[] = { label, NULL };
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, "local", filter, &err), 0);
	int found = 0;
	for (size_t i = 0; i < n; i++)
		found |= !strcmp(v[i].id, id);
	sbx_sandbox_info_free(v, n);
	return found;
}

static unsigned ready_of(const char *name)
{
	char out[4096];
	cr_assert_eq(cli(out, sizeof(out), (const char *[]){ "sbx", "pool", "ls", "--json", NULL }), 0);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "pool ls --json: %s", out);
	unsigned ready = 0;
	for (size_t i = 0; i < json_array_size(j); i++) {
		json_t *p = json_array_get(j, i);
		if (!strcmp(json_string_value(json_object_get(p, "name")), name))
			ready = (unsigned)json_integer_value(json_object_get(p, "ready"));
	}
	json_decref(j);
	return ready;
}

/* Waits (without a deadline that matters: the suite's timeout) for `want`. */
static void wait_ready(const char *name, unsigned want)
{
	for (int i = 0; i < 6000 && ready_of(name) != want; i++)
		usleep(20000);
	cr_assert_eq(ready_of(name), want, "pool %s: %u ready, want %u", name, ready_of(name), want);
}

static void destroy_id(const char *id)
{
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_destroy_id(rt, "local", id, &err), 0, "destroy %s: %s", id, err ? err->msg : "?");
}

Test(cli_pool, take_refill_and_stop_leaves_nothing)
{
	char name[64], id[64], label[96];
	cr_assert_eq(cli(name, sizeof(name), (const char *[]){ "sbx", "pool", "start", "-n", "2", "busybox", NULL }), 0);
	cr_assert_eq(strlen(name), 16, "pool name: '%s'", name);
	snprintf(label, sizeof(label), "sbx.xpool=%s", name);
	cr_expect_eq(ready_of(name), 2);
	cr_expect_eq(pooled(name), 2);
	/* A second keeper for the same spec is refused. */
	cr_expect_neq(cli(NULL, 0, (const char *[]){ "sbx", "pool", "start", "-n", "2", "busybox", NULL }), 0);
	/* run takes one (and destroys it), the keeper makes another. */
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "run", "busybox", "--", "true", NULL }), 0);
	wait_ready(name, 2);
	/* create takes one: it is the user's now and outlives the pool. */
	cr_assert_eq(cli(id, sizeof(id), (const char *[]){ "sbx", "create", "busybox", NULL }), 0);
	cr_expect(has_label(id, label), "sbx create did not take from the pool");
	/* The keeper warmed it: its memory group is there before any exec. */
	char mdir[512];
	if (have_v1_memory())
		cr_expect(memcg_dir_of(id, mdir, sizeof(mdir)), "pooled sandbox %s has no memory group", id);
	wait_ready(name, 2);
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "pool", "stop", name, NULL }), 0);
	cr_expect_eq(pooled(name), 1, "after stop: %zu pooled sandboxes, want the created one", pooled(name));
	cr_expect(has_label(id, label));
	/* gc leaves the created one alone: it was handed out. */
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "gc", NULL }), 0);
	cr_expect(has_label(id, label), "gc destroyed a sandbox sbx create had taken");
	destroy_id(id);
	cr_expect_eq(pooled(name), 0);
}

Test(cli_pool, concurrent_takers_never_share_one)
{
	char name[64];
	enum { TAKERS = 6 };
	cr_assert_eq(cli(name, sizeof(name), (const char *[]){ "sbx", "pool", "start", "-n", "3", "busybox", NULL }), 0);
	int fds[TAKERS];
	pid_t pids[TAKERS];
	for (int i = 0; i < TAKERS; i++) {
		int o[2];
		cr_assert_eq(pipe(o), 0);
		pids[i] = fork();
		cr_assert_geq(pids[i], 0);
		if (pids[i] == 0) {
			close(o[0]);
			char id[64];
			int c = cli(id, sizeof(id), (const char *[]){ "sbx", "create", "busybox", NULL });
			dprintf(o[1], "%s", c == 0 ? id : "");
			_exit(c);
		}
		close(o[1]);
		fds[i] = o[0];
	}
	char ids[TAKERS][64];
	for (int i = 0; i < TAKERS; i++) {
		ssize_t k = read(fds[i], ids[i], sizeof(ids[i]) - 1);
		ids[i][k > 0 ? k : 0] = '\0';
		close(fds[i]);
		int st;
		waitpid(pids[i], &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "taker %d failed", i);
	}
	for (int i = 0; i < TAKERS; i++)
		for (int k = i + 1; k < TAKERS; k++)
			cr_assert_str_neq(ids[i], ids[k], "two takers got sandbox %s", ids[i]);
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "pool", "stop", name, NULL }), 0);
	for (int i = 0; i < TAKERS; i++)
		destroy_id(ids[i]);
	cr_expect_eq(pooled(name), 0);
}

Test(cli_pool, killed_keeper_is_collected_by_gc)
{
	char name[64];
	cr_assert_eq(cli(name, sizeof(name), (const char *[]){ "sbx", "pool", "start", "-n", "2", "busybox", NULL }), 0);
	char path[1024];
	snprintf(path, sizeof(path), "%s/xpool/%s/info.json", sbx_runtime_state_dir(rt), name);
	json_t *j = json_load_file(path, 0, NULL);
	cr_assert_not_null(j);
	pid_t keeper = (pid_t)json_integer_value(json_object_get(j, "keeper"));
	json_decref(j);
	cr_assert_gt(keeper, 0);
	/* A run hands its killed sandbox to a keeper that never gets to it. */
	cr_assert_eq(kill(keeper, SIGSTOP), 0);
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "run", "busybox", "--", "true", NULL }), 0);
	snprintf(path, sizeof(path), "%s/xpool/%s/dead", sbx_runtime_state_dir(rt), name);
	DIR *d = opendir(path);
	cr_assert_not_null(d);
	int dead = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		dead += e->d_name[0] != '.';
	closedir(d);
	cr_expect_eq(dead, 1, "sbx run from the pool left %d dead records, want 1", dead);
	cr_assert_eq(kill(keeper, SIGKILL), 0);
	/* Its lock goes with it. */
	while (kill(keeper, 0) == 0)
		usleep(10000);
	cr_expect_eq(pooled(name), 2, "a killed keeper: %zu sandboxes, want 1 ready and 1 dead", pooled(name));
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "gc", NULL }), 0);
	cr_expect_eq(pooled(name), 0, "gc left %zu of a dead keeper's sandboxes", pooled(name));
	snprintf(path, sizeof(path), "%s/xpool/%s", sbx_runtime_state_dir(rt), name);
	cr_expect_neq(access(path, F_OK), 0, "gc left the dead pool's dir");
}

Test(cli_pool, other_spec_is_a_cold_create)
{
	char name[64], id[64], label[96];
	cr_assert_eq(cli(name, sizeof(name),
			 (const char *[]){ "sbx", "pool", "start", "-n", "1", "--env", "POOLED=1", "busybox", NULL }), 0);
	snprintf(label, sizeof(label), "sbx.xpool=%s", name);
	cr_assert_eq(cli(id, sizeof(id), (const char *[]){ "sbx", "create", "busybox", NULL }), 0);
	cr_expect(!has_label(id, label), "a create without --env took from an --env pool");
	destroy_id(id);
	cr_expect_eq(ready_of(name), 1);
	/* The same spec takes from it, and sees its env. */
	char out[64];
	cr_assert_eq(cli(out, sizeof(out),
			 (const char *[]){ "sbx", "run", "--env", "POOLED=1", "busybox", "--", "sh", "-c",
					   "echo $POOLED", NULL }), 0);
	cr_expect_str_eq(out, "1");
	/* Another run id is another owner: a cold create, labelled with its own. */
	setenv("SBX_RUN_ID", "other-run", 1);
	cr_assert_eq(cli(id, sizeof(id), (const char *[]){ "sbx", "create", "--env", "POOLED=1", "busybox", NULL }), 0);
	unsetenv("SBX_RUN_ID");
	cr_expect(!has_label(id, label), "a create of another SBX_RUN_ID took from the pool");
	cr_expect(has_label(id, "sbx.run_id=other-run"));
	destroy_id(id);
	cr_assert_eq(cli(NULL, 0, (const char *[]){ "sbx", "pool", "stop", name, NULL }), 0);
	cr_expect_eq(pooled(name), 0);
}
