/* SPDX-License-Identifier: MIT */
/*
 * The server's notifier: one thread, one epoll set and one timer list for
 * everything that waits without a connection thread (docs/server.md,
 * "Threads"): the output pipes and status of started processes, a parked
 * stream's wake-up time, a WatchDir's inotify fd, a proxied response
 * waiting for the sandbox. Callbacks run on this thread and must be quick:
 * they resume a connection or hand work to the worker pool (workers.c),
 * never read or write a sandbox's fds themselves (a pipe read can wait
 * for the pipe's mutex, held by a splice inside the sandbox).
 *
 * Watches are one-shot (EPOLLONESHOT): a callback fires once per
 * sbx__srv_loop_arm(). Removal is synchronous: once sbx__srv_loop_unwatch()
 * or sbx__srv_timer_cancel() returns, that callback is not running and
 * will not run, so its owner may free it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "server_int.h"

#define LOOP_BATCH 64

struct srv_loop {
	int ep, wake;
	pthread_t th;
	int running;
	atomic_int stop;
	pthread_mutex_t dispatch;    /* guards iter, done */
	pthread_cond_t dcv;          /* done advanced */
	unsigned long iter, done;    /* epoll_waits begun; batches dispatched */
	struct epoll_event ev[LOOP_BATCH];
	int nev;                     /* events of the batch being dispatched */
	pthread_mutex_t tlk;         /* the timer list */
	pthread_cond_t tcv;          /* a timer's callback finished */
	struct srv_timer *timers;
};

static int on_loop(struct srv_loop *L)
{
	return L->running && pthread_equal(pthread_self(), L->th);
}

static void kick(struct srv_loop *L)
{
	uint64_t one = 1;
	(void)!write(L->wake, &one, sizeof(one));
}

int sbx__srv_loop_arm(struct server *srv, struct srv_watch *w, uint32_t events)
{
	struct srv_loop *L = srv->loop;
	struct epoll_event e = { .events = events | EPOLLONESHOT, .data.ptr = w };
	/* added is set first: the callback (on the loop thread, then a worker)
	 * may arm it again before this returns. */
	if (__atomic_exchange_n(&w->added, 1, __ATOMIC_ACQ_REL))
		return epoll_ctl(L->ep, EPOLL_CTL_MOD, w->fd, &e) < 0 ? -errno : 0;
	if (epoll_ctl(L->ep, EPOLL_CTL_ADD, w->fd, &e) == 0)
		return 0;
	if (errno == EEXIST)
		return epoll_ctl(L->ep, EPOLL_CTL_MOD, w->fd, &e) < 0 ? -errno : 0;
	int rc = -errno;
	__atomic_store_n(&w->added, 0, __ATOMIC_RELEASE);
	return rc;
}

void sbx__srv_loop_unwatch(struct server *srv, struct srv_watch *w)
{
	struct srv_loop *L = srv->loop;
	if (!w->added)
		return;
	epoll_ctl(L->ep, EPOLL_CTL_DEL, w->fd, NULL);
	w->added = 0;
	if (on_loop(L)) {
		/* From a callback: drop its event from the batch in progress. */
		for (int i = 0; i < L->nev; i++)
			if (L->ev[i].data.ptr == w)
				L->ev[i].data.ptr = NULL;
		return;
	}
	/* An epoll_wait begun before the removal may have returned it: wait
	 * until that one's batch has been dispatched. */
	pthread_mutex_lock(&L->dispatch);
	unsigned long target = L->iter;
	kick(L);
	while (L->done < target && L->running)
		pthread_cond_wait(&L->dcv, &L->dispatch);
	pthread_mutex_unlock(&L->dispatch);
}

void sbx__srv_timer_set(struct server *srv, struct srv_timer *t, double at)
{
	struct srv_loop *L = srv->loop;
	pthread_mutex_lock(&L->tlk);
	if (!t->linked) {
		t->next = L->timers;
		L->timers = t;
		t->linked = 1;
	}
	t->at = at;
	pthread_mutex_unlock(&L->tlk);
	kick(L);
}

static void unlink_timer(struct srv_loop *L, struct srv_timer *t)
{
	for (struct srv_timer **pp = &L->timers; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	t->linked = 0;
}

void sbx__srv_timer_cancel(struct server *srv, struct srv_timer *t)
{
	struct srv_loop *L = srv->loop;
	if (!L) /* a server without a notifier (the fuzz fixture) armed nothing */
		return;
	pthread_mutex_lock(&L->tlk);
	if (t->linked)
		unlink_timer(L, t);
	while (t->firing && !on_loop(L))
		pthread_cond_wait(&L->tcv, &L->tlk);
	pthread_mutex_unlock(&L->tlk);
}

/* Fires the due timers; the wait until the next one, in ms (-1 = none). */
static int run_timers(struct srv_loop *L)
{
	double now = sbx__now_mono(), next = 0;
	struct srv_timer *due = NULL;
	pthread_mutex_lock(&L->tlk);
	for (struct srv_timer *t = L->timers, *nx; t; t = nx) {
		nx = t->next;
		if (t->at <= now) {
			unlink_timer(L, t);
			t->firing = 1;
			t->next = due;
			due = t;
		} else if (!next || t->at < next) {
			next = t->at;
		}
	}
	pthread_mutex_unlock(&L->tlk);
	while (due) {
		struct srv_timer *t = due;
		due = t->next;
		t->cb(t);
		pthread_mutex_lock(&L->tlk);
		t->firing = 0;
		pthread_cond_broadcast(&L->tcv);
		pthread_mutex_unlock(&L->tlk);
	}
	if (!next)
		return -1;
	double ms = (next - sbx__now_mono()) * 1e3 + 1;
	return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

static void *loop_main(void *arg)
{
	struct srv_loop *L = arg;
	while (!atomic_load(&L->stop)) {
		int tmo = run_timers(L);
		pthread_mutex_lock(&L->dispatch);
		unsigned long me = ++L->iter;
		pthread_mutex_unlock(&L->dispatch);
		int n = epoll_wait(L->ep, L->ev, LOOP_BATCH, tmo);
		if (n < 0 && errno != EINTR)
			break;
		L->nev = n > 0 ? n : 0;
		for (int i = 0; i < L->nev; i++) {
			struct srv_watch *w = L->ev[i].data.ptr;
			if (!w) {
				uint64_t v;
				(void)!read(L->wake, &v, sizeof(v));
				continue;
			}
			w->cb(w, L->ev[i].events);
		}
		L->nev = 0;
		pthread_mutex_lock(&L->dispatch);
		L->done = me;
		pthread_cond_broadcast(&L->dcv);
		pthread_mutex_unlock(&L->dispatch);
	}
	pthread_mutex_lock(&L->dispatch);
	L->done = ~0ul;
	pthread_cond_broadcast(&L->dcv);
	pthread_mutex_unlock(&L->dispatch);
	return NULL;
}

int sbx__srv_loop_start(struct server *srv, sbx_error **err)
{
	struct srv_loop *L = xcalloc(1, sizeof(*L));
	pthread_mutex_init(&L->dispatch, NULL);
	pthread_cond_init(&L->dcv, NULL);
	pthread_mutex_init(&L->tlk, NULL);
	pthread_cond_init(&L->tcv, NULL);
	L->ep = epoll_create1(EPOLL_CLOEXEC);
	L->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
	srv->loop = L;
	if (L->ep < 0 || L->wake < 0 || epoll_ctl(L->ep, EPOLL_CTL_ADD, L->wake, &e) < 0)
		return sbx_error_setsys(err, -errno, errno, "create the server's event loop");
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	int te = pthread_create(&L->th, &at, loop_main, L);
	pthread_attr_destroy(&at);
	if (te != 0)
		return sbx_error_setsys(err, -te, te, "start the server's event loop thread");
	L->running = 1;
	return 0;
}

void sbx__srv_loop_stop(struct server *srv)
{
	struct srv_loop *L = srv->loop;
	if (!L || !L->running)
		return;
	atomic_store(&L->stop, 1);
	kick(L);
	pthread_join(L->th, NULL);
	L->running = 0;
}

void sbx__srv_loop_free(struct server *srv)
{
	struct srv_loop *L = srv->loop;
	if (!L)
		return;
	if (L->ep >= 0)
		close(L->ep);
	if (L->wake >= 0)
		close(L->wake);
	pthread_mutex_destroy(&L->dispatch);
	pthread_cond_destroy(&L->dcv);
	pthread_mutex_destroy(&L->tlk);
	pthread_cond_destroy(&L->tcv);
	free(L);
	srv->loop = NULL;
}
