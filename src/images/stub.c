/* SPDX-License-Identifier: MIT */
/* Placeholder until the image store lands. */
#include <errno.h>
#include <sbx/image.h>

int sbx_image_get(sbx_image **out, sbx_runtime *rt, const char *name, sbx_error **err)
{
	(void)out; (void)rt;
	return sbx_error_set(err, -ENOENT, "image %s: image store not implemented", name);
}
void sbx_image_free(sbx_image *img) { (void)img; }
int sbx_image_import(sbx_image **out, sbx_runtime *rt, const char *name, const char *src, sbx_error **err)
{
	(void)out; (void)rt; (void)src;
	return sbx_error_set(err, -ENOSYS, "import %s: not implemented", name);
}
