/* SPDX-License-Identifier: MIT */
/*
 * Port routing of `sbx serve` (docs/server.md, "Port routing"; docs/
 * security.md): a real server on loopback, a real sandbox (network none)
 * running tests/integration/porthelper.c, reached by Host
 * `{port}-{id}.{domain}` and by E2b-Sandbox-Id/-Port headers: plain HTTP
 * with bodies far larger than any buffer both ways (the server's VmHWM
 * stays flat), a WebSocket echo through 1800 ping/pong and 1800 message
 * round trips (30 minutes of a client pinging every second), traffic
 * tokens, 502 for a port nothing listens on, the per-sandbox cap, a
 * destroyed sandbox closing its WebSocket, and a route that reaches
 * neither the host's ports nor another sandbox's.
 */

#include "server_harness.h"

TestSuite(ports, .init = suite_init, .fini = fini, .timeout = 600);

#define DOMAIN "sbx.test"
#define SRV_HDR "e2b-traffic-access-token"
#define BIG (256ull << 20)
#define RSS_SLACK (48ull << 20)
#define WS_ROUNDS 1800

static unsigned long long vm_hwm(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f);
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb << 10;
}

/* A request to port `port` of sandbox `id` by Host (or headers when
 * by_headers), with extra headers. */
static struct resp preq(const char *method, const char *id, unsigned port, int by_headers, const char *path,
			const char *extra, const void *body, size_t blen)
{
	char host[160], hid[80], hport[48];
	snprintf(host, sizeof(host), "Host: %u-%s." DOMAIN, port, id);
	snprintf(hid, sizeof(hid), "E2b-Sandbox-Id: %s", id);
	snprintf(hport, sizeof(hport), "E2b-Sandbox-Port: %u", port);
	const char *h[] = { by_headers ? hid : host, by_headers ? hport : extra, by_headers ? extra : NULL, NULL };
	return req(method, path, h, body, blen, 60000);
}

/* Uploads the helper into the sandbox and starts it on `port`. */
static void start_helper(const struct sbref *s, unsigned port)
{
	const char *bin = getenv("SBX_PORTHELPER");
	cr_assert_not_null(bin, "SBX_PORTHELPER is not set (tests/integration/meson.build)");
	FILE *f = fopen(bin, "rb");
	cr_assert_not_null(f, "%s", bin);
	static char data[4 << 20];
	size_t n = fread(data, 1, sizeof(data), f);
	fclose(f);
	cr_assert_gt(n, 0);
	struct resp r = envd(s, "POST", "/files?path=/tmp/porthelper", "application/octet-stream", data, n, NULL, 60000);
	cr_assert_eq(r.status, 200, "upload: %ld %s", r.status, r.body);
	free(r.body);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "chmod 755 /tmp/porthelper && (/tmp/porthelper %u </dev/null >/dev/null 2>&1 &)", port);
	run(s, cmd);
	for (int i = 0; i < 100; i++) {
		r = preq("GET", s->id, port, 0, "/", NULL, NULL, 0);
		long st = r.status;
		free(r.body);
		if (st == 200)
			return;
		nap_ms(50);
	}
	cr_assert_fail("the helper never answered on port %u", port);
}

static void new_sandbox(struct sbref *s, const char *body)
{
	cr_assert_eq(create_sb(s, body ? body : "{\"templateID\":\"bash\",\"timeout\":600}"), 201);
}

static void start(const char *const *extra)
{
	const char *base[8] = { "--domain", DOMAIN };
	size_t n = 2;
	for (size_t i = 0; extra && extra[i] && n < 7; i++)
		base[n++] = extra[i];
	srv_start(&S, base, 0);
}

Test(ports, http_by_host_and_by_headers)
{
	start(NULL);
	struct sbref s;
	new_sandbox(&s, NULL);
	start_helper(&s, 8000);
	struct resp r = preq("GET", s.id, 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "porthelper ok\n");
	free(r.body);
	r = preq("GET", s.id, 8000, 1, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
	cr_assert_str_eq(r.body, "porthelper ok\n");
	free(r.body);
	/* sslip.io names route too, with the server's own port in Host */
	char host[160];
	snprintf(host, sizeof(host), "Host: 8000-%s.127.0.0.1.sslip.io:%d", s.id, S.port);
	const char *h[] = { host, "X-Trace: abc", "e2b-traffic-access-token: not-for-the-sandbox", NULL };
	r = req("GET", "/headers?a=1&b=%20x", h, NULL, 0, 30000);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "GET /headers?a=1&b=%20x HTTP/1.1\r\n"), "target as sent: %s", r.body);
	cr_assert(strstr(r.body, "X-Trace: abc\r\n"), "%s", r.body);
	cr_assert(strstr(r.body, "X-Forwarded-For: 127.0.0.1\r\n"), "%s", r.body);
	cr_assert(strstr(r.body, ".127.0.0.1.sslip.io:"), "Host kept: %s", r.body);
	cr_assert_null(strstr(r.body, "not-for-the-sandbox"), "the traffic token header is not forwarded");
	free(r.body);
	/* the create and detail answers name the domain getHost() builds on */
	long st;
	json_t *d = detail(&s, &st);
	cr_assert_str_eq(json_string_value(json_object_get(d, "domain")), DOMAIN);
	cr_assert(json_is_true(json_object_get(json_object_get(d, "network"), "allowPublicTraffic")));
	json_decref(d);
	srv_stop(&S);
}

struct pat {
	unsigned long long n, bad;
	uint64_t x, sum;
};

static size_t pat_check(char *p, size_t sz, size_t n, void *u)
{
	struct pat *c = u;
	for (size_t i = 0; i < sz * n; i++, c->n++)
		c->bad += (unsigned char)p[i] != c->n % 251;
	return sz * n;
}

static size_t gen_body(char *buf, size_t size, size_t n, void *u)
{
	struct pat *g = u;
	size_t want = size * n < g->n ? size * n : (size_t)g->n;
	for (size_t i = 0; i < want; i++) {
		g->x = g->x * 6364136223846793005ull + 1442695040888963407ull;
		buf[i] = (char)(g->x >> 56);
		g->sum = (g->sum ^ (unsigned char)buf[i]) * 1099511628211ULL;
	}
	g->n -= want;
	return want;
}

/* curl with our callbacks; chunked when len is 0 and a body is given. */
static long stream(const char *method, const char *path, const char *host, struct pat *in, unsigned long long len,
		   struct pat *out, char *reply, size_t rcap)
{
	CURL *c = curl_easy_init();
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", S.port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	struct curl_slist *h = curl_slist_append(NULL, host);
	h = curl_slist_append(h, "Expect:");
	if (in && !len)
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (in) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, gen_body);
		curl_easy_setopt(c, CURLOPT_READDATA, in);
		if (len)
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
	}
	struct resp r = { 0 };
	if (out) {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, pat_check);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	} else {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	}
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 300000L);
	CURLcode cc = curl_easy_perform(c);
	long st = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	cr_assert_eq(cc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(cc));
	if (reply)
		snprintf(reply, rcap, "%s", r.body ? r.body : "");
	free(r.body);
	return st;
}

Test(ports, bodies_stream_both_ways)
{
	start(NULL);
	struct sbref s;
	new_sandbox(&s, NULL);
	start_helper(&s, 8000);
	char host[160], path[64], reply[256], want[256];
	snprintf(host, sizeof(host), "Host: 8000-%s." DOMAIN, s.id);
	unsigned long long before = vm_hwm(S.pid);
	/* downloads: Content-Length, then chunked (decoded and re-framed) */
	struct pat out = { 0 };
	snprintf(path, sizeof(path), "/big?n=%llu", BIG);
	cr_assert_eq(stream("GET", path, host, NULL, 0, &out, NULL, 0), 200);
	cr_assert_eq(out.n, BIG);
	cr_assert_eq(out.bad, 0);
	memset(&out, 0, sizeof(out));
	snprintf(path, sizeof(path), "/chunked?n=%llu", BIG / 4 + 12345);
	cr_assert_eq(stream("GET", path, host, NULL, 0, &out, NULL, 0), 200);
	cr_assert_eq(out.n, BIG / 4 + 12345);
	cr_assert_eq(out.bad, 0);
	/* uploads: with a length, then chunked */
	struct pat in = { .n = BIG, .x = 7, .sum = 1469598103934665603ULL };
	cr_assert_eq(stream("POST", "/sum", host, &in, BIG, NULL, reply, sizeof(reply)), 200);
	snprintf(want, sizeof(want), "n=%llu sum=%016llx", BIG, (unsigned long long)in.sum);
	cr_assert_str_eq(reply, want);
	in = (struct pat){ .n = BIG / 4 + 999, .x = 9, .sum = 1469598103934665603ULL };
	cr_assert_eq(stream("POST", "/sum", host, &in, 0, NULL, reply, sizeof(reply)), 200);
	snprintf(want, sizeof(want), "n=%llu sum=%016llx", BIG / 4 + 999, (unsigned long long)in.sum);
	cr_assert_str_eq(reply, want);
	unsigned long long after = vm_hwm(S.pid);
	cr_assert_lt(after - before, RSS_SLACK, "the server grew by %llu MiB moving %llu MiB",
		     (after - before) >> 20, (BIG * 5 / 2) >> 20);
	srv_stop(&S);
}

/* ---- WebSocket --------------------------------------------------------------- */

static void ws_frame(int fd, unsigned op, const char *p, size_t n)
{
	unsigned char f[256];
	cr_assert_lt(n, 126);
	f[0] = (unsigned char)(0x80 | op);
	f[1] = (unsigned char)(0x80 | n);
	unsigned char mask[4] = { 0x12, 0x34, 0x56, (unsigned char)n };
	memcpy(f + 2, mask, 4);
	for (size_t i = 0; i < n; i++)
		f[6 + i] = (unsigned char)p[i] ^ mask[i & 3];
	cr_assert_eq(send(fd, f, 6 + n, MSG_NOSIGNAL), (ssize_t)(6 + n));
}

static int read_exact(int fd, void *buf, size_t n, long max_ms)
{
	char *p = buf;
	while (n > 0) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, (int)max_ms) <= 0)
			return -1;
		ssize_t k = recv(fd, p, n, 0);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Reads one unmasked server frame: its opcode, payload in p (NUL-ended). */
static int ws_read(int fd, char *p, size_t cap)
{
	unsigned char h[2];
	if (read_exact(fd, h, 2, 30000) < 0)
		return -1;
	size_t n = h[1] & 127;
	cr_assert_lt(n, 126);
	cr_assert_lt(n, cap);
	if (read_exact(fd, p, n, 30000) < 0)
		return -1;
	p[n] = '\0';
	return h[0] & 15;
}

/* Opens a WebSocket to port 8000 of sandbox id: the fd after the 101, or
 * -status when the server answered something else. */
static int ws_open(const char *id)
{
	int fd = tcp_to_server(NULL);
	char rq[512];
	snprintf(rq, sizeof(rq),
		 "GET /ws HTTP/1.1\r\nHost: 8000-%s." DOMAIN "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", id);
	send_str(fd, rq);
	char head[4096] = "";
	size_t len = 0;
	while (!strstr(head, "\r\n\r\n") && len < sizeof(head) - 1) {
		if (read_exact(fd, head + len, 1, 30000) < 0)
			break;
		head[++len] = '\0';
	}
	int st = -1;
	sscanf(head, "HTTP/1.%*d %d", &st);
	if (st != 101) {
		close(fd);
		return -st;
	}
	/* RFC 6455's example key: the echo server's accept passes through */
	cr_assert(strstr(head, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "%s", head);
	cr_assert(strcasestr(head, "upgrade: websocket"), "%s", head);
	return fd;
}

Test(ports, websocket_30_minutes_of_pings)
{
	start(NULL);
	struct sbref s;
	new_sandbox(&s, NULL);
	start_helper(&s, 8000);
	int fd = ws_open(s.id);
	cr_assert_geq(fd, 0, "upgrade answered %d", -fd);
	char msg[64], got[256];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < WS_ROUNDS; i++) {
		snprintf(msg, sizeof(msg), "ping-%d", i);
		ws_frame(fd, 0x9, msg, strlen(msg));
		cr_assert_eq(ws_read(fd, got, sizeof(got)), 0xA, "pong %d", i);
		cr_assert_str_eq(got, msg);
		snprintf(msg, sizeof(msg), "step %d", i);
		ws_frame(fd, 0x1, msg, strlen(msg));
		cr_assert_eq(ws_read(fd, got, sizeof(got)), 0x1, "echo %d", i);
		cr_assert_str_eq(got, msg);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / (2 * WS_ROUNDS);
	cr_log_info("websocket through the route: %d round trips, %.3f ms each", 2 * WS_ROUNDS, ms);
	ws_frame(fd, 0x8, "", 0);
	cr_assert_eq(ws_read(fd, got, sizeof(got)), 0x8);
	close(fd);
	srv_stop(&S);
}

Test(ports, destroyed_sandbox_closes_its_websockets)
{
	start(NULL);
	struct sbref s;
	new_sandbox(&s, NULL);
	start_helper(&s, 8000);
	int fd = ws_open(s.id);
	cr_assert_geq(fd, 0);
	char got[64];
	ws_frame(fd, 0x1, "hi", 2);
	cr_assert_eq(ws_read(fd, got, sizeof(got)), 0x1);
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s", s.id);
	struct resp r = api("DELETE", p, NULL, 30000);
	cr_assert_eq(r.status, 204);
	free(r.body);
	char buf[256];
	cr_assert(read_until_closed(fd, buf, sizeof(buf), 30000), "the WebSocket outlived its sandbox");
	close(fd);
	/* and the route is gone with it */
	r = preq("GET", s.id, 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 502);
	cr_assert(strstr(r.body, "not found"), "%s", r.body);
	free(r.body);
	srv_stop(&S);
}

Test(ports, idle_proxied_connections_close)
{
	const char *extra[] = { "--proxy-idle-timeout", "1", NULL };
	start(extra);
	struct sbref s;
	new_sandbox(&s, NULL);
	start_helper(&s, 8000);
	int fd = ws_open(s.id);
	cr_assert_geq(fd, 0);
	char got[64];
	/* traffic keeps it open past the idle timeout... */
	for (int i = 0; i < 12; i++) {
		ws_frame(fd, 0x9, "k", 1);
		cr_assert_eq(ws_read(fd, got, sizeof(got)), 0xA, "ping %d after %d ms of activity", i, i * 250);
		nap_ms(250);
	}
	struct resp r = req("GET", "/metrics", NULL, NULL, 0, 30000);
	cr_assert(strstr(r.body, "sbx_serve_proxy_connections 1\n"), "%s", r.body);
	free(r.body);
	/* ...silence closes it */
	char buf[64];
	cr_assert(read_until_closed(fd, buf, sizeof(buf), 30000), "an idle WebSocket stayed open");
	close(fd);
	srv_stop(&S);
}

Test(ports, per_sandbox_cap)
{
	const char *extra[] = { "--max-proxy-connections", "2", NULL };
	start(extra);
	struct sbref s;
	new_sandbox(&s, NULL);
	start_helper(&s, 8000);
	int a = ws_open(s.id), b = ws_open(s.id);
	cr_assert_geq(a, 0);
	cr_assert_geq(b, 0);
	cr_assert_eq(ws_open(s.id), -429);
	struct resp r = preq("GET", s.id, 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 429, "%ld %s", r.status, r.body);
	cr_assert(strstr(r.body, "--max-proxy-connections"), "%s", r.body);
	free(r.body);
	close(a);
	/* the relay notices the close and frees the slot */
	long st = 0;
	for (int i = 0; i < 100 && st != 200; i++) {
		r = preq("GET", s.id, 8000, 0, "/", NULL, NULL, 0);
		st = r.status;
		free(r.body);
		if (st != 200)
			nap_ms(50);
	}
	cr_assert_eq(st, 200);
	close(b);
	srv_stop(&S);
}

static void token_status(const char *id, const char *hdr, long want, const char *needle)
{
	struct resp r = preq("GET", id, 8000, 0, "/", hdr, NULL, 0);
	cr_assert_eq(r.status, want, "%s: %ld %s", hdr ? hdr : "(no token)", r.status, r.body);
	if (needle)
		cr_assert(strstr(r.body, needle), "%s", r.body);
	free(r.body);
}

Test(ports, traffic_token_guards_private_sandboxes)
{
	start(NULL);
	struct sbref s;
	struct resp r = api("POST", "/sandboxes",
			    "{\"templateID\":\"bash\",\"timeout\":600,\"network\":{\"allowPublicTraffic\":false}}", 120000);
	cr_assert_eq(r.status, 201, "%s", r.body);
	json_t *j = json_loadb(r.body, r.len, 0, NULL);
	free(r.body);
	snprintf(s.id, sizeof(s.id), "%s", json_string_value(json_object_get(j, "sandboxID")));
	snprintf(s.token, sizeof(s.token), "%s", json_string_value(json_object_get(j, "envdAccessToken")));
	char tt[80];
	snprintf(tt, sizeof(tt), "%s", json_string_value(json_object_get(j, "trafficAccessToken")) ?: "");
	json_decref(j);
	cr_assert_eq(strlen(tt), 48, "trafficAccessToken: '%s'", tt);
	cr_assert_str_neq(tt, s.token);
	/* uploading and starting the helper is envd's business: no traffic token */
	const char *bin = getenv("SBX_PORTHELPER");
	cr_assert_not_null(bin);
	FILE *f = fopen(bin, "rb");
	static char data[4 << 20];
	size_t n = fread(data, 1, sizeof(data), f);
	fclose(f);
	r = envd(&s, "POST", "/files?path=/tmp/porthelper", "application/octet-stream", data, n, NULL, 60000);
	cr_assert_eq(r.status, 200);
	free(r.body);
	run(&s, "chmod 755 /tmp/porthelper && (/tmp/porthelper 8000 </dev/null >/dev/null 2>&1 &) && sleep 0.3");
	char good[128], bad[128], envdtok[128];
	snprintf(good, sizeof(good), SRV_HDR ": %s", tt);
	snprintf(bad, sizeof(bad), SRV_HDR ": %.47sx", tt);
	snprintf(envdtok, sizeof(envdtok), SRV_HDR ": %s", s.token);
	token_status(s.id, NULL, 403, "is missing");
	token_status(s.id, bad, 403, "is invalid");
	token_status(s.id, envdtok, 403, "is invalid");
	token_status(s.id, good, 200, "porthelper ok");
	long st;
	json_t *d = detail(&s, &st);
	cr_assert(json_is_false(json_object_get(json_object_get(d, "network"), "allowPublicTraffic")));
	cr_assert_null(json_object_get(d, "trafficAccessToken"), "only create hands the token out");
	json_decref(d);
	srv_stop(&S);
	/* never in the server's log */
	char log[1 << 16] = "";
	FILE *lf = fopen(S.log, "r");
	cr_assert_not_null(lf);
	size_t ln = fread(log, 1, sizeof(log) - 1, lf);
	log[ln] = '\0';
	fclose(lf);
	cr_assert_null(strstr(log, tt), "the traffic token is in the server log");
}

/* A listener on the host's loopback that must never see a connection. */
static int host_listener(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, 8), 0);
	socklen_t al = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &al);
	*port = ntohs(a.sin_port);
	return fd;
}

Test(ports, closed_ports_and_what_the_route_cannot_reach)
{
	start(NULL);
	struct sbref a, b;
	new_sandbox(&a, NULL);
	new_sandbox(&b, NULL);
	start_helper(&b, 8000);
	/* a's port 8000 is closed even though b's is open: keyed by the id */
	struct resp r = preq("GET", a.id, 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 502);
	cr_assert(strstr(r.body, "port is not open"), "%s", r.body);
	json_t *j = json_loadb(r.body, r.len, 0, NULL);
	cr_assert_eq(json_integer_value(json_object_get(j, "code")), 502);
	cr_assert_str_eq(json_string_value(json_object_get(j, "sandboxId")), a.id);
	cr_assert_str_eq(json_string_value(json_object_get(j, "port")), "8000");
	json_decref(j);
	free(r.body);
	/* the host's loopback: a listener there, and the server's own port */
	int hp = 0, hl = host_listener(&hp);
	r = preq("GET", a.id, (unsigned)hp, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 502, "host port %d: %ld %s", hp, r.status, r.body);
	free(r.body);
	r = preq("GET", a.id, (unsigned)hp, 1, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 502);
	free(r.body);
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	cr_assert_lt(accept(hl, (struct sockaddr *)&peer, &pl), 0, "the route reached the host's port %d", hp);
	close(hl);
	r = preq("GET", a.id, (unsigned)S.port, 0, "/sandboxes", NULL, NULL, 0);
	cr_assert_eq(r.status, 502, "the server's own port through the route: %ld %s", r.status, r.body);
	free(r.body);
	/* unknown ids, bad ports, hosts that are not routes */
	r = preq("GET", "nosuchsandbox0", 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 502);
	cr_assert(strstr(r.body, "not found"), "%s", r.body);
	free(r.body);
	char hid[80];
	snprintf(hid, sizeof(hid), "E2b-Sandbox-Id: %s", a.id);
	const char *bad_port[] = { hid, "E2b-Sandbox-Port: 80x", NULL };
	r = req("GET", "/", bad_port, NULL, 0, 30000);
	cr_assert_eq(r.status, 400, "%ld %s", r.status, r.body);
	free(r.body);
	char host[160];
	snprintf(host, sizeof(host), "Host: 70000-%s." DOMAIN, a.id);
	const char *h1[] = { host, NULL };
	r = req("GET", "/sandboxes", h1, NULL, 0, 30000);
	cr_assert_eq(r.status, 401, "not a route, so the control plane (no key): %ld", r.status);
	free(r.body);
	snprintf(host, sizeof(host), "Host: 8000-%s.example.com", b.id);
	const char *h2[] = { host, NULL };
	r = req("GET", "/sandboxes", h2, NULL, 0, 30000);
	cr_assert_eq(r.status, 401, "a foreign domain is not routed: %ld", r.status);
	free(r.body);
	/* a paused sandbox's ports answer 502 until it resumes */
	char pp[128];
	snprintf(pp, sizeof(pp), "/sandboxes/%s/pause", b.id);
	r = api("POST", pp, NULL, 30000);
	cr_assert_eq(r.status, 204);
	free(r.body);
	r = preq("GET", b.id, 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 502);
	cr_assert(strstr(r.body, "paused"), "%s", r.body);
	free(r.body);
	snprintf(pp, sizeof(pp), "/sandboxes/%s/resume", b.id);
	r = api("POST", pp, NULL, 30000);
	cr_assert_eq(r.status, 201);
	free(r.body);
	r = preq("GET", b.id, 8000, 0, "/", NULL, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	srv_stop(&S);
}
