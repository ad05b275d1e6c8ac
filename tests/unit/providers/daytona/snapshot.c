/* SPDX-License-Identifier: MIT */
/* The daytona provider's snapshot codec (providers/daytona/snapshot.c): the
 * digest name, the POST /snapshots body, state stepping, the quota error as
 * a throttle, and task_image's paths that need no server. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "providers/daytona/daytona_int.h"
#include "util/lazy.h"

Test(daytona_snapshot, the_name_is_a_digest_of_the_recipe)
{
	cr_assert_eq(sbx__lazy_load(&sbx__lazy_crypto, NULL), 0);
	const char *df = "FROM sbx-tasks:bookworm\nCOPY a /a\n";
	char *a = sbx__dtn_snapshot_name("fix-git", df, "0123456789abcdef0123456789abcdef");
	char *b = sbx__dtn_snapshot_name("fix-git", df, "0123456789abcdef0123456789abcdef");
	char *c = sbx__dtn_snapshot_name("fix-git", "FROM sbx-tasks:bookworm\nCOPY a /b\n",
					 "0123456789abcdef0123456789abcdef");
	char *d = sbx__dtn_snapshot_name("fix-git", df, "fedcba9876543210fedcba9876543210");
	cr_assert_str_eq(a, b, "same recipe, same name");
	cr_assert_str_neq(a, c, "the Dockerfile text counts");
	cr_assert_str_neq(a, d, "the context's content counts");
	cr_assert_eq(strncmp(a, "sbx-fix-git-", 12), 0, "%s", a);
	cr_assert_eq(strlen(a), strlen("sbx-fix-git-") + 12, "%s", a);
	free(a), free(b), free(c), free(d);
	/* a slug that is not a Daytona name is made one: lowercase, bytes outside [a-z0-9._-] as -, at most 40 */
	char *e = sbx__dtn_snapshot_name("My Task/../x", df, NULL);
	cr_assert_eq(strncmp(e, "sbx-my-task-..-x-", 17), 0, "%s", e);
	free(e);
	char long_slug[100];
	memset(long_slug, 'a', sizeof(long_slug) - 1);
	long_slug[99] = '\0';
	char *f = sbx__dtn_snapshot_name(long_slug, df, NULL);
	cr_assert_eq(strlen(f), 4 + 40 + 1 + 12, "%s", f);
	free(f);
}

Test(daytona_snapshot, the_create_body)
{
	json_t *b = sbx__dtn_snapshot_body("sbx-t-0123456789ab", "FROM x\n", "0123456789abcdef0123456789abcdef");
	cr_assert_str_eq(json_string_value(json_object_get(b, "name")), "sbx-t-0123456789ab");
	json_t *bi = json_object_get(b, "buildInfo");
	cr_assert_str_eq(json_string_value(json_object_get(bi, "dockerfileContent")), "FROM x\n");
	json_t *h = json_object_get(bi, "contextHashes");
	cr_assert_eq(json_array_size(h), 1);
	cr_assert_str_eq(json_string_value(json_array_get(h, 0)), "0123456789abcdef0123456789abcdef");
	cr_assert_null(json_object_get(b, "imageName"));
	json_decref(b);
	b = sbx__dtn_snapshot_body("n", "FROM x\n", NULL);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(b, "buildInfo"), "contextHashes")), 0);
	json_decref(b);
}

Test(daytona_snapshot, states)
{
	cr_assert_eq(sbx__dtn_snapshot_step("active"), 1);
	const char *wait[] = { "pending", "pulling", "building", "snapshotting", "unknown" };
	for (size_t i = 0; i < sizeof(wait) / sizeof(wait[0]); i++)
		cr_assert_eq(sbx__dtn_snapshot_step(wait[i]), 0, "%s", wait[i]);
	const char *bad[] = { "error", "build_failed", "removing", "inactive" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(sbx__dtn_snapshot_step(bad[i]), -1, "%s", bad[i]);
}

Test(daytona_snapshot, the_snapshot_quota_is_a_throttle)
{
	const sbx_provider_desc *d = sbx_provider_describe("daytona");
	cr_assert_not_null(d);
	cr_assert_not_null(d->task_image, "daytona has its own task_image");
	sbx_error e = { .code = -EINVAL, .http_status = 400,
			.msg = (char *)"daytona: create snapshot: Snapshot quota exceeded. Maximum allowed: 30" };
	cr_assert_eq(d->is_throttle(&e), 1);
}

Test(daytona_snapshot, task_image_without_a_dockerfile)
{
	const sbx_provider_desc *d = sbx_provider_describe("daytona");
	char *img = NULL, *how = NULL;
	sbx_task_env env = { .dir = "/tasks/t", .docker_image = "python:3.12-slim", .slug = "t" };
	cr_assert_eq(d->task_image(&img, &how, NULL, &env, NULL), 0);
	cr_assert_str_eq(img, "python:3.12-slim", "a registry image goes as FROM NAME, as before");
	cr_assert_str_eq(how, "prebuilt");
	free(img), free(how);
	sbx_task_env none = { .dir = "/tasks/t", .slug = "t" };
	sbx_error *err = NULL;
	cr_assert_eq(d->task_image(&img, &how, NULL, &none, &err), -ENOENT);
	cr_assert(err && strstr(err->msg, "/tasks/t") && strstr(err->msg, "docker_image"), "%s", err ? err->msg : "");
	sbx_error_free(err);
}
