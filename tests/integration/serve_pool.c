/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve --pool N` (src/server/pool.c): an E2B create of a pooled
 * template is a hand-out from the server's warm pool, works end to end
 * (commands through envd), a create the pool does not match is a cold one,
 * and the server shuts down leaving no sandbox: neither the idle pooled ones
 * nor the handed-out ones (--destroy-on-exit).
 */
#include "../security/server_harness.h"

TestSuite(serve_pool, .init = suite_init, .fini = fini);

/* Sandboxes in the server's state dir, and how many carry sbx.pool. */
static size_t count(const char *state, size_t *pooled, const char *id, int *id_pooled)
{
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	sbx_runtime *r = NULL;
	cr_assert_eq(sbx_runtime_new(&r, &o, NULL), 0);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, r, "local", NULL, NULL), 0);
	*pooled = 0;
	for (size_t i = 0; i < n; i++) {
		int p = 0;
		for (size_t k = 0; v[i].labels && v[i].labels[k]; k++)
			p |= !strncmp(v[i].labels[k], "sbx.pool=", 9);
		*pooled += (size_t)p;
		if (id && id_pooled && !strcmp(v[i].id, id))
			*id_pooled = p;
	}
	sbx_sandbox_info_free(v, n);
	sbx_runtime_free(r);
	return n;
}

Test(serve_pool, create_is_a_hand_out_and_stop_leaves_nothing)
{
	srv_start(&S, (const char *const[]){ "--pool", "2", NULL }, 0);
	size_t pooled = 0;
	/* "ready" is printed once the pool is full. */
	cr_assert_eq(count(S.state, &pooled, NULL, NULL), 2);
	cr_expect_eq(pooled, 2);
	struct sbref a, b;
	cr_assert_eq(create_sb(&a, "{\"templateID\": \"base\", \"timeout\": 300}"), 201);
	int a_pooled = 0, b_pooled = 1;
	count(S.state, &pooled, a.id, &a_pooled);
	cr_expect(a_pooled, "a create of the pooled template was not a hand-out");
	char *out = sh(&a, "echo pooled-$((6*7)); id -u");
	cr_expect(strstr(out, "pooled-42") != NULL, "command output: %s", out);
	free(out);
	/* metadata: another spec (labels), a cold create. */
	cr_assert_eq(create_sb(&b, "{\"templateID\": \"base\", \"metadata\": {\"k\": \"v\"}}"), 201);
	count(S.state, &pooled, b.id, &b_pooled);
	cr_expect(!b_pooled, "a create with metadata came from the pool");
	out = sh(&b, "echo cold");
	cr_expect(strstr(out, "cold") != NULL, "command output: %s", out);
	free(out);
	/* Killing one works as for any other. */
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s", a.id);
	struct resp r = api("DELETE", p, NULL, 60000);
	cr_expect_eq(r.status, 204, "kill: %ld %s", r.status, r.body);
	free(r.body);
	/* Stop without the harness's reaping: what the server itself leaves. */
	kill(S.pid, SIGTERM);
	int st = 0;
	cr_assert_eq(waitpid(S.pid, &st, 0), S.pid);
	S.pid = 0;
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbx serve exit status %d", st);
	size_t left = count(S.state, &pooled, NULL, NULL);
	cr_expect_eq(left, 0, "sbx serve --pool left %zu sandboxes (%zu pooled)", left, pooled);
	reap_state(S.state);
}

Test(serve_pool, unknown_pool_template_fails_naming_it)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	char bin[512], state[512], images[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	snprintf(state, sizeof(state), "%s/test-state/srvpool-%d", b, (int)getpid());
	snprintf(images, sizeof(images), "%s/test-images", b);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--image-dir", images,
		      "--pool", "1", "--pool-template", "no-such-template", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[4096];
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(buf) - 1 && (k = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	close(p[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "sbx serve started with an unknown pool template");
	cr_expect(strstr(buf, "no-such-template") != NULL, "error does not name the template: %s", buf);
	reap_state(state);
}
