/* SPDX-License-Identifier: MIT */
/*
 * Batches over task lists: a fixed pool of worker threads pulls the next task
 * index from a shared counter and runs an episode (sbx_episode_run_batch) or
 * an image resolve/build (sbx_task_bake_batch). Completion callbacks are
 * serialised under one mutex so callers can print without locking.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/connector.h>
#include <sbx/task.h>

#include "util/alloc.h"
#include "util/cleanup.h"

struct pool {
	pthread_mutex_t lock;
	size_t next, n;
	void (*work)(struct pool *p, size_t i);
	/* episode batch */
	sbx_runtime *rt;
	sbx_task *const *tasks;
	const sbx_batch_opts *bo;
	sbx_episode_result *results;
	/* bake batch */
	int force;
	sbx_bake_result *bakes;
	sbx_bake_done_fn bake_done;
	void *payload;
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		size_t i = p->next < p->n ? p->next++ : p->n;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->n)
			return NULL;
		p->work(p, i);
	}
}

static int run_pool(struct pool *p, unsigned threads, sbx_error **err)
{
	if (threads == 0)
		threads = 4;
	if (threads > p->n)
		threads = p->n ? (unsigned)p->n : 1;
	pthread_t *tids = xcalloc(threads, sizeof(pthread_t));
	unsigned started = 0;
	for (unsigned i = 0; i < threads; i++) {
		if (pthread_create(&tids[i], NULL, worker, p) != 0)
			break;
		started++;
	}
	if (started == 0) {
		free(tids);
		return sbx_error_setsys(err, -EAGAIN, EAGAIN, "start worker threads");
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	return 0;
}

static void episode_work(struct pool *p, size_t i)
{
	sbx_episode_opts o = p->bo->episode;
	_cleanup_free_ char *logs = NULL;
	if (p->bo->logs_root) {
		logs = xasprintf("%s/%s", p->bo->logs_root, p->tasks[i]->name);
		o.logs_dir = logs;
	} else {
		o.logs_dir = NULL;
	}
	sbx_error *err = NULL;
	sbx_episode_result *r = &p->results[i];
	if (sbx_episode_run(r, p->rt, p->tasks[i], &o, &err) < 0) {
		memset(r, 0, sizeof(*r));
		r->task = xstrdup(p->tasks[i]->name);
		r->status = SBX_EPISODE_AGENT_ERROR;
		r->detail = xstrdup(err ? err->msg : "episode failed");
		r->agent_exit_code = r->verifier_exit_code = -1;
	}
	sbx_error_free(err);
	if (p->bo->on_done) {
		pthread_mutex_lock(&p->lock);
		p->bo->on_done(i, r, p->bo->payload);
		pthread_mutex_unlock(&p->lock);
	}
}

int sbx_episode_run_batch(sbx_episode_result *results, sbx_runtime *rt,
			  sbx_task *const *tasks, size_t n, const sbx_batch_opts *opts,
			  sbx_error **err)
{
	if (!opts || opts->version != SBX_BATCH_OPTS_VERSION ||
	    opts->episode.version != SBX_EPISODE_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "batch opts: missing or unknown version");
	const sbx_agent_ops *agent;
	if (opts->episode.agent && sbx_agent_lookup(&agent, opts->episode.agent, err) < 0)
		return -EINVAL;
	memset(results, 0, n * sizeof(*results));
	struct pool p = { .lock = PTHREAD_MUTEX_INITIALIZER, .n = n, .work = episode_work,
			  .rt = rt, .tasks = tasks, .bo = opts, .results = results };
	int r = run_pool(&p, opts->concurrency, err);
	pthread_mutex_destroy(&p.lock);
	return r;
}

static void bake_work(struct pool *p, size_t i)
{
	sbx_error *err = NULL;
	sbx_bake_result *b = &p->bakes[i];
	b->rc = sbx_task_resolve_image(&b->image, p->rt, p->tasks[i], p->force, NULL, NULL, &err);
	if (b->rc < 0)
		b->error = xstrdup(err && err->msg ? err->msg : "failed");
	sbx_error_free(err);
	if (p->bake_done) {
		pthread_mutex_lock(&p->lock);
		p->bake_done(i, p->tasks[i], b, p->payload);
		pthread_mutex_unlock(&p->lock);
	}
}

int sbx_task_bake_batch(sbx_bake_result *results, sbx_runtime *rt, sbx_task *const *tasks,
			size_t n, unsigned jobs, int force, sbx_bake_done_fn on_done,
			void *payload, sbx_error **err)
{
	if (!rt || (n && !tasks))
		return sbx_error_set(err, -EINVAL, "bake: runtime and tasks are required");
	memset(results, 0, n * sizeof(*results));
	struct pool p = { .lock = PTHREAD_MUTEX_INITIALIZER, .n = n, .work = bake_work, .rt = rt,
			  .tasks = tasks, .force = force, .bakes = results, .bake_done = on_done,
			  .payload = payload };
	int r = run_pool(&p, jobs, err);
	pthread_mutex_destroy(&p.lock);
	return r;
}

void sbx_bake_result_free(sbx_bake_result *r)
{
	if (!r)
		return;
	free(r->error);
	r->error = NULL;
	sbx_task_image_free(&r->image);
}
