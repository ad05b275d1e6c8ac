/* SPDX-License-Identifier: MIT */
/* Template aliases: deterministic, and different for a change in any input
 * (base image, instruction, copied bytes, file mode, build user, resources,
 * used build-args); unchanged by ignored files and unused build-args. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../images/helpers.h"

static sbx_runtime *rt;
static char *store, *ctx;

static void put(const char *name, const char *data)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", ctx, name);
	th_write_file(p, data, strlen(data));
}

static void import_base(const char *content)
{
	char *root = th_tmpdir("base");
	char p[1024];
	snprintf(p, sizeof(p), "%s/etc/os-release", root);
	th_write_file(p, content, strlen(content));
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(NULL, rt, "base:1", root, &err), 0, "import: %s", err ? err->msg : "?");
	th_rm_rf(root);
	free(root);
}

static void setup(void)
{
	rt = th_runtime(&store);
	ctx = th_tmpdir("ctx");
	import_base("base one\n");
	put("Dockerfile", "FROM base:1\nARG V\nCOPY app.txt /app/\nRUN echo $V\n");
	put("app.txt", "hello\n");
	put(".dockerignore", "*.tmp\n");
}

static void teardown(void)
{
	th_runtime_free(rt, store);
	th_rm_rf(ctx);
	free(ctx);
}

static sbx_build_opts opts(void)
{
	sbx_build_opts o = SBX_BUILD_OPTS_INIT;
	o.context_dir = ctx;
	o.slug = "Fix_Git";
	return o;
}

static char *alias_of(const sbx_build_opts *o)
{
	char *a = NULL;
	sbx_error *err = NULL;
	int r = sbx_template_alias(&a, rt, o, &err);
	cr_assert_eq(r, 0, "alias: %s", err ? err->msg : "?");
	return a;
}

TestSuite(templates_alias, .init = setup, .fini = teardown);

Test(templates_alias, deterministic_and_well_formed)
{
	sbx_build_opts o = opts();
	char *a = alias_of(&o), *b = alias_of(&o);
	cr_assert_str_eq(a, b);
	cr_assert_eq(strlen(a), strlen("fix-git-") + 10, "%s", a);
	cr_assert(strncmp(a, "fix-git-", 8) == 0, "%s", a);
	cr_assert_eq(strspn(a + 8, "0123456789abcdef"), 10);
	o.slug = NULL;
	char *c = alias_of(&o);
	cr_assert(strncmp(c, "image-", 6) == 0, "%s", c);
	free(a);
	free(b);
	free(c);
}

/* Applies one change and checks the alias moves, then reverts nothing. */
#define EXPECT_CHANGE(what, stmt)                                           \
	do {                                                                \
		sbx_build_opts o = opts();                                  \
		char *before = alias_of(&o);                                \
		stmt;                                                       \
		char *after = alias_of(&o);                                 \
		cr_assert_str_neq(before, after, "%s did not change the alias", what); \
		free(before);                                               \
		free(after);                                                \
	} while (0)

#define EXPECT_SAME(what, stmt)                                             \
	do {                                                                \
		sbx_build_opts o = opts();                                  \
		char *before = alias_of(&o);                                \
		stmt;                                                       \
		char *after = alias_of(&o);                                 \
		cr_assert_str_eq(before, after, "%s changed the alias", what); \
		free(before);                                               \
		free(after);                                                \
	} while (0)

Test(templates_alias, base_image_digest)
{
	EXPECT_CHANGE("a re-imported base", import_base("base two\n"));
}

Test(templates_alias, one_instruction)
{
	EXPECT_CHANGE("an edited RUN", put("Dockerfile", "FROM base:1\nARG V\nCOPY app.txt /app/\nRUN echo $V!\n"));
}

Test(templates_alias, one_byte_of_a_copied_file)
{
	EXPECT_CHANGE("one byte", put("app.txt", "hellO\n"));
}

Test(templates_alias, file_mode)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/app.txt", ctx);
	EXPECT_CHANGE("chmod +x", chmod(p, 0755));
}

Test(templates_alias, build_user)
{
	EXPECT_CHANGE("build user", o.user = "1000");
}

Test(templates_alias, resources)
{
	EXPECT_CHANGE("cpus", o.cpus = 2);
	EXPECT_CHANGE("memory", o.memory_mb = 2048);
	EXPECT_CHANGE("storage", o.storage_mb = 4096);
}

Test(templates_alias, used_build_arg)
{
	const char *v1[] = { "V=1", NULL }, *v2[] = { "V=2", NULL }, *unused[] = { "OTHER=1", NULL };
	EXPECT_CHANGE("a used build-arg", o.build_args = v1);
	sbx_build_opts o1 = opts(), o2 = opts();
	o1.build_args = v1;
	o2.build_args = v2;
	char *a = alias_of(&o1), *b = alias_of(&o2);
	cr_assert_str_neq(a, b);
	free(a);
	free(b);
	EXPECT_SAME("an unused build-arg", o.build_args = unused);
}

Test(templates_alias, ignored_and_uncopied_files)
{
	EXPECT_SAME("an ignored file", put("scratch.tmp", "x"));
	EXPECT_SAME("a file no COPY uses", put("notes.md", "x"));
}

Test(templates_alias, missing_base_and_bad_dockerfile)
{
	put("Dockerfile", "FROM nosuch-image-for-sbx-tests:1\n");
	sbx_build_opts o = opts();
	char *a = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_template_alias(&a, rt, &o, &err), -ENOENT);
	cr_assert(strstr(err->msg, "sbx image import"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	put("Dockerfile", "FROM base:1\nCOPY missing.txt /x\n");
	cr_assert_eq(sbx_template_alias(&a, rt, &o, &err), -ENOENT);
	cr_assert(strstr(err->msg, "Dockerfile:2"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	put("Dockerfile", "FROM base:1\nBOGUS x\n");
	cr_assert_eq(sbx_template_alias(&a, rt, &o, &err), -EINVAL);
	cr_assert(strstr(err->msg, "Dockerfile:2: unknown instruction"), "%s", err->msg);
	sbx_error_free(err);
}

/*
 * The alias is a cache key: the same inputs must give the same bytes across
 * sbx versions, or every template rebuilds and old digest aliases dangle.
 * Pinned from the build before the digests moved onto util/sha256; covers
 * the stage, step and template digests and a copied file, directory and
 * symlink (FROM scratch keeps the image store out of it).
 */
Test(templates_alias, pinned_across_versions)
{
	char p[1024];
	put("Dockerfile", "FROM scratch\nCOPY app.txt /app/\nCOPY tree /tree/\nRUN true\n");
	snprintf(p, sizeof(p), "%s/tree", ctx);
	cr_assert_eq(mkdir(p, 0750), 0);
	cr_assert_eq(chmod(p, 0750), 0);
	put("tree/a", "alpha\n");
	snprintf(p, sizeof(p), "%s/tree/a", ctx);
	cr_assert_eq(chmod(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/tree/l", ctx);
	cr_assert_eq(symlink("a", p), 0);
	snprintf(p, sizeof(p), "%s/app.txt", ctx);
	cr_assert_eq(chmod(p, 0644), 0);
	sbx_build_opts o = opts();
	char *a = alias_of(&o);
	cr_expect_str_eq(a, "fix-git-1f061fbbab");
	free(a);
	o.user = "1000";
	o.cpus = 2;
	o.memory_mb = 512;
	a = alias_of(&o);
	cr_expect_str_eq(a, "fix-git-8866a54d9e");
	free(a);
}
