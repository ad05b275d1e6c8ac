/* SPDX-License-Identifier: MIT */
/*
 * The event loop of `sbx openenv serve`: one epoll over the listening socket,
 * every connection, the pool's eventfd, a signalfd (SIGINT, SIGTERM) and a
 * one-second timerfd that sends pings and enforces the deadlines. Sockets are
 * non-blocking and every buffer has a maximum, so a slow or hostile client
 * costs one connection's buffers and never a thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "openenv_int.h"

static void do_accept(struct oe_server *s)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				SBX_LOGW("openenv: accept: %s", strerror(errno));
			return;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		sbx__oe_conn_new(s, fd);
	}
}

static void on_job_done(struct oe_server *s)
{
	uint64_t v;
	if (read(s->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		SBX_LOGW("openenv: eventfd read: %s", strerror(errno));
	struct oe_job *j = sbx__oe_pool_take_done(s);
	while (j) {
		struct oe_job *next = j->next;
		struct oe_conn *c = j->conn;
		if (!c) {
			sbx__oe_job_free(j);
			j = next;
			continue;
		}
		c->busy = 0;
		if (c->fd >= 0 && j->reply) {
			if (c->ws)
				sbx__oe_send_text(c, j->reply);
			else
				sbx__oe_send_http(c, j->http_status ? j->http_status : 200, j->reply);
		}
		if (c->fd >= 0 && j->kind == OE_JOB_CLOSE)
			sbx__oe_ws_close(c, OE_WS_CLOSE_NORMAL, NULL);
		sbx__oe_job_free(j);
		if (c->fd < 0) {
			sbx__oe_conn_close(c);
		} else if (c->ws) {
			while (!c->busy && c->n_pending && c->fd >= 0 && !c->closing) {
				char *m = c->pending[0];
				c->n_pending--;
				memmove(c->pending, c->pending + 1, c->n_pending * sizeof(char *));
				size_t ml = strlen(m);
				c->pending_bytes -= ml;
				sbx__oe_env_message(c, m, ml);
				free(m);
			}
			if (c->fd >= 0)
				sbx__oe_conn_process(c);
		} else {
			sbx__oe_conn_process(c);
		}
		j = next;
	}
}

static void on_tick(struct oe_server *s)
{
	uint64_t v;
	if (read(s->tfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	const struct oe_config *cfg = s->cfg;
	double now = sbx__now_mono();
	struct oe_conn *next;
	for (struct oe_conn *c = s->conns; c; c = next) {
		next = c->next;
		if (c->fd < 0)
			continue;
		if (c->closing) {
			/* A peer that never reads our last bytes does not keep its slot. */
			if (!c->closing_since)
				c->closing_since = now;
			else if (now - c->closing_since > OE_CLOSING_S && (c->ws || !c->busy))
				sbx__oe_conn_close(c);
			continue;
		}
		if (c->partial_since && cfg->message_timeout_s > 0 &&
		    now - c->partial_since > cfg->message_timeout_s) {
			if (c->ws) {
				sbx__oe_ws_fail(c, OE_WS_CLOSE_POLICY, "message not received within the per-message deadline");
			} else {
				sbx__oe_send_http(c, 408, "{\"detail\":\"request not received in time\"}");
			}
			continue;
		}
		if (!c->ws) {
			if (!c->busy && now - c->last_rx > OE_IDLE_HTTP_S)
				sbx__oe_conn_close(c);
			continue;
		}
		/* A peer that answers neither our pings nor anything else is gone:
		 * drop it so its sandbox does not outlive it. */
		if (c->ping_sent && cfg->ping_timeout_s > 0 && now - c->ping_sent > cfg->ping_timeout_s &&
		    now - c->last_rx > cfg->ping_timeout_s) {
			SBX_LOGI("openenv: no pong for %.0f s, dropping the session", cfg->ping_timeout_s);
			sbx__oe_conn_close(c);
			continue;
		}
		if (cfg->ping_interval_s > 0 && now - c->last_ping >= cfg->ping_interval_s && !c->closing) {
			sbx__oe_conn_frame(c, OE_WS_PING, "sbx", 3);
			c->last_ping = now;
			if (!c->ping_sent)
				c->ping_sent = now;
			sbx__oe_conn_flush(c);
		}
	}
}

static int listen_on(struct oe_server *s)
{
	const struct oe_config *cfg = s->cfg;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port) };
	if (inet_pton(AF_INET, cfg->listen_addr, &a.sin_addr) != 1) {
		fprintf(stderr, "sbx openenv serve: --listen wants an IPv4 address, got '%s'\n", cfg->listen_addr);
		return -EINVAL;
	}
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (s->lfd < 0)
		return -errno;
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 1024) < 0) {
		int e = errno;
		fprintf(stderr, "sbx openenv serve: cannot listen on %s:%u: %s\n", cfg->listen_addr, cfg->port,
			strerror(e));
		return -e;
	}
	socklen_t al = sizeof(a);
	getsockname(s->lfd, (struct sockaddr *)&a, &al);
	if (cfg->print_port) {
		printf("%u\n", ntohs(a.sin_port));
		fflush(stdout);
	}
	fprintf(stderr, "sbx openenv serve: listening on %s:%u (tasks %s, max %u sessions)\n",
		cfg->listen_addr, ntohs(a.sin_port), cfg->tasks_dir, cfg->max_sessions);
	return 0;
}

static void add_fd(struct oe_server *s, int fd, int *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void begin_stop(struct oe_server *s)
{
	s->stopping = 1;
	SBX_LOGI("openenv: stopping: closing every session and destroying its sandbox");
	fprintf(stderr, "sbx openenv serve: stopping (%u sessions)\n", s->active_sessions);
	if (s->lfd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
		close(s->lfd);
		s->lfd = -1;
	}
	struct oe_conn *next;
	for (struct oe_conn *c = s->conns; c; c = next) {
		next = c->next;
		if (c->ws && c->fd >= 0 && !c->closing) {
			sbx__oe_ws_close(c, OE_WS_CLOSE_GOING_AWAY, "server stopping");
			if (c->fd < 0)
				continue;
		}
		sbx__oe_conn_close(c);
	}
}

int sbx__oe_serve(const struct oe_config *cfg, sbx_runtime *rt)
{
	struct oe_server s = { .cfg = cfg, .rt = rt, .epfd = -1, .lfd = -1, .evfd = -1, .sigfd = -1, .tfd = -1 };
	sigset_t mask, old;
	int rc;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	if ((rc = listen_on(&s)) < 0)
		goto out;
	s.epfd = epoll_create1(EPOLL_CLOEXEC);
	s.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sigdelset(&mask, SIGPIPE);
	s.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	s.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (s.epfd < 0 || s.evfd < 0 || s.sigfd < 0 || s.tfd < 0) {
		rc = -errno;
		fprintf(stderr, "sbx openenv serve: cannot set up the event loop: %s\n", strerror(errno));
		goto out;
	}
	struct itimerspec it = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
	timerfd_settime(s.tfd, 0, &it, NULL);
	add_fd(&s, s.lfd, &s.lfd);
	add_fd(&s, s.evfd, &s.evfd);
	add_fd(&s, s.sigfd, &s.sigfd);
	add_fd(&s, s.tfd, &s.tfd);
	sbx__oe_pool_start(&s, NULL);

	struct epoll_event evs[64];
	while (!s.stopping || s.conns) {
		int n = epoll_wait(s.epfd, evs, 64, -1);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &s.lfd) {
				do_accept(&s);
			} else if (p == &s.evfd) {
				on_job_done(&s);
			} else if (p == &s.tfd) {
				on_tick(&s);
			} else if (p == &s.sigfd) {
				struct signalfd_siginfo si;
				while (read(s.sigfd, &si, sizeof(si)) == sizeof(si))
					;
				if (!s.stopping)
					begin_stop(&s);
			} else {
				struct oe_conn *c = p;
				if (c->fd < 0)
					continue;
				if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
					sbx__oe_conn_close(c);
					continue;
				}
				if (evs[i].events & EPOLLOUT)
					sbx__oe_conn_flush(c);
				if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)))
					sbx__oe_conn_readable(c);
			}
		}
		sbx__oe_conn_bury(&s);
	}
	sbx__oe_conn_bury(&s);
	sbx__oe_pool_stop(&s);
	fprintf(stderr, "sbx openenv serve: stopped (at most %u worker threads were busy at once)\n",
		s.peak_workers);
	rc = 0;
out:
	if (s.lfd >= 0)
		close(s.lfd);
	if (s.epfd >= 0)
		close(s.epfd);
	if (s.evfd >= 0)
		close(s.evfd);
	if (s.sigfd >= 0)
		close(s.sigfd);
	if (s.tfd >= 0)
		close(s.tfd);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
