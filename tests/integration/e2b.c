/* SPDX-License-Identifier: MIT */
/*
 * The e2b provider end to end against `sbx serve` on loopback: the real
 * server binary with a private state dir on a free port, E2B_API_URL and
 * E2B_SANDBOX_URL pointing at it, the key from E2B_API_KEY_FILE (the
 * server's key file). Lifecycle, commands, streamed processes, files, file
 * system calls, labels, errors; the fd test (SBX_E2B_EPISODES episodes,
 * default 1000, must leave this process's open descriptors flat); and the
 * golden sweep of examples/tasks over e2b plus the harbor smoke over
 * agentenv, both through the CLI.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/sbx.h>

#include "fixtures.h"

struct srv {
	pid_t pid;
	int port;
	char state[512];
	char base[128];
	char keyfile[600];
};

static struct srv S;
static sbx_runtime *local_rt, *rt;

static void srv_start(struct srv *s, const char *images, const char *tag)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	snprintf(s->state, sizeof(s->state), "%s/test-state/e2b-%s-%d", b, tag, (int)getpid());
	char bin[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	s->pid = fork();
	if (s->pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", s->state,
		      "--image-dir", images, "--destroy-on-exit", "--no-access-log", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	s->port = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!s->port)
			s->port = (int)strtol(line, NULL, 10);
		if (strstr(line, "ready url="))
			break;
	}
	fclose(f);
	cr_assert_gt(s->port, 0, "sbx serve did not print its port");
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
	snprintf(s->keyfile, sizeof(s->keyfile), "%s/server/api-key", s->state);
}

static void srv_stop(struct srv *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
	}
	s->pid = 0;
}

/* Points the E2B variables at server s (key by file, never by value). */
static void point_at(const struct srv *s)
{
	setenv("E2B_API_URL", s->base, 1);
	setenv("E2B_SANDBOX_URL", s->base, 1);
	setenv("E2B_API_KEY_FILE", s->keyfile, 1);
	unsetenv("E2B_API_KEY");
	unsetenv("E2B_DOMAIN");
}

static sbx_runtime *e2b_runtime(void)
{
	char state[512];
	snprintf(state, sizeof(state), "%s/test-state/e2b-client-%d", getenv("SBX_BUILD_ROOT"), (int)getpid());
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.default_provider = "e2b";
	sbx_runtime *r = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&r, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	return r;
}

static void suite_setup(void)
{
	sbx_test_require_root();
	local_rt = sbx_test_runtime();
	sbx_test_busybox_image(local_rt);
	char images[512];
	snprintf(images, sizeof(images), "%s/test-images", getenv("SBX_BUILD_ROOT"));
	srv_start(&S, images, "unit");
	point_at(&S);
	rt = e2b_runtime();
}

static void suite_teardown(void)
{
	sbx_runtime_free(rt);
	srv_stop(&S);
	if (local_rt)
		sbx_test_runtime_free(local_rt);
}

TestSuite(e2b, .init = suite_setup, .fini = suite_teardown, .timeout = 1800);

static sbx_sandbox *mk(const char *const *labels, const char *const *env)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = "e2b";
	o.image = "busybox";
	o.labels = labels;
	o.env = env;
	o.ttl_s = 300;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create(&sb, rt, &o, &err), 0, "create: %s", err ? err->msg : "?");
	return sb;
}

static sbx_exec_result sh(sbx_sandbox *sb, const char *cmd)
{
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = cmd;
	sbx_exec_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &x, &err), 0, "exec %s: %s", cmd, err ? err->msg : "?");
	return r;
}

static void destroy(sbx_sandbox *sb)
{
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0, "destroy: %s", err ? err->msg : "?");
	sbx_sandbox_free(sb);
}

Test(e2b, lifecycle_exec_and_labels)
{
	const char *labels[] = { "t.case=lifecycle", "t.n=1", NULL };
	const char *env[] = { "GREETING=hello there", NULL };
	sbx_sandbox *sb = mk(labels, env);
	sbx_exec_result r = sh(sb, "echo \"$GREETING\"; echo oops >&2; exit 3");
	cr_assert_eq(r.exit_code, 3);
	cr_assert_str_eq(r.out, "hello there\n");
	cr_assert_str_eq(r.err, "oops\n");
	sbx_exec_result_free(&r);

	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	const char *argv[] = { "sh", "-c", "pwd; echo $X", NULL };
	const char *xenv[] = { "X=42", NULL };
	x.argv = argv;
	x.env = xenv;
	x.cwd = "/tmp";
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &x, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(r.out, "/tmp\n42\n");
	sbx_exec_result_free(&r);

	/* stdin, output cap, timeout */
	sbx_exec_opts in = SBX_EXEC_OPTS_INIT;
	in.shell = "cat; echo";
	in.stdin_data = "from stdin";
	in.stdin_len = 10;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &in, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(r.out, "from stdin\n");
	sbx_exec_result_free(&r);
	sbx_exec_opts cap = SBX_EXEC_OPTS_INIT;
	cap.shell = "yes | head -c 100000";
	cap.output_max = 1000;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &cap, &err), 0);
	cr_assert_eq(r.out_len, 1000);
	cr_assert(r.out_truncated);
	sbx_exec_result_free(&r);
	sbx_exec_opts slow = SBX_EXEC_OPTS_INIT;
	slow.shell = "sleep 30";
	slow.timeout_s = 1;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &slow, &err), 0, "%s", err ? err->msg : "");
	cr_assert(r.timed_out, "exit %d after %.1fs", r.exit_code, r.seconds);
	cr_assert_lt(r.seconds, 10);
	sbx_exec_result_free(&r);
	const char *nope[] = { "/no/such/binary", NULL };
	sbx_exec_opts nx = SBX_EXEC_OPTS_INIT;
	nx.argv = nope;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &nx, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(r.exit_code, 127);
	sbx_exec_result_free(&r);

	/* keepalive, list by label, open by id */
	cr_assert_eq(sbx_sandbox_set_timeout(sb, 600, &err), 0, "%s", err ? err->msg : "");
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	const char *filter[] = { "t.case=lifecycle", NULL };
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, "e2b", filter, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(n, 1);
	cr_assert_str_eq(v[0].id, sbx_sandbox_id(sb));
	cr_assert_eq(v[0].leaked, 0, "our own sandbox is not leaked");
	int has_n = 0;
	for (size_t i = 0; v[0].labels[i]; i++)
		has_n |= !strcmp(v[0].labels[i], "t.n=1");
	cr_assert(has_n);
	sbx_sandbox_info_free(v, n);
	sbx_sandbox *again = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt, "e2b", sbx_sandbox_id(sb), &err), 0, "%s", err ? err->msg : "");
	r = sh(again, "echo reopened");
	cr_assert_str_eq(r.out, "reopened\n");
	sbx_exec_result_free(&r);
	sbx_sandbox_free(again);

	char id[128];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0);
	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0, "idempotent");
	sbx_sandbox_free(sb);
	cr_assert_eq(sbx_sandbox_destroy_id(rt, "e2b", id, &err), -ENOENT);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt, "e2b", id, &err), -ENOENT);
	sbx_error_free(err);
}

static void write_host(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
	chmod(path, mode);
}

Test(e2b, files_upload_download)
{
	sbx_sandbox *sb = mk(NULL, NULL);
	sbx_error *err = NULL;
	char bin[3000];
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (char)(i * 7);
	cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/deep/dir/b.bin", bin, sizeof(bin), 0644, &err), 0, "%s",
		     err ? err->msg : "");
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_sandbox_read_file(&data, &len, sb, "/tmp/deep/dir/b.bin", 0, &err), 0);
	cr_assert_eq(len, sizeof(bin));
	cr_assert_eq(memcmp(data, bin, len), 0);
	free(data);
	cr_assert_eq(sbx_sandbox_read_file(&data, &len, sb, "/tmp/deep/dir/b.bin", 100, &err), -EFBIG);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_read_file(&data, &len, sb, "/nope", 0, &err), -ENOENT);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/x.sh", "echo run\n", 9, 0755, &err), 0);
	sbx_exec_result r = sh(sb, "/tmp/x.sh");
	cr_assert_str_eq(r.out, "run\n", "mode 0755 applied");
	sbx_exec_result_free(&r);

	/* a tree up and back down (modes kept) */
	char host[512], back[600];
	snprintf(host, sizeof(host), "%s/test-state/e2b-up-%d", getenv("SBX_BUILD_ROOT"), (int)getpid());
	char p[1200];
	snprintf(p, sizeof(p), "mkdir -p %s/t/sub && rm -rf %s/back", host, host);
	cr_assert_eq(system(p), 0); /* checksrc: allow (test) */
	snprintf(p, sizeof(p), "%s/t/a.txt", host);
	write_host(p, "alpha\n", 0644);
	snprintf(p, sizeof(p), "%s/t/sub/run.sh", host);
	write_host(p, "#!/bin/sh\necho sub\n", 0755);
	snprintf(p, sizeof(p), "%s/t", host);
	cr_assert_eq(sbx_sandbox_upload(sb, p, "/work/t", &err), 0, "%s", err ? err->msg : "");
	r = sh(sb, "cat /work/t/a.txt && /work/t/sub/run.sh");
	cr_assert_str_eq(r.out, "alpha\nsub\n");
	sbx_exec_result_free(&r);
	cr_assert_eq(sbx_sandbox_upload(sb, p, "/work", &err), 0, "into an existing dir");
	r = sh(sb, "ls /work");
	cr_assert_str_eq(r.out, "t\n");
	sbx_exec_result_free(&r);
	snprintf(back, sizeof(back), "%s/back", host);
	cr_assert_eq(sbx_sandbox_download(sb, "/work/t", back, &err), 0, "%s", err ? err->msg : "");
	snprintf(p, sizeof(p), "%s/back/sub/run.sh", host);
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0755);
	snprintf(p, sizeof(p), "%s/back/a.txt", host);
	cr_assert_eq(stat(p, &st), 0);
	FILE *f = fopen(p, "r");
	char buf[64] = "";
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "alpha\n");
	cr_assert_eq(sbx_sandbox_download(sb, "/no/such", back, &err), -ENOENT);
	sbx_error_free(err);
	destroy(sb);
}

Test(e2b, filesystem_calls)
{
	sbx_sandbox *sb = mk(NULL, NULL);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_mkdir(sb, "/srv/a/b", 0755, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_sandbox_write_file(sb, "/srv/a/b/f", "12345", 5, 0644, &err), 0);
	sbx_file_info fi;
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/srv/a/b/f", &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(fi.type, SBX_FILE_REGULAR);
	cr_assert_eq(fi.size, 5);
	sbx_file_info_clear(&fi);
	sbx_file_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list_dir(&v, &n, sb, "/srv/a", 2, &err), 0, "%s", err ? err->msg : "");
	cr_assert_geq(n, 2);
	sbx_file_info_free(v, n);
	cr_assert_eq(sbx_sandbox_rename(sb, "/srv/a/b/f", "/srv/a/g", &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/srv/a/b/f", &err), -ENOENT);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_remove(sb, "/srv/a", 0, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_sandbox_remove(sb, "/srv/a", 1, &err), 0, "force: missing is fine");
	destroy(sb);
}

Test(e2b, streamed_process)
{
	sbx_sandbox *sb = mk(NULL, NULL);
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = "read line; echo \"got $line\"; echo e >&2; exit 4";
	sbx_process *p = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_process_start(&p, sb, &x, 1, &err), 0, "%s", err ? err->msg : "");
	cr_assert_gt(sbx_process_pid(p), 0);
	int in = sbx_process_stdin_fd(p);
	cr_assert_geq(in, 0);
	cr_assert_eq(write(in, "ping\n", 5), 5);
	sbx_process_close_stdin(p);
	char out[256] = "";
	size_t got = 0;
	int ofd = sbx_process_stdout_fd(p);
	for (;;) {
		struct pollfd pf = { .fd = ofd, .events = POLLIN };
		cr_assert_gt(poll(&pf, 1, 20000), 0, "stdout never became readable");
		ssize_t k = read(ofd, out + got, sizeof(out) - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	cr_assert_str_eq(out, "got ping\n");
	struct pollfd sf = { .fd = sbx_process_status_fd(p), .events = POLLIN };
	cr_assert_gt(poll(&sf, 1, 20000), 0);
	int status = 0, to = 0;
	cr_assert_eq(sbx_process_poll(p, &status, &to, 0, &err), 1);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 4, "status %d", status);
	sbx_process_free(p);

	/* a long process killed by signal, and one freed while running */
	x.shell = "sleep 60";
	cr_assert_eq(sbx_process_start(&p, sb, &x, 0, &err), 0);
	cr_assert_eq(sbx_process_signal(p, SIGKILL, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_process_poll(p, &status, &to, 1, &err), 1);
	cr_assert(WIFSIGNALED(status) || WEXITSTATUS(status) != 0, "status %d", status);
	sbx_process_free(p);
	cr_assert_eq(sbx_process_start(&p, sb, &x, 0, &err), 0);
	sbx_process_free(p);
	destroy(sb);
}

Test(e2b, errors)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = "e2b";
	o.image = "no-such-template";
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, rt, &o, &err);
	cr_assert(r == -ENOENT || r == -EINVAL, "unknown template: %d %s", r, err ? err->msg : "");
	cr_assert_not_null(err);
	cr_assert_gt(err->http_status, 0);
	sbx_error_free(err);
	err = NULL;
	/* a wrong key: a fresh runtime reads the credential again */
	char bad[700];
	snprintf(bad, sizeof(bad), "%s.bad", S.keyfile);
	FILE *f = fopen(bad, "w");
	fputs("e2b_0000000000000000000000000000000000000000\n", f);
	fclose(f);
	setenv("E2B_API_KEY_FILE", bad, 1);
	sbx_runtime *brt = e2b_runtime();
	o.image = "busybox";
	r = sbx_sandbox_create(&sb, brt, &o, &err);
	cr_assert_eq(r, -EACCES, "bad key: %d %s", r, err ? err->msg : "");
	cr_assert_eq(err->http_status, 401);
	cr_assert_null(strstr(err->msg, "e2b_0000"), "no key material in errors");
	sbx_error_free(err);
	sbx_runtime_free(brt);
	point_at(&S);
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? (int)strtol(v, NULL, 10) : def;
}

Test(e2b, fds_stay_flat_across_episodes, .timeout = 3600)
{
	int n = env_int("SBX_E2B_EPISODES", 1000);
	/* warm up: the pooled handles and connections exist after this */
	for (int i = 0; i < 3; i++) {
		sbx_sandbox *sb = mk(NULL, NULL);
		sbx_exec_result r = sh(sb, "true");
		sbx_exec_result_free(&r);
		destroy(sb);
	}
	int before = sbx_test_count_fds();
	for (int i = 0; i < n; i++) {
		const char *labels[] = { "t.case=fds", NULL };
		sbx_sandbox *sb = mk(labels, NULL);
		sbx_exec_result r = sh(sb, "echo ok");
		cr_assert_str_eq(r.out, "ok\n", "episode %d", i);
		sbx_exec_result_free(&r);
		destroy(sb);
	}
	int after = sbx_test_count_fds();
	fprintf(stderr, "e2b fd test: %d episodes, open fds %d before, %d after\n", n, before, after);
	cr_assert_leq(after - before, 4, "fds grew from %d to %d over %d episodes", before, after, n);
	sbx_sandbox_info *v = NULL;
	size_t k = 0;
	const char *filter[] = { "t.case=fds", NULL };
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &k, rt, "e2b", filter, &err), 0);
	cr_assert_eq(k, 0, "every episode's sandbox is gone");
	sbx_sandbox_info_free(v, k);
}

/* ---- golden sweep over e2b, harbor smoke over agentenv ---- */

static struct srv G;

static int run_cmd(const char *cmd)
{
	int st = system(cmd); /* checksrc: allow (test: the CLI end to end) */
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The bundled tasks say FROM sbx-tasks:bookworm: the server's image store
 * must have it. That store is the test's own ($SBX_TEST_TASK_IMAGE_DIR, which
 * scripts/check.sh points at the plain build's so the ASan pass reuses it,
 * else BUILD/test-task-images), never the default store `make demo` fills.
 * Bootstrap it the way scripts/demo.sh does when it is missing (a few
 * minutes, once per store). */
static char golden_images[512];

static void golden_setup(void)
{
	sbx_test_require_root();
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	const char *images = getenv("SBX_TEST_TASK_IMAGE_DIR");
	if (images && *images)
		snprintf(golden_images, sizeof(golden_images), "%s", images);
	else
		snprintf(golden_images, sizeof(golden_images), "%s/test-task-images", b);
	images = golden_images;
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; . examples/tasks/base-image.env; export SBX_IMAGE_DIR='%s'; "
		 "export SBX_STATE_DIR='%s/test-state/e2b-golden-bootstrap'; "
		 "if ! '%s/src/cli/sbx' image inspect \"$SBX_TASKS_IMAGE\" >/dev/null 2>&1; then "
		 "echo 'e2b golden: bootstrapping the task base image (one time)' >&2; "
		 "'%s/src/cli/sbx' image bootstrap \"$SBX_TASKS_IMAGE\" --suite \"$SBX_TASKS_SUITE\" "
		 "--include \"$SBX_TASKS_PACKAGES\" >&2; fi",
		 src, images, b, b, b);
	cr_assert_eq(run_cmd(cmd), 0, "the task base image could not be bootstrapped");
	srv_start(&G, images, "golden");
	point_at(&G);
}

static void golden_teardown(void)
{
	srv_stop(&G);
}

TestSuite(e2b_golden, .init = golden_setup, .fini = golden_teardown, .timeout = 3600);

Test(e2b_golden, every_bundled_task_and_the_agentenv_smoke)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	char state[512], cmd[4096];
	snprintf(state, sizeof(state), "%s/test-state/e2b-golden-client-%d", b, (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && SBX_STATE_DIR='%s' '%s/src/cli/sbx' golden examples/tasks --all --backend e2b >&2",
		 src, state, b);
	cr_assert_eq(run_cmd(cmd), 0, "sbx golden examples/tasks --all --backend e2b failed (output above)");
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && SBX_STATE_DIR='%s' '%s/src/cli/sbx' smoke --connector harbor --backend agentenv "
		 "--tasks-dir examples/tasks >&2", src, state, b);
	cr_assert_eq(run_cmd(cmd), 0, "sbx smoke --backend agentenv failed (output above)");
	/* nothing left behind on the server */
	sbx_runtime *c = e2b_runtime();
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &n, c, "e2b", NULL, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(n, 0, "%zu sandboxes left on the server", n);
	sbx_sandbox_info_free(v, n);
	sbx_runtime_free(c);
}
