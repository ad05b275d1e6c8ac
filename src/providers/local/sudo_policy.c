/* SPDX-License-Identifier: MIT */
/*
 * Whether a sandbox's users may run commands as its root through sudo
 * (docs/security.md, "sudo"): the label sbx.sudo, the spec's over the
 * image's. "nopasswd" turns the broker's policy on; "off" (or no label)
 * leaves it off. Root inside is the sandbox's own, so this is a policy of
 * the sandbox, not a host barrier.
 */
#include <errno.h>
#include <string.h>

#include <sbx/image.h>

#include "local_int.h"

#define SUDO_LABEL "sbx.sudo="

static const char *find(char *const *labels)
{
	const char *v = NULL;
	for (size_t i = 0; labels && labels[i]; i++)
		if (strncmp(labels[i], SUDO_LABEL, strlen(SUDO_LABEL)) == 0)
			v = labels[i] + strlen(SUDO_LABEL);
	return v;
}

int sbx__local_sudo_policy(int *on, const sbx_image *img, const sbx_sandbox_opts *o, sbx_error **err)
{
	const char *v = find((char *const *)o->labels);
	const char *from = "the sandbox's";
	if (!v) {
		v = find(img->config.labels);
		from = "the image's";
	}
	*on = 0;
	if (!v || strcmp(v, "off") == 0)
		return 0;
	if (strcmp(v, "nopasswd") == 0) {
		*on = 1;
		return 0;
	}
	return sbx_error_set(err, -EINVAL, "label sbx.sudo (%s): expected 'nopasswd' or 'off', got '%.64s'", from, v);
}
