/* SPDX-License-Identifier: MIT */
/*
 * The creation pipeline every provider's creates go through:
 *   - a per-provider semaphore held only while a provider create call runs
 *     (released during backoff, so throttled episodes don't starve others);
 *   - throttles retried with jittered exponential backoff, everything else
 *     failing at once;
 *   - cancel safety: with a cancel token or a deadline, each attempt runs on
 *     a worker thread; if the caller gives up, the worker destroys whatever
 *     the provider still produces. Nothing is leaked by a cancelled episode.
 *     The worker reads only its attempt's own copy of the spec, since the
 *     caller's is borrowed for the call alone, and sbx_runtime_free waits
 *     for workers before it frees the provider contexts they use.
 *   - ownership labels (sbx.task, sbx.launcher, sbx.run_id) on every sandbox.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/config.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "runtime_int.h"

struct sbx_cancel {
	atomic_int fired;
};

sbx_cancel *sbx_cancel_new(void)
{
	return xcalloc(1, sizeof(sbx_cancel));
}

void sbx_cancel_fire(sbx_cancel *c)
{
	if (c)
		atomic_store(&c->fired, 1);
}

int sbx_cancel_fired(const sbx_cancel *c)
{
	return c ? atomic_load(&((sbx_cancel *)c)->fired) : 0;
}

void sbx_cancel_free(sbx_cancel *c)
{
	free(c);
}

/* ---- knobs ------------------------------------------------------------- */

static double env_double(const char *name, double def)
{
	const char *v = sbx__env_dyn(name);
	if (!v || !*v)
		return def;
	char *end;
	double d = strtod(v, &end);
	return (*end || d < 0 || !isfinite(d)) ? def : d;
}

static unsigned max_retries(const char *provider)
{
	char var[96];
	snprintf(var, sizeof(var), "OPENENV_%s_CREATE_MAX_RETRIES", provider);
	for (char *p = var; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	const char *names[] = { "SBX_CREATE_MAX_RETRIES", var };
	for (size_t i = 0; i < 2; i++) {
		const char *v = sbx__env_dyn(names[i]);
		uint64_t n;
		if (v && sbx__parse_u64(&n, v) == 0 && n < 1000)
			return (unsigned)n;
	}
	return 8;
}

/* ---- throttle classification ------------------------------------------- */

static int contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	if (!n)
		return 0;
	for (const char *p = hay; *p; p++)
		if (strncasecmp(p, needle, n) == 0)
			return 1;
	return 0;
}

static int matches_list(const char *msg, const char *list_s)
{
	if (!list_s || !*list_s)
		return 0;
	_cleanup_free_ char *list = xstrdup(list_s);
	char *rest = list, *pat;
	while ((pat = strsep(&rest, ",")) != NULL)
		if (*sbx__str_trim(pat) && contains_ci(msg, pat))
			return 1;
	return 0;
}

/* The provider's classifier first (when it has an opinion), then typed
 * (-EAGAIN, HTTP 429), then the message: the common throttle and quota
 * wordings, the provider's own patterns, and SBX_THROTTLE_PATTERNS or the
 * provider's pattern variable (comma separated, re-read on every failure so
 * an operator can widen it while a run goes on). */
static int is_throttle(const sbx_provider_desc *d, const sbx_error *e)
{
	if (!e)
		return 0;
	int v = d && d->is_throttle ? d->is_throttle(e) : -1;
	if (v >= 0)
		return v;
	if (e->code == -EAGAIN || e->http_status == 429)
		return 1;
	static const char *const words[] = { "too many requests", "429", "rate limit", "ratelimit",
					     "throttl", "limit exceeded", "resource exhausted",
					     "quota exceeded", NULL };
	const char *msg = e->msg ? e->msg : "";
	for (int i = 0; words[i]; i++)
		if (contains_ci(msg, words[i]))
			return 1;
	for (size_t i = 0; d && d->throttle_patterns && d->throttle_patterns[i]; i++)
		if (contains_ci(msg, d->throttle_patterns[i]))
			return 1;
	const char *extra = sbx__env("SBX_THROTTLE_PATTERNS");
	if (!extra && d && d->throttle_env)
		extra = sbx__env_dyn(d->throttle_env);
	return matches_list(msg, extra);
}

/* ---- labels -------------------------------------------------------------- */

char **sbx__create_labels(const sbx_sandbox_opts *o, const char *task)
{
	char **v = sbx__strv_dup(o->labels);
	if (task && *task) {
		_cleanup_free_ char *kv = xasprintf("sbx.task=%s", task);
		sbx__strv_setenv(&v, kv);
	}
	const char *launcher = sbx__env("SBX_LAUNCHER");
	if (!launcher || !*launcher)
		launcher = sbx__env("OPENENV_LAUNCHER");
	char buf[256];
	struct passwd pw, *res = NULL;
	if ((!launcher || !*launcher) && getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
		launcher = res->pw_name;
	_cleanup_free_ char *l = xasprintf("sbx.launcher=%s", launcher && *launcher ? launcher : "unknown");
	if (sbx__strv_find_key(v, "sbx.launcher") < 0)
		sbx__strv_push(&v, l);
	const char *run = sbx__env("SBX_RUN_ID");
	if (!run || !*run)
		run = sbx__env("OPENENV_RUN_ID");
	if (run && *run && sbx__strv_find_key(v, "sbx.run_id") < 0) {
		_cleanup_free_ char *kv = xasprintf("sbx.run_id=%s", run);
		sbx__strv_push(&v, kv);
	}
	return v;
}

/* ---- the attempt's own copy of the spec ---------------------------------- */

/* Everything a provider's create may read through its opts. The strings and
 * arrays are the attempt's: an abandoned attempt outlives the caller's. */
struct spec {
	sbx_sandbox_opts o;     /* every pointer points at the fields below */
	char *provider, *image, *workdir, *user, *hostname, *upper_dir;
	char **env, **labels, **allow_out, **deny_out;
};

#define ALIGN_UP(n, a) (((n) + (a) - 1) / (a) * (a))
/* A field appended to sbx_sandbox_opts trips this (a pointer always does:
 * trailing padding is narrower than the struct's pointer alignment). If it
 * is a pointer, copy it in spec_copy() and free it in spec_clear(); then
 * name the new last field here. */
_Static_assert(sizeof(sbx_sandbox_opts) ==
		       ALIGN_UP(offsetof(sbx_sandbox_opts, scratch) + sizeof(sbx_scratch_kind), _Alignof(sbx_sandbox_opts)),
	       "sbx_sandbox_opts grew: review spec_copy()");

static char *dup_opt(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static char **dup_strv(const char *const *v, const char *const **field)
{
	char **r = sbx__strv_dup(v);
	*field = (const char *const *)r;
	return r;
}

/* `labels` (the caller's plus the pipeline's) replace o->labels. */
static void spec_copy(struct spec *s, const sbx_sandbox_opts *o, char *const *labels, unsigned ttl)
{
	s->o = *o;
	s->o.ttl_s = ttl;
	s->o.provider = s->provider = dup_opt(o->provider);
	s->o.image = s->image = dup_opt(o->image);
	s->o.workdir = s->workdir = dup_opt(o->workdir);
	s->o.user = s->user = dup_opt(o->user);
	s->o.hostname = s->hostname = dup_opt(o->hostname);
	s->o.upper_dir = s->upper_dir = dup_opt(o->upper_dir);
	s->env = dup_strv(o->env, &s->o.env);
	s->labels = dup_strv((const char *const *)labels, &s->o.labels);
	s->allow_out = dup_strv(o->allow_out, &s->o.allow_out);
	s->deny_out = dup_strv(o->deny_out, &s->o.deny_out);
}

static void spec_clear(struct spec *s)
{
	free(s->provider);
	free(s->image);
	free(s->workdir);
	free(s->user);
	free(s->hostname);
	free(s->upper_dir);
	sbx__strv_free(s->env);
	sbx__strv_free(s->labels);
	sbx__strv_free(s->allow_out);
	sbx__strv_free(s->deny_out);
}

/* ---- one attempt, possibly on a worker thread --------------------------- */

/* Shared by the caller and, when threaded, the worker; freed by the last of
 * them to let go. Nothing in it points at the caller's memory. */
struct attempt {
	pthread_mutex_t m;
	pthread_cond_t c;
	int refs;               /* caller + worker */
	int done;
	int abandoned;          /* the caller gave up; the worker cleans up */
	const sbx_provider_ops *ops;  /* static, or registered for the process's life */
	sbx_runtime *rt;        /* held (sbx__runtime_worker_hold) while a worker runs */
	void *ctx;              /* the runtime's provider context */
	struct spec spec;
	struct sbx_sem *sem;    /* the runtime's */
	int r;
	void *impl;
	char *id;
	sbx_error *err;
};

void sbx__sem_release(struct sbx_sem *s)
{
	pthread_mutex_lock(&s->m);
	s->used--;
	pthread_cond_signal(&s->c);
	pthread_mutex_unlock(&s->m);
}

static void attempt_unref(struct attempt *a)
{
	pthread_mutex_lock(&a->m);
	int last = --a->refs == 0;
	pthread_mutex_unlock(&a->m);
	if (!last)
		return;
	pthread_mutex_destroy(&a->m);
	pthread_cond_destroy(&a->c);
	spec_clear(&a->spec);
	sbx_error_free(a->err);
	free(a->id);
	free(a);
}

/* Runs the provider call; the slot is released as soon as it returns. */
static void run_attempt(struct attempt *a)
{
	void *impl = NULL;
	char *id = NULL;
	sbx_error *e = NULL;
	int r = a->ops->create(&impl, &id, a->ctx, &a->spec.o, &e);
	sbx__sem_release(a->sem);
	pthread_mutex_lock(&a->m);
	a->r = r;
	a->impl = impl;
	a->id = id;
	a->err = e;
	a->done = 1;
	int orphan = a->abandoned && r == 0;
	pthread_cond_broadcast(&a->c);
	pthread_mutex_unlock(&a->m);
	if (orphan) {
		sbx_error *de = NULL;
		if (a->ops->destroy(impl, &de) < 0)
			SBX_LOGW("failed to destroy sandbox %s orphaned by a cancelled create: %s", id,
				 de ? de->msg : "?");
		else
			SBX_LOGI("destroyed sandbox %s orphaned by a cancelled create", id);
		sbx_error_free(de);
		if (a->ops->close)
			a->ops->close(impl);
		a->impl = NULL;
	}
}

static void *attempt_thread(void *arg)
{
	struct attempt *a = arg;
	sbx_runtime *rt = a->rt;
	run_attempt(a);
	attempt_unref(a);
	sbx__runtime_worker_release(rt);
	return NULL;
}

/* Why the caller must stop waiting, or 0. */
static int stop_reason(const sbx_create_ctl *ctl, double deadline)
{
	if (ctl && sbx_cancel_fired(ctl->cancel))
		return -ECANCELED;
	if (deadline > 0 && sbx__now_mono() >= deadline)
		return -ETIMEDOUT;
	return 0;
}

static int stop_error(int why, sbx_error **err)
{
	return why == -ECANCELED ? sbx_error_set(err, -ECANCELED, "create cancelled")
				 : sbx_error_set(err, -ETIMEDOUT, "create timed out");
}

/* Takes a slot, giving up on cancel/deadline. 0 or the stop reason. */
static int sem_acquire(struct sbx_sem *s, const sbx_create_ctl *ctl, double deadline)
{
	pthread_mutex_lock(&s->m);
	int r = 0;
	s->waiting++;
	while (s->used >= s->limit) {
		if ((r = stop_reason(ctl, deadline)) != 0)
			break;
		struct timespec ts;
		sbx__timespec_in(&ts, 0.01);
		pthread_cond_timedwait(&s->c, &s->m, &ts);
	}
	s->waiting--;
	if (!r)
		s->used++;
	pthread_mutex_unlock(&s->m);
	return r;
}

/* Sleeps up to `secs`, waking early on cancel/deadline. 0 or the stop reason. */
static int backoff_sleep(double secs, const sbx_create_ctl *ctl, double deadline)
{
	double until = sbx__now_mono() + secs;
	for (;;) {
		int why = stop_reason(ctl, deadline);
		if (why)
			return why;
		double left = until - sbx__now_mono();
		if (left <= 0)
			return 0;
		double step = left < 0.01 ? left : 0.01;
		struct timespec ts = { (time_t)step, (long)((step - (double)(time_t)step) * 1e9) };
		nanosleep(&ts, NULL);
	}
}

static double jitter(void)
{
	unsigned short r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (unsigned short)(time(NULL) & 0xffff);
	return 0.5 + (double)r / 65535.0; /* U(0.5, 1.5) */
}

int sbx_sandbox_create_ex(sbx_sandbox **out, sbx_runtime *rt, const sbx_sandbox_opts *opts,
			  sbx_create_ctl *ctl, sbx_error **err)
{
	if (ctl && ctl->version != SBX_CREATE_CTL_VERSION)
		return sbx_error_set(err, -EINVAL, "create ctl version %u unsupported", ctl->version);
	int r = sbx__sandbox_check_opts(opts, err);
	if (r < 0)
		return r;
	const sbx_provider_ops *ops;
	void *ctx;
	r = sbx__runtime_provider(&ops, &ctx, rt, opts->provider, err);
	if (r < 0)
		return r;
	struct sbx_sem *sem = sbx__runtime_sem(rt, ops);
	unsigned retries = max_retries(ops->name);
	double base = env_double("SBX_BACKOFF_BASE_S", 2.0), cap = env_double("SBX_BACKOFF_CAP_S", 30.0);
	double deadline = ctl && ctl->timeout_s > 0 ? sbx__now_mono() + ctl->timeout_s : 0;
	int threaded = ctl && (ctl->cancel || ctl->timeout_s > 0);
	char **labels = sbx__create_labels(opts, ctl ? ctl->task : NULL);
	unsigned ttl = opts->ttl_s;
	if (ctl && ctl->keepalive && !ttl) {
		ttl = sbx__sandbox_ttl_s();
	}
	if (ctl)
		ctl->attempts = 0;
	/* A create already cancelled or past its deadline takes nothing. */
	int renew = ctl && ctl->keepalive && ttl && ops->set_timeout;
	sbx_sandbox *pooled = rt->pools && !stop_reason(ctl, deadline)
				      ? sbx__pool_take(rt, ops, opts, labels, ttl, renew)
				      : NULL;
	if (pooled) {
		if (renew)
			sbx__keepalive_add(rt, pooled, ttl);
		sbx__strv_free(labels);
		*out = pooled;
		return 0;
	}
	for (unsigned attempt = 1;; attempt++) {
		int why = sem_acquire(sem, ctl, deadline);
		if (why) {
			r = stop_error(why, err);
			break;
		}
		struct attempt *a = xcalloc(1, sizeof(*a));
		pthread_mutex_init(&a->m, NULL);
		pthread_cond_init(&a->c, NULL);
		a->refs = 1;
		a->ops = ops;
		a->rt = rt;
		a->ctx = ctx;
		spec_copy(&a->spec, opts, labels, ttl);
		a->sem = sem;
		if (ctl)
			ctl->attempts++;
		pthread_t th;
		if (threaded) {
			a->refs = 2;
			sbx__runtime_worker_hold(rt);
			int e = pthread_create(&th, NULL, attempt_thread, a);
			if (e != 0) {
				/* Still correct, only no longer cancellable mid-call. */
				SBX_LOGW("%s create: no worker thread (%s); running it uncancellable",
					 ops->name, strerror(e));
				sbx__runtime_worker_release(rt);
				a->refs = 1;
				run_attempt(a);
			} else {
				pthread_detach(th);
			}
		} else {
			run_attempt(a);
		}
		pthread_mutex_lock(&a->m);
		while (!a->done && !(why = stop_reason(ctl, deadline))) {
			struct timespec ts;
			sbx__timespec_in(&ts, 0.01);
			pthread_cond_timedwait(&a->c, &a->m, &ts);
		}
		if (!a->done) {
			/* Give up now; the worker destroys what the provider produces. */
			a->abandoned = 1;
			pthread_mutex_unlock(&a->m);
			attempt_unref(a);
			r = stop_error(why, err);
			break;
		}
		pthread_mutex_unlock(&a->m);
		if (a->r == 0) {
			if ((why = stop_reason(ctl, deadline)) != 0) {
				/* Finished, but too late: the caller no longer wants it. */
				a->ops->destroy(a->impl, NULL);
				if (a->ops->close)
					a->ops->close(a->impl);
				attempt_unref(a);
				r = stop_error(why, err);
				break;
			}
			sbx_sandbox *sb = sbx__sandbox_wrap(rt, ops, a->impl, steal_ptr(&a->id));
			attempt_unref(a);
			if (ctl && ctl->keepalive && ttl && ops->set_timeout)
				sbx__keepalive_add(rt, sb, ttl);
			*out = sb;
			r = 0;
			break;
		}
		int throttled = is_throttle(ops->desc, a->err);
		if (!throttled || attempt > retries) {
			r = a->r;
			if (err && !*err) {
				*err = steal_ptr(&a->err);
				if (throttled)
					sbx_error_prefix(err, r, "%s create still throttled after %u attempts",
							 ops->name, attempt);
			}
			attempt_unref(a);
			break;
		}
		double delay = fmin(cap, base * pow(2.0, (double)(attempt - 1))) * jitter();
		SBX_LOGW("%s create throttled%s%s (attempt %u/%u); retrying in %.2fs: %s", ops->name,
			 ctl && ctl->task ? " for " : "", ctl && ctl->task ? ctl->task : "", attempt, retries + 1,
			 delay, a->err && a->err->msg ? a->err->msg : "");
		attempt_unref(a);
		if ((why = backoff_sleep(delay, ctl, deadline)) != 0) {
			r = stop_error(why, err);
			break;
		}
	}
	sbx__strv_free(labels);
	return r;
}
