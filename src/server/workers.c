/* SPDX-License-Identifier: MIT */
/*
 * The worker pool of `sbx serve`: every handler that may block (sandbox
 * create, kill, pause, exec start, file I/O into a sandbox, builds, a
 * proxied request's connect) runs here while its connection is suspended,
 * never on libmicrohttpd's event thread. At most --workers threads (jobs
 * beyond that wait in FIFO order); a thread is started when a job finds
 * none idle and ends after WORKER_IDLE_S without work, so an idle server
 * holds WORKER_MIN of them. Stacks are WORKER_STACK, what the deepest
 * handler (libsbx calls with 64 KiB buffers on the stack) needs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "server_int.h"

#define WORKER_IDLE_S 30.0
#define WORKER_MIN 2u
#define WORKER_STACK (1u << 20)

struct job {
	void (*fn)(void *);
	void *arg;
	struct job *next;
};

struct srv_pool {
	pthread_mutex_t lk;
	pthread_cond_t cv;           /* a job was queued, or stop */
	pthread_cond_t idle_cv;      /* a thread ran out of work or ended */
	struct job *head, *tail;
	unsigned threads, idle, busy, max;
	int stop;
};

static void *worker_main(void *arg)
{
	struct srv_pool *P = arg;
	pthread_mutex_lock(&P->lk);
	for (;;) {
		while (!P->head && !P->stop) {
			P->idle++;
			pthread_cond_broadcast(&P->idle_cv);
			struct timespec ts;
			sbx__timespec_in(&ts, WORKER_IDLE_S);
			int rc = pthread_cond_timedwait(&P->cv, &P->lk, &ts);
			P->idle--;
			if (rc == ETIMEDOUT && !P->head && P->threads > WORKER_MIN)
				goto out;
		}
		if (!P->head)
			break; /* stop, and nothing left */
		struct job *j = P->head;
		P->head = j->next;
		if (!P->head)
			P->tail = NULL;
		P->busy++;
		pthread_mutex_unlock(&P->lk);
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&P->lk);
		P->busy--;
	}
out:
	P->threads--;
	pthread_cond_broadcast(&P->idle_cv);
	pthread_mutex_unlock(&P->lk);
	return NULL;
}

/* With P->lk held: one more thread. 0, or the pthread error. */
static int spawn(struct srv_pool *P)
{
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, WORKER_STACK);
	pthread_t t;
	int e = pthread_create(&t, &at, worker_main, P);
	pthread_attr_destroy(&at);
	if (e == 0)
		P->threads++;
	return e;
}

int sbx__srv_pool_start(struct server *srv, unsigned max, sbx_error **err)
{
	struct srv_pool *P = xcalloc(1, sizeof(*P));
	pthread_mutex_init(&P->lk, NULL);
	pthread_cond_init(&P->cv, NULL);
	pthread_cond_init(&P->idle_cv, NULL);
	P->max = max ? max : SRV_WORKERS;
	srv->pool = P;
	pthread_mutex_lock(&P->lk);
	int e = 0;
	for (unsigned i = 0; i < WORKER_MIN && i < P->max && !e; i++)
		e = spawn(P);
	pthread_mutex_unlock(&P->lk);
	return e ? sbx_error_setsys(err, -e, e, "start the server's worker threads") : 0;
}

void sbx__srv_pool_submit(struct server *srv, void (*fn)(void *), void *arg)
{
	struct srv_pool *P = srv->pool;
	if (!P) { /* a server without workers (the fuzz fixture): inline */
		fn(arg);
		return;
	}
	struct job *j = xcalloc(1, sizeof(*j));
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&P->lk);
	if (P->tail)
		P->tail->next = j;
	else
		P->head = j;
	P->tail = j;
	/* Jobs already waiting count against the idle threads about to take them. */
	unsigned queued = 0;
	for (struct job *q = P->head; q && queued <= P->idle; q = q->next)
		queued++;
	if (queued > P->idle && P->threads < P->max) {
		int e = spawn(P);
		if (e && P->threads == 0)
			SBX_LOGE("serve: no worker thread (%s): requests wait", strerror(e));
	}
	pthread_cond_signal(&P->cv);
	pthread_mutex_unlock(&P->lk);
}

int sbx__srv_pool_wait_idle(struct server *srv, double until)
{
	struct srv_pool *P = srv->pool;
	if (!P)
		return 1;
	pthread_mutex_lock(&P->lk);
	while ((P->head || P->busy) && sbx__now_mono() < until) {
		struct timespec ts;
		sbx__timespec_in(&ts, 0.1);
		pthread_cond_timedwait(&P->idle_cv, &P->lk, &ts);
	}
	int idle = !P->head && !P->busy;
	pthread_mutex_unlock(&P->lk);
	return idle;
}

int sbx__srv_pool_stop(struct server *srv, double until)
{
	struct srv_pool *P = srv->pool;
	if (!P)
		return 1;
	pthread_mutex_lock(&P->lk);
	P->stop = 1;
	pthread_cond_broadcast(&P->cv);
	while (P->threads && sbx__now_mono() < until) {
		struct timespec ts;
		sbx__timespec_in(&ts, 0.1);
		pthread_cond_timedwait(&P->idle_cv, &P->lk, &ts);
	}
	int done = P->threads == 0;
	pthread_mutex_unlock(&P->lk);
	return done;
}

void sbx__srv_pool_free(struct server *srv)
{
	struct srv_pool *P = srv->pool;
	if (!P)
		return;
	pthread_mutex_destroy(&P->lk);
	pthread_cond_destroy(&P->cv);
	pthread_cond_destroy(&P->idle_cv);
	free(P);
	srv->pool = NULL;
}

void sbx__srv_pool_stats(struct server *srv, unsigned *threads, unsigned *busy)
{
	struct srv_pool *P = srv->pool;
	if (!P) { /* no workers: jobs run inline (the fuzz fixture) */
		*threads = *busy = 0;
		return;
	}
	pthread_mutex_lock(&P->lk);
	*threads = P->threads;
	*busy = P->busy;
	pthread_mutex_unlock(&P->lk);
}
