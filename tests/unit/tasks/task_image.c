/* SPDX-License-Identifier: MIT */
/* A task's image goes through the provider's description: a provider with a
 * task_image callback gets the task's environment (Dockerfile context,
 * resources, slug) and decides what create takes; the task layer never
 * names it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/sbx.h>
#include <sbx/sys/provider.h>
#include <sbx/task.h>

static char root[64];
static char seen_ctx[256], seen_slug[64];
static unsigned seen_mem;
static int calls;

static int img_task_image(char **image_out, char **how_out, sbx_runtime *rt, const sbx_task_env *env,
			  sbx_error **err)
{
	(void)rt;
	calls++;
	snprintf(seen_ctx, sizeof(seen_ctx), "%s", env->context_dir ? env->context_dir : "");
	snprintf(seen_slug, sizeof(seen_slug), "%s", env->slug ? env->slug : "");
	seen_mem = env->memory_mb;
	if (env->force)
		return sbx_error_set(err, -EIO, "imgp: refusing to rebuild %s", env->dir);
	*image_out = strdup("imgp-template-1");
	*how_out = strdup("cached");
	return 0;
}

static int nop_create(void **sb, char **id, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)sb;
	(void)id;
	(void)ctx;
	(void)o;
	return sbx_error_set(err, -EIO, "imgp: no sandboxes");
}

static int nop_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	(void)out;
	(void)sb;
	(void)o;
	return sbx_error_set(err, -EIO, "imgp: no exec");
}

static int nop_destroy(void *sb, sbx_error **err)
{
	(void)sb;
	(void)err;
	return 0;
}

static const sbx_provider_desc img_desc = { .name = "imgp", .title = "Image provider",
					    .task_image = img_task_image };
static const sbx_provider_ops img_ops = { .version = SBX_PROVIDER_OPS_VERSION, .name = "imgp",
					  .desc = &img_desc, .create = nop_create, .exec = nop_exec,
					  .destroy = nop_destroy };

static void put(const char *rel, const char *body)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(body, f);
	fclose(f);
}

static void mk(void)
{
	snprintf(root, sizeof(root), "/tmp/sbx-task-image.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	sbx_provider_register(&img_ops, NULL);
}

static void rm(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_assert_eq(system(cmd), 0);
	unsetenv("SBX_BACKEND");
}

TestSuite(task_image, .init = mk, .fini = rm);

Test(task_image, the_provider_turns_the_environment_into_an_image)
{
	put("fix-it/instruction.md", "Fix it.\n");
	put("fix-it/tests/test.sh", "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n");
	put("fix-it/environment/Dockerfile", "FROM busybox\n");
	put("fix-it/task.toml", "version = \"1.0\"\n[environment]\nmemory_mb = 2048\n");
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/fix-it", root);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, &err), 0, "%s", err ? err->msg : "");
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	ro.state_dir = root;
	ro.image_dir = root;
	sbx_runtime *rt = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &ro, NULL), 0);
	setenv("SBX_BACKEND", "imgp", 1);
	sbx_task_image img = { 0 };
	cr_assert_eq(sbx_task_resolve_image(&img, rt, t, 0, NULL, NULL, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(calls, 1);
	cr_assert_str_eq(img.image, "imgp-template-1");
	cr_assert_str_eq(img.how, "cached");
	char want[256];
	snprintf(want, sizeof(want), "%s/environment", dir);
	cr_assert_str_eq(seen_ctx, want);
	cr_assert_str_eq(seen_slug, "fix-it");
	cr_assert_eq(seen_mem, 2048);
	sbx_task_image_free(&img);
	/* the provider's failure is the caller's, unchanged */
	cr_assert_eq(sbx_task_resolve_image(&img, rt, t, 1, NULL, NULL, &err), -EIO);
	cr_assert_not_null(strstr(err->msg, "imgp: refusing to rebuild"), "%s", err->msg);
	sbx_error_free(err);
	sbx_runtime_free(rt);
	sbx_task_free(t);
}
