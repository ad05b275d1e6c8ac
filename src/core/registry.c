/* SPDX-License-Identifier: MIT */
/*
 * Provider registry: a static table of built-in providers plus runtime
 * registration for out-of-tree ones. Lookup is by exact name.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "runtime_int.h"

extern const sbx_provider_ops sbx_provider_local;
extern const sbx_provider_ops sbx_provider_e2b;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const sbx_provider_ops *table[SBX_MAX_PROVIDERS] = { &sbx_provider_local, &sbx_provider_e2b };
static size_t n_table = 2;

int sbx_provider_register(const sbx_provider_ops *ops, sbx_error **err)
{
	if (!ops || !ops->name || ops->version != SBX_PROVIDER_OPS_VERSION || !ops->create ||
	    !ops->exec || !ops->destroy)
		return sbx_error_set(err, -EINVAL, "register provider: ops table incomplete or version %u unsupported",
				     ops ? ops->version : 0);
	int r = 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_table; i++)
		if (strcmp(table[i]->name, ops->name) == 0) {
			r = sbx_error_set(err, -EEXIST, "register provider %s: name taken", ops->name);
			goto out;
		}
	if (n_table == SBX_MAX_PROVIDERS) {
		r = sbx_error_set(err, -ENOSPC, "register provider %s: table full", ops->name);
		goto out;
	}
	table[n_table++] = ops;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

const sbx_provider_ops *sbx_provider_find(const char *name)
{
	const sbx_provider_ops *r = NULL;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_table && name; i++)
		if (strcmp(table[i]->name, name) == 0)
			r = table[i];
	pthread_mutex_unlock(&lock);
	return r;
}

void sbx_provider_names(char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_table && off < len; i++) {
		int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", table[i]->name);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	pthread_mutex_unlock(&lock);
}
