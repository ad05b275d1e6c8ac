/* SPDX-License-Identifier: MIT */
/*
 * One connection of `sbx openenv serve`: its non-blocking reads and writes,
 * the HTTP requests on it, the WebSocket upgrade and frames after it, and its
 * end (the record outlives the socket while a job runs or an episode is left
 * to abort). Every buffer has a maximum, so a slow or hostile client costs
 * one connection's buffers and never a thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "openenv_int.h"

#define READ_CHUNK (64u << 10)
#define READS_PER_EVENT 16     /* fairness: at most 1 MiB per wakeup per socket */
#define OUT_SLACK (1u << 20)   /* output room beyond one maximal message */

static void conn_watch(struct oe_conn *c)
{
	if (c->fd < 0)
		return;
	/* A closing connection reads nothing more (level-triggered input it
	 * leaves unread would wake the loop forever); it only drains. */
	struct epoll_event ev = { .events = c->closing ? 0 : EPOLLIN | EPOLLRDHUP, .data.ptr = c };
	if (c->out.len)
		ev.events |= EPOLLOUT;
	epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

void sbx__oe_conn_flush(struct oe_conn *c)
{
	size_t off = 0;
	while (c->fd >= 0 && off < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + off, c->out.len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* The peer is gone: what is left will never be read. */
		off = c->out.len;
		c->closing = 1;
	}
	if (off) {
		memmove(c->out.data, c->out.data + off, c->out.len - off);
		c->out.len -= off;
		c->out.data[c->out.len] = '\0';
	}
	if (c->closing && !c->out.len && (c->ws || !c->busy)) {
		sbx__oe_conn_close(c);
		return;
	}
	conn_watch(c);
}

static void out_append(struct oe_conn *c, const void *p, size_t n)
{
	if (c->fd < 0)
		return;
	if (sbx__buf_append(&c->out, p, n) < 0) {
		/* A client that reads nothing while we write 17 MiB is dropped. */
		SBX_LOGW("openenv: output buffer full, dropping the connection");
		c->out.len = 0;
		c->closing = 1;
	}
}

void sbx__oe_conn_frame(struct oe_conn *c, int opcode, const void *p, size_t n)
{
	unsigned char h[OE_WS_HEADER_MAX];
	size_t hl = sbx__oe_ws_header(h, opcode, n);
	out_append(c, h, hl);
	out_append(c, p, n);
}

void sbx__oe_send_text(struct oe_conn *c, const char *text)
{
	if (c->closing)
		return;
	sbx__oe_conn_frame(c, OE_WS_TEXT, text, strlen(text));
	sbx__oe_conn_flush(c);
}

void sbx__oe_ws_close(struct oe_conn *c, int code, const char *reason)
{
	if (c->closing || c->fd < 0)
		return;
	unsigned char p[125];
	size_t rl = reason ? strnlen(reason, 120) : 0;
	p[0] = (unsigned char)(code >> 8);
	p[1] = (unsigned char)code;
	if (rl)
		memcpy(p + 2, reason, rl);
	sbx__oe_conn_frame(c, OE_WS_CLOSE, p, 2 + rl);
	c->closing = 1;
	sbx__oe_conn_flush(c);
}

void sbx__oe_send_http(struct oe_conn *c, int status, const char *body)
{
	char head[256];
	size_t bl = strlen(body);
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n",
			 status, sbx__oe_http_reason(status), bl,
			 c->closing || status >= 400 ? "Connection: close\r\n" : "");
	out_append(c, head, (size_t)n);
	out_append(c, body, bl);
	/* An error may leave an unread body behind: close rather than misparse it. */
	if (status >= 400)
		c->closing = 1;
	sbx__oe_conn_flush(c);
}

/* Unlinks C; the memory goes at the end of the loop iteration, since
 * events of this batch may still point at it. */
static void conn_free(struct oe_conn *c)
{
	struct oe_server *s = c->srv;
	c->freed = 1;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->has_session)
		s->active_sessions--;
	s->n_conns--;
	c->next = s->grave;
	s->grave = c;
}

void sbx__oe_conn_bury(struct oe_server *s)
{
	while (s->grave) {
		struct oe_conn *c = s->grave;
		s->grave = c->next;
		for (size_t i = 0; i < c->n_pending; i++)
			free(c->pending[i]);
		sbx__oe_session_clear(&c->sess);
		sbx__buf_free(&c->in);
		sbx__buf_free(&c->out);
		sbx__oe_ws_msg_free(&c->msg);
		free(c);
	}
}

/* Closes the socket now; the record lives on while a job runs or an
 * episode is left to abort. */
void sbx__oe_conn_close(struct oe_conn *c)
{
	if (c->freed)
		return;
	if (c->fd >= 0) {
		epoll_ctl(c->srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
		c->out.len = 0;
	}
	if (c->busy) {
		/* A step (or verifier) may run for many minutes: destroy its sandbox
		 * under it, so it ends now and the abort after it finds nothing. */
		if (!c->kill_sent && (c->job_kind == OE_JOB_EXEC || c->job_kind == OE_JOB_EVALUATE)) {
			struct oe_job *k = xcalloc(1, sizeof(*k));
			k->kind = OE_JOB_KILL;
			k->task_id = xstrdup(c->sess.label);
			c->kill_sent = 1;
			sbx__oe_submit(c->srv, k);
		}
		return;
	}
	if (c->sess.ep) {
		struct oe_job *j = xcalloc(1, sizeof(*j));
		j->kind = OE_JOB_ABORT;
		j->conn = c;
		sbx__oe_submit(c->srv, j);
		return;
	}
	conn_free(c);
}

void sbx__oe_conn_new(struct oe_server *s, int fd)
{
	struct oe_conn *c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->fd = fd;
	c->serial = ++s->next_serial;
	sbx__buf_init(&c->in, s->cfg->max_message + OE_HTTP_HEADERS_MAX + 16);
	sbx__buf_init(&c->out, s->cfg->max_message + OUT_SLACK);
	sbx__oe_ws_msg_init(&c->msg, s->cfg->max_message);
	c->last_rx = sbx__now_mono();
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		SBX_LOGW("openenv: epoll_ctl: %s", strerror(errno));
		sbx__oe_conn_close(c);
	}
}

static void ws_upgrade(struct oe_conn *c, const struct oe_http_req *r)
{
	char accept[OE_WS_ACCEPT_LEN + 1];
	if (strcmp(r->method, "GET") != 0 || !r->conn_upgrade || strcmp(r->ws_version, "13") != 0 ||
	    sbx__oe_ws_accept_key(accept, r->ws_key) < 0) {
		sbx__oe_send_http(c, 400, "{\"detail\":\"bad WebSocket handshake: want GET with "
				  "Connection: Upgrade, Sec-WebSocket-Version: 13 and a 16-byte "
				  "base64 Sec-WebSocket-Key\"}");
		return;
	}
	char head[256];
	/* No Sec-WebSocket-Extensions: permessage-deflate is never agreed. */
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", accept);
	out_append(c, head, (size_t)n);
	c->ws = 1;
	c->last_ping = sbx__now_mono();
	sbx__oe_conn_flush(c);
	if (c->fd >= 0)
		sbx__oe_env_open(c);
}

/* One complete request is at the start of c->in: R and its body. */
static int http_step(struct oe_conn *c)
{
	struct oe_http_req r;
	long hl = sbx__oe_http_parse(&r, c->in.data, c->in.len);
	if (hl == 0)
		return 0;
	if (hl < 0) {
		sbx__oe_send_http(c, hl == -E2BIG ? 431 : 400,
				  hl == -E2BIG ? "{\"detail\":\"request head too large (max 16 KiB)\"}"
					       : "{\"detail\":\"malformed HTTP request\"}");
		return 0;
	}
	if (r.chunked) {
		sbx__oe_send_http(c, 411, "{\"detail\":\"chunked bodies are not accepted: send Content-Length\"}");
		return 0;
	}
	size_t body = r.content_length > 0 ? (size_t)r.content_length : 0;
	if (body > c->srv->cfg->max_message) {
		sbx__oe_send_http(c, 413, "{\"detail\":\"request body over --max-message-mb\"}");
		return 0;
	}
	if (c->in.len - (size_t)hl < body)
		return 0;
	c->closing = r.conn_close;
	if (r.upgrade_ws && strcmp(r.path, "/ws") == 0) {
		c->closing = 0;
		ws_upgrade(c, &r);
	} else {
		/* Copied: the handler may answer at once, which can move c->in. */
		char *b = xmalloc(body + 1);
		memcpy(b, c->in.data + hl, body);
		b[body] = '\0';
		sbx__oe_env_http(c, &r, b, body);
		free(b);
	}
	size_t used = (size_t)hl + body;
	if (c->fd >= 0) {
		memmove(c->in.data, c->in.data + used, c->in.len - used);
		c->in.len -= used;
		c->in.data[c->in.len] = '\0';
	}
	c->partial_since = c->in.len ? sbx__now_mono() : 0;
	return c->fd >= 0 && !c->busy && !c->closing;
}

void sbx__oe_ws_fail(struct oe_conn *c, int code, const char *what)
{
	char *frame = sbx__oe_error_frame(code == OE_WS_CLOSE_TOO_BIG ? "MESSAGE_TOO_BIG" : "PROTOCOL_ERROR",
					  what, NULL);
	sbx__oe_send_text(c, frame);
	free(frame);
	sbx__oe_ws_close(c, code, what);
}

static void ws_message(struct oe_conn *c)
{
	struct oe_ws_msg *m = &c->msg;
	if (m->opcode != OE_WS_TEXT) {
		char *f = sbx__oe_error_frame("INVALID_JSON", "binary message: send JSON as a text message", NULL);
		sbx__oe_send_text(c, f);
		free(f);
	} else if (c->busy || c->n_pending) {
		if (c->n_pending == OE_PENDING_MAX || c->pending_bytes + m->data.len > c->srv->cfg->max_message) {
			char *f = sbx__oe_error_frame("EXECUTION_ERROR",
						      "too many messages queued behind the running step", NULL);
			sbx__oe_send_text(c, f);
			free(f);
		} else {
			c->pending_bytes += m->data.len;
			c->pending[c->n_pending++] = sbx__buf_steal(&m->data, NULL);
		}
	} else {
		sbx__oe_env_message(c, m->data.data, m->data.len);
	}
	sbx__oe_ws_msg_reset(m);
}

/* @return 1 when a frame was taken and more may follow. */
static int ws_step(struct oe_conn *c)
{
	struct oe_ws_frame f;
	long n = sbx__oe_ws_parse(&f, (unsigned char *)c->in.data, c->in.len, c->srv->cfg->max_message);
	if (n == 0)
		return 0;
	if (n < 0) {
		sbx__oe_ws_fail(c, (int)-n, n == -OE_WS_CLOSE_TOO_BIG ? "frame over the message limit (--max-message-mb)"
				 : "protocol error: frames must be masked, with a known opcode and no RSV bits; "
				   "control frames unfragmented and at most 125 bytes");
		return 0;
	}
	switch (f.opcode) {
	case OE_WS_PING:
		sbx__oe_conn_frame(c, OE_WS_PONG, f.payload, f.len);
		break;
	case OE_WS_PONG:
		c->ping_sent = 0;
		break;
	case OE_WS_CLOSE: {
		int code = f.len >= 2 ? (f.payload[0] << 8 | f.payload[1]) : OE_WS_CLOSE_NORMAL;
		if (f.len == 1 || (f.len >= 2 && (code < 1000 || code == 1005 || code == 1006 || code >= 5000)))
			code = OE_WS_CLOSE_PROTOCOL;
		sbx__oe_ws_close(c, code == OE_WS_CLOSE_PROTOCOL ? code : OE_WS_CLOSE_NORMAL, NULL);
		return 0;
	}
	default: {
		int rc = sbx__oe_ws_msg_add(&c->msg, &f);
		if (rc < 0) {
			sbx__oe_ws_fail(c, -rc, rc == -OE_WS_CLOSE_TOO_BIG ? "message over the limit (--max-message-mb)"
					: rc == -OE_WS_CLOSE_BAD_DATA ? "text message is not valid UTF-8"
					: "protocol error: bad fragmentation");
			return 0;
		}
		if (rc == 1) {
			memmove(c->in.data, c->in.data + n, c->in.len - (size_t)n);
			c->in.len -= (size_t)n;
			ws_message(c);
			return c->fd >= 0 && !c->closing;
		}
		break;
	}
	}
	memmove(c->in.data, c->in.data + n, c->in.len - (size_t)n);
	c->in.len -= (size_t)n;
	return c->fd >= 0 && !c->closing;
}

void sbx__oe_conn_process(struct oe_conn *c)
{
	/* Re-checks c->ws each time: a client may send frames right behind its
	 * upgrade request, in the same read. */
	while (c->in.len && c->fd >= 0 && !c->closing) {
		if (c->ws ? !ws_step(c) : (c->busy || !http_step(c)))
			break;
	}
	if (c->fd < 0)
		return;
	/* The per-message deadline runs while a frame or request is half in. */
	int partial = c->in.len || (c->ws && c->msg.opcode);
	if (!partial)
		c->partial_since = 0;
	else if (!c->partial_since)
		c->partial_since = sbx__now_mono();
	sbx__oe_conn_flush(c);
}

void sbx__oe_conn_readable(struct oe_conn *c)
{
	char buf[READ_CHUNK];
	for (int i = 0; i < READS_PER_EVENT && c->fd >= 0 && !c->closing; i++) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			sbx__oe_conn_close(c);
			return;
		}
		if (n < 0)
			break;
		c->last_rx = sbx__now_mono();
		if (sbx__buf_append(&c->in, buf, (size_t)n) < 0) {
			/* Cannot happen for a conforming parser; stay bounded anyway. */
			sbx__oe_conn_close(c);
			return;
		}
		sbx__oe_conn_process(c);
		if (n < (ssize_t)sizeof(buf))
			break;
	}
	if (c->fd >= 0 && c->closing && !c->out.len && (c->ws || !c->busy))
		sbx__oe_conn_close(c);
}

