/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve` at scale (docs/server.md, "Threads"): thousands of idle
 * keep-alive connections and hundreds of live command streams held by one
 * event thread, a notifier and a bounded worker pool, so the server's
 * thread count stays bounded while normal requests keep working; a client
 * that reads nothing holds up nobody else. Prints the memory an idle
 * connection costs (RSS delta / connections) for docs/performance.md.
 * SBX_SERVER_SCALE_CONNS (default 2000) and SBX_SERVER_SCALE_STREAMS
 * (default 500) set the sizes.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bash_image.h"
#include "common.h"

#define WORKERS 8
/* main, MHD's event thread, the notifier, the relay, the deadline timer,
 * libsbx's own (create pipeline, keepalive) and a margin */
#define OTHER_THREADS 16

static pid_t srv_pid;
static int srv_port;
static char srv_key[128];

static void srv_start(void)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	char state[512], bin[512], images[512], workers[32];
	snprintf(state, sizeof(state), "%s/test-state/scale%d", b, (int)getpid());
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	snprintf(images, sizeof(images), "%s/test-images", b);
	snprintf(workers, sizeof(workers), "--workers=%d", WORKERS);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	srv_pid = fork();
	if (srv_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], 1);
		close(p[0]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", state, "--image-dir",
		      images, "--default-template", "bash", "--no-access-log", "--destroy-on-exit", workers, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (!srv_port)
			srv_port = atoi(line); /* checksrc: allow (test) */
		if (strstr(line, "ready url="))
			break;
	}
	fclose(f);
	cr_assert_gt(srv_port, 0, "server did not print its port");
	char kp[600];
	snprintf(kp, sizeof(kp), "%s/server/api-key", state);
	FILE *k = fopen(kp, "r");
	cr_assert_not_null(k);
	cr_assert_not_null(fgets(srv_key, sizeof(srv_key), k));
	srv_key[strcspn(srv_key, "\n")] = '\0';
	fclose(k);
}

static void suite_setup(void)
{
	setup();
	sbx_test_bash_image(rt);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	srv_start();
}

static void suite_teardown(void)
{
	if (srv_pid > 0) {
		kill(srv_pid, SIGTERM);
		waitpid(srv_pid, NULL, 0);
	}
	teardown();
}

TestSuite(server_scale, .init = suite_setup, .fini = suite_teardown, .timeout = 900);

/* ---- the server's process ------------------------------------------------ */

static long status_field(const char *name)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)srv_pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	long v = -1;
	size_t n = strlen(name);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, n) == 0 && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

/* ---- raw HTTP ------------------------------------------------------------- */

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srv_port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s", strerror(errno));
	return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		cr_assert_gt(w, 0, "send: %s", strerror(errno));
		p += w;
		n -= (size_t)w;
	}
}

/* Reads until `needle` shows up (within 60 s): 1, or 0 at EOF / timeout. */
static int read_until(int fd, char *buf, size_t cap, size_t *len, const char *needle)
{
	for (int waited = 0; waited < 600;) {
		buf[*len] = '\0';
		if (memmem(buf, *len, needle, strlen(needle))) /* Connect frames hold NULs */
			return 1;
		if (*len + 1 >= cap)
			return 0;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) == 0) {
			waited++;
			continue;
		}
		ssize_t n = recv(fd, buf + *len, cap - 1 - *len, 0);
		if (n <= 0)
			return 0;
		*len += (size_t)n;
	}
	return 0;
}

struct resp {
	int status;
	size_t len;
	char body[65536];
};

/* Connect frames hold NUL bytes: search the whole body. */
static int has(const struct resp *r, const char *needle)
{
	return memmem(r->body, r->len, needle, strlen(needle)) != NULL;
}

/* One request on its own connection (Connection: close), chunked replies
 * decoded. */
static struct resp http(const char *method, const char *path, const char *hdrs, const char *body, size_t blen)
{
	static char raw[1 << 20];
	struct resp r = { 0 };
	int fd = dial();
	char head[2048];
	int hn = snprintf(head, sizeof(head),
			  "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n",
			  method, path, hdrs ? hdrs : "", blen);
	send_all(fd, head, (size_t)hn);
	if (blen)
		send_all(fd, body, blen);
	size_t len = 0;
	for (;;) {
		ssize_t n = recv(fd, raw + len, sizeof(raw) - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	raw[len] = '\0';
	cr_assert(sscanf(raw, "HTTP/1.%*d %d", &r.status) == 1, "no status line: %.200s", raw);
	char *b = strstr(raw, "\r\n\r\n");
	cr_assert_not_null(b);
	*b = '\0';
	b += 4;
	size_t out = 0, blen0 = len - (size_t)(b - raw);
	if (strcasestr(raw, "Transfer-Encoding: chunked")) {
		for (;;) {
			unsigned long sz = strtoul(b, &b, 16);
			b = strstr(b, "\r\n");
			if (!sz || !b)
				break;
			b += 2;
			if (out + sz < sizeof(r.body)) {
				memcpy(r.body + out, b, sz);
				out += sz;
			}
			b += sz + 2;
		}
	} else {
		out = blen0 < sizeof(r.body) - 1 ? blen0 : sizeof(r.body) - 1;
		memcpy(r.body, b, out);
	}
	r.body[out] = '\0';
	r.len = out;
	return r;
}

struct sbref {
	char id[32];
	char hdrs[256]; /* E2b-Sandbox-Id and X-Access-Token header lines */
};

static struct sbref create_sb(void)
{
	char h[256];
	snprintf(h, sizeof(h), "X-API-KEY: %s\r\nContent-Type: application/json\r\n", srv_key);
	const char *body = "{\"templateID\":\"base\",\"timeout\":600}";
	struct resp r = http("POST", "/sandboxes", h, body, strlen(body));
	cr_assert_eq(r.status, 201, "create: %d %s", r.status, r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	cr_assert_not_null(j);
	struct sbref s;
	snprintf(s.id, sizeof(s.id), "%s", json_string_value(json_object_get(j, "sandboxID")));
	snprintf(s.hdrs, sizeof(s.hdrs), "E2b-Sandbox-Id: %s\r\nX-Access-Token: %s\r\n", s.id,
		 json_string_value(json_object_get(j, "envdAccessToken")));
	json_decref(j);
	return s;
}

static void kill_sb(const struct sbref *s)
{
	char h[256], path[64];
	snprintf(h, sizeof(h), "X-API-KEY: %s\r\n", srv_key);
	snprintf(path, sizeof(path), "/sandboxes/%s", s->id);
	cr_assert_eq(http("DELETE", path, h, NULL, 0).status, 204);
}

/* A Start request for `bash -c CMD` as one Connect envelope. */
static size_t start_req(char *out, size_t cap, const struct sbref *s, const char *cmd, int keep_alive)
{
	char json[512], env[600];
	int jn = snprintf(json, sizeof(json), "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"%s\"]}}", cmd);
	env[0] = 0;
	env[1] = (char)((jn >> 24) & 0xff);
	env[2] = (char)((jn >> 16) & 0xff);
	env[3] = (char)((jn >> 8) & 0xff);
	env[4] = (char)(jn & 0xff);
	memcpy(env + 5, json, (size_t)jn);
	int hn = snprintf(out, cap,
			  "POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s"
			  "Content-Type: application/connect+json\r\nContent-Length: %d\r\n\r\n",
			  keep_alive ? "" : "Connection: close\r\n", s->hdrs, jn + 5);
	memcpy(out + hn, env, (size_t)jn + 5);
	return (size_t)hn + (size_t)jn + 5;
}

/* Runs `cmd` through a Start stream to its end: the stream's bytes. */
static struct resp run_cmd(const struct sbref *s, const char *cmd)
{
	char req[2048];
	size_t n = start_req(req, sizeof(req), s, cmd, 0);
	char *body = strstr(req, "\r\n\r\n") + 4;
	char hdrs[512];
	snprintf(hdrs, sizeof(hdrs), "%sContent-Type: application/connect+json\r\n", s->hdrs);
	return http("POST", "/process.Process/Start", hdrs, body, n - (size_t)(body - req));
}

/* The server still answers: /health, and a command through a fresh sandbox. */
static void server_works(void)
{
	cr_assert_eq(http("GET", "/health", NULL, NULL, 0).status, 204);
	struct sbref s = create_sb();
	struct resp r = run_cmd(&s, "echo c2NhbGU= | base64 -d");
	cr_assert_eq(r.status, 200);
	/* stdout "scale" arrives base64-encoded in a data event */
	cr_assert(has(&r, "c2NhbGU="), "no output in a %zu-byte stream", r.len);
	cr_assert(has(&r, "\"end\""), "no end event in a %zu-byte stream", r.len);
	kill_sb(&s);
	/* the pool is in the metrics, within --workers */
	r = http("GET", "/metrics", NULL, NULL, 0);
	const char *w = strstr(r.body, "\nsbx_serve_workers ");
	cr_assert_not_null(w, "no sbx_serve_workers in /metrics");
	cr_assert_leq(atoi(w + strlen("\nsbx_serve_workers ")), WORKERS); /* checksrc: allow (test) */
	cr_assert(strstr(r.body, "\nsbx_serve_workers_busy "));
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def; /* checksrc: allow (test) */
}

Test(server_scale, idle_keep_alive_connections)
{
	int n = env_int("SBX_SERVER_SCALE_CONNS", 2000);
	if (n <= 0)
		cr_skip_test("SBX_SERVER_SCALE_CONNS=0");
	int *fds = calloc((size_t)n, sizeof(int));
	cr_assert_not_null(fds);
	server_works(); /* warm: the pool's threads, the image */
	long rss0 = status_field("VmRSS"), thr0 = status_field("Threads");
	const char *req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	for (int i = 0; i < n; i++) {
		fds[i] = dial();
		send_all(fds[i], req, strlen(req));
	}
	/* every one answered, and kept open (HTTP/1.1 keep-alive) */
	for (int i = 0; i < n; i++) {
		char buf[512];
		size_t len = 0;
		cr_assert(read_until(fds[i], buf, sizeof(buf), &len, "\r\n\r\n"), "connection %d: no reply", i);
		cr_assert(strncmp(buf, "HTTP/1.1 204", 12) == 0, "connection %d: %.40s", i, buf);
	}
	long rss1 = status_field("VmRSS"), thr1 = status_field("Threads");
	printf("scale: %d idle keep-alive connections: server threads %ld -> %ld, VmRSS %ld -> %ld KiB "
	       "(%.1f KiB per connection)\n",
	       n, thr0, thr1, rss0, rss1, (double)(rss1 - rss0) / n);
	cr_assert_leq(thr1, WORKERS + OTHER_THREADS, "%ld threads with %d idle connections", thr1, n);
	server_works();
	cr_assert_leq(status_field("Threads"), WORKERS + OTHER_THREADS);
	/* still open: a second request on each of a few is answered */
	for (int i = 0; i < n; i += n / 10 > 0 ? n / 10 : 1) {
		char buf[512];
		size_t len = 0;
		send_all(fds[i], req, strlen(req));
		cr_assert(read_until(fds[i], buf, sizeof(buf), &len, "\r\n\r\n"), "connection %d closed", i);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
}

Test(server_scale, live_command_streams)
{
	int n = env_int("SBX_SERVER_SCALE_STREAMS", 500);
	if (n <= 0)
		cr_skip_test("SBX_SERVER_SCALE_STREAMS=0");
	enum { PER_SB = 50 };
	int nsb = (n + PER_SB - 1) / PER_SB;
	struct sbref *sbs = calloc((size_t)nsb, sizeof(*sbs));
	int *fds = calloc((size_t)n, sizeof(int));
	cr_assert(sbs && fds);
	for (int i = 0; i < nsb; i++)
		sbs[i] = create_sb();
	long thr0 = status_field("Threads");
	for (int i = 0; i < n; i++) {
		char req[2048];
		size_t len = start_req(req, sizeof(req), &sbs[i / PER_SB], "exec sleep 600", 1);
		fds[i] = dial();
		send_all(fds[i], req, len);
	}
	/* each stream is live: its start event (with the pid) came */
	for (int i = 0; i < n; i++) {
		char buf[4096];
		size_t len = 0;
		cr_assert(read_until(fds[i], buf, sizeof(buf), &len, "\"pid\""), "stream %d: no start event: %s", i,
			  buf);
	}
	long thr1 = status_field("Threads");
	printf("scale: %d live command streams (%d sandboxes): server threads %ld -> %ld, VmRSS %ld KiB\n", n, nsb,
	       thr0, thr1, status_field("VmRSS"));
	cr_assert_leq(thr1, WORKERS + OTHER_THREADS, "%ld threads with %d live streams", thr1, n);
	server_works();
	/* killing a sandbox ends its streams (unavailable), none hangs */
	for (int i = 0; i < nsb; i++)
		kill_sb(&sbs[i]);
	for (int i = 0; i < n; i++) {
		char buf[8192];
		size_t len = 0;
		cr_assert(read_until(fds[i], buf, sizeof(buf), &len, "unavailable"), "stream %d did not end", i);
		close(fds[i]);
	}
	free(fds);
	free(sbs);
}

Test(server_scale, slow_reader_blocks_nobody)
{
	struct sbref s = create_sb();
	struct resp r = run_cmd(&s, "head -c 67108864 /dev/zero > /tmp/big; yes | head -c 33554432 > /tmp/yes");
	cr_assert_eq(r.status, 200);
	/* Two clients that read nothing: a 64 MiB download, and a stream of
	 * 32 MiB of output. */
	char req[2048];
	int hn = snprintf(req, sizeof(req), "GET /files?path=/tmp/big HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", s.hdrs);
	int slow1 = dial();
	send_all(slow1, req, (size_t)hn);
	size_t len = start_req(req, sizeof(req), &s, "cat /tmp/yes", 1);
	int slow2 = dial();
	send_all(slow2, req, len);
	usleep(500 * 1000);
	/* everyone else is served meanwhile */
	for (int i = 0; i < 20; i++)
		cr_assert_eq(http("GET", "/health", NULL, NULL, 0).status, 204);
	r = run_cmd(&s, "echo c2xvdw== | base64 -d");
	cr_assert(has(&r, "c2xvdw=="), "no output in a %zu-byte stream", r.len);
	server_works();
	close(slow1);
	close(slow2);
	kill_sb(&s);
}
