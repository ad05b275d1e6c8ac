/* SPDX-License-Identifier: MIT */
/* Placeholder until template builds land. */
#include <errno.h>
#include <sbx/template.h>

int sbx_template_alias(char **alias_out, sbx_runtime *rt, const sbx_build_opts *o, sbx_error **err)
{
	(void)alias_out; (void)rt; (void)o;
	return sbx_error_set(err, -ENOSYS, "template builds are not implemented yet");
}

int sbx_template_build(sbx_build_result *out, sbx_runtime *rt, const sbx_build_opts *o, sbx_error **err)
{
	(void)out; (void)rt; (void)o;
	return sbx_error_set(err, -ENOSYS, "template builds are not implemented yet");
}

void sbx_build_result_free(sbx_build_result *r) { (void)r; }
