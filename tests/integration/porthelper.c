/* SPDX-License-Identifier: MIT */
/*
 * A tiny server that tests/integration/ports.c uploads into a sandbox and
 * reaches through `sbx serve`'s port routing (built -static: the test image
 * has no libc of its own to rely on). `porthelper PORT` listens on
 * 0.0.0.0:PORT, one forked child per connection:
 *   GET /            "porthelper ok\n"
 *   GET /headers     the request head as received (what the proxy forwarded)
 *   GET /big?n=N     N pattern bytes (i % 251) with Content-Length
 *   GET /chunked?n=N the same, chunked, in pieces of up to 8 KiB
 *   POST /sum        reads the body (Content-Length or chunked) to its end,
 *                    answers "n=<bytes> sum=<fnv1a64 hex>"
 *   GET with Upgrade: websocket   a WebSocket echo: text/binary echoed,
 *                    ping answered with pong, close answered with close.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wsaccept.h"

static int fd_c = -1;
static char head[65536];
static size_t head_len, have; /* have: bytes in head[] (head plus body start) */

static void wr(const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd_c, c, n);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			_exit(0);
		}
		c += w;
		n -= (size_t)w;
	}
}

static void wrs(const char *s)
{
	wr(s, strlen(s));
}

/* Reads into dst: first what followed the head, then the socket. */
static size_t body_off;
static ssize_t rd(void *dst, size_t n)
{
	if (body_off < have) {
		size_t k = have - body_off < n ? have - body_off : n;
		memcpy(dst, head + body_off, k);
		body_off += k;
		return (ssize_t)k;
	}
	ssize_t r;
	do
		r = read(fd_c, dst, n);
	while (r < 0 && errno == EINTR);
	return r;
}

static int rd_full(void *dst, size_t n)
{
	char *p = dst;
	while (n > 0) {
		ssize_t r = rd(p, n);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int rd_line(char *out, size_t cap)
{
	size_t n = 0;
	for (;;) {
		char c;
		if (rd(&c, 1) != 1)
			return -1;
		if (c == '\n')
			break;
		if (c != '\r' && n + 1 < cap)
			out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

static const char *hdr(const char *name)
{
	static char v[1024];
	size_t nl = strlen(name);
	for (char *p = strstr(head, "\r\n"); p && p < head + head_len; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
			const char *s = p + 3 + nl;
			while (*s == ' ')
				s++;
			size_t k = strcspn(s, "\r");
			snprintf(v, sizeof(v), "%.*s", (int)k, s);
			return v;
		}
	}
	return NULL;
}

static unsigned long long qnum(const char *target, const char *key)
{
	const char *p = strstr(target, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* ---- handlers ---------------------------------------------------------------- */

static void ws_send(unsigned op, const unsigned char *p, size_t n)
{
	unsigned char h[10];
	size_t hn = 2;
	h[0] = (unsigned char)(0x80 | op);
	if (n < 126) {
		h[1] = (unsigned char)n;
	} else if (n < 65536) {
		h[1] = 126, h[2] = (unsigned char)(n >> 8), h[3] = (unsigned char)n, hn = 4;
	} else {
		h[1] = 127, hn = 10;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
	}
	/* one write per frame: two would wait on the peer's delayed ACK */
	static unsigned char f[(1 << 20) + 10];
	memcpy(f, h, hn);
	memcpy(f + hn, p, n);
	wr(f, hn + n);
}

static void websocket(void)
{
	const char *key = hdr("Sec-WebSocket-Key");
	if (!key) {
		wrs("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		return;
	}
	char acc[40], resp[256];
	ws_accept(key, acc);
	snprintf(resp, sizeof(resp),
		 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Accept: %s\r\nX-Porthelper: ws\r\n\r\n", acc);
	wrs(resp);
	static unsigned char p[1 << 20];
	for (;;) {
		unsigned char h[2], ext[8], mask[4];
		if (rd_full(h, 2) < 0)
			return;
		unsigned op = h[0] & 15;
		uint64_t n = h[1] & 127;
		if (n == 126) {
			if (rd_full(ext, 2) < 0)
				return;
			n = (uint64_t)ext[0] << 8 | ext[1];
		} else if (n == 127) {
			if (rd_full(ext, 8) < 0)
				return;
			n = 0;
			for (int i = 0; i < 8; i++)
				n = n << 8 | ext[i];
		}
		if (n > sizeof(p) || ((h[1] & 0x80) && rd_full(mask, 4) < 0) || rd_full(p, (size_t)n) < 0)
			return;
		if (h[1] & 0x80)
			for (uint64_t i = 0; i < n; i++)
				p[i] ^= mask[i & 3];
		if (op == 0x9)
			ws_send(0xA, p, (size_t)n);
		else if (op == 0x8) {
			ws_send(0x8, p, (size_t)n);
			return;
		} else if (op == 0x1 || op == 0x2)
			ws_send(op, p, (size_t)n);
	}
}

static void sum(void)
{
	uint64_t h = 1469598103934665603ULL, total = 0;
	static char buf[1 << 16];
	const char *te = hdr("Transfer-Encoding");
	if (te && strcasestr(te, "chunked")) {
		for (;;) {
			char line[64];
			if (rd_line(line, sizeof(line)) < 0)
				return;
			unsigned long long cn = strtoull(line, NULL, 16);
			if (cn == 0) {
				rd_line(line, sizeof(line));
				break;
			}
			while (cn > 0) {
				size_t k = cn < sizeof(buf) ? (size_t)cn : sizeof(buf);
				if (rd_full(buf, k) < 0)
					return;
				for (size_t i = 0; i < k; i++)
					h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
				total += k;
				cn -= k;
			}
			rd_line(line, sizeof(line));
		}
	} else {
		const char *cl = hdr("Content-Length");
		unsigned long long left = cl ? strtoull(cl, NULL, 10) : 0;
		while (left > 0) {
			ssize_t r = rd(buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
			if (r <= 0)
				return;
			for (ssize_t i = 0; i < r; i++)
				h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
			total += (uint64_t)r;
			left -= (unsigned long long)r;
		}
	}
	char out[128], resp[256];
	snprintf(out, sizeof(out), "n=%llu sum=%016llx", (unsigned long long)total, (unsigned long long)h);
	snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
		 strlen(out), out);
	wrs(resp);
}

static void big(unsigned long long n, int chunked)
{
	static char buf[8192];
	char h[160];
	if (chunked)
		snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	else
		snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nConnection: close\r\n\r\n", n);
	wrs(h);
	for (unsigned long long i = 0; i < n;) {
		size_t k = n - i < sizeof(buf) ? (size_t)(n - i) : sizeof(buf);
		for (size_t j = 0; j < k; j++)
			buf[j] = (char)((i + j) % 251);
		if (chunked) {
			char ch[32];
			snprintf(ch, sizeof(ch), "%zx\r\n", k);
			wrs(ch);
		}
		wr(buf, k);
		if (chunked)
			wrs("\r\n");
		i += k;
	}
	if (chunked)
		wrs("0\r\n\r\n");
}

static void serve_one(void)
{
	head_len = 0;
	while (have < sizeof(head) - 1) {
		ssize_t r = read(fd_c, head + have, sizeof(head) - 1 - have);
		if (r <= 0)
			return;
		have += (size_t)r;
		head[have] = '\0';
		char *e = strstr(head, "\r\n\r\n");
		if (e) {
			head_len = (size_t)(e + 4 - head);
			break;
		}
	}
	if (!head_len)
		return;
	body_off = head_len;
	char method[16], target[2048];
	if (sscanf(head, "%15s %2047s", method, target) != 2)
		return;
	const char *up = hdr("Upgrade");
	if (up && strcasecmp(up, "websocket") == 0) {
		websocket();
	} else if (strcmp(method, "POST") == 0 && strncmp(target, "/sum", 4) == 0) {
		sum();
	} else if (strncmp(target, "/big", 4) == 0) {
		big(qnum(target, "n="), 0);
	} else if (strncmp(target, "/chunked", 8) == 0) {
		big(qnum(target, "n="), 1);
	} else if (strncmp(target, "/headers", 8) == 0) {
		char h[128];
		snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", head_len);
		wrs(h);
		wr(head, head_len);
	} else {
		wrs("HTTP/1.1 200 OK\r\nContent-Length: 14\r\nX-Porthelper: yes\r\nConnection: close\r\n\r\nporthelper ok\n");
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigaction(SIGCHLD, &ign, NULL); /* no zombies */
	sigaction(SIGPIPE, &ign, NULL);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)strtoul(argv[1], NULL, 10)) };
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 128) < 0)
		return 1;
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			close(s);
			fd_c = c;
			serve_one();
			shutdown(c, SHUT_WR);
			char sink[256];
			while (read(c, sink, sizeof(sink)) > 0)
				;
			_exit(0);
		}
		close(c);
	}
}
