/* SPDX-License-Identifier: MIT */
/*
 * Proxied connections of `sbx serve`: the table of every socket into a
 * sandbox (for the per-sandbox cap and for shutting them down when the
 * sandbox goes away), and the relay of upgraded connections (WebSocket):
 * one thread and one epoll set for all of them, so an idle WebSocket costs
 * two fds and two RELAY_BUF buffers, never a thread. libmicrohttpd's
 * connection thread ends once it hands the upgraded socket over. Each
 * direction has one bounded buffer: a side that does not read stops the
 * other from being read (back-pressure), and a half-close is passed on.
 * A relay idle for --proxy-idle-timeout is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "server_int.h"

#define RELAY_BUF (32u << 10)

struct dir {
	char data[RELAY_BUF];
	size_t off, len;
	int eof;                     /* its source was read to EOF */
	int shut;                    /* its sink got SHUT_WR */
};

struct relay;
struct side {
	struct relay *r;
	int fd;
	unsigned ev;                 /* events registered (0 = not in the set) */
};

struct relay {
	struct side c, b;            /* client (MHD's socket), sandbox */
	struct MHD_UpgradeResponseHandle *urh;
	struct dir c2b, b2c;
	double last;                 /* monotonic, last byte moved */
	int failed, closed;
	struct relay *next;          /* R->list (or R->fresh until the thread takes it) */
	struct relay *next_dead;
};

struct track {
	char sid[32];
	int bfd, cfd;                /* cfd: an upgraded client socket, else -1 */
};

struct srv_relays {
	pthread_mutex_t lk;          /* the table and the relay list */
	struct track *t;
	size_t n, cap;
	struct relay *list;
	struct relay *fresh;         /* added, not yet armed by the thread */
	struct relay *dead;          /* closed in this batch, freed after it */
	size_t nrelays;
	int ep, wake;
	pthread_t th;
	int running;
	atomic_int stop;
};

int sbx__srv_relays_track(struct server *srv, const char *sid, int fd)
{
	struct srv_relays *R = srv->relays;
	unsigned cap = srv->cfg.max_proxy_connections ? srv->cfg.max_proxy_connections : SRV_PROXY_PER_SANDBOX;
	if (!R)
		return -EAGAIN; /* no table (the relay never started): nothing is proxied */
	pthread_mutex_lock(&R->lk);
	size_t mine = 0;
	for (size_t i = 0; i < R->n; i++)
		mine += strcmp(R->t[i].sid, sid) == 0;
	int rc = 0;
	if (mine >= cap) {
		rc = -EAGAIN;
	} else {
		if (R->n == R->cap) {
			R->cap = R->cap ? R->cap * 2 : 64;
			R->t = xrealloc(R->t, R->cap * sizeof(*R->t));
		}
		struct track *t = &R->t[R->n++];
		snprintf(t->sid, sizeof(t->sid), "%s", sid);
		t->bfd = fd;
		t->cfd = -1;
	}
	pthread_mutex_unlock(&R->lk);
	return rc;
}

/* Under R->lk. */
static void untrack_locked(struct srv_relays *R, int fd)
{
	for (size_t i = 0; i < R->n; i++)
		if (R->t[i].bfd == fd) {
			R->t[i] = R->t[--R->n];
			return;
		}
}

void sbx__srv_relays_untrack(struct server *srv, int fd)
{
	if (!srv->relays)
		return;
	pthread_mutex_lock(&srv->relays->lk);
	untrack_locked(srv->relays, fd);
	pthread_mutex_unlock(&srv->relays->lk);
}

void sbx__srv_relays_sandbox_gone(struct server *srv, const char *sid)
{
	struct srv_relays *R = srv->relays;
	if (!R)
		return;
	/* Shut down, not closed: each owner closes its fds (after untracking,
	 * under this lock, so a number here is never a reused one). */
	pthread_mutex_lock(&R->lk);
	for (size_t i = 0; i < R->n; i++)
		if (strcmp(R->t[i].sid, sid) == 0) {
			shutdown(R->t[i].bfd, SHUT_RDWR);
			if (R->t[i].cfd >= 0)
				shutdown(R->t[i].cfd, SHUT_RDWR);
		}
	pthread_mutex_unlock(&R->lk);
}

size_t sbx__srv_relays_count(struct server *srv)
{
	if (!srv->relays)
		return 0;
	pthread_mutex_lock(&srv->relays->lk);
	size_t n = srv->relays->n;
	pthread_mutex_unlock(&srv->relays->lk);
	return n;
}

/* ---- the relay thread ----------------------------------------------------- */

/* On the relay thread (or after it stopped). Freed after the batch. */
static void relay_close(struct srv_relays *R, struct relay *r)
{
	if (r->closed)
		return;
	r->closed = 1;
	pthread_mutex_lock(&R->lk);
	for (struct relay **p = &R->list; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			R->nrelays--;
			break;
		}
	untrack_locked(R, r->b.fd);
	pthread_mutex_unlock(&R->lk);
	if (r->c.ev)
		epoll_ctl(R->ep, EPOLL_CTL_DEL, r->c.fd, NULL);
	if (r->b.ev)
		epoll_ctl(R->ep, EPOLL_CTL_DEL, r->b.fd, NULL);
	close(r->b.fd);
	MHD_upgrade_action(r->urh, MHD_UPGRADE_ACTION_CLOSE); /* MHD closes the client socket */
	r->next_dead = R->dead;
	R->dead = r;
}

static void free_dead(struct srv_relays *R)
{
	while (R->dead) {
		struct relay *r = R->dead;
		R->dead = r->next_dead;
		free(r);
	}
}

/* Moves what it can from `from` through d to `to`: -1 on an error. */
static int pump(int from, struct dir *d, int to, double *last)
{
	for (;;) {
		int moved = 0;
		if (!d->eof && d->len < sizeof(d->data)) {
			if (d->off > 0 && d->off == d->len)
				d->off = d->len = 0;
			if (d->len < sizeof(d->data)) {
				ssize_t n = recv(from, d->data + d->len, sizeof(d->data) - d->len, 0);
				if (n > 0) {
					d->len += (size_t)n;
					moved = 1;
				} else if (n == 0) {
					d->eof = 1;
				} else if (errno != EAGAIN && errno != EINTR) {
					return -1;
				}
			}
		}
		if (d->off < d->len) {
			ssize_t n = send(to, d->data + d->off, d->len - d->off, MSG_NOSIGNAL);
			if (n > 0) {
				d->off += (size_t)n;
				moved = 1;
				if (d->off == d->len)
					d->off = d->len = 0;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (d->eof && d->off == d->len && !d->shut) {
			shutdown(to, SHUT_WR);
			d->shut = 1;
		}
		if (moved)
			*last = sbx__now_mono();
		if (!moved)
			return 0;
	}
}

/* Registers the events each side waits for; 1 when the relay is over. */
static int rearm(struct srv_relays *R, struct relay *r)
{
	if (r->failed || (r->c2b.shut && r->b2c.shut))
		return 1;
	struct side *sides[2] = { &r->c, &r->b };
	struct dir *in[2] = { &r->c2b, &r->b2c }, *out[2] = { &r->b2c, &r->c2b };
	for (int i = 0; i < 2; i++) {
		unsigned want = 0;
		if (!in[i]->eof && in[i]->len < sizeof(in[i]->data))
			want |= EPOLLIN;
		if (out[i]->off < out[i]->len)
			want |= EPOLLOUT;
		if (want == sides[i]->ev)
			continue;
		struct epoll_event e = { .events = want | EPOLLRDHUP, .data.ptr = sides[i] };
		int op = !want ? EPOLL_CTL_DEL : sides[i]->ev ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
		if (epoll_ctl(R->ep, op, sides[i]->fd, &e) < 0 && op != EPOLL_CTL_DEL)
			return 1;
		sides[i]->ev = want;
	}
	return 0;
}

static void relay_run(struct srv_relays *R, struct relay *r)
{
	if (pump(r->c.fd, &r->c2b, r->b.fd, &r->last) < 0 || pump(r->b.fd, &r->b2c, r->c.fd, &r->last) < 0)
		r->failed = 1;
	if (rearm(R, r))
		relay_close(R, r);
}

/* Arms relays added since the last batch (only this thread arms). */
static void take_fresh(struct srv_relays *R)
{
	pthread_mutex_lock(&R->lk);
	struct relay *f = R->fresh;
	R->fresh = NULL;
	for (struct relay *r = f, *nx; r; r = nx) {
		nx = r->next;
		r->next = R->list;
		R->list = r;
		R->nrelays++;
	}
	pthread_mutex_unlock(&R->lk);
	for (struct relay *r = f, *nx; r; r = nx) {
		nx = r->next_dead; /* the fresh chain, threaded through next_dead */
		r->next_dead = NULL;
		relay_run(R, r);
	}
}

static void *relay_main(void *arg)
{
	struct server *srv = arg;
	struct srv_relays *R = srv->relays;
	struct epoll_event ev[64];
	double last_scan = sbx__now_mono();
	while (!atomic_load(&R->stop)) {
		int n = epoll_wait(R->ep, ev, 64, 1000);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == NULL) {
				uint64_t v;
				ssize_t k = read(R->wake, &v, sizeof(v));
				(void)k;
				take_fresh(R);
				continue;
			}
			struct side *s = ev[i].data.ptr;
			if (!s->r->closed) /* both sides of one relay can be in a batch */
				relay_run(R, s->r);
		}
		free_dead(R);
		double now = sbx__now_mono();
		unsigned idle = srv->cfg.proxy_idle_timeout_s;
		if (now - last_scan >= 1 && idle) {
			last_scan = now;
			struct relay *stale[64];
			size_t ns = 0;
			pthread_mutex_lock(&R->lk);
			for (struct relay *r = R->list; r && ns < 64; r = r->next)
				if (now - r->last > idle)
					stale[ns++] = r;
			pthread_mutex_unlock(&R->lk);
			for (size_t i = 0; i < ns; i++)
				relay_close(R, stale[i]);
			free_dead(R);
		}
	}
	return NULL;
}

/* Writes all of data to a non-blocking fd, waiting at most 5 s a step. */
static int send_now(int fd, const char *data, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
		if (w > 0) {
			data += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, 5000) <= 0)
				return -ETIMEDOUT;
		} else if (!(w < 0 && errno == EINTR)) {
			return -EPIPE;
		}
	}
	return 0;
}

void sbx__srv_relays_add(struct server *srv, const char *sid, int cfd, struct MHD_UpgradeResponseHandle *urh,
			 int bfd, const char *to_client, size_t nc, const char *to_sandbox, size_t ns)
{
	struct srv_relays *R = srv->relays;
	int fl = fcntl(cfd, F_GETFL);
	if (fl >= 0)
		fcntl(cfd, F_SETFL, fl | O_NONBLOCK);
	/* Messages, not a bulk stream: each relayed write goes out at once
	 * (Nagle would hold a small frame for the peer's delayed ACK). */
	int nodelay = 1;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
	setsockopt(bfd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
	/* What either side sent along with the handshake goes out first, here:
	 * the relay's buffers then start empty (and stay small). */
	int ok = send_now(cfd, to_client, nc) == 0 && send_now(bfd, to_sandbox, ns) == 0;
	pthread_mutex_lock(&R->lk);
	if (!ok || atomic_load(&R->stop) || !R->running) {
		untrack_locked(R, bfd);
		pthread_mutex_unlock(&R->lk);
		close(bfd);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	struct relay *r = xcalloc(1, sizeof(*r));
	r->c = (struct side){ .r = r, .fd = cfd };
	r->b = (struct side){ .r = r, .fd = bfd };
	r->urh = urh;
	r->last = sbx__now_mono();
	for (size_t i = 0; i < R->n; i++)
		if (R->t[i].bfd == bfd)
			R->t[i].cfd = cfd;
	r->next_dead = R->fresh;
	R->fresh = r;
	pthread_mutex_unlock(&R->lk);
	uint64_t one = 1;
	ssize_t k = write(R->wake, &one, sizeof(one));
	(void)k;
	(void)sid;
}

int sbx__srv_relays_start(struct server *srv, sbx_error **err)
{
	struct srv_relays *R = xcalloc(1, sizeof(*R));
	pthread_mutex_init(&R->lk, NULL);
	atomic_init(&R->stop, 0);
	srv->relays = R;
	R->ep = epoll_create1(EPOLL_CLOEXEC);
	R->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (R->ep < 0 || R->wake < 0)
		return sbx_error_setsys(err, -errno, errno, "serve: the relay's epoll set");
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
	if (epoll_ctl(R->ep, EPOLL_CTL_ADD, R->wake, &e) < 0)
		return sbx_error_setsys(err, -errno, errno, "serve: the relay's epoll set");
	int te = pthread_create(&R->th, NULL, relay_main, srv);
	if (te)
		return sbx_error_setsys(err, -te, te, "serve: start the relay thread");
	R->running = 1;
	return 0;
}

void sbx__srv_relays_stop(struct server *srv)
{
	struct srv_relays *R = srv->relays;
	if (!R || !R->running)
		return;
	pthread_mutex_lock(&R->lk);
	atomic_store(&R->stop, 1);
	pthread_mutex_unlock(&R->lk);
	uint64_t one = 1;
	ssize_t k = write(R->wake, &one, sizeof(one));
	(void)k;
	pthread_join(R->th, NULL);
	R->running = 0;
	take_fresh(R);
	while (R->list)
		relay_close(R, R->list);
	free_dead(R);
}

void sbx__srv_relays_free(struct server *srv)
{
	struct srv_relays *R = srv->relays;
	if (!R)
		return;
	sbx__srv_relays_stop(srv);
	if (R->ep >= 0)
		close(R->ep);
	if (R->wake >= 0)
		close(R->wake);
	pthread_mutex_destroy(&R->lk);
	free(R->t);
	free(R);
	srv->relays = NULL;
}
