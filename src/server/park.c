/* SPDX-License-Identifier: MIT */
/*
 * Replies that wait without a thread (docs/server.md, "Threads"): a content
 * reader with nothing to send parks its connection (suspends it) until a
 * producer wakes it, a time comes, or an fd the notifier (loop.c) watches
 * is ready; then libmicrohttpd calls the reader again. Server-streaming
 * Connect replies (process output, WatchDir) are built on it; so is the
 * body of a proxied response (proxy_http.c). At shutdown every parked
 * connection is woken (libmicrohttpd must not stop with one suspended).
 */
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "../util/alloc.h"
#include "server_int.h"

/* ---- parking ------------------------------------------------------------ */

static void park_resume(struct srv_park *p)
{
	pthread_mutex_lock(&p->lk);
	int was = p->parked;
	p->parked = 0;
	if (was)
		MHD_resume_connection(p->c);
	pthread_mutex_unlock(&p->lk);
}

static void park_on_timer(struct srv_timer *t)
{
	struct srv_park *p = t->ctx;
	atomic_fetch_add(&p->gen, 1);
	park_resume(p);
}

static void park_on_fd(struct srv_watch *w, uint32_t events)
{
	(void)events;
	struct srv_park *p = w->ctx;
	atomic_fetch_add(&p->gen, 1);
	park_resume(p);
}

void sbx__srv_park_init(struct srv_park *p, struct server *srv, struct MHD_Connection *c)
{
	memset(p, 0, sizeof(*p));
	p->srv = srv;
	p->c = c;
	pthread_mutex_init(&p->lk, NULL);
	p->timer.cb = park_on_timer;
	p->timer.ctx = p;
	p->watch.fd = -1;
	p->watch.cb = park_on_fd;
	p->watch.ctx = p;
	p->inited = 1;
	pthread_mutex_lock(&srv->parks_lk);
	p->pnext = srv->parks;
	if (p->pnext)
		p->pnext->pprev = p;
	srv->parks = p;
	pthread_mutex_unlock(&srv->parks_lk);
}

unsigned sbx__srv_park_gen(struct srv_park *p)
{
	return atomic_load(&p->gen);
}

int sbx__srv_park(struct srv_park *p, unsigned gen, double until, int fd, uint32_t events)
{
	/* MHD must not stop with a connection suspended: none is, once stopping */
	if (atomic_load(&p->srv->stopping))
		return 0;
	pthread_mutex_lock(&p->lk);
	if (atomic_load(&p->gen) != gen) {
		pthread_mutex_unlock(&p->lk);
		return 0;
	}
	p->parked = 1;
	MHD_suspend_connection(p->c);
	pthread_mutex_unlock(&p->lk);
	if (until > 0)
		sbx__srv_timer_set(p->srv, &p->timer, until);
	if (fd >= 0) {
		if (p->watch.fd != fd) {
			sbx__srv_loop_unwatch(p->srv, &p->watch);
			p->watch.fd = fd;
		}
		if (sbx__srv_loop_arm(p->srv, &p->watch, events) < 0)
			sbx__srv_park_wake(p); /* cannot watch it: poll it instead */
	}
	return 1;
}

void sbx__srv_park_wake(struct srv_park *p)
{
	atomic_fetch_add(&p->gen, 1);
	park_resume(p);
}

void sbx__srv_park_quiesce(struct srv_park *p)
{
	if (!p->inited || p->quiet)
		return;
	struct server *srv = p->srv;
	pthread_mutex_lock(&srv->parks_lk);
	if (p->pprev)
		p->pprev->pnext = p->pnext;
	else if (srv->parks == p)
		srv->parks = p->pnext;
	if (p->pnext)
		p->pnext->pprev = p->pprev;
	pthread_mutex_unlock(&srv->parks_lk);
	sbx__srv_timer_cancel(srv, &p->timer);
	sbx__srv_loop_unwatch(srv, &p->watch);
	p->quiet = 1;
}

void sbx__srv_park_fini(struct srv_park *p)
{
	if (!p->inited)
		return;
	sbx__srv_park_quiesce(p);
	pthread_mutex_destroy(&p->lk);
	p->inited = 0;
}

/* ---- streams -------------------------------------------------------------- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct srv_stream *s = cls;
	while (s->off >= s->out.len) {
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		s->out.len = 0;
		s->off = 0;
		if (s->out.data)
			s->out.data[0] = '\0';
		unsigned gen = sbx__srv_park_gen(&s->park);
		s->wake_at = 0;
		s->wake_fd = -1;
		int rc = s->fill(s);
		if (rc == SRV_FILL_DONE) {
			s->done = 1;
		} else if (rc == SRV_FILL_WAIT && s->out.len == 0) {
			if (atomic_load(&s->srv->stopping)) {
				s->done = 1; /* a fill that has no end frame for this */
				continue;
			}
			if (sbx__srv_park(&s->park, gen, s->wake_at, s->wake_fd, EPOLLIN))
				return 0;
		}
	}
	size_t n = s->out.len - s->off;
	if (n > max)
		n = max;
	memcpy(buf, s->out.data + s->off, n);
	s->off += n;
	sbx__srv_conn_touch(s->c, s->srv->cfg.idle_timeout_s);
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct srv_stream *s = cls;
	/* The notifier lets go first (before fini closes a watched fd, whose
	 * number could be reused at once); then fini unsubscribes the stream
	 * from its producers, so nothing wakes the parking torn down last. */
	sbx__srv_park_quiesce(&s->park);
	if (s->fini)
		s->fini(s);
	sbx__srv_park_fini(&s->park);
	sbx__buf_free(&s->out);
	free(s);
}

void sbx__srv_stream_wake(struct srv_stream *s)
{
	sbx__srv_park_wake(&s->park);
}

void sbx__srv_parks_wake_all(struct server *srv)
{
	pthread_mutex_lock(&srv->parks_lk);
	for (struct srv_park *p = srv->parks; p; p = p->pnext)
		sbx__srv_park_wake(p);
	pthread_mutex_unlock(&srv->parks_lk);
}

void sbx__srv_reply_stream(struct srv_req *r, struct srv_stream *s)
{
	s->srv = r->srv;
	s->c = r->c;
	sbx__srv_park_init(&s->park, r->srv, r->c);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read,
								       s, stream_free);
	sbx__srv_queue(r, 200, resp, "application/connect+json");
}

