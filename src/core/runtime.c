/* SPDX-License-Identifier: MIT */
/* The runtime: state and image directories, default provider, log sink. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/runtime.h>
#include <sbx/sys/provider.h>
#include <sbx/version.h>

#include "../util/alloc.h"
#include "../util/config.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "runtime_int.h"

const char *sbx_version_string(void)
{
	return SBX_VERSION_STRING;
}

static const char *pick(const char *opt, const char *env, const char *def)
{
	if (opt && *opt)
		return opt;
	const char *e = sbx__env_dyn(env);
	return e && *e ? e : def;
}

int sbx_runtime_new(sbx_runtime **out, const sbx_runtime_opts *opts, sbx_error **err)
{
	sbx_runtime_opts def = SBX_RUNTIME_OPTS_INIT;
	if (!opts)
		opts = &def;
	if (opts->version != SBX_RUNTIME_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "runtime opts version %u unsupported", opts->version);
	const char *state = pick(opts->state_dir, "SBX_STATE_DIR", "/run/sbx");
	const char *images = pick(opts->image_dir, "SBX_IMAGE_DIR", "/var/lib/sbx/images");
	if (state[0] != '/' || images[0] != '/')
		return sbx_error_set(err, -EINVAL, "state dir %s and image dir %s must be absolute paths",
				     state, images);
	int r = sbx__mkdir_p(state, 0700, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "state dir");
	sbx_runtime *rt = xcalloc(1, sizeof(*rt));
	rt->state_dir = xstrdup(state);
	rt->image_dir = xstrdup(images);
	rt->default_provider = xstrdup(opts->default_provider ? opts->default_provider : sbx_provider_default()->name);
	pthread_mutex_init(&rt->lock, NULL);
	pthread_mutex_init(&rt->workers_lock, NULL);
	pthread_cond_init(&rt->workers_idle, NULL);
	if (opts->log)
		sbx__log_set_sink(opts->log, opts->log_payload, opts->log_level);
	*out = rt;
	return 0;
}

void sbx__runtime_worker_hold(sbx_runtime *rt)
{
	pthread_mutex_lock(&rt->workers_lock);
	rt->workers++;
	pthread_mutex_unlock(&rt->workers_lock);
}

/* The worker's last touch of the runtime. */
void sbx__runtime_worker_release(sbx_runtime *rt)
{
	pthread_mutex_lock(&rt->workers_lock);
	if (--rt->workers == 0)
		pthread_cond_broadcast(&rt->workers_idle);
	pthread_mutex_unlock(&rt->workers_lock);
}

/* Creates abandoned by a cancel or deadline still run in the provider and
 * then destroy what it made; the contexts they use must outlive them. */
static void wait_workers(sbx_runtime *rt)
{
	pthread_mutex_lock(&rt->workers_lock);
	if (rt->workers)
		SBX_LOGI("runtime: waiting for %u abandoned create(s) to finish and clean up", rt->workers);
	while (rt->workers)
		pthread_cond_wait(&rt->workers_idle, &rt->workers_lock);
	pthread_mutex_unlock(&rt->workers_lock);
}

void sbx_runtime_free(sbx_runtime *rt)
{
	if (!rt)
		return;
	sbx__pool_stop(rt);
	wait_workers(rt);
	sbx__keepalive_stop(rt);
	for (size_t i = 0; i < SBX_MAX_PROVIDERS; i++) {
		if (rt->ops[i] && rt->ops[i]->fini)
			rt->ops[i]->fini(rt->ctx[i]);
		if (rt->ops[i]) {
			pthread_mutex_destroy(&rt->sem[i].m);
			pthread_cond_destroy(&rt->sem[i].c);
		}
	}
	pthread_mutex_destroy(&rt->lock);
	pthread_mutex_destroy(&rt->workers_lock);
	pthread_cond_destroy(&rt->workers_idle);
	free(rt->state_dir);
	free(rt->image_dir);
	free(rt->default_provider);
	free(rt);
}

const char *sbx_runtime_state_dir(const sbx_runtime *rt)
{
	return rt->state_dir;
}

const char *sbx_runtime_image_dir(const sbx_runtime *rt)
{
	return rt->image_dir;
}

/* SBX_CREATE_CONCURRENCY, else OPENENV_<B>_CREATE_CONCURRENCY, else 4. */
static unsigned create_concurrency(const char *provider)
{
	char var[96];
	snprintf(var, sizeof(var), "OPENENV_%s_CREATE_CONCURRENCY", provider);
	for (char *p = var; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	const char *names[] = { "SBX_CREATE_CONCURRENCY", var };
	for (size_t i = 0; i < 2; i++) {
		const char *v = sbx__env_dyn(names[i]);
		uint64_t n;
		if (v && sbx__parse_u64(&n, v) == 0 && n > 0 && n < 100000)
			return (unsigned)n;
	}
	return 4;
}

struct sbx_sem *sbx__runtime_sem(sbx_runtime *rt, const sbx_provider_ops *ops)
{
	for (size_t i = 0; i < SBX_MAX_PROVIDERS; i++)
		if (rt->ops[i] == ops)
			return &rt->sem[i];
	return NULL;
}

int sbx__runtime_provider(const sbx_provider_ops **ops_out, void **ctx_out, sbx_runtime *rt,
			  const char *name, sbx_error **err)
{
	if (!name)
		name = rt->default_provider;
	const sbx_provider_ops *ops = sbx_provider_find(name);
	if (!ops) {
		char names[256];
		sbx_provider_names(names, sizeof(names));
		if (sbx_provider_describe(name))
			return sbx_error_set(err, -ENOENT, "provider '%s' is described but not implemented in this "
					     "build (available: %s)", name, names);
		return sbx_error_set(err, -ENOENT, "no provider '%s' in this build (available: %s)", name, names);
	}
	int r = 0;
	pthread_mutex_lock(&rt->lock);
	size_t i;
	for (i = 0; i < SBX_MAX_PROVIDERS && rt->ops[i] && rt->ops[i] != ops; i++)
		;
	if (i == SBX_MAX_PROVIDERS) {
		r = sbx_error_set(err, -ENOSPC, "too many providers in one runtime");
		goto out;
	}
	if (!rt->ops[i]) {
		void *ctx = NULL;
		if (ops->init) {
			r = ops->init(&ctx, rt, err);
			if (r < 0)
				goto out;
		}
		rt->ctx[i] = ctx;
		pthread_mutex_init(&rt->sem[i].m, NULL);
		pthread_cond_init(&rt->sem[i].c, NULL);
		rt->sem[i].limit = create_concurrency(ops->name);
		rt->ops[i] = ops;
	}
	*ops_out = ops;
	*ctx_out = rt->ctx[i];
out:
	pthread_mutex_unlock(&rt->lock);
	return r;
}

void sbx_runtime_log(sbx_runtime *rt, sbx_log_level level, const char *fmt, ...)
{
	(void)rt;
	va_list ap;
	va_start(ap, fmt);
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	sbx__log(level, "provider", 0, "%s", msg);
	free(msg);
}
