/* SPDX-License-Identifier: MIT */
/*
 * The worker pool of `sbx openenv serve`: threads are started on demand up
 * to cfg->workers and leave after OE_WORKER_IDLE_S without work, so idle
 * sockets cost none; a finished job goes on the done list and a write to
 * the eventfd wakes the event loop.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/log.h"
#include "openenv_int.h"

#define OE_WORKER_IDLE_S 30

static void *worker_main(void *arg)
{
	struct oe_server *s = arg;
	pthread_mutex_lock(&s->lk);
	for (;;) {
		int timed_out = 0;
		while (!s->todo && !s->quit && !timed_out) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += OE_WORKER_IDLE_S;
			s->idle_workers++;
			timed_out = pthread_cond_timedwait(&s->cv, &s->lk, &until) == ETIMEDOUT;
			s->idle_workers--;
		}
		if (!s->todo)
			break;
		struct oe_job *j = s->todo;
		s->n_todo--;
		s->todo = j->next;
		if (!s->todo)
			s->todo_tail = NULL;
		pthread_mutex_unlock(&s->lk);
		sbx__oe_env_run_job(s, j);
		pthread_mutex_lock(&s->lk);
		j->next = s->done;
		s->done = j;
		uint64_t one = 1;
		/* The counter only saturates after 2^64 - 1 unread wakes. */
		if (write(s->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			SBX_LOGW("openenv: eventfd write: %s", strerror(errno));
	}
	s->n_workers--;
	pthread_cond_broadcast(&s->gone);
	pthread_mutex_unlock(&s->lk);
	return NULL;
}

int sbx__oe_pool_start(struct oe_server *s, sbx_error **err)
{
	pthread_condattr_t a;
	(void)err;
	pthread_mutex_init(&s->lk, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &a);
	pthread_condattr_destroy(&a);
	pthread_cond_init(&s->gone, NULL);
	return 0;
}

void sbx__oe_submit(struct oe_server *s, struct oe_job *j)
{
	j->next = NULL;
	if (j->conn) {
		j->conn->busy = 1;
		j->conn->job_kind = j->kind;
	}
	pthread_mutex_lock(&s->lk);
	if (s->todo_tail)
		s->todo_tail->next = j;
	else
		s->todo = j;
	s->todo_tail = j;
	s->n_todo++;
	s->jobs_in_flight++;
	unsigned cap = s->cfg->workers ? s->cfg->workers : 1;
	if (s->n_todo > s->idle_workers && s->n_workers < cap) {
		/* Detached; they inherit the loop's blocked signal mask (signalfd). */
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, worker_main, s) == 0) {
			s->n_workers++;
			if (s->n_workers > s->peak_workers)
				s->peak_workers = s->n_workers;
		} else if (s->n_workers == 0) {
			SBX_LOGE("openenv: cannot start a worker thread");
		}
		pthread_attr_destroy(&a);
	}
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->lk);
}

struct oe_job *sbx__oe_pool_take_done(struct oe_server *s)
{
	pthread_mutex_lock(&s->lk);
	struct oe_job *d = s->done;
	s->done = NULL;
	for (struct oe_job *j = d; j; j = j->next)
		s->jobs_in_flight--;
	pthread_mutex_unlock(&s->lk);
	return d;
}

void sbx__oe_pool_stop(struct oe_server *s)
{
	pthread_mutex_lock(&s->lk);
	s->quit = 1;
	pthread_cond_broadcast(&s->cv);
	while (s->n_workers)
		pthread_cond_wait(&s->gone, &s->lk);
	pthread_mutex_unlock(&s->lk);
	pthread_cond_destroy(&s->gone);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->lk);
}

void sbx__oe_job_free(struct oe_job *j)
{
	if (!j)
		return;
	free(j->task_id);
	free(j->command);
	free(j->reply);
	free(j);
}
