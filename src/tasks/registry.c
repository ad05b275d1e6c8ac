/* SPDX-License-Identifier: MIT */
/*
 * The connector and agent registries: a static table of the built-in ones
 * (the one place that names them) plus runtime registration for
 * out-of-tree ones. Lookup is by exact name (agents: or alias); the first
 * connector is the default of sbx_task_load(), the first agent (the oracle)
 * that of episodes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <sbx/sys/connector.h>

#include "tasks/task_int.h"
#include "util/alloc.h"

#define MAX_ENTRIES 32

extern const sbx_connector_ops sbx_connector_harbor;
extern const sbx_agent_ops sbx_agent_oracle;
extern const sbx_agent_ops sbx_agent_nop;
extern const sbx_agent_ops sbx_agent_policy;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const sbx_connector_ops *connectors[MAX_ENTRIES] = { &sbx_connector_harbor };
static size_t n_connectors = 1;
static const sbx_agent_ops *agents[MAX_ENTRIES] = { &sbx_agent_oracle, &sbx_agent_nop,
							    &sbx_agent_policy };
static size_t n_agents = 3;

static int agent_has_name(const sbx_agent_ops *a, const char *name)
{
	if (strcmp(a->name, name) == 0)
		return 1;
	for (size_t i = 0; a->aliases && a->aliases[i]; i++)
		if (strcmp(a->aliases[i], name) == 0)
			return 1;
	return 0;
}

int sbx_connector_register(const sbx_connector_ops *ops, sbx_error **err)
{
	if (!ops || !ops->name || !*ops->name || ops->version != SBX_CONNECTOR_OPS_VERSION ||
	    !ops->probe || !ops->load || !ops->sandbox_spec || !ops->agent_inputs || !ops->verify)
		return sbx_error_set(err, -EINVAL, "register connector %s: ops table incomplete or "
				     "version %u unsupported", ops && ops->name ? ops->name : "?",
				     ops ? ops->version : 0);
	int r = 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_connectors; i++)
		if (strcmp(connectors[i]->name, ops->name) == 0) {
			r = sbx_error_set(err, -EEXIST, "register connector %s: name taken", ops->name);
			goto out;
		}
	if (n_connectors == MAX_ENTRIES) {
		r = sbx_error_set(err, -ENOSPC, "register connector %s: table full", ops->name);
		goto out;
	}
	connectors[n_connectors++] = ops;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

int sbx_agent_register(const sbx_agent_ops *ops, sbx_error **err)
{
	if (!ops || !ops->name || !*ops->name || ops->version != SBX_AGENT_OPS_VERSION || !ops->run)
		return sbx_error_set(err, -EINVAL, "register agent %s: ops table incomplete or "
				     "version %u unsupported", ops && ops->name ? ops->name : "?",
				     ops ? ops->version : 0);
	int r = 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_agents; i++) {
		const char *clash = agent_has_name(agents[i], ops->name) ? ops->name : NULL;
		for (size_t j = 0; !clash && ops->aliases && ops->aliases[j]; j++)
			if (agent_has_name(agents[i], ops->aliases[j]))
				clash = ops->aliases[j];
		if (clash) {
			r = sbx_error_set(err, -EEXIST, "register agent %s: name \"%s\" taken by %s",
					  ops->name, clash, agents[i]->name);
			goto out;
		}
	}
	if (n_agents == MAX_ENTRIES) {
		r = sbx_error_set(err, -ENOSPC, "register agent %s: table full", ops->name);
		goto out;
	}
	agents[n_agents++] = ops;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

const sbx_connector_ops *sbx_connector_find(const char *name)
{
	const sbx_connector_ops *r = NULL;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_connectors && name && !r; i++)
		if (strcmp(connectors[i]->name, name) == 0)
			r = connectors[i];
	pthread_mutex_unlock(&lock);
	return r;
}

const sbx_agent_ops *sbx_agent_find(const char *name)
{
	const sbx_agent_ops *r = NULL;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_agents && name && !r; i++)
		if (agent_has_name(agents[i], name))
			r = agents[i];
	pthread_mutex_unlock(&lock);
	return r;
}

const sbx_connector_ops *sbx_connector_detect(const char *dir)
{
	const sbx_connector_ops *snap[MAX_ENTRIES];
	pthread_mutex_lock(&lock);
	size_t n = n_connectors;
	memcpy(snap, connectors, n * sizeof(*snap));
	pthread_mutex_unlock(&lock);
	/* probe() touches the file system: not under the lock. */
	for (size_t i = 0; i < n && dir; i++)
		if (snap[i]->probe(dir) == 1)
			return snap[i];
	return NULL;
}

const sbx_connector_ops *sbx__connector_default(void)
{
	pthread_mutex_lock(&lock);
	const sbx_connector_ops *r = connectors[0];
	pthread_mutex_unlock(&lock);
	return r;
}

const sbx_agent_ops *sbx__agent_default(void)
{
	pthread_mutex_lock(&lock);
	const sbx_agent_ops *r = agents[0];
	pthread_mutex_unlock(&lock);
	return r;
}

static void names(char *buf, size_t len, const char *const *v, size_t n)
{
	size_t off = 0;
	if (len == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		int k = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", v[i]);
		if (k < 0)
			break;
		off += (size_t)k;
	}
}

void sbx_connector_names(char *buf, size_t len)
{
	const char *v[MAX_ENTRIES];
	pthread_mutex_lock(&lock);
	size_t n = n_connectors;
	for (size_t i = 0; i < n; i++)
		v[i] = connectors[i]->name;
	pthread_mutex_unlock(&lock);
	names(buf, len, v, n);
}

void sbx_agent_names(char *buf, size_t len)
{
	const char *v[MAX_ENTRIES];
	pthread_mutex_lock(&lock);
	size_t n = n_agents;
	for (size_t i = 0; i < n; i++)
		v[i] = agents[i]->name;
	pthread_mutex_unlock(&lock);
	names(buf, len, v, n);
}

int sbx_connector_lookup(const sbx_connector_ops **out, const char *name, sbx_error **err)
{
	*out = sbx_connector_find(name);
	if (*out)
		return 0;
	char known[512];
	sbx_connector_names(known, sizeof(known));
	return sbx_error_set(err, -EINVAL, "unknown connector \"%s\" (known: %s)",
			     name ? name : "", known);
}

int sbx_agent_lookup(const sbx_agent_ops **out, const char *name, sbx_error **err)
{
	*out = sbx_agent_find(name);
	if (*out)
		return 0;
	char known[512];
	sbx_agent_names(known, sizeof(known));
	return sbx_error_set(err, -EINVAL, "unknown agent \"%s\" (known: %s)", name ? name : "",
			     known);
}
