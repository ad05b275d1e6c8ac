/* SPDX-License-Identifier: MIT */
/* Placeholder: the local provider. */
#include <errno.h>
#include <sbx/sys/provider.h>

static int lcreate(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *opts, sbx_error **err)
{
	(void)sb_out; (void)id_out; (void)ctx; (void)opts;
	return sbx_error_set(err, -ENOSYS, "local: not implemented");
}
static int lexec(sbx_exec_result *out, void *sb, const sbx_exec_opts *opts, sbx_error **err)
{
	(void)out; (void)sb; (void)opts;
	return sbx_error_set(err, -ENOSYS, "local: not implemented");
}
static int ldestroy(void *sb, sbx_error **err) { (void)sb; (void)err; return 0; }

const sbx_provider_ops sbx_provider_local = {
	.version = SBX_PROVIDER_OPS_VERSION, .name = "local",
	.create = lcreate, .exec = lexec, .destroy = ldestroy,
};
