/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve --pool N`: warm pools (include/sbx/pool.h) in the server's
 * runtime, one per template it is told to serve warm (--pool-template,
 * default "base"), each of the spec an E2B create of that template with no
 * metadata and no envVars is given by control.c. Such a create is a hand-out. A
 * create that matches no pool (metadata, envVars, another template, another
 * network) is a cold create, as without --pool.
 *
 * Pooled sandboxes are never detached (the library's rule, so `sbx gc`
 * collects a crashed server's idle ones): a handed-out one is re-adopted by
 * the next start like a detached one, unless an `sbx gc` ran while the
 * server was down (it counts as leaked then). sbx_runtime_free() at exit
 * destroys the idle ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/pool.h>
#include <sbx/sys/provider.h>

#include "../core/runtime_int.h"
#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/str.h"
#include "server_int.h"

/* How long the start waits for the pools to fill before it gives up. */
#define FILL_TIMEOUT_S 300.0

static char *key_of(const sbx_sandbox_opts *spec)
{
	sbx_sandbox_opts k = *spec;
	k.detach = 0;
	return sbx__pool_key(k.provider, &k, (char *const *)k.labels);
}

int sbx__srv_pool_start(struct server *srv, sbx_error **err)
{
	if (!srv->cfg.pool_size)
		return 0;
	static const char *const base[] = { "base", NULL };
	const char *const *tpl = srv->cfg.pool_templates ? (const char *const *)srv->cfg.pool_templates : base;
	for (size_t i = 0; tpl[i]; i++) {
		_cleanup_free_ char *image = NULL;
		char **labels = NULL, **env = NULL;
		int r = sbx__srv_template_resolve(srv, tpl[i], &image, err);
		if (r < 0)
			return sbx_error_prefix(err, r, "--pool-template %s", tpl[i]);
		sbx__srv_create_lists(&labels, &env, srv, tpl[i], NULL, NULL);
		/* As control.c's create() builds it for {"templateID": T}. */
		sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
		o.provider = sbx_provider_host()->name;
		o.image = image;
		o.cpus = srv->cfg.cpus;
		o.memory_mb = srv->cfg.memory_mb;
		o.storage_mb = srv->cfg.storage_mb;
		o.network = srv->cfg.allow_internet ? SBX_NETWORK_INTERNET : SBX_NETWORK_NONE;
		o.env = (const char *const *)env;
		o.labels = (const char *const *)labels;
		sbx_pool_opts po = SBX_POOL_OPTS_INIT;
		po.spec = &o;
		po.size = srv->cfg.pool_size;
		r = sbx_pool_add(srv->rt, &po, err);
		if (r == 0) {
			_cleanup_free_ char *k = key_of(&o);
			sbx__strv_push(&srv->pool_keys, k);
		}
		sbx__strv_free(labels);
		sbx__strv_free(env);
		if (r < 0)
			return sbx_error_prefix(err, r, "--pool for template %s", tpl[i]);
	}
	/* Ready means warm: the first creates are hand-outs. */
	return sbx_pool_wait(srv->rt, FILL_TIMEOUT_S, err);
}

int sbx__srv_pooled(const struct server *srv, const sbx_sandbox_opts *o)
{
	if (!srv->pool_keys)
		return 0;
	_cleanup_free_ char *k = key_of(o);
	return sbx__strv_contains(srv->pool_keys, k);
}

void sbx__srv_pool_free(struct server *srv)
{
	sbx__strv_free(srv->pool_keys);
	srv->pool_keys = NULL;
}
