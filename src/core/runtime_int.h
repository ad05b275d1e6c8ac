/* SPDX-License-Identifier: MIT */
/* Private to src/core: the runtime struct. */
#ifndef SBX_CORE_RUNTIME_INT_H
#define SBX_CORE_RUNTIME_INT_H

#include <pthread.h>
#include <sbx/sys/provider.h>

#define SBX_MAX_PROVIDERS 16

/* Counting semaphore bounding concurrent provider create calls. */
struct sbx_sem {
	pthread_mutex_t m;
	pthread_cond_t c;
	unsigned limit;
	unsigned used;
	unsigned waiting;  /* foreground creates blocked on a slot: pool refills yield */
};

struct sbx_keepalive;
struct sbx_pools;

struct sbx_runtime {
	char *state_dir;
	char *image_dir;
	char *default_provider;
	pthread_mutex_t lock;          /* guards ctx[] initialisation */
	const sbx_provider_ops *ops[SBX_MAX_PROVIDERS];
	void *ctx[SBX_MAX_PROVIDERS];
	struct sbx_sem sem[SBX_MAX_PROVIDERS];  /* per provider, sized on first use */
	struct sbx_keepalive *keepalive;         /* lazily started (keepalive.c) */
	pthread_mutex_t workers_lock;  /* guards workers */
	pthread_cond_t workers_idle;   /* signalled when workers drops to 0 */
	unsigned workers;              /* create attempts on threads of their own (create.c) */
	struct sbx_pools *pools;       /* warm pools (pool.c); NULL until sbx_pool_add */
};

/* -ENOSYS "PROVIDER: OP is not supported", for an optional op left NULL. */
int sbx__unsupported(const sbx_provider_ops *ops, const char *op, sbx_error **err);

/* A create worker uses the runtime (provider context, semaphore) until it
 * releases it, also after its caller gave up: sbx_runtime_free waits. */
void sbx__runtime_worker_hold(sbx_runtime *rt);
void sbx__runtime_worker_release(sbx_runtime *rt);

/* The create semaphore of a provider already set up by sbx__runtime_provider. */
struct sbx_sem *sbx__runtime_sem(sbx_runtime *rt, const sbx_provider_ops *ops);

/* sandbox.c: wraps a provider handle (takes ownership of impl and id). */
sbx_sandbox *sbx__sandbox_wrap(sbx_runtime *rt, const sbx_provider_ops *ops, void *impl, char *id);
/* sandbox.c: argument checks shared by every create entry point. */
int sbx__sandbox_check_opts(const sbx_sandbox_opts *o, sbx_error **err);
/* process.c: the tty fields of exec opts against what the provider can do
 * (-ENOSYS naming the provider, -EINVAL for a size past 65535). */
int sbx__exec_check_tty(const sbx_provider_ops *ops, const sbx_exec_opts *o, sbx_error **err);
/* Provider access for core helpers (keepalive). */
const sbx_provider_ops *sbx__sandbox_ops(const sbx_sandbox *sb);
void *sbx__sandbox_impl(const sbx_sandbox *sb);
/* What a pooled sandbox's first command would pay, paid now (the
 * provider's version 6 `warm`; 0 when it has none). Only -ESRCH (the
 * sandbox is dead) matters to the caller: other failures leave it to the
 * first command. */
int sbx__warm(const sbx_provider_ops *ops, void *impl, const char *id);
int sbx__sandbox_warm(sbx_sandbox *sb);
sbx_runtime *sbx__sandbox_runtime(const sbx_sandbox *sb);
void sbx__sandbox_set_keepalive(sbx_sandbox *sb, int on);

/* keepalive.c */
void sbx__keepalive_add(sbx_runtime *rt, sbx_sandbox *sb, unsigned ttl_s);
void sbx__keepalive_remove(sbx_runtime *rt, sbx_sandbox *sb);
void sbx__keepalive_stop(sbx_runtime *rt);
/* Seconds between renewals of a TTL (TTL/6 or SBX_KEEPALIVE_INTERVAL_S). */
double sbx__keepalive_interval(unsigned ttl);

/* create.c: the labels given to every create (the caller's, sbx.task, sbx.launcher,
 * sbx.run_id); owned. */
char **sbx__create_labels(const sbx_sandbox_opts *o, const char *task);
/* create.c: gives a create slot back. */
void sbx__sem_release(struct sbx_sem *s);

/* pool.c: a ready sandbox matching OPTS + LABELS (ttl set to TTL), or NULL.
 * KEEPALIVE: the caller renews the TTL from now on (sbx__keepalive_add). */
sbx_sandbox *sbx__pool_take(sbx_runtime *rt, const sbx_provider_ops *ops, const sbx_sandbox_opts *opts,
			    char *const *labels, unsigned ttl, int keepalive);
/* pool_key.c: the pool key of a spec: every field but ttl_s, with LABELS (the
 * create pipeline's, order ignored) for o->labels; owned. */
char *sbx__pool_key(const char *provider, const sbx_sandbox_opts *o, char *const *labels);
/* pool.c: stops refills and destroys the idle sandboxes (runtime free). */
void sbx__pool_stop(sbx_runtime *rt);

/* Finds a provider and its per-runtime context, initialising it once. */
int sbx__runtime_provider(const sbx_provider_ops **ops_out, void **ctx_out, sbx_runtime *rt,
			  const char *name, sbx_error **err);

#endif
