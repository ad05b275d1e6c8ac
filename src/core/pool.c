/* SPDX-License-Identifier: MIT */
/*
 * Warm pools (include/sbx/pool.h): per runtime, one refill thread keeps each
 * pool's ready list full. It takes a create slot only when one is free and no
 * foreground create waits for one, one create at a time, so a pool never
 * starves the creates of episodes. A take pops under the lock: a sandbox
 * leaves the ready list exactly once and is never put back. Pools are only
 * added while the runtime lives, so a pool pointer stays valid unlocked.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/pool.h>
#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "runtime_int.h"

struct entry {
	void *impl;
	char *id;
	double born;              /* monotonic: when its TTL clock started */
};

struct pool {
	struct pool *next;
	char *key;
	const sbx_provider_ops *ops;
	void *ctx;
	struct sbx_sem *sem;
	unsigned size;
	sbx_sandbox_opts o;       /* the pool's own copy; pointers below */
	char *provider, *image, *workdir, *user, *hostname;
	char **env, **labels, **allow_out, **deny_out;
	struct entry *ready;      /* FIFO, ready[0] the oldest */
	unsigned n_ready;
	unsigned failures;        /* consecutive, for the retry backoff */
	int last_code;            /* of the last failed refill */
	char *last_err;
	double retry_at;
};

struct sbx_pools {
	pthread_mutex_t m;
	pthread_cond_t c;         /* any change: a take, a refill, stop */
	pthread_t th;
	int stop;
	struct pool *list;
};

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static struct pool *pool_new(const sbx_sandbox_opts *spec, char *const *labels, const char *key)
{
	struct pool *p = xcalloc(1, sizeof(*p));
	p->key = xstrdup(key);
	p->o = *spec;
	p->o.detach = 0;
	p->o.provider = p->provider = dup_or_null(spec->provider);
	p->o.image = p->image = dup_or_null(spec->image);
	p->o.workdir = p->workdir = dup_or_null(spec->workdir);
	p->o.user = p->user = dup_or_null(spec->user);
	p->o.hostname = p->hostname = dup_or_null(spec->hostname);
	p->env = sbx__strv_dup(spec->env);
	p->o.env = (const char *const *)p->env;
	p->allow_out = sbx__strv_dup(spec->allow_out);
	p->o.allow_out = (const char *const *)p->allow_out;
	p->deny_out = sbx__strv_dup(spec->deny_out);
	p->o.deny_out = (const char *const *)p->deny_out;
	/* FNV-1a of the key: marks the pool's sandboxes for listing and gc. */
	uint64_t h = 1469598103934665603ULL;
	for (const char *c = key; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	p->labels = sbx__strv_dup((const char *const *)labels);
	_cleanup_free_ char *mark = xasprintf("sbx.pool=%016" PRIx64, h);
	sbx__strv_setenv(&p->labels, mark);
	p->o.labels = (const char *const *)p->labels;
	return p;
}

static void entry_destroy(const sbx_provider_ops *ops, struct entry *e)
{
	sbx_error *err = NULL;
	if (ops->destroy(e->impl, &err) < 0)
		SBX_LOGW("pool: failed to destroy idle sandbox %s: %s", e->id, err ? err->msg : "?");
	sbx_error_free(err);
	if (ops->close)
		ops->close(e->impl);
	free(e->id);
}

static void pool_free(struct pool *p)
{
	for (unsigned i = 0; i < p->n_ready; i++)
		entry_destroy(p->ops, &p->ready[i]);
	free(p->ready);
	free(p->last_err);
	free(p->key);
	free(p->provider);
	free(p->image);
	free(p->workdir);
	free(p->user);
	free(p->hostname);
	sbx__strv_free(p->env);
	sbx__strv_free(p->labels);
	sbx__strv_free(p->allow_out);
	sbx__strv_free(p->deny_out);
	free(p);
}

/* A slot only if one is free and no foreground create is queued for one. */
static int sem_try_idle(struct sbx_sem *s)
{
	pthread_mutex_lock(&s->m);
	int ok = s->used < s->limit && s->waiting == 0;
	if (ok)
		s->used++;
	pthread_mutex_unlock(&s->m);
	return ok;
}

static struct pool *next_to_fill(struct sbx_pools *ps, double now)
{
	for (struct pool *p = ps->list; p; p = p->next)
		if (p->n_ready < p->size && p->retry_at <= now)
			return p;
	return NULL;
}

int sbx__warm(const sbx_provider_ops *ops, void *impl, const char *id)
{
	/* Tables older than version 6 end before warm: never read past them. */
	if (ops->version < 6 || !ops->warm)
		return 0;
	sbx_error *err = NULL;
	int r = ops->warm(impl, &err);
	if (r < 0)
		SBX_LOGD("pool: warming %s failed%s: %s", id, r == -ESRCH ? "" : " (its first command pays instead)",
			 err && err->msg ? err->msg : "?");
	sbx_error_free(err);
	return r;
}

int sbx__sandbox_warm(sbx_sandbox *sb)
{
	return sbx__warm(sbx__sandbox_ops(sb), sbx__sandbox_impl(sb), sbx_sandbox_id(sb));
}

static void *refill_thread(void *arg)
{
	struct sbx_pools *ps = arg;
	pthread_mutex_lock(&ps->m);
	while (!ps->stop) {
		struct pool *p = next_to_fill(ps, sbx__now_mono());
		if (!p || !sem_try_idle(p->sem)) {
			struct timespec ts;
			sbx__timespec_in(&ts, p ? 0.005 : 0.1);
			pthread_cond_timedwait(&ps->c, &ps->m, &ts);
			continue;
		}
		pthread_mutex_unlock(&ps->m);
		struct entry e = { 0 };
		sbx_error *err = NULL;
		e.born = sbx__now_mono();
		int r = p->ops->create(&e.impl, &e.id, p->ctx, &p->o, &err);
		sbx__sem_release(p->sem); /* warming needs no create slot */
		if (r == 0 && sbx__warm(p->ops, e.impl, e.id) == -ESRCH) {
			/* Dead already: never hand it out. */
			r = sbx_error_set(&err, -ESRCH, "sandbox %s died before it was ready", e.id);
			entry_destroy(p->ops, &e);
		}
		pthread_mutex_lock(&ps->m);
		if (r < 0) {
			p->failures++;
			double delay = fmin(30.0, 0.1 * pow(2.0, (double)p->failures));
			p->retry_at = sbx__now_mono() + delay;
			SBX_LOGW("pool: create of %s failed (retrying in %.1fs): %s", p->image, delay,
				 err ? err->msg : "?");
			free(p->last_err);
			p->last_err = xstrdup(err && err->msg ? err->msg : "failed");
			p->last_code = r;
			sbx_error_free(err);
		} else {
			/* Even after stop: sbx__pool_stop destroys what is listed. */
			p->failures = 0;
			p->ready = xrealloc(p->ready, (p->n_ready + 1) * sizeof(*p->ready));
			p->ready[p->n_ready++] = e;
		}
		pthread_cond_broadcast(&ps->c);
	}
	pthread_mutex_unlock(&ps->m);
	return NULL;
}

static struct sbx_pools *pools_get(sbx_runtime *rt)
{
	return __atomic_load_n(&rt->pools, __ATOMIC_ACQUIRE);
}

/* The runtime's pools, started on first use (under rt->lock). */
static int pools_start(struct sbx_pools **out, sbx_runtime *rt, sbx_error **err)
{
	int r = 0;
	pthread_mutex_lock(&rt->lock);
	struct sbx_pools *ps = rt->pools;
	if (!ps) {
		ps = xcalloc(1, sizeof(*ps));
		pthread_mutex_init(&ps->m, NULL);
		pthread_cond_init(&ps->c, NULL);
		int e = pthread_create(&ps->th, NULL, refill_thread, ps);
		if (e) {
			pthread_mutex_destroy(&ps->m);
			pthread_cond_destroy(&ps->c);
			free(ps);
			r = sbx_error_set(err, -e, "pool: cannot start the refill thread: %s", strerror(e));
			goto out;
		}
		__atomic_store_n(&rt->pools, ps, __ATOMIC_RELEASE);
	}
	*out = ps;
out:
	pthread_mutex_unlock(&rt->lock);
	return r;
}

int sbx_pool_add(sbx_runtime *rt, const sbx_pool_opts *opts, sbx_error **err)
{
	if (!opts || opts->version != SBX_POOL_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "pool opts: missing or version %u unsupported",
				     opts ? opts->version : 0);
	if (opts->size < 1 || opts->size > 1024)
		return sbx_error_set(err, -EINVAL, "pool: size %u out of range (1..1024)", opts->size);
	const sbx_sandbox_opts *spec = opts->spec;
	int r = sbx__sandbox_check_opts(spec, err);
	if (r < 0)
		return r;
	if (spec->detach || spec->upper_dir)
		return sbx_error_set(err, -EINVAL, "pool: a spec with %s is not poolable",
				     spec->detach ? "detach" : "upper_dir");
	const sbx_provider_ops *ops;
	void *ctx;
	r = sbx__runtime_provider(&ops, &ctx, rt, spec->provider, err);
	if (r < 0)
		return r;
	struct sbx_pools *ps = NULL;
	r = pools_start(&ps, rt, err);
	if (r < 0)
		return r;
	char **labels = sbx__create_labels(spec, opts->task);
	_cleanup_free_ char *key = sbx__pool_key(ops->name, spec, labels);
	pthread_mutex_lock(&ps->m);
	struct pool *p;
	for (p = ps->list; p && (p->ops != ops || strcmp(p->key, key)); p = p->next)
		;
	if (p) {
		if (opts->size > p->size)
			p->size = opts->size;
	} else {
		p = pool_new(spec, labels, key);
		p->ops = ops;
		p->ctx = ctx;
		p->sem = sbx__runtime_sem(rt, ops);
		p->size = opts->size;
		p->next = ps->list;
		ps->list = p;
	}
	pthread_cond_broadcast(&ps->c);
	pthread_mutex_unlock(&ps->m);
	sbx__strv_free(labels);
	return 0;
}

/* Whether the idle sandbox's own deadline already serves a taker whose TTL
 * keepalive renews: it is no later than the taker asked for, and far enough
 * off that the first renewal comes first. Saves a set_timeout round trip. */
static int deadline_serves(unsigned pool_ttl, double born, unsigned ttl, int keepalive)
{
	if (!keepalive || !pool_ttl || !ttl)
		return 0;
	double left = (double)pool_ttl - (sbx__now_mono() - born);
	return left <= (double)ttl && left >= 2.0 * sbx__keepalive_interval(ttl) + 1.0;
}

sbx_sandbox *sbx__pool_take(sbx_runtime *rt, const sbx_provider_ops *ops, const sbx_sandbox_opts *opts,
			    char *const *labels, unsigned ttl, int keepalive)
{
	struct sbx_pools *ps = pools_get(rt);
	if (!ps || opts->detach || opts->upper_dir)
		return NULL;
	_cleanup_free_ char *key = sbx__pool_key(ops->name, opts, labels);
	struct entry e = { 0 };
	unsigned pool_ttl = 0;
	pthread_mutex_lock(&ps->m);
	for (struct pool *p = ps->list; p; p = p->next) {
		if (p->ops != ops || p->n_ready == 0 || strcmp(p->key, key))
			continue;
		e = p->ready[0];
		memmove(p->ready, p->ready + 1, --p->n_ready * sizeof(*p->ready));
		pool_ttl = p->o.ttl_s;
		pthread_cond_broadcast(&ps->c);
		break;
	}
	pthread_mutex_unlock(&ps->m);
	if (!e.impl)
		return NULL;
	/* Also restarts a TTL whose clock ran while the sandbox waited idle. */
	if ((ttl != pool_ttl || ttl) && !deadline_serves(pool_ttl, e.born, ttl, keepalive)) {
		sbx_error *err = NULL;
		int r = ops->set_timeout ? ops->set_timeout(e.impl, ttl, &err) : -ENOSYS;
		if (r < 0) {
			SBX_LOGW("pool: cannot set the TTL of %s (%s); creating instead", e.id,
				 err ? err->msg : "no set_timeout");
			sbx_error_free(err);
			entry_destroy(ops, &e);
			return NULL;
		}
	}
	SBX_LOGD("pool: handed out %s", e.id);
	return sbx__sandbox_wrap(rt, ops, e.impl, e.id);
}

int sbx_pool_wait(sbx_runtime *rt, double timeout_s, sbx_error **err)
{
	struct sbx_pools *ps = pools_get(rt);
	if (!ps)
		return 0;
	double until = timeout_s > 0 ? sbx__now_mono() + timeout_s : 0;
	int r = 0;
	pthread_mutex_lock(&ps->m);
	for (;;) {
		struct pool *p;
		for (p = ps->list; p && p->n_ready >= p->size; p = p->next)
			;
		if (!p)
			break;
		/* A spec that keeps failing would never fill: say why instead. */
		if (p->failures >= 3) {
			r = sbx_error_set(err, p->last_code, "pool of %s: %u of %u ready; refills fail: %s",
					  p->image, p->n_ready, p->size, p->last_err);
			break;
		}
		if (until && sbx__now_mono() >= until) {
			r = sbx_error_set(err, -ETIMEDOUT, "pool of %s: %u of %u ready after %.1fs", p->image,
					  p->n_ready, p->size, timeout_s);
			break;
		}
		struct timespec ts;
		sbx__timespec_in(&ts, 0.05);
		pthread_cond_timedwait(&ps->c, &ps->m, &ts);
	}
	pthread_mutex_unlock(&ps->m);
	return r;
}

unsigned sbx_pool_ready(sbx_runtime *rt)
{
	struct sbx_pools *ps = pools_get(rt);
	if (!ps)
		return 0;
	unsigned n = 0;
	pthread_mutex_lock(&ps->m);
	for (struct pool *p = ps->list; p; p = p->next)
		n += p->n_ready;
	pthread_mutex_unlock(&ps->m);
	return n;
}

void sbx__pool_stop(sbx_runtime *rt)
{
	struct sbx_pools *ps = pools_get(rt);
	if (!ps)
		return;
	pthread_mutex_lock(&ps->m);
	ps->stop = 1;
	pthread_cond_broadcast(&ps->c);
	pthread_mutex_unlock(&ps->m);
	pthread_join(ps->th, NULL);
	unsigned n = 0;
	for (struct pool *p = ps->list, *next; p; p = next) {
		next = p->next;
		n += p->n_ready;
		pool_free(p);
	}
	if (n)
		SBX_LOGI("pool: destroyed %u idle sandbox(es)", n);
	pthread_mutex_destroy(&ps->m);
	pthread_cond_destroy(&ps->c);
	free(ps);
	rt->pools = NULL;
}
