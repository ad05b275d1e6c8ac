/* SPDX-License-Identifier: MIT */
/*
 * HTTP through a user port of a sandbox: one connection into the sandbox's
 * own network (sbx_sandbox_connect_port) per request, made on the
 * worker like every other call of the server (http.c). The request
 * head goes out at once, the body follows as it arrives (Content-Length
 * kept, chunked re-chunked), then the response is read: its head parsed
 * (at most SRV_PROXY_BUF bytes), its body streamed to the client as the
 * sandbox sends it (Content-Length, chunked decoded and re-framed by MHD,
 * or to EOF) through one SRV_PROXY_BUF buffer: nothing is held whole. A 101
 * to an upgrade request hands both sockets to the relay thread (relay.c).
 * Every wait on the sandbox is bounded by --proxy-idle-timeout. The begin,
 * body and head run on a worker (http.c); the body's reader runs on the
 * event thread and never waits: with nothing from the sandbox it parks the
 * connection until the socket is readable (the notifier watches it).
 * This file holds the connection's I/O and the response; proxy_request.c
 * sends the request.
 */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

#define LINE_MAX_B 4096u

/* A 101's sockets on their way to the relay thread (on_upgrade). */
struct upg {
	struct server *srv;
	char sid[32];
	int bfd;
	char *pending;               /* sandbox bytes after the 101's head */
	size_t npending;
	int taken;
};

void sbx__srv_px_put(struct srv_proxy *px)
{
	if (atomic_fetch_sub(&px->refs, 1) != 1)
		return;
	if (px->upg) {
		if (!px->upg->taken) {
			sbx__srv_relays_untrack(px->srv, px->upg->bfd);
			close(px->upg->bfd);
		}
		free(px->upg->pending);
		free(px->upg);
	}
	if (px->fd >= 0) {
		sbx__srv_relays_untrack(px->srv, px->fd);
		close(px->fd);
	}
	free(px);
}

/* 1 ready, 0 timed out, -errno. */
static int wait_fd(struct srv_proxy *px, short ev)
{
	struct pollfd p = { .fd = px->fd, .events = ev };
	int n;
	do
		n = poll(&p, 1, px->timeout_ms);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int sbx__srv_px_send_all(struct srv_proxy *px, const void *data, size_t n)
{
	const char *p = data;
	while (n > 0) {
		ssize_t w = send(px->fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -errno;
		int k = wait_fd(px, POLLOUT);
		if (k <= 0)
			return k == 0 ? -ETIMEDOUT : k;
	}
	return 0;
}

/* Reads more into buf (compacted first): bytes read, 0 at EOF, -errno
 * (-ENOBUFS when buf is full). */
static ssize_t fill(struct srv_proxy *px)
{
	if (px->off > 0) {
		memmove(px->buf, px->buf + px->off, px->len - px->off);
		px->len -= px->off;
		px->off = 0;
	}
	if (px->len == sizeof(px->buf))
		return -ENOBUFS;
	for (;;) {
		ssize_t n = recv(px->fd, px->buf + px->len, sizeof(px->buf) - px->len, 0);
		if (n >= 0) {
			px->len += (size_t)n;
			return n;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || px->nonblock)
			return -errno;
		int k = wait_fd(px, POLLIN);
		if (k <= 0)
			return k == 0 ? -ETIMEDOUT : k;
	}
}

/* One line (CRLF or LF) from buf, reading as needed: its start and length
 * without the line end; 0, or -EPROTO past LINE_MAX_B, EOF or an error. */
static int get_line(struct srv_proxy *px, const char **start, size_t *n)
{
	for (;;) {
		char *nl = memchr(px->buf + px->off, '\n', px->len - px->off);
		if (nl) {
			*start = px->buf + px->off;
			*n = (size_t)(nl - *start);
			if (*n > 0 && (*start)[*n - 1] == '\r')
				(*n)--;
			px->off = (size_t)(nl + 1 - px->buf);
			return 0;
		}
		if (px->len - px->off > LINE_MAX_B)
			return -EPROTO;
		ssize_t k = fill(px);
		if (k == -EAGAIN)
			return -EAGAIN;
		if (k <= 0)
			return -EPROTO;
	}
}

/* ---- response ------------------------------------------------------------ */

static ssize_t take(struct srv_proxy *px, char *out, size_t max)
{
	size_t n = px->len - px->off;
	if (n > max)
		n = max;
	memcpy(out, px->buf + px->off, n);
	px->off += n;
	return (ssize_t)n;
}

/* Decoded body bytes into out (at most max): > 0, 0 when nothing has
 * arrived yet (-EAGAIN from the socket), or an MHD end code. */
static ssize_t next_body(struct srv_proxy *px, char *out, size_t max)
{
	if (px->mode == BODY_NONE)
		return MHD_CONTENT_READER_END_OF_STREAM;
	for (;;) {
		if (px->mode == BODY_LENGTH || px->mode == BODY_EOF ||
		    (px->mode == BODY_CHUNKED && px->ch == CH_DATA)) {
			if (px->mode != BODY_EOF && px->left == 0) {
				if (px->mode == BODY_LENGTH)
					return MHD_CONTENT_READER_END_OF_STREAM;
				px->ch = CH_CRLF;
				continue;
			}
			if (px->off == px->len) {
				ssize_t n = fill(px);
				if (n == -EAGAIN)
					return 0;
				if (n == 0 && px->mode == BODY_EOF)
					return MHD_CONTENT_READER_END_OF_STREAM;
				if (n <= 0)
					return MHD_CONTENT_READER_END_WITH_ERROR; /* cut short: the client sees it */
			}
			if (px->mode != BODY_EOF && max > px->left)
				max = (size_t)px->left;
			ssize_t n = take(px, out, max);
			if (px->mode != BODY_EOF)
				px->left -= (uint64_t)n;
			return n;
		}
		const char *ln;
		size_t lnn;
		if (px->ch == CH_DONE)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int lr = get_line(px, &ln, &lnn);
		if (lr == -EAGAIN)
			return 0;
		if (lr < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (px->ch == CH_CRLF) {
			if (lnn != 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			px->ch = CH_SIZE;
		} else if (px->ch == CH_SIZE) {
			char tmp[20];
			size_t k = 0;
			while (k < lnn && k < sizeof(tmp) - 1 && ln[k] != ';' && ln[k] != ' ' && ln[k] != '\t') {
				tmp[k] = ln[k];
				k++;
			}
			tmp[k] = '\0';
			char *end = NULL;
			errno = 0;
			unsigned long long v = strtoull(tmp, &end, 16);
			if (k == 0 || *end || errno)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			px->left = v;
			px->ch = v ? CH_DATA : CH_TRAILER;
		} else if (lnn == 0) { /* CH_TRAILER: trailers are dropped */
			px->ch = CH_DONE;
		}
	}
}

static ssize_t body_read(void *cls, uint64_t pos, char *out, size_t max)
{
	(void)pos;
	struct srv_proxy *px = cls;
	for (;;) {
		unsigned gen = sbx__srv_park_gen(&px->park);
		ssize_t n = next_body(px, out, max);
		if (n > 0) {
			px->park_until = 0;
			if (px->r)
				sbx__srv_touch(px->r);
		}
		if (n != 0)
			return n;
		double now = sbx__now_mono();
		/* cut short (the client sees it): stopping, or silent that long */
		if (atomic_load(&px->srv->stopping) || (px->park_until && now >= px->park_until))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		/* Nothing from the sandbox yet: parked until its socket is
		 * readable or the idle timeout. */
		double until = px->park_until ? px->park_until : px->timeout_ms >= 0 ? now + px->timeout_ms / 1e3 : 0;
		if (sbx__srv_park(&px->park, gen, until, px->fd, EPOLLIN | EPOLLRDHUP)) {
			px->park_until = until;
			return 0;
		}
	}
}

static void body_free(void *cls)
{
	struct srv_proxy *px = cls;
	sbx__srv_park_fini(&px->park);
	sbx__srv_px_put(px);
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
		       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)c;
	(void)con_cls;
	struct upg *u = cls;
	u->taken = 1;
	sbx__srv_relays_add(u->srv, u->sid, sock, urh, u->bfd, u->pending, u->npending, extra_in, extra_in_size);
}

struct head {
	int status;
	int chunked;
	int has_length;
	uint64_t length;
};

/* Where the head starting at p ends (after its empty line), or NULL. */
static const char *head_end(const char *p, size_t n)
{
	const char *end = p + n;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return NULL;
		if (nl == p || (nl == p + 1 && *p == '\r'))
			return nl + 1;
		p = nl + 1;
	}
	return NULL;
}

/* Reads a whole response head into buf (skipping 1xx other than 101):
 * status and framing in *hd, its header lines at buf[*hs, *he). 0, or
 * -ETIMEDOUT, -E2BIG (past SRV_PROXY_BUF), -ECONNRESET (nothing at all),
 * -EPROTO. */
static int read_head(struct srv_proxy *px, struct head *hd, size_t *hs, size_t *he)
{
	for (;;) {
		while (!head_end(px->buf + px->off, px->len - px->off)) {
			ssize_t n = fill(px);
			if (n == -ENOBUFS)
				return -E2BIG;
			if (n == 0)
				return px->len == px->off ? -ECONNRESET : -EPROTO;
			if (n < 0)
				return (int)n;
		}
		const char *ln;
		size_t n;
		get_line(px, &ln, &n); /* the head is whole: no reads from here */
		int st = 0;
		if (n < 12 || strncmp(ln, "HTTP/1.", 7) != 0 || sscanf(ln + 8, " %3d", &st) != 1 || st < 100 || st > 599)
			return -EPROTO;
		hd->status = st;
		hd->chunked = hd->has_length = 0;
		*hs = px->off;
		while (get_line(px, &ln, &n) == 0 && n > 0) {
			if (n > 18 && strncasecmp(ln, "Transfer-Encoding:", 18) == 0) {
				char v[256];
				snprintf(v, sizeof(v), "%.*s", (int)(n - 18), ln + 18);
				hd->chunked = sbx__srv_proxy_has_token(v, "chunked");
			} else if (n > 15 && strncasecmp(ln, "Content-Length:", 15) == 0) {
				char v[32];
				snprintf(v, sizeof(v), "%.*s", (int)(n - 15), ln + 15);
				if (sbx__parse_u64(&hd->length, sbx__str_trim(v)) < 0)
					return -EPROTO;
				hd->has_length = 1;
			}
		}
		*he = px->off;
		if (st >= 200 || st == 101)
			return 0;
		/* 100 Continue and friends: the client already had MHD's. */
	}
}

/* Copies the end-to-end headers of buf[hs..he) onto resp. */
static void copy_headers(struct srv_proxy *px, struct MHD_Response *resp, size_t hs, size_t he, int upgrade)
{
	size_t p = hs;
	while (p < he) {
		char *nl = memchr(px->buf + p, '\n', he - p);
		size_t n = (size_t)((nl ? nl : px->buf + he) - (px->buf + p));
		char line[LINE_MAX_B + 1];
		snprintf(line, sizeof(line), "%.*s", (int)n, px->buf + p);
		p += n + 1;
		line[strcspn(line, "\r")] = '\0';
		char *colon = strchr(line, ':');
		if (!colon || colon == line)
			continue;
		*colon = '\0';
		char *v = colon + 1;
		v += strspn(v, " \t");
		if (strcasecmp(line, "Date") == 0 || (sbx__srv_proxy_hop_by_hop(line) && !(upgrade && strcasecmp(line, "Upgrade") == 0)))
			continue;
		MHD_add_response_header(resp, line, v);
	}
}

void sbx__srv_proxy_finish(struct srv_req *r)
{
	struct srv_proxy *px = r->proxy;
	if (!px) {
		sbx__srv_proxy_error(r, 502, r->proxy_port, "no connection into sandbox %s", r->sandbox_id);
		return;
	}
	if (px->chunked_in && !px->failed) {
		int rc = sbx__srv_px_send_all(px, "0\r\n\r\n", 5);
		if (rc < 0)
			px->failed = -rc;
	}
	struct head hd = { 0 };
	size_t hs = 0, he = 0;
	/* A sandbox that answered early (and stopped reading) still gets its
	 * answer relayed; one that said nothing is a 502. */
	int rc = read_head(px, &hd, &hs, &he);
	if (rc == -ETIMEDOUT) {
		sbx__srv_proxy_error(r, 504, px->port, "port %u of sandbox %s sent no response within %u s", px->port,
				     px->sid, r->srv->cfg.proxy_idle_timeout_s);
		return;
	}
	if (rc < 0) {
		sbx__srv_proxy_error(r, 502, px->port, "port %u of sandbox %s %s", px->port, px->sid,
				     px->failed ? "stopped reading the request" :
				     rc == -E2BIG ? "sent a response head larger than 64 KiB" :
				     rc == -EPROTO ? "sent no valid HTTP/1.x response" : "closed the connection without a response");
		return;
	}
	if (hd.status == 101) {
		if (!px->upgrade) {
			sbx__srv_proxy_error(r, 502, px->port, "port %u of sandbox %s switched protocols unasked", px->port,
					     px->sid);
			return;
		}
		struct upg *u = xcalloc(1, sizeof(*u));
		u->srv = r->srv;
		snprintf(u->sid, sizeof(u->sid), "%s", px->sid);
		u->bfd = px->fd;
		u->npending = px->len - px->off;
		u->pending = xmalloc(u->npending + 1);
		memcpy(u->pending, px->buf + px->off, u->npending);
		px->fd = -1;
		px->upg = u;
		struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, u);
		if (!resp) { /* a libmicrohttpd without upgrade support */
			sbx__srv_proxy_error(r, 502, px->port, "this server cannot relay protocol upgrades");
			return;
		}
		copy_headers(px, resp, hs, he, 1);
		sbx__srv_queue(r, 101, resp, NULL);
		return;
	}
	int no_body = px->head_only || hd.status == 204 || hd.status == 304;
	px->mode = no_body ? BODY_NONE : hd.chunked ? BODY_CHUNKED : hd.has_length ? BODY_LENGTH : BODY_EOF;
	px->left = hd.length;
	px->ch = CH_SIZE;
	uint64_t size = px->mode == BODY_LENGTH ? hd.length : px->mode == BODY_NONE ? (hd.has_length ? hd.length : 0)
										     : MHD_SIZE_UNKNOWN;
	atomic_fetch_add(&px->refs, 1);
	px->nonblock = 1;
	sbx__srv_park_init(&px->park, r->srv, r->c);
	struct MHD_Response *resp = MHD_create_response_from_callback(size, 64 * 1024, body_read, px, body_free);
	if (!resp) {
		sbx__srv_park_fini(&px->park);
		sbx__srv_px_put(px);
		sbx__srv_proxy_error(r, 500, px->port, "out of memory relaying port %u", px->port);
		return;
	}
	copy_headers(px, resp, hs, he, 0);
	sbx__srv_queue(r, hd.status, resp, NULL);
}
