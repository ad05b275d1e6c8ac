/* SPDX-License-Identifier: MIT */
/*
 * Harness of tests/security/server.c: a real `sbx serve` per test on a
 * loopback port with a private state dir and its stderr in a file, libcurl
 * requests, raw sockets (for heads without bodies, idle and capped
 * connections), and commands run through envd's Start stream.
 */
#ifndef SBX_TEST_SECURITY_SERVER_HARNESS_H
#define SBX_TEST_SECURITY_SERVER_HARNESS_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../integration/common.h"
#include "bash_image.h"

/* Each test file uses its own subset of these helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"

struct srv {
	pid_t pid;
	int port;
	char state[512];
	char key[128];
	char log[600];
};

static struct srv S;

static void suite_init(void)
{
	setup();
	sbx_test_bash_image(rt);
	curl_global_init(CURL_GLOBAL_ALL);
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Starts `sbx serve` with `extra` options (NULL-terminated); stderr goes to s->log. */
static void srv_start(struct srv *s, const char *const *extra, int access_log)
{
	static int seq;
	const char *b = getenv("SBX_BUILD_ROOT");
	const char *bin_env = getenv("SBX_SERVE_BIN");
	char bin[512], images[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	snprintf(images, sizeof(images), "%s/test-images", b);
	snprintf(s->state, sizeof(s->state), "%s/test-state/secsrv%d-%d", b, (int)getpid(), seq++);
	snprintf(s->log, sizeof(s->log), "%s.log", s->state);
	const char *argv[32] = { "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", s->state,
				 "--image-dir", images, "--default-template", "bash", "--destroy-on-exit" };
	size_t n = 12;
	if (!access_log)
		argv[n++] = "--no-access-log";
	for (size_t i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	int p[2];
	cr_assert_eq(pipe(p), 0);
	s->pid = fork();
	cr_assert_geq(s->pid, 0);
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		int lf = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (lf >= 0)
			dup2(lf, 2);
		close(p[0]);
		execv(bin_env ? bin_env : bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	s->port = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!s->port)
			s->port = (int)strtol(line, NULL, 10);
		if (strstr(line, "ready url="))
			break;
	}
	fclose(f);
	cr_assert_gt(s->port, 0, "server did not start (options: see %s)", s->log);
	char kp[600];
	snprintf(kp, sizeof(kp), "%s/server/api-key", s->state);
	FILE *k = fopen(kp, "r");
	cr_assert_not_null(k);
	cr_assert_not_null(fgets(s->key, sizeof(s->key), k));
	s->key[strcspn(s->key, "\n")] = '\0';
	fclose(k);
}

/* Destroys whatever a server left behind in its state dir. */
static void reap_state(const char *state)
{
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	sbx_runtime *r = NULL;
	if (sbx_runtime_new(&r, &o, NULL) < 0)
		return;
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	if (sbx_sandbox_list(&v, &n, r, "local", NULL, NULL) == 0) {
		for (size_t i = 0; i < n; i++)
			sbx_sandbox_destroy_id(r, "local", v[i].id, NULL);
		sbx_sandbox_info_free(v, n);
	}
	sbx_runtime_free(r);
}

/* SIGTERM; 1 when the server exited by itself within a generous bound. */
static int srv_stop(struct srv *s)
{
	int exited = 0;
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		for (int i = 0; i < 600 && !exited; i++) {
			if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
				exited = 1;
			else
				nap_ms(100);
		}
		if (!exited) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, NULL, 0);
		}
	}
	s->pid = 0;
	reap_state(s->state);
	return exited;
}

static void fini(void)
{
	if (S.pid > 0)
		srv_stop(&S);
	teardown();
}


/* ---- HTTP ------------------------------------------------------------------ */

struct resp {
	long status;
	char *body;
	size_t len;
};

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
	struct resp *r = u;
	r->body = realloc(r->body, r->len + sz * n + 1); /* checksrc: allow (test) */
	memcpy(r->body + r->len, p, sz * n);
	r->len += sz * n;
	r->body[r->len] = '\0';
	return sz * n;
}

static struct resp req(const char *method, const char *path, const char *const *hdrs, const void *body,
		       size_t blen, long timeout_ms)
{
	struct resp r = { 0 };
	CURL *c = curl_easy_init();
	char url[1024];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", S.port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	struct curl_slist *h = curl_slist_append(NULL, "Expect:");
	for (size_t i = 0; hdrs && hdrs[i]; i++)
		h = curl_slist_append(h, hdrs[i]);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)blen);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 60000L);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)64 << 20);
	curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (!r.body)
		r.body = calloc(1, 1);
	return r;
}

static struct resp api(const char *method, const char *path, const char *json, long timeout_ms)
{
	char kh[200];
	snprintf(kh, sizeof(kh), "X-API-KEY: %s", S.key);
	const char *h[] = { kh, "Content-Type: application/json", NULL };
	return req(method, path, h, json, json ? strlen(json) : 0, timeout_ms);
}

struct sbref {
	char id[32];
	char token[80];
};

/* POST /sandboxes; returns the HTTP status (201 fills *out). */
static long create_sb(struct sbref *out, const char *body)
{
	struct resp r = api("POST", "/sandboxes", body, 120000);
	long st = r.status;
	if (st == 201) {
		json_t *j = json_loadb(r.body, r.len, 0, NULL);
		cr_assert_not_null(j);
		snprintf(out->id, sizeof(out->id), "%s", json_string_value(json_object_get(j, "sandboxID")));
		snprintf(out->token, sizeof(out->token), "%s", json_string_value(json_object_get(j, "envdAccessToken")));
		json_decref(j);
	}
	free(r.body);
	return st;
}

static json_t *detail(const struct sbref *s, long *status)
{
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s", s->id);
	struct resp r = api("GET", p, NULL, 15000);
	*status = r.status;
	json_t *j = r.status == 200 ? json_loadb(r.body, r.len, 0, NULL) : NULL;
	free(r.body);
	return j;
}

/* Polls GET /sandboxes/{id} until 404 (bounded); 1 when it went away. */
static int wait_gone(const struct sbref *s)
{
	for (int i = 0; i < 120; i++) {
		long st = 0;
		json_decref(detail(s, &st));
		if (st == 404)
			return 1;
		nap_ms(500);
	}
	return 0;
}

static struct resp envd(const struct sbref *s, const char *method, const char *path, const char *ctype,
			const void *body, size_t blen, const char *extra, long timeout_ms)
{
	char idh[80], tokh[128], cth[128];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", s->id);
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", s->token);
	snprintf(cth, sizeof(cth), "Content-Type: %s", ctype ? ctype : "application/json");
	const char *h[] = { idh, tokh, cth, "Connect-Protocol-Version: 1", extra, NULL };
	return req(method, path, h, body, blen, timeout_ms);
}

/* A Connect envelope (flags 0) around the JSON of j (stolen); owned, *len set. */
static char *envelope(json_t *j, size_t *len)
{
	char *js = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	size_t n = strlen(js);
	char *env = malloc(n + 5); /* checksrc: allow (test) */
	env[0] = 0;
	env[1] = (char)(n >> 24);
	env[2] = (char)(n >> 16);
	env[3] = (char)(n >> 8);
	env[4] = (char)n;
	memcpy(env + 5, js, n);
	free(js);
	*len = n + 5;
	return env;
}

/* Runs `cmd` with bash in the sandbox through a Start stream without
 * keepalives, until the stream ends. */
static void run(const struct sbref *s, const char *wrapped)
{
	size_t n = 0;
	char *env = envelope(json_pack("{s:{s:s,s:[s,s]}}", "process", "cmd", "/bin/bash", "args", "-c", wrapped), &n);
	struct resp r = envd(s, "POST", "/process.Process/Start", "application/connect+json", env, n, NULL, 120000);
	cr_assert_eq(r.status, 200, "start: %ld %s", r.status, r.body);
	/* the stream must have run to its end-stream frame (flag 2) */
	size_t off = 0;
	unsigned last = 0;
	while (off + 5 <= r.len) {
		const unsigned char *f = (const unsigned char *)r.body + off;
		last = f[0];
		off += 5 + (((size_t)f[1] << 24) | ((size_t)f[2] << 16) | ((size_t)f[3] << 8) | f[4]);
	}
	cr_assert(off == r.len && last == 2, "process stream was cut before its end: %zu bytes", r.len);
	free(r.body);
	free(env);
}

/* run() and what the command wrote to stdout+stderr (owned), read through /files. */
static char *sh(const struct sbref *s, const char *cmd)
{
	char wrapped[2048];
	snprintf(wrapped, sizeof(wrapped), "{ %s ; } >/tmp/.out 2>&1", cmd);
	run(s, wrapped);
	struct resp r = envd(s, "GET", "/files?path=/tmp/.out", NULL, NULL, 0, NULL, 30000);
	cr_assert_eq(r.status, 200, "read output: %ld %s", r.status, r.body);
	return r.body;
}

/* ---- raw sockets ------------------------------------------------------------ */

/* A TCP connection to the server from source address `src` (NULL = any). */
static int tcp_to_server(const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	if (src) {
		inet_pton(AF_INET, src, &a.sin_addr);
		cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind %s", src);
	}
	a.sin_port = htons((uint16_t)S.port);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_str(int fd, const char *s)
{
	cr_assert_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Reads whatever arrives for up to `max_ms`; returns 1 once the peer closed
 * (EOF or reset), collecting the bytes in buf. */
static int read_until_closed(int fd, char *buf, size_t cap, long max_ms)
{
	size_t len = 0;
	for (long waited = 0; waited < max_ms; waited += 100) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		char tmp[4096];
		ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
		if (n <= 0)
			return 1;
		size_t k = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;
		memcpy(buf + len, tmp, k);
		len += k;
		buf[len] = '\0';
	}
	return 0;
}

/* The status of the first response line read within max_ms, or -1. */
static int read_status(int fd, long max_ms)
{
	char buf[8192] = "";
	size_t len = 0;
	for (long waited = 0; waited < max_ms && !strstr(buf, "\r\n"); waited += 100) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
	}
	int st = -1;
	if (sscanf(buf, "HTTP/1.%*d %d", &st) != 1)
		return -1;
	return st;
}



#endif
