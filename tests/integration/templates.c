/* SPDX-License-Identifier: MIT */
/* Template builds end to end on the local provider: RUN/COPY/ENV/WORKDIR/USER,
 * full cache hits, partial rebuilds, failures and timeouts, two concurrent
 * builds of one alias, multi-stage COPY --from, whiteouts, ADD of a tar. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

TestSuite(templates, .init = setup, .fini = teardown);

static char ctx[256];

/* A fresh context whose Dockerfile starts with a unique ENV, so its steps
 * never hit layers cached by an earlier run of the suite. */
static void make_ctx(const char *dockerfile_body)
{
	snprintf(ctx, sizeof(ctx), "/tmp/sbx-tpl-XXXXXX");
	cr_assert_not_null(mkdtemp(ctx));
	char p[512];
	snprintf(p, sizeof(p), "%s/Dockerfile", ctx);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fprintf(f, "FROM busybox\nENV NONCE=%d-%ld\n%s", (int)getpid(), (long)time(NULL) ^ random(),
		dockerfile_body);
	fclose(f);
}

static void put(const char *name, const char *data, mode_t mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", ctx, name);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(data, f);
	fclose(f);
	chmod(p, mode);
}

static void edit_line(const char *from, const char *to)
{
	char p[512], *data = NULL;
	snprintf(p, sizeof(p), "%s/Dockerfile", ctx);
	FILE *f = fopen(p, "r");
	size_t n = 0;
	cr_assert_gt(getdelim(&data, &n, '\0', f), 0);
	fclose(f);
	char *at = strstr(data, from);
	cr_assert_not_null(at, "no '%s' in the Dockerfile", from);
	f = fopen(p, "w");
	fprintf(f, "%.*s%s%s", (int)(at - data), data, to, at + strlen(from));
	fclose(f);
	free(data);
}

static void cleanup_ctx(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ctx);
	cr_assert_eq(system(cmd), 0);
}

static int build(sbx_build_result *res, const char *slug, double timeout_s, sbx_error **err)
{
	sbx_build_opts o = SBX_BUILD_OPTS_INIT;
	o.context_dir = ctx;
	o.slug = slug;
	o.timeout_s = timeout_s;
	memset(res, 0, sizeof(*res));
	return sbx_template_build(res, rt, &o, err);
}

static void build_ok(sbx_build_result *res, const char *slug)
{
	sbx_error *err = NULL;
	int r = build(res, slug, 0, &err);
	cr_assert_eq(r, 0, "build: %s", err ? err->msg : "?");
}

static char *sh_in(const char *image, const char *cmd, int *code)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.image = image;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	char *out = sbx_test_sh(sb, cmd, code);
	destroy(sb);
	return out;
}

Test(templates, run_copy_env_workdir_user_then_fully_cached)
{
	make_ctx("ENV GREETING=hello\n"
		 "WORKDIR /srv/app\n"
		 "COPY app.sh data/ ./\n"
		 "RUN echo \"$GREETING from $(id -u)\" > made.txt && chown user made.txt\n"
		 "USER user\n"
		 "RUN id -un > /tmp/who\n");
	put("app.sh", "#!/bin/sh\necho app\n", 0755);
	char p[512];
	snprintf(p, sizeof(p), "%s/data", ctx);
	mkdir(p, 0755);
	put("data/d.txt", "data\n", 0640);
	sbx_build_result res;
	build_ok(&res, "tpl-basic");
	cr_assert_eq(res.cached, 0);
	cr_assert_eq(res.layers_built, 7, "built %d", res.layers_built);
	cr_assert_eq(res.layers_cached, 1, "FROM counts as cached");
	cr_assert(strncmp(res.alias, "tpl-basic-", 10) == 0, "%s", res.alias);
	int code;
	char *out = sh_in(res.alias, "pwd; id -un; echo $GREETING; cat made.txt /tmp/who; ./app.sh; "
			  "stat -c '%a %u' app.sh d.txt made.txt", &code);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert_str_eq(out, "/srv/app\nuser\nhello\nhello from 0\nuser\napp\n755 0\n640 0\n644 1000\n");
	free(out);

	sbx_build_result again;
	build_ok(&again, "tpl-basic");
	cr_assert_str_eq(again.alias, res.alias);
	cr_assert_eq(again.cached, 1);
	cr_assert_eq(again.layers_built, 0);
	sbx_build_result_free(&again);

	/* Without the alias image, every step is still a layer-cache hit. */
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_remove(rt, res.alias, &err), 0);
	build_ok(&again, "tpl-basic");
	cr_assert_eq(again.cached, 0);
	cr_assert_eq(again.layers_built, 0);
	cr_assert_eq(again.layers_cached, 8);
	sbx_build_result_free(&again);
	sbx_build_result_free(&res);
	cleanup_ctx();
}

Test(templates, editing_a_step_rebuilds_it_and_later_only)
{
	make_ctx("RUN echo one > /one\n"
		 "RUN echo two > /two\n"
		 "RUN echo three > /three\n"
		 "RUN cat /one /two /three > /all\n");
	sbx_build_result a, b;
	build_ok(&a, "tpl-edit");
	cr_assert_eq(a.layers_built, 5);
	edit_line("echo three", "echo THREE");
	build_ok(&b, "tpl-edit");
	cr_assert_str_neq(a.alias, b.alias);
	cr_assert_eq(b.layers_built, 2, "built %d", b.layers_built);
	cr_assert_eq(b.layers_cached, 4);
	int code;
	char *out = sh_in(b.alias, "cat /all", &code);
	cr_assert_str_eq(out, "one\ntwo\nTHREE\n");
	free(out);
	/* A changed COPY source rebuilds from that COPY on. */
	sbx_build_result_free(&a);
	sbx_build_result_free(&b);
	cleanup_ctx();
}

Test(templates, copied_file_change_rebuilds_from_the_copy)
{
	make_ctx("RUN echo base > /base\n"
		 "COPY f.txt /f.txt\n"
		 "RUN cat /f.txt > /g.txt\n");
	put("f.txt", "v1\n", 0644);
	sbx_build_result a, b;
	build_ok(&a, "tpl-copy");
	put("f.txt", "v2\n", 0644);
	build_ok(&b, "tpl-copy");
	cr_assert_eq(b.layers_built, 2);
	int code;
	char *out = sh_in(b.alias, "cat /g.txt", &code);
	cr_assert_str_eq(out, "v2\n");
	free(out);
	sbx_build_result_free(&a);
	sbx_build_result_free(&b);
	cleanup_ctx();
}

Test(templates, failing_run_names_the_step)
{
	make_ctx("RUN true\nRUN echo oops >&2; exit 3\n");
	sbx_build_result res;
	sbx_error *err = NULL;
	cr_assert_eq(build(&res, "tpl-fail", 0, &err), -EIO);
	cr_assert(strstr(err->msg, "[4/4] RUN echo oops"), "%s", err->msg);
	cr_assert(strstr(err->msg, "exit code 3: oops"), "%s", err->msg);
	cr_assert(strstr(err->msg, "Dockerfile:4"), "%s", err->msg);
	sbx_error_free(err);
	cleanup_ctx();
}

Test(templates, timeout)
{
	make_ctx("RUN sleep 30\n");
	sbx_build_result res;
	sbx_error *err = NULL;
	double t0 = (double)time(NULL);
	cr_assert_eq(build(&res, "tpl-timeout", 1.5, &err), -ETIMEDOUT);
	cr_assert_lt((double)time(NULL) - t0, 15);
	cr_assert(strstr(err->msg, "RUN sleep 30"), "%s", err->msg);
	sbx_error_free(err);
	cleanup_ctx();
}

Test(templates, two_concurrent_builds_build_once)
{
	make_ctx("RUN sleep 1; echo a > /a\nRUN echo b > /b\n");
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		cr_assert_geq(kids[i], 0);
		if (kids[i] == 0) {
			sbx_runtime *krt = sbx_test_runtime();
			sbx_build_opts o = SBX_BUILD_OPTS_INIT;
			o.context_dir = ctx;
			o.slug = "tpl-race";
			sbx_build_result res = { 0 };
			int r = sbx_template_build(&res, krt, &o, NULL);
			char line[64];
			int n = snprintf(line, sizeof(line), "%d %d %d\n", r, res.cached, res.layers_built);
			if (write(fds[1], line, (size_t)n) != n)
				_exit(2);
			_exit(0);
		}
	}
	close(fds[1]);
	for (int i = 0; i < 2; i++) {
		int st;
		cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	char buf[256] = { 0 };
	cr_assert_gt(read(fds[0], buf, sizeof(buf) - 1), 0);
	close(fds[0]);
	int r1, c1, b1, r2, c2, b2;
	cr_assert_eq(sscanf(buf, "%d %d %d\n%d %d %d", &r1, &c1, &b1, &r2, &c2, &b2), 6, "%s", buf);
	cr_assert_eq(r1, 0);
	cr_assert_eq(r2, 0);
	cr_assert_eq(c1 + c2, 1, "exactly one build found the other's result: %s", buf);
	cr_assert_eq(b1 + b2, 3, "the steps were built once: %s", buf);
	cleanup_ctx();
}

Test(templates, multi_stage_copy_from)
{
	make_ctx("RUN echo unused\n"
		 "FROM busybox AS builder\n"
		 "WORKDIR /out\n"
		 "RUN echo built > hello && mkdir -p tree/sub && echo deep > tree/sub/x\n"
		 "FROM busybox\n"
		 "COPY --from=builder /out/hello /usr/share/\n"
		 "COPY --from=builder --chown=user /out/tree /opt/tree\n");
	sbx_build_result res;
	build_ok(&res, "tpl-multi");
	int code;
	char *out = sh_in(res.alias, "cat /usr/share/hello /opt/tree/sub/x; stat -c %u /opt/tree/sub/x; "
			  "test -e /out && echo leaked; echo ok", &code);
	cr_assert_str_eq(out, "built\ndeep\n1000\nok\n");
	free(out);
	sbx_build_result_free(&res);
	cleanup_ctx();
}

Test(templates, whiteouts_hide_lower_files)
{
	make_ctx("RUN rm /bin/vi && rm -rf /home/user && mkdir /home/user && echo new > /home/user/n\n"
		 "RUN test ! -e /bin/vi\n");
	sbx_build_result res;
	build_ok(&res, "tpl-wh");
	int code;
	char *out = sh_in(res.alias, "ls /bin/vi 2>/dev/null; ls /home/user; ls /bin/sh", &code);
	cr_assert_str_eq(out, "n\n/bin/sh\n");
	free(out);
	sbx_build_result_free(&res);
	cleanup_ctx();
}

Test(templates, add_extracts_local_tar_and_chmod)
{
	make_ctx("ADD pkg.tar.gz /opt/pkg/\n"
		 "COPY --chmod=0700 tool /usr/local/bin/tool\n"
		 "COPY <<EOF /etc/motd\n"
		 "nonce $NONCE\n"
		 "EOF\n");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/src/lib && echo in-tar > %s/src/lib/f && "
		 "tar -C %s/src -czf %s/pkg.tar.gz lib && rm -rf %s/src", ctx, ctx, ctx, ctx, ctx);
	cr_assert_eq(system(cmd), 0);
	put("tool", "#!/bin/sh\n", 0644);
	sbx_build_result res;
	build_ok(&res, "tpl-add");
	int code;
	char *out = sh_in(res.alias, "cat /opt/pkg/lib/f; stat -c %a /usr/local/bin/tool; "
			  "grep -c nonce /etc/motd; grep -q 'NONCE' /etc/motd || echo expanded", &code);
	cr_assert_str_eq(out, "in-tar\n700\n1\nexpanded\n");
	free(out);
	sbx_build_result_free(&res);
	cleanup_ctx();
}
