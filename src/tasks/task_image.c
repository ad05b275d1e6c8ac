/* SPDX-License-Identifier: MIT */
/*
 * A task's image: what the episode's provider turns the task's environment
 * into (its description's task_image: an E2B template, ...), else, for
 * providers on the host's image store, the prebuilt docker_image when the
 * store has it, else a build of environment/, else a pull. Used by the
 * episode's resolve stage and by bakes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/backend.h>
#include <sbx/image.h>
#include <sbx/sys/provider.h>
#include <sbx/template.h>

#include "tasks/task_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

/* The episode's provider, else the backend the environment names. */
static const sbx_provider_desc *provider_of(const char *provider)
{
	if (provider)
		return sbx_provider_describe(provider);
	char *b = NULL;
	const sbx_provider_desc *d = sbx_backend_resolve(&b, NULL, NULL) == 0 ? sbx_provider_describe(b) : NULL;
	free(b);
	return d;
}

static int resolve_by_provider(sbx_task_image *out, sbx_runtime *rt, const sbx_provider_desc *d,
			       const sbx_task *t, int force, double timeout_s, sbx_output_fn on_output,
			       void *payload, sbx_error **err)
{
	_cleanup_free_ char *ctx = t->has_dockerfile ? xasprintf("%s/environment", t->dir) : NULL;
	sbx_task_env env = { .dir = t->dir, .context_dir = ctx, .docker_image = t->docker_image,
			     .slug = t->name, .cpus = t->cpus, .memory_mb = t->memory_mb,
			     .storage_mb = t->storage_mb, .timeout_s = timeout_s, .force = force,
			     .on_output = on_output, .payload = payload };
	double t0 = sbx__now_mono();
	int r = d->task_image(&out->image, &out->how, rt, &env, err);
	if (r < 0)
		return r;
	out->seconds = sbx__now_mono() - t0;
	return 0;
}

int sbx__task_resolve(sbx_task_image *out, sbx_runtime *rt, const sbx_task *t, int force,
		      double timeout_s, sbx_output_fn on_output, void *payload, const char *provider,
		      sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const sbx_provider_desc *d = provider_of(provider);
	if (d && d->task_image)
		return resolve_by_provider(out, rt, d, t, force, timeout_s, on_output, payload, err);
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
