/* SPDX-License-Identifier: MIT */
/*
 * Provider registry: the one table that names backends. Built-in providers
 * are listed below (one line each); out-of-tree ones register at run time.
 * An entry is a description (sys/provider.h) with or without ops: a provider
 * described only (no implementation in this build yet) still resolves as a
 * backend name, has its credential spec and doctor checks, but cannot create.
 * Lookup is by canonical name or alias, case-insensitive. Entries are only
 * appended, and every table and description outlives the process, so the
 * pointers handed out stay valid without the lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/str.h"
#include "runtime_int.h"

extern const sbx_provider_ops sbx_provider_local;
extern const sbx_provider_ops sbx_provider_e2b;
extern const sbx_provider_ops sbx_provider_daytona;
extern const sbx_provider_desc sbx_provider_modal_desc;

struct entry {
	const sbx_provider_desc *desc;
	const sbx_provider_ops *ops;  /* NULL: described only */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The built-in providers, default first. */
static struct entry table[SBX_MAX_PROVIDERS] = {
	{ NULL, &sbx_provider_local },
	{ NULL, &sbx_provider_e2b },
	{ NULL, &sbx_provider_daytona },
	{ &sbx_provider_modal_desc, NULL },
};
static size_t n_table = 4;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill_descs(void)
{
	for (size_t i = 0; i < n_table; i++)
		if (!table[i].desc)
			table[i].desc = table[i].ops->desc;
}

static void ready(void)
{
	pthread_once(&once, fill_descs);
}

static int named(const sbx_provider_desc *d, const char *name)
{
	if (strcasecmp(d->name, name) == 0)
		return 1;
	for (size_t i = 0; d->aliases && d->aliases[i]; i++)
		if (strcasecmp(d->aliases[i], name) == 0)
			return 1;
	return 0;
}

/* Under lock. */
static const struct entry *lookup(const char *name)
{
	for (size_t i = 0; i < n_table && name; i++)
		if (named(table[i].desc, name))
			return &table[i];
	return NULL;
}

static int check_ops(const sbx_provider_ops *ops, sbx_error **err)
{
	if (!ops || !ops->name || !*ops->name)
		return sbx_error_set(err, -EINVAL, "register provider: ops table without a name");
	if (ops->version == 1)
		return sbx_error_set(err, -EINVAL,
				     "register provider %s: ops version 1 predates provider descriptions; "
				     "rebuild against sys/provider.h version %u (it adds .desc after .name)",
				     ops->name, SBX_PROVIDER_OPS_VERSION);
	if (ops->version != SBX_PROVIDER_OPS_VERSION && ops->version != 2)
		return sbx_error_set(err, -EINVAL, "register provider %s: ops version %u unsupported (this build: %u)",
				     ops->name, ops->version, SBX_PROVIDER_OPS_VERSION);
	const char *miss = !ops->create ? "create" : !ops->exec ? "exec" : !ops->destroy ? "destroy" : NULL;
	if (!miss && ops->process_start)
		miss = !ops->process_poll ? "process_poll" : !ops->process_free ? "process_free" : NULL;
	if (miss)
		return sbx_error_set(err, -EINVAL, "register provider %s: ops table incomplete (no %s)", ops->name,
				     miss);
	if (ops->desc && (!ops->desc->name || strcmp(ops->desc->name, ops->name) != 0))
		return sbx_error_set(err, -EINVAL, "register provider %s: its description is named '%s'", ops->name,
				     ops->desc->name ? ops->desc->name : "(null)");
	if (ops->desc && (ops->desc->caps & SBX_PROVIDER_CAP_DEFAULT))
		return sbx_error_set(err, -EINVAL, "register provider %s: only a built-in provider can be the default",
				     ops->name);
	return 0;
}

int sbx_provider_register(const sbx_provider_ops *ops, sbx_error **err)
{
	int r = check_ops(ops, err);
	if (r < 0)
		return r;
	ready();
	const sbx_provider_desc *d = ops->desc;
	if (!d) {
		/* A bare table: its name is its whole description. */
		sbx_provider_desc *bare = xcalloc(1, sizeof(*bare));
		bare->name = ops->name;
		bare->title = ops->name;
		d = bare;
	}
	pthread_mutex_lock(&lock);
	const char *clash = lookup(d->name) ? d->name : NULL;
	for (size_t i = 0; !clash && d->aliases && d->aliases[i]; i++)
		if (lookup(d->aliases[i]))
			clash = d->aliases[i];
	if (clash) {
		r = sbx_error_set(err, -EEXIST, "register provider %s: name %s taken", ops->name, clash);
		goto out;
	}
	if (n_table == SBX_MAX_PROVIDERS) {
		r = sbx_error_set(err, -ENOSPC, "register provider %s: table full", ops->name);
		goto out;
	}
	table[n_table++] = (struct entry){ d, ops };
	d = NULL;
out:
	pthread_mutex_unlock(&lock);
	if (d && !ops->desc)
		free((void *)d);
	return r;
}

const sbx_provider_ops *sbx_provider_find(const char *name)
{
	ready();
	pthread_mutex_lock(&lock);
	const struct entry *e = lookup(name);
	const sbx_provider_ops *r = e ? e->ops : NULL;
	pthread_mutex_unlock(&lock);
	return r;
}

void sbx_provider_names(char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	ready();
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_table && off < len; i++) {
		if (!table[i].ops)
			continue;
		int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", table[i].ops->name);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	pthread_mutex_unlock(&lock);
}

const sbx_provider_desc *sbx_provider_describe(const char *name)
{
	if (!name)
		return NULL;
	_cleanup_free_ char *n = xstrdup(name);
	ready();
	pthread_mutex_lock(&lock);
	const struct entry *e = lookup(sbx__str_trim(n));
	const sbx_provider_desc *r = e ? e->desc : NULL;
	pthread_mutex_unlock(&lock);
	return r;
}

const sbx_provider_desc *sbx_provider_desc_at(size_t i)
{
	ready();
	pthread_mutex_lock(&lock);
	const sbx_provider_desc *r = i < n_table ? table[i].desc : NULL;
	pthread_mutex_unlock(&lock);
	return r;
}

static const sbx_provider_desc *first_with(unsigned cap)
{
	const sbx_provider_desc *d;
	for (size_t i = 0; (d = sbx_provider_desc_at(i)) != NULL; i++)
		if (d->caps & cap)
			return d;
	return sbx_provider_desc_at(0);
}

const sbx_provider_desc *sbx_provider_default(void)
{
	return first_with(SBX_PROVIDER_CAP_DEFAULT);
}

const sbx_provider_desc *sbx_provider_host(void)
{
	return first_with(SBX_PROVIDER_CAP_HOST);
}

const sbx_provider_ops *sbx_provider_desc_ops(const sbx_provider_desc *d)
{
	const sbx_provider_ops *r = NULL;
	ready();
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_table && d; i++)
		if (table[i].desc == d)
			r = table[i].ops;
	pthread_mutex_unlock(&lock);
	return r;
}
