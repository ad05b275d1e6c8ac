/* SPDX-License-Identifier: MIT */
/* The build context never leads out of itself: source expansion, copying,
 * hashing, the Dockerfile and the resolved paths handed to other readers
 * resolve symlinks inside the context only, and never block on a FIFO. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "templates/templates_int.h"
#include "util/str.h"

static char ctx[64], out[64], dst[64];

static char *at(const char *dir, const char *name)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

static void put(const char *dir, const char *name, const char *data)
{
	char *p = at(dir, name);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(data, f);
	fclose(f);
	free(p);
}

static void ln(const char *target, const char *name)
{
	char *p = at(ctx, name);
	cr_assert_eq(symlink(target, p), 0, "%s", p);
	free(p);
}

static void rm_rf(const char *d)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	cr_assert_eq(system(cmd), 0);
}

/* ctx: f, sub/g, link -> f, abs -> /f, dirlink -> sub, out -> OUT/secret,
 * up -> ../../../../OUT/secret, hostdir -> OUT, pipe (FIFO); OUT: secret. */
static void make(void)
{
	snprintf(ctx, sizeof(ctx), "/tmp/sbx-ut-ctx-XXXXXX");
	snprintf(out, sizeof(out), "/tmp/sbx-ut-out-XXXXXX");
	snprintf(dst, sizeof(dst), "/tmp/sbx-ut-dst-XXXXXX");
	cr_assert_not_null(mkdtemp(ctx));
	cr_assert_not_null(mkdtemp(out));
	cr_assert_not_null(mkdtemp(dst));
	put(ctx, "f", "inside\n");
	char *sub = at(ctx, "sub"), *secret = at(out, "secret"), *up = NULL, *pipe = at(ctx, "pipe");
	cr_assert_eq(mkdir(sub, 0755), 0);
	put(sub, "g", "g\n");
	put(out, "secret", "host secret\n");
	ln("f", "link");
	ln("/f", "abs");
	ln("sub", "dirlink");
	ln(secret, "out");
	cr_assert_geq(asprintf(&up, "../../../..%s", secret), 0);
	ln(up, "up");
	ln(out, "hostdir");
	cr_assert_eq(mkfifo(pipe, 0644), 0);
	free(sub), free(secret), free(up), free(pipe);
}

static void fini(void)
{
	rm_rf(ctx);
	rm_rf(out);
	rm_rf(dst);
}

TestSuite(context, .init = make, .fini = fini);

static int sources(const char *src, char **msg)
{
	char *one[] = { (char *)src, NULL };
	char **files = NULL;
	sbx_error *err = NULL;
	int r = sbx__ctx_sources(&files, ctx, NULL, one, &err);
	*msg = err ? strdup(err->msg) : NULL;
	sbx_error_free(err);
	sbx__strv_free(files);
	return r;
}

Test(context, sources_that_lead_out_are_errors)
{
	const char *bad[] = { "out", "up", "hostdir", "hostdir/secret", "hostdir/*", NULL };
	for (size_t i = 0; bad[i]; i++) {
		char *msg = NULL;
		cr_expect_eq(sources(bad[i], &msg), -ENOENT, "%s", bad[i]);
		cr_expect(msg && strstr(msg, bad[i]), "%s: %s", bad[i], msg ? msg : "(none)");
		free(msg);
	}
	char *msg = NULL;
	cr_expect_eq(sources("out", &msg), -ENOENT);
	cr_expect(msg && strstr(msg, "symlink"), "the error says it is a symlink: %s", msg);
	free(msg);
	const char *good[] = { "f", "link", "abs", "dirlink", "dirlink/g", "sub/*", ".", NULL };
	for (size_t i = 0; good[i]; i++) {
		cr_expect_eq(sources(good[i], &msg), 0, "%s: %s", good[i], msg ? msg : "");
		free(msg);
	}
}

static char *slurp(const char *p)
{
	FILE *f = fopen(p, "r");
	if (!f)
		return NULL;
	char buf[256] = "";
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

Test(context, copy_keeps_symlinks_and_follows_the_top_inside)
{
	struct copy_opts o = { .chmod = -1, .follow_top = true, .rel = "" };
	sbx_error *err = NULL;
	cr_assert_eq(sbx__ctx_copy(ctx, "", dst, &o, &err), 0, "%s", err ? err->msg : "");
	char *p = at(dst, "out"), target[PATH_MAX];
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	cr_assert_gt(n, 0, "out was not copied as a symlink");
	free(p);
	p = at(dst, "pipe");
	struct stat st;
	cr_expect_neq(lstat(p, &st), 0, "the FIFO was copied");
	free(p);
	p = at(dst, "abs-copy");
	o.rel = "abs";
	cr_assert_eq(sbx__ctx_copy(ctx, "abs", p, &o, &err), 0, "%s", err ? err->msg : "");
	char *got = slurp(p);
	cr_expect_str_eq(got, "inside\n", "an absolute symlink resolves inside the context");
	free(got), free(p);
}

static void digest(const char *rel, unsigned char md[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	sbx_error *err = NULL;
	cr_assert_eq(sbx__ctx_hash(c, ctx, rel, NULL, &err), 0, "%s", err ? err->msg : "");
	EVP_DigestFinal_ex(c, md, NULL);
	EVP_MD_CTX_free(c);
}

Test(context, hash_does_not_read_through_symlinks)
{
	unsigned char a[32], b[32];
	digest("", a);
	put(out, "secret", "the host file changed\n");
	digest("", b);
	cr_expect(memcmp(a, b, 32) == 0, "the context digest depends on a host file");
}

Test(context, real_path_and_dockerfile_stay_inside)
{
	char *p = NULL, *f = at(ctx, "f");
	sbx_error *err = NULL;
	cr_assert_eq(sbx__ctx_real_path(&p, ctx, "link", &err), 0, "%s", err ? err->msg : "");
	cr_expect_str_eq(p, f);
	free(p);
	p = NULL;
	cr_expect_lt(sbx__ctx_real_path(&p, ctx, "out", &err), 0, "real path of out: %s", p ? p : "");
	sbx_error_free(err);
	err = NULL;
	char *text = NULL;
	size_t len;
	ln("out", "Dockerfile");
	cr_expect_eq(sbx__ctx_read_dockerfile(&text, &len, ctx, NULL, &err), -ENOENT);
	sbx_error_free(err);
	err = NULL;
	char *df = at(ctx, "Dockerfile");
	unlink(df);
	cr_assert_eq(mkfifo(df, 0644), 0);
	cr_expect_eq(sbx__ctx_read_dockerfile(&text, &len, ctx, NULL, &err), -EINVAL, "a FIFO Dockerfile");
	sbx_error_free(err);
	err = NULL;
	cr_expect_eq(sbx__ctx_read_dockerfile(&text, &len, ctx, df, &err), -EINVAL, "a FIFO given by path");
	sbx_error_free(err);
	free(df), free(f);
}
