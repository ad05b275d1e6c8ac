/* SPDX-License-Identifier: MIT */
/*
 * The worker pool of `sbx openenv serve`: threads are started on demand up
 * to cfg->workers, so idle sockets cost none; a finished job goes on the done
 * list and a write to the eventfd wakes the event loop.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/log.h"
#include "openenv_int.h"

static void *worker_main(void *arg)
{
	struct oe_server *s = arg;
	pthread_mutex_lock(&s->lk);
	for (;;) {
		while (!s->todo && !s->quit) {
			s->idle_workers++;
			pthread_cond_wait(&s->cv, &s->lk);
			s->idle_workers--;
		}
		if (!s->todo)
			break;
		struct oe_job *j = s->todo;
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
	pthread_mutex_unlock(&s->lk);
	return NULL;
}

int sbx__oe_pool_start(struct oe_server *s, sbx_error **err)
{
	(void)err;
	pthread_mutex_init(&s->lk, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->workers = xcalloc(s->cfg->workers ? s->cfg->workers : 1, sizeof(pthread_t));
	return 0;
}

void sbx__oe_submit(struct oe_server *s, struct oe_job *j)
{
	j->next = NULL;
	j->conn->busy = 1;
	pthread_mutex_lock(&s->lk);
	if (s->todo_tail)
		s->todo_tail->next = j;
	else
		s->todo = j;
	s->todo_tail = j;
	s->jobs_in_flight++;
	unsigned cap = s->cfg->workers ? s->cfg->workers : 1;
	if (s->idle_workers == 0 && s->n_workers < cap) {
		/* Workers inherit the loop's blocked signal mask (signalfd). */
		if (pthread_create(&s->workers[s->n_workers], NULL, worker_main, s) == 0)
			s->n_workers++;
		else if (s->n_workers == 0)
			SBX_LOGE("openenv: cannot start a worker thread");
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
	pthread_mutex_unlock(&s->lk);
	for (unsigned i = 0; i < s->n_workers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	s->workers = NULL;
	s->n_workers = 0;
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
