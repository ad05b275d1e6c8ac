/* SPDX-License-Identifier: MIT */
/*
 * A task's image: the prebuilt docker_image when the store has it, else a
 * build of environment/ (E2B templates for the e2b backend), else a pull.
 * Used by the episode's resolve stage and by bakes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/backend.h>
#include <sbx/image.h>
#include <sbx/template.h>

#include "providers/e2b/e2b_template.h"
#include "tasks/task_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

/* Images for the e2b backend (alias agentenv) are E2B templates, built on
 * the endpoint through its template build API (docs/providers.md). The
 * backend is the episode's provider, else the one the environment names. */
static int for_e2b(const char *provider)
{
	if (provider)
		return sbx__e2b_backend_is(provider);
	char *b = NULL;
	int is = sbx_backend_resolve(&b, NULL, NULL) == 0 && sbx__e2b_backend_is(b);
	free(b);
	return is;
}

static int resolve_e2b(sbx_task_image *out, sbx_runtime *rt, const sbx_task *t, int force,
		       double timeout_s, sbx_output_fn on_output, void *payload, sbx_error **err)
{
	_cleanup_free_ char *ctx = t->has_dockerfile ? xasprintf("%s/environment", t->dir) : NULL;
	struct sbx_e2b_template_opts o = { .context_dir = ctx, .docker_image = t->docker_image,
					   .slug = t->name, .cpus = t->cpus, .memory_mb = t->memory_mb,
					   .timeout_s = timeout_s, .force = force, .on_output = on_output,
					   .payload = payload };
	double t0 = sbx__now_mono();
	int cached = 0;
	int r = sbx__e2b_template_ensure(&out->image, &cached, rt, &o, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "e2b template of %s", t->dir);
	out->how = xstrdup(cached ? "cached" : "built");
	out->seconds = sbx__now_mono() - t0;
	return 0;
}

int sbx__task_resolve(sbx_task_image *out, sbx_runtime *rt, const sbx_task *t, int force,
		      double timeout_s, sbx_output_fn on_output, void *payload, const char *provider,
		      sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	if (for_e2b(provider))
		return resolve_e2b(out, rt, t, force, timeout_s, on_output, payload, err);
	double t0 = sbx__now_mono();
	if (force && !t->has_dockerfile)
		force = 0;
	int r;
	if (t->docker_image && !force && sbx_image_get(NULL, rt, t->docker_image, NULL) == 0) {
		out->image = xstrdup(t->docker_image);
		out->how = xstrdup("prebuilt");
	} else if (t->has_dockerfile) {
		_cleanup_free_ char *ctx = xasprintf("%s/environment", t->dir);
		sbx_build_opts b = SBX_BUILD_OPTS_INIT;
		b.context_dir = ctx;
		b.slug = t->name;
		b.cpus = t->cpus;
		b.memory_mb = t->memory_mb;
		b.storage_mb = t->storage_mb;
		b.timeout_s = timeout_s;
		b.force = force;
		b.on_output = on_output;
		b.payload = payload;
		sbx_build_result br = { 0 };
		r = sbx_template_build(&br, rt, &b, err);
		if (r < 0) {
			sbx_build_result_free(&br);
			return sbx_error_prefix(err, r, "build %s/environment", t->dir);
		}
		out->image = steal_ptr(&br.alias);
		out->how = xstrdup(br.cached ? "cached" : "built");
		sbx_build_result_free(&br);
	} else if (t->docker_image) {
		r = sbx_image_pull(NULL, rt, t->docker_image, NULL, err);
		if (r < 0)
			return r;
		out->image = xstrdup(t->docker_image);
		out->how = xstrdup("pulled");
	} else {
		return sbx_error_set(err, -ENOENT, "%s: no Dockerfile and no docker_image", t->dir);
	}
	out->seconds = sbx__now_mono() - t0;
	return 0;
}

int sbx_task_resolve_image(sbx_task_image *out, sbx_runtime *rt, const sbx_task *task,
			   int force_build, sbx_output_fn on_output, void *payload,
			   sbx_error **err)
{
	int r = sbx__task_resolve(out, rt, task, force_build, task->build_timeout_sec, on_output,
				  payload, NULL, err);
	if (r < 0)
		sbx_task_image_free(out);
	return r;
}

void sbx_task_image_free(sbx_task_image *img)
{
	if (!img)
		return;
	free(img->image);
	free(img->how);
	img->image = img->how = NULL;
}
