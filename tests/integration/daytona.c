/* SPDX-License-Identifier: MIT */
/*
 * The daytona provider through the CLI against `sbx serve`'s Daytona API on
 * loopback: the golden sweep of examples/tasks (`sbx golden --all --backend
 * daytona`) and the harbor smoke. The key travels as the server's key file
 * (DAYTONA_API_KEY_FILE), never by value.
 *
 * Task images: the provider's own task_image makes each task's environment
 * a digest-named Daytona snapshot on the server (context uploaded through
 * the server's object storage, built by its template builder into its own
 * --image-dir). The client's image store is another, empty directory and
 * stays empty: nothing is shared but the API. The server's store is the
 * test's task image store ($SBX_TEST_TASK_IMAGE_DIR, else
 * BUILD/test-task-images), bootstrapped here when the base image is
 * missing, as the e2b golden test does.
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

static pid_t srv_pid;
static char srv_state[512], images[512], client_images[512], keyfile[600], api[128];

static int run_cmd(const char *cmd)
{
	int st = system(cmd); /* checksrc: allow (test: the CLI end to end) */
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void srv_start(void)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	snprintf(srv_state, sizeof(srv_state), "%s/test-state/daytona-golden-srv-%d", b, (int)getpid());
	char bin[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	srv_pid = fork();
	if (srv_pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", srv_state,
		      "--image-dir", images, "--destroy-on-exit", "--no-access-log", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	int port = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!port)
			port = (int)strtol(line, NULL, 10);
		if (strstr(line, "ready url="))
			break;
	}
	fclose(f);
	cr_assert_gt(port, 0, "sbx serve did not print its port");
	snprintf(api, sizeof(api), "http://127.0.0.1:%d/api", port);
	snprintf(keyfile, sizeof(keyfile), "%s/server/api-key", srv_state);
	setenv("DAYTONA_API_URL", api, 1);
	setenv("DAYTONA_API_KEY_FILE", keyfile, 1);
	unsetenv("DAYTONA_API_KEY");
	/* the client's own store, empty: task images live on the server only */
	snprintf(client_images, sizeof(client_images), "%s/test-state/daytona-client-images-%d", b, (int)getpid());
	setenv("SBX_IMAGE_DIR", client_images, 1);
}

static void golden_setup(void)
{
	sbx_test_require_root();
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	const char *t = getenv("SBX_TEST_TASK_IMAGE_DIR");
	snprintf(images, sizeof(images), "%s", t && *t ? t : "");
	if (!*images)
		snprintf(images, sizeof(images), "%s/test-task-images", b);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; . examples/tasks/base-image.env; export SBX_IMAGE_DIR='%s'; "
		 "export SBX_STATE_DIR='%s/test-state/daytona-golden-bootstrap'; "
		 "if ! '%s/src/cli/sbx' image inspect \"$SBX_TASKS_IMAGE\" >/dev/null 2>&1; then "
		 "echo 'daytona golden: bootstrapping the task base image (one time)' >&2; "
		 "'%s/src/cli/sbx' image bootstrap \"$SBX_TASKS_IMAGE\" --suite \"$SBX_TASKS_SUITE\" "
		 "--include \"$SBX_TASKS_PACKAGES\" >&2; fi",
		 src, images, b, b, b);
	cr_assert_eq(run_cmd(cmd), 0, "the task base image could not be bootstrapped");
	srv_start();
}

static void golden_teardown(void)
{
	if (srv_pid > 0) {
		kill(srv_pid, SIGTERM);
		waitpid(srv_pid, NULL, 0);
	}
	srv_pid = 0;
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", client_images, srv_state);
	run_cmd(cmd);
}

TestSuite(daytona_golden, .init = golden_setup, .fini = golden_teardown, .timeout = 3600);

Test(daytona_golden, every_bundled_task_and_the_harbor_smoke)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	char state[512], cmd[4096];
	snprintf(state, sizeof(state), "%s/test-state/daytona-golden-client-%d", b, (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && SBX_STATE_DIR='%s' '%s/src/cli/sbx' golden examples/tasks --all --backend daytona >&2",
		 src, state, b);
	cr_assert_eq(run_cmd(cmd), 0, "sbx golden examples/tasks --all --backend daytona failed (output above)");
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && SBX_STATE_DIR='%s' '%s/src/cli/sbx' smoke --connector harbor --backend daytona "
		 "--tasks-dir examples/tasks >&2", src, state, b);
	cr_assert_eq(run_cmd(cmd), 0, "sbx smoke --backend daytona failed (output above)");
	/* nothing left behind on the server */
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.default_provider = "daytona";
	sbx_runtime *c = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&c, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, c, "daytona", NULL, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(n, 0, "%zu sandboxes left on the server", n);
	sbx_sandbox_info_free(v, n);
	sbx_runtime_free(c);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The first bake makes the snapshots on the server (context through its
 * object storage), a second one (another process) finds them; the client's
 * store is never written. */
Test(daytona_golden, bake_makes_snapshots_on_the_server_then_hits_the_cache)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	char state[512], out[600], cmd[4096];
	snprintf(state, sizeof(state), "%s/test-state/daytona-bake-client-%d", b, (int)getpid());
	snprintf(out, sizeof(out), "%s.out", state);
	for (int round = 0; round < 2; round++) {
		snprintf(cmd, sizeof(cmd),
			 "cd '%s' && SBX_STATE_DIR='%s' '%s/src/cli/sbx' bake examples/tasks --tasks "
			 "fix-permissions,rotate-logs-script --backend daytona > '%s'",
			 src, state, b, out);
		cr_assert_eq(run_cmd(cmd), 0, "bake round %d failed: %s", round, slurp(out));
		const char *text = slurp(out);
		cr_expect_eq(count(text, "snapshot:sbx-fix-permissions-"), 1, "%s", text);
		cr_expect_eq(count(text, "snapshot:sbx-rotate-logs-script-"), 1, "%s", text);
		cr_expect_eq(count(text, round == 0 ? " built " : " cached "), 2, "round %d: %s", round, text);
	}
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s/images' 2>/dev/null)\"", client_images);
	cr_expect_eq(run_cmd(cmd), 0, "the client's image store got images");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", state, out);
	run_cmd(cmd);
}

/* A task whose build fails: the bake fails naming the snapshot, its state
 * and the server's errorReason. */
Test(daytona_golden, a_failed_snapshot_build_names_the_snapshot_and_reason)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	char dir[512], out[600], cmd[4096];
	snprintf(dir, sizeof(dir), "%s/test-state/daytona-badtask-%d", b, (int)getpid());
	snprintf(out, sizeof(out), "%s.out", dir);
	snprintf(cmd, sizeof(cmd),
		 "rm -rf '%s' && mkdir -p '%s' && cp -a '%s/examples/tasks/fix-permissions' '%s/broken' && "
		 "echo 'RUN echo sbx-build-breaks >&2; exit 3' >> '%s/broken/environment/Dockerfile'",
		 dir, dir, src, dir, dir);
	cr_assert_eq(run_cmd(cmd), 0);
	snprintf(cmd, sizeof(cmd), "SBX_STATE_DIR='%s/state' '%s/src/cli/sbx' bake '%s' --all --backend daytona > '%s' 2>&1",
		 dir, b, dir, out);
	cr_assert_eq(run_cmd(cmd), 1, "the bake of a broken task did not fail: %s", slurp(out));
	const char *text = slurp(out);
	cr_expect(strstr(text, "snapshot sbx-broken-") && strstr(text, "build_failed"), "%s", text);
	cr_expect(strstr(text, "exit code 3") && strstr(text, "sbx-build-breaks"), "no reason: %s", text);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, out);
	run_cmd(cmd);
}

/* Daytona's snapshot quota error on the first two snapshot creates
 * (SBX_SERVE_DAYTONA_FAIL_SNAPSHOTS): the provider backs off and the bake
 * succeeds once capacity returns. The bake makes one snapshot, so without
 * the retries it would fail on the first answer. */
static void quota_setup(void)
{
	setenv("SBX_SERVE_DAYTONA_FAIL_SNAPSHOTS", "2", 1);
	golden_setup();
	unsetenv("SBX_SERVE_DAYTONA_FAIL_SNAPSHOTS");
}

TestSuite(daytona_quota, .init = quota_setup, .fini = golden_teardown, .timeout = 600);

Test(daytona_quota, the_snapshot_quota_error_backs_off_then_succeeds)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	char state[512], out[600], cmd[4096];
	snprintf(state, sizeof(state), "%s/test-state/daytona-quota-client-%d", b, (int)getpid());
	snprintf(out, sizeof(out), "%s.out", state);
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && SBX_STATE_DIR='%s' '%s/src/cli/sbx' bake examples/tasks --tasks fix-permissions "
		 "--backend daytona > '%s' 2>&1",
		 src, state, b, out);
	cr_assert_eq(run_cmd(cmd), 0, "bake failed: %s", slurp(out));
	const char *text = slurp(out);
	cr_expect(strstr(text, "snapshot:sbx-fix-permissions-") && strstr(text, " built "), "%s", text);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", state, out);
	run_cmd(cmd);
}
