/* SPDX-License-Identifier: MIT */
/*
 * Keepalive: one thread per runtime renews the TTL of every sandbox created
 * with ctl.keepalive, every TTL/6. A sandbox whose renewal fails three times
 * in a row is dropped from the list (logged): its TTL then reclaims it. If
 * this process dies, renewals stop and the provider's TTL is the dead-man's
 * switch. Removal waits for a renewal in flight on that sandbox, so a
 * destroyed handle is never touched afterwards.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/config.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "runtime_int.h"

#define MAX_FAILURES 3

struct entry {
	sbx_sandbox *sb;
	unsigned ttl_s;
	double next;        /* monotonic time of the next renewal */
	int failures;
	struct entry *next_e;
};

struct sbx_keepalive {
	pthread_mutex_t m;
	pthread_cond_t c;
	pthread_t thread;
	int stop;
	struct entry *list;
	sbx_sandbox *busy;  /* the sandbox being renewed right now */
};

double sbx__keepalive_interval(unsigned ttl)
{
	double env = 0;
	const char *v = sbx__env("SBX_KEEPALIVE_INTERVAL_S");
	if (v && *v)
		env = strtod(v, NULL);
	return env > 0 ? env : (double)ttl / 6.0;
}

static void *run(void *arg)
{
	struct sbx_keepalive *k = arg;
	pthread_mutex_lock(&k->m);
	while (!k->stop) {
		double now = sbx__now_mono(), soonest = now + 3600;
		struct entry **pp = &k->list, *due = NULL;
		for (struct entry *e = k->list; e; e = e->next_e)
			if (e->next <= now && !due)
				due = e;
			else if (e->next < soonest)
				soonest = e->next;
		if (!due) {
			struct timespec ts;
			sbx__timespec_in(&ts, soonest - now);
			pthread_cond_timedwait(&k->c, &k->m, &ts);
			continue;
		}
		k->busy = due->sb;
		pthread_mutex_unlock(&k->m);
		sbx_error *err = NULL;
		const sbx_provider_ops *ops = sbx__sandbox_ops(due->sb);
		int r = ops->set_timeout(sbx__sandbox_impl(due->sb), due->ttl_s, &err);
		pthread_mutex_lock(&k->m);
		k->busy = NULL;
		pthread_cond_broadcast(&k->c);
		/* The entry may have been removed while we were renewing. */
		for (pp = &k->list; *pp && *pp != due; pp = &(*pp)->next_e)
			;
		if (*pp) {
			due->failures = r < 0 ? due->failures + 1 : 0;
			due->next = sbx__now_mono() + sbx__keepalive_interval(due->ttl_s);
			if (due->failures >= MAX_FAILURES) {
				SBX_LOGW("keepalive: giving up on sandbox %s after %d failed renewals (last: %s); "
					 "its TTL of %us will reclaim it",
					 sbx_sandbox_id(due->sb), MAX_FAILURES, err ? err->msg : "?", due->ttl_s);
				*pp = due->next_e;
				sbx__sandbox_set_keepalive(due->sb, 0);
				free(due);
			} else if (r < 0) {
				SBX_LOGW("keepalive: renewing sandbox %s failed (%d/%d): %s", sbx_sandbox_id(due->sb),
					 due->failures, MAX_FAILURES, err ? err->msg : "?");
			}
		}
		sbx_error_free(err);
	}
	pthread_mutex_unlock(&k->m);
	return NULL;
}

void sbx__keepalive_add(sbx_runtime *rt, sbx_sandbox *sb, unsigned ttl_s)
{
	pthread_mutex_lock(&rt->lock);
	if (!rt->keepalive) {
		struct sbx_keepalive *k = xcalloc(1, sizeof(*k));
		pthread_mutex_init(&k->m, NULL);
		pthread_cond_init(&k->c, NULL);
		int e = pthread_create(&k->thread, NULL, run, k);
		if (e != 0) {
			pthread_mutex_unlock(&rt->lock);
			SBX_LOGE("keepalive: cannot start its thread (%s); the TTL of sandbox %s will not be "
				 "renewed", strerror(e), sbx_sandbox_id(sb));
			pthread_mutex_destroy(&k->m);
			pthread_cond_destroy(&k->c);
			free(k);
			return;
		}
		rt->keepalive = k;
	}
	struct sbx_keepalive *k = rt->keepalive;
	pthread_mutex_unlock(&rt->lock);
	struct entry *e = xcalloc(1, sizeof(*e));
	e->sb = sb;
	e->ttl_s = ttl_s;
	e->next = sbx__now_mono() + sbx__keepalive_interval(ttl_s);
	pthread_mutex_lock(&k->m);
	e->next_e = k->list;
	k->list = e;
	sbx__sandbox_set_keepalive(sb, 1);
	pthread_cond_broadcast(&k->c);
	pthread_mutex_unlock(&k->m);
}

void sbx__keepalive_remove(sbx_runtime *rt, sbx_sandbox *sb)
{
	struct sbx_keepalive *k = rt->keepalive;
	if (!k)
		return;
	pthread_mutex_lock(&k->m);
	while (k->busy == sb)
		pthread_cond_wait(&k->c, &k->m);
	for (struct entry **pp = &k->list; *pp; pp = &(*pp)->next_e)
		if ((*pp)->sb == sb) {
			struct entry *e = *pp;
			*pp = e->next_e;
			free(e);
			break;
		}
	sbx__sandbox_set_keepalive(sb, 0);
	pthread_mutex_unlock(&k->m);
}

void sbx__keepalive_stop(sbx_runtime *rt)
{
	struct sbx_keepalive *k = rt->keepalive;
	if (!k)
		return;
	pthread_mutex_lock(&k->m);
	k->stop = 1;
	pthread_cond_broadcast(&k->c);
	pthread_mutex_unlock(&k->m);
	pthread_join(k->thread, NULL);
	while (k->list) {
		struct entry *e = k->list;
		k->list = e->next_e;
		free(e);
	}
	pthread_mutex_destroy(&k->m);
	pthread_cond_destroy(&k->c);
	free(k);
	rt->keepalive = NULL;
}
