/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <sbx/sbx.h>
#include <sbx/sys/provider.h>

static int nop_create(void **sb, char **id, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)sb; (void)id; (void)ctx; (void)o;
	return sbx_error_set(err, -ENOSYS, "nop");
}
static int nop_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	(void)out; (void)sb; (void)o;
	return sbx_error_set(err, -ENOSYS, "nop");
}
static int nop_destroy(void *sb, sbx_error **err)
{
	(void)sb; (void)err;
	return 0;
}

Test(core_registry, local_is_built_in)
{
	const sbx_provider_ops *ops = sbx_provider_find("local");
	cr_assert_not_null(ops);
	cr_assert_str_eq(ops->name, "local");
	cr_assert_null(sbx_provider_find("nope"));
	cr_assert_null(sbx_provider_find(NULL));
}

Test(core_registry, register_checks_version_and_names)
{
	static const sbx_provider_ops good = { .version = SBX_PROVIDER_OPS_VERSION, .name = "extra",
					       .create = nop_create, .exec = nop_exec, .destroy = nop_destroy };
	static const sbx_provider_ops old = { .version = 0, .name = "old",
					      .create = nop_create, .exec = nop_exec, .destroy = nop_destroy };
	static const sbx_provider_ops dup = { .version = SBX_PROVIDER_OPS_VERSION, .name = "local",
					      .create = nop_create, .exec = nop_exec, .destroy = nop_destroy };
	sbx_error *err = NULL;
	cr_assert_eq(sbx_provider_register(&good, NULL), 0);
	cr_assert_eq(sbx_provider_find("extra"), &good);
	cr_assert_eq(sbx_provider_register(&old, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_provider_register(&dup, &err), -EEXIST);
	cr_assert_not_null(strstr(err->msg, "local"));
	sbx_error_free(err);
	char names[128];
	sbx_provider_names(names, sizeof(names));
	cr_assert_str_eq(names, "local, e2b, daytona, extra");
}
