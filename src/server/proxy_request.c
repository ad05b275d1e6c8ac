/* SPDX-License-Identifier: MIT */
/* HTTP through a user port, the request half: the head sent into the sandbox
 * (hop-by-hop headers dropped, X-Forwarded-*), then the body as it arrives
 * (proxy_http.c reads the response). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

int sbx__srv_proxy_hop_by_hop(const char *k)
{
	static const char *const drop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
					    "Transfer-Encoding", "Upgrade", "Content-Length", "Expect",
					    "Proxy-Authorization", "X-Forwarded-For", "X-Forwarded-Proto",
					    SRV_TRAFFIC_HEADER, "E2b-Sandbox-Id", "E2b-Sandbox-Port", NULL };
	for (size_t i = 0; drop[i]; i++)
		if (strcasecmp(k, drop[i]) == 0)
			return 1;
	return 0;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	(void)kind;
	if (k && !sbx__srv_proxy_hop_by_hop(k))
		sbx__buf_printf(cls, "%s: %s\r\n", k, v ? v : "");
	return MHD_YES;
}

static void feed(struct srv_req *r, const char *data, size_t n)
{
	struct srv_proxy *px = r->proxy;
	if (px->failed || n == 0)
		return;
	int rc = 0;
	if (px->chunked_in) {
		char h[24];
		int hn = snprintf(h, sizeof(h), "%zx\r\n", n);
		rc = sbx__srv_px_send_all(px, h, (size_t)hn);
		if (rc == 0)
			rc = sbx__srv_px_send_all(px, data, n);
		if (rc == 0)
			rc = sbx__srv_px_send_all(px, "\r\n", 2);
	} else {
		rc = sbx__srv_px_send_all(px, data, n);
	}
	if (rc < 0)
		px->failed = -rc;
}

static void up_free(struct srv_req *r)
{
	if (r->proxy) {
		r->proxy->r = NULL;
		sbx__srv_px_put(r->proxy);
	}
	r->proxy = NULL;
}

int sbx__srv_proxy_has_token(const char *list, const char *tok)
{
	if (!list)
		return 0;
	size_t tn = strlen(tok);
	for (const char *p = list; *p;) {
		p += strspn(p, " \t,");
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
			m--;
		if (m == tn && strncasecmp(p, tok, tn) == 0)
			return 1;
		p += n;
	}
	return 0;
}

static void client_ip(struct srv_req *r, char *out, size_t len)
{
	snprintf(out, len, "unknown");
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, out, (socklen_t)len);
}

void sbx__srv_proxy_begin(struct srv_req *r)
{
	struct server *srv = r->srv;
	struct srv_sandbox *s = r->sb;
	unsigned port = r->proxy_port;
	int fd = -1;
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx_sandbox_connect_port(&fd, s->sb, port, &e);
		sbx__srv_op_end(s);
	}
	if (rc == -ECONNREFUSED)
		sbx__srv_proxy_error(r, 502, port,
				     "The sandbox is running but port is not open: nothing listens on 127.0.0.1:%u "
				     "in sandbox %s", port, s->id);
	else if (rc == -ESRCH)
		sbx__srv_proxy_error(r, 502, port, "The sandbox was not found: sandbox %s is not running", s->id);
	else if (rc < 0)
		sbx__srv_proxy_error(r, 502, port, "port %u of sandbox %s: %s", port, s->id, e ? e->msg : "failed");
	sbx_error_free(e);
	if (rc < 0)
		return;
	if (sbx__srv_relays_track(srv, s->id, fd) < 0) {
		close(fd);
		sbx__srv_proxy_error(r, 429, port,
				     "sandbox %s has %u proxied connections open, the most --max-proxy-connections allows",
				     s->id, srv->cfg.max_proxy_connections);
		return;
	}
	struct srv_proxy *px = xcalloc(1, sizeof(*px));
	atomic_init(&px->refs, 1);
	px->r = r;
	px->srv = srv;
	px->fd = fd;
	px->port = port;
	snprintf(px->sid, sizeof(px->sid), "%s", s->id);
	px->timeout_ms = srv->cfg.proxy_idle_timeout_s ? (int)(srv->cfg.proxy_idle_timeout_s * 1000u) : -1;
	px->head_only = strcmp(r->method, "HEAD") == 0;
	r->proxy = px;
	r->upload = 1;
	r->body_cap = UINT64_MAX;
	r->feed = feed;
	r->up_free = up_free;

	const char *te = sbx__srv_header(r, "Transfer-Encoding");
	const char *cl = sbx__srv_header(r, "Content-Length");
	px->chunked_in = sbx__srv_proxy_has_token(te, "chunked");
	px->upgrade = sbx__srv_proxy_has_token(sbx__srv_header(r, "Connection"), "upgrade") && sbx__srv_header(r, "Upgrade");
	sbx_buf h;
	sbx__buf_init(&h, 256u << 10); /* MHD bounds the head it parsed well below this */
	sbx__buf_printf(&h, "%s %s HTTP/1.1\r\n", r->method, r->raw_uri ? r->raw_uri : r->url);
	if (!sbx__srv_header(r, "Host"))
		sbx__buf_printf(&h, "Host: 127.0.0.1:%u\r\n", port);
	MHD_get_connection_values(r->c, MHD_HEADER_KIND, add_header, &h);
	char ip[INET_ADDRSTRLEN + 8];
	client_ip(r, ip, sizeof(ip));
	sbx__buf_printf(&h, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: http\r\n", ip);
	if (px->upgrade)
		sbx__buf_printf(&h, "Connection: Upgrade\r\nUpgrade: %s\r\n", sbx__srv_header(r, "Upgrade"));
	else
		sbx__buf_printf(&h, "Connection: close\r\n");
	if (px->chunked_in)
		sbx__buf_printf(&h, "Transfer-Encoding: chunked\r\n");
	else if (cl)
		sbx__buf_printf(&h, "Content-Length: %s\r\n", cl);
	sbx__buf_printf(&h, "\r\n");
	rc = sbx__srv_px_send_all(px, h.data, h.len);
	sbx__buf_free(&h);
	if (rc < 0)
		px->failed = -rc;
}
