/* SPDX-License-Identifier: MIT */
/*
 * Template builds on E2B: the e2b provider's task_image (desc.c), which the
 * task layer calls through the registry when the backend is e2b/agentenv. The alias is
 * "<slug>-<10 hex>" of a digest over the base image, the build user (root),
 * every step with the content of its COPY sources, and the resources, so
 * an unchanged task maps to the same E2B template and is never built twice.
 */
#ifndef SBX_PROVIDERS_E2B_TEMPLATE_H
#define SBX_PROVIDERS_E2B_TEMPLATE_H

#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/sandbox.h>

struct sbx_e2b_template_opts {
	const char *context_dir;   /* environment/ with a Dockerfile, or NULL */
	const char *docker_image;  /* base when there is no Dockerfile */
	const char *slug;          /* alias prefix (task name) */
	double cpus;               /* template resources (E2B sizes at build time) */
	unsigned memory_mb;
	double timeout_s;          /* build deadline, 0 = none */
	int force;                 /* rebuild even if the alias exists */
	sbx_output_fn on_output;   /* build log, fd 2 */
	void *payload;
};

/*
 * Makes sure the template of a task exists on the E2B endpoint in the
 * environment: GET /templates/aliases/<alias>, else the build API
 * (POST /v3/templates with name = alias, COPY uploads, POST
 * /v2/templates/<id>/builds/<build> whose steps start with USER root, status
 * polling). @param alias_out owned; @param cached_out 1 when nothing was built.
 * @return 0, -ENOENT, -EINVAL (unsupported Dockerfile feature: the message
 *         names it), -ETIMEDOUT, -EIO (the build failed: the server's reason),
 *         -EACCES, -EAGAIN.
 */
int sbx__e2b_template_ensure(char **alias_out, int *cached_out, sbx_runtime *rt,
			     const struct sbx_e2b_template_opts *o, sbx_error **err);

#endif
