/* SPDX-License-Identifier: MIT */
/* Placeholder until registry pulls land. */
#include <errno.h>
#include <sbx/image.h>

int sbx_image_pull(sbx_image **out, sbx_runtime *rt, const char *ref, const char *name, sbx_error **err)
{
	(void)out; (void)rt; (void)name;
	return sbx_error_set(err, -ENOSYS, "pull %s: registry pulls are not implemented yet", ref);
}
