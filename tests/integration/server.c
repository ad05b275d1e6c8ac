/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve` end to end: the real server binary on a loopback port with a
 * private state dir, driven with libcurl: auth, the control plane, Connect
 * framing of process streams, filesystem RPCs, /files, WatchDir, metrics,
 * crash recovery after kill -9, --destroy-on-exit, and a scale run
 * (SBX_SERVER_SCALE sandboxes, default 500).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bash_image.h"
#include "common.h"

struct srv {
	pid_t pid;
	int port;
	char state[512];
	char key[128];
	char base[64];
};

static struct srv S;
static int seq;
static pid_t started[16];
static int n_started;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void srv_start(struct srv *s, const char *state, const char *extra)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	int p[2];
	cr_assert_eq(pipe(p), 0);
	if (state && state != s->state)
		snprintf(s->state, sizeof(s->state), "%s", state);
	else if (!state)
		snprintf(s->state, sizeof(s->state), "%s/test-state/srv%d-%d", b, (int)getpid(), seq++);
	char bin[512], images[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	snprintf(images, sizeof(images), "%s/test-images", b);
	s->pid = fork();
	if (s->pid > 0 && n_started < 16)
		started[n_started++] = s->pid;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], 1);
		close(p[0]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", s->state,
		      "--image-dir", images, "--default-template", "bash", "--no-access-log", extra, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	s->port = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!s->port)
			s->port = atoi(line); /* checksrc: allow (test) */
		if (strstr(line, "ready url="))
			break;
	}
	fclose(f);
	cr_assert_gt(s->port, 0, "server did not print its port");
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
	char kp[600];
	snprintf(kp, sizeof(kp), "%s/server/api-key", s->state);
	FILE *k = fopen(kp, "r");
	cr_assert_not_null(k);
	cr_assert_not_null(fgets(s->key, sizeof(s->key), k));
	s->key[strcspn(s->key, "\n")] = '\0';
	fclose(k);
	struct stat st;
	cr_assert_eq(stat(kp, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
}

static int srv_stop(struct srv *s, int sig)
{
	int st = 0;
	if (s->pid > 0) {
		kill(s->pid, sig);
		waitpid(s->pid, &st, 0);
	}
	s->pid = 0;
	return st;
}

static void suite_setup(void)
{
	setup();
	sbx_test_bash_image(rt);
	curl_global_init(CURL_GLOBAL_ALL);
	srv_start(&S, NULL, "--max-timeout=3600");
}

static void suite_teardown(void)
{
	srv_stop(&S, SIGTERM);
	for (int i = 0; i < n_started; i++)
		if (kill(started[i], SIGTERM) == 0)
			waitpid(started[i], NULL, 0);
	teardown();
}

/* ---- HTTP ------------------------------------------------------------------ */

struct resp {
	long status;
	char *body;
	size_t len;
	char next[256];
	char ctype[128];
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

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
	struct resp *r = u;
	if (strncasecmp(p, "X-Next-Token: ", 14) == 0)
		snprintf(r->next, sizeof(r->next), "%.*s", (int)strcspn(p + 14, "\r\n"), p + 14);
	if (strncasecmp(p, "Content-Type: ", 14) == 0)
		snprintf(r->ctype, sizeof(r->ctype), "%.*s", (int)strcspn(p + 14, "\r\n"), p + 14);
	return sz * n;
}

/* One request; hdrs is a NULL-terminated list; chunked sends the body chunked. */
static struct resp req(const char *method, const char *path, const char *const *hdrs, const void *body,
		       size_t blen, int chunked, long timeout_ms)
{
	struct resp r = { 0 };
	CURL *c = curl_easy_init();
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", S.base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	struct curl_slist *h = NULL;
	for (size_t i = 0; hdrs && hdrs[i]; i++)
		h = curl_slist_append(h, hdrs[i]);
	if (chunked)
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)blen);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 60000L);
	curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (!r.body)
		r.body = calloc(1, 1);
	return r;
}

static struct resp api(const char *method, const char *path, const char *json)
{
	char kh[200];
	snprintf(kh, sizeof(kh), "X-API-KEY: %s", S.key);
	const char *h[] = { kh, "Content-Type: application/json", NULL };
	return req(method, path, h, json, json ? strlen(json) : 0, json != NULL, 0);
}

static json_t *jparse(struct resp *r)
{
	json_t *j = json_loadb(r->body, r->len, 0, NULL);
	cr_assert_not_null(j, "not JSON (status %ld): %s", r->status, r->body);
	return j;
}

struct sbx_ref {
	char id[32];
	char token[80];
};

static struct sbx_ref create_sb(const char *body, int v2)
{
	struct resp r = api("POST", v2 ? "/v2/sandboxes" : "/sandboxes", body);
	cr_assert_eq(r.status, 201, "create: %ld %s", r.status, r.body);
	json_t *j = jparse(&r);
	struct sbx_ref s;
	snprintf(s.id, sizeof(s.id), "%s", json_string_value(json_object_get(j, "sandboxID")));
	snprintf(s.token, sizeof(s.token), "%s", json_string_value(json_object_get(j, "envdAccessToken")));
	cr_assert_str_eq(json_string_value(json_object_get(j, "envdVersion")), "0.6.13");
	json_decref(j);
	free(r.body);
	return s;
}

static void kill_sb(const char *id)
{
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s", id);
	struct resp r = api("DELETE", p, NULL);
	cr_assert_eq(r.status, 204, "kill %s: %ld %s", id, r.status, r.body);
	free(r.body);
}

/* envd call: unary JSON or (stream) one envelope. */
static struct resp envd(const struct sbx_ref *s, const char *method, const char *json, int stream,
			const char *extra_hdr, long timeout_ms)
{
	char idh[80], tokh[128];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", s->id);
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", s->token);
	const char *h[] = { idh, "E2b-Sandbox-Port: 49983", tokh, "Connect-Protocol-Version: 1",
			    stream ? "Content-Type: application/connect+json" : "Content-Type: application/json",
			    "Keepalive-Ping-Interval: 1", extra_hdr, NULL };
	size_t n = strlen(json);
	char *body = malloc(n + 5); /* checksrc: allow (test) */
	size_t blen = n;
	if (stream) {
		body[0] = 0;
		body[1] = (char)(n >> 24);
		body[2] = (char)(n >> 16);
		body[3] = (char)(n >> 8);
		body[4] = (char)n;
		memcpy(body + 5, json, n);
		blen = n + 5;
	} else {
		memcpy(body, json, n);
	}
	struct resp r = req("POST", method, h, body, blen, 1, timeout_ms);
	free(body);
	return r;
}

/* Splits a stream response into frames; returns count, fills flags and JSON payloads. */
static size_t frames(const struct resp *r, unsigned char *flags, json_t **msgs, size_t max)
{
	size_t n = 0, off = 0;
	while (off + 5 <= r->len && n < max) {
		const unsigned char *p = (const unsigned char *)r->body + off;
		size_t len = ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
		cr_assert_leq(off + 5 + len, r->len, "truncated frame");
		flags[n] = p[0];
		msgs[n] = json_loadb((const char *)p + 5, len, 0, NULL);
		cr_assert_not_null(msgs[n], "frame %zu is not JSON", n);
		n++;
		off += 5 + len;
	}
	cr_assert_eq(off, r->len, "trailing bytes after frames");
	return n;
}

static const char *sh_start(const char *cmd, char *buf, size_t len, int use_stdin)
{
	json_t *j = json_pack("{s:{s:s,s:[s,s,s]},s:b}", "process", "cmd", "/bin/bash", "args", "-l", "-c", cmd,
			      "stdin", use_stdin);
	char *s = json_dumps(j, JSON_COMPACT);
	snprintf(buf, len, "%s", s);
	free(s);
	json_decref(j);
	return buf;
}

/* Output of a finished Start stream: stdout, exit code, end-stream error code. */
struct run {
	char out[8192];
	char err[8192];
	int exit_code;
	int has_end;
	char error[64];
	int pid;
};

static struct run parse_run(const struct resp *r)
{
	struct run x = { .exit_code = -1000 };
	unsigned char fl[4096];
	json_t *m[4096];
	size_t n = frames(r, fl, m, 4096);
	cr_assert_gt(n, 1, "no frames: %s", r->body);
	cr_assert_eq(fl[0], 0);
	json_t *start = json_object_get(json_object_get(m[0], "event"), "start");
	cr_assert_not_null(start, "first event is not start");
	x.pid = (int)json_integer_value(json_object_get(start, "pid"));
	cr_assert_eq(fl[n - 1], 2, "last frame is not end-stream");
	json_t *err = json_object_get(m[n - 1], "error");
	if (err)
		snprintf(x.error, sizeof(x.error), "%s", json_string_value(json_object_get(err, "code")));
	for (size_t i = 1; i + 1 < n; i++) {
		cr_assert_eq(fl[i], 0);
		json_t *ev = json_object_get(m[i], "event");
		json_t *d = json_object_get(ev, "data"), *end = json_object_get(ev, "end");
		cr_assert(!x.has_end || json_object_get(ev, "keepalive"), "event after end");
		const char *b64[2] = { json_string_value(json_object_get(d, "stdout")),
				       json_string_value(json_object_get(d, "stderr")) };
		for (int k = 0; k < 2; k++) {
			if (!b64[k])
				continue;
			unsigned char raw[8192];
			int len = EVP_DecodeBlock(raw, (const unsigned char *)b64[k], (int)strlen(b64[k]));
			size_t pad = strlen(b64[k]) >= 2 ? (b64[k][strlen(b64[k]) - 1] == '=') + (b64[k][strlen(b64[k]) - 2] == '=') : 0;
			char *dst = k ? x.err : x.out;
			strncat(dst, (char *)raw, (size_t)len - pad); /* checksrc: allow (test) */
		}
		if (end) {
			x.has_end = 1;
			x.exit_code = (int)json_integer_value(json_object_get(end, "exitCode"));
		}
	}
	for (size_t i = 0; i < n; i++)
		json_decref(m[i]);
	return x;
}

static struct run run_cmd(const struct sbx_ref *s, const char *cmd, const char *hdr)
{
	char buf[4096];
	struct resp r = envd(s, "/process.Process/Start", sh_start(cmd, buf, sizeof(buf), 0), 1, hdr, 0);
	cr_assert_eq(r.status, 200, "start: %ld %s", r.status, r.body);
	cr_assert_str_eq(r.ctype, "application/connect+json");
	struct run x = parse_run(&r);
	free(r.body);
	return x;
}

TestSuite(server, .init = suite_setup, .fini = suite_teardown, .timeout = 900);

Test(server, auth)
{
	struct resp r = req("GET", "/v2/sandboxes", NULL, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 401);
	json_t *j = jparse(&r);
	cr_assert_eq(json_integer_value(json_object_get(j, "code")), 401);
	json_decref(j);
	free(r.body);
	const char *bad[] = { "X-API-KEY: e2b_0000000000000000000000000000000000000000", NULL };
	r = req("GET", "/v2/sandboxes", bad, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 401);
	free(r.body);
	r = req("GET", "/health", NULL, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 204);
	free(r.body);
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1), b = create_sb("{\"templateID\":\"bash\"}", 0);
	struct sbx_ref cross = a;
	snprintf(cross.token, sizeof(cross.token), "%s", b.token);
	r = envd(&cross, "/filesystem.Filesystem/Stat", "{\"path\":\"/\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 401, "another sandbox's token: %ld %s", r.status, r.body);
	cr_assert(strstr(r.body, "\"unauthenticated\""));
	free(r.body);
	/* token-only routing (SDK < 2.14.1 sends no E2b-Sandbox-Id on /files) */
	char tokh[128];
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", b.token);
	const char *th[] = { tokh, NULL };
	r = req("GET", "/files?path=/etc/passwd", th, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "user:x:1000"));
	free(r.body);
	kill_sb(a.id);
	kill_sb(b.id);
}

Test(server, control_plane)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\",\"timeout\":300,\"secure\":true,"
				     "\"allow_internet_access\":true,\"metadata\":{\"run\":\"x y\",\"k\":\"1\"},"
				     "\"envVars\":{\"FOO\":\"bar\"}}", 0);
	struct sbx_ref b = create_sb("{\"templateID\":\"base\",\"metadata\":{\"run\":\"x y\",\"k\":\"2\"}}", 1);
	char p[512];
	snprintf(p, sizeof(p), "/sandboxes/%s", a.id);
	struct resp r = api("GET", p, NULL);
	cr_assert_eq(r.status, 200);
	json_t *j = jparse(&r);
	cr_assert_str_eq(json_string_value(json_object_get(j, "envdAccessToken")), a.token);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "running");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "metadata"), "run")), "x y");
	json_decref(j);
	free(r.body);
	/* envVars reach processes */
	struct run x = run_cmd(&a, "echo $FOO", NULL);
	cr_assert_str_eq(x.out, "bar\n");
	/* metadata filter (URL-encoded k=v&k2=v2) and state filter */
	r = api("GET", "/v2/sandboxes?metadata=run%3Dx%2520y%26k%3D2&state=running", NULL);
	j = jparse(&r);
	cr_assert_eq(json_array_size(j), 1, "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "sandboxID")), b.id);
	json_decref(j);
	free(r.body);
	r = api("GET", "/v2/sandboxes?metadata=run%3Dx%2520y&state=paused", NULL);
	cr_assert_str_eq(r.body, "[]");
	free(r.body);
	/* pagination */
	r = api("GET", "/v2/sandboxes?metadata=run%3Dx%2520y&limit=1", NULL);
	j = jparse(&r);
	cr_assert_eq(json_array_size(j), 1);
	cr_assert_neq(r.next[0], '\0', "no X-Next-Token");
	char first[32];
	snprintf(first, sizeof(first), "%s", json_string_value(json_object_get(json_array_get(j, 0), "sandboxID")));
	json_decref(j);
	snprintf(p, sizeof(p), "/v2/sandboxes?metadata=run%%3Dx%%2520y&limit=1&nextToken=%s", r.next);
	free(r.body);
	r = api("GET", p, NULL);
	j = jparse(&r);
	cr_assert_eq(json_array_size(j), 1);
	cr_assert_str_neq(json_string_value(json_object_get(json_array_get(j, 0), "sandboxID")), first);
	cr_assert_eq(r.next[0], '\0', "last page has X-Next-Token");
	json_decref(j);
	free(r.body);
	/* malformed JSON: 400, nothing created */
	r = api("GET", "/v2/sandboxes", NULL);
	j = jparse(&r);
	size_t before = json_array_size(j);
	json_decref(j);
	free(r.body);
	r = api("POST", "/v2/sandboxes", "{\"templateID\":");
	cr_assert_eq(r.status, 400);
	j = jparse(&r);
	cr_assert_eq(json_integer_value(json_object_get(j, "code")), 400);
	json_decref(j);
	free(r.body);
	r = api("POST", "/sandboxes", "{\"templateID\":\"base\",\"timeout\":\"soon\"}");
	cr_assert_eq(r.status, 400);
	free(r.body);
	r = api("GET", "/v2/sandboxes", NULL);
	j = jparse(&r);
	cr_assert_eq(json_array_size(j), before);
	json_decref(j);
	free(r.body);
	r = api("POST", "/v2/sandboxes", "{\"templateID\":\"no-such-template\"}");
	cr_assert_eq(r.status, 404);
	free(r.body);
	/* refreshes, connect v1 and v2 */
	snprintf(p, sizeof(p), "/sandboxes/%s/refreshes", a.id);
	r = api("POST", p, "{\"duration\":60}");
	cr_assert_eq(r.status, 204);
	free(r.body);
	snprintf(p, sizeof(p), "/sandboxes/%s/connect", a.id);
	r = api("POST", p, "{\"timeout\":300}");
	cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
	j = jparse(&r);
	cr_assert_str_eq(json_string_value(json_object_get(j, "envdAccessToken")), a.token);
	json_decref(j);
	free(r.body);
	/* pause twice (409), connect resumes (201) */
	snprintf(p, sizeof(p), "/sandboxes/%s/pause", a.id);
	r = api("POST", p, "{}");
	cr_assert_eq(r.status, 204, "%ld %s", r.status, r.body);
	free(r.body);
	r = api("POST", p, "{}");
	cr_assert_eq(r.status, 409);
	free(r.body);
	snprintf(p, sizeof(p), "/sandboxes/%s", a.id);
	r = api("GET", p, NULL);
	cr_assert(strstr(r.body, "\"state\":\"paused\""));
	free(r.body);
	/* a paused sandbox's envd is unreachable, /health included (E2B) */
	char idh[80], tokh[128];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", a.id);
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", a.token);
	const char *hh[] = { idh, tokh, NULL };
	r = req("GET", "/health", hh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 502, "health of a paused sandbox: %ld", r.status);
	free(r.body);
	const char *th[] = { tokh, NULL }; /* SDKs before 2.14.1: the token alone */
	r = req("GET", "/health", th, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 502, "health (token only) of a paused sandbox: %ld", r.status);
	free(r.body);
	snprintf(p, sizeof(p), "/v2/sandboxes/%s/connect", a.id);
	r = api("POST", p, "{}");
	cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
	free(r.body);
	r = req("GET", "/health", hh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 204, "health after connect: %ld", r.status);
	free(r.body);
	x = run_cmd(&a, "echo alive", NULL);
	cr_assert_str_eq(x.out, "alive\n");
	/* pause + deprecated resume */
	snprintf(p, sizeof(p), "/sandboxes/%s/pause", a.id);
	free(api("POST", p, NULL).body);
	snprintf(p, sizeof(p), "/sandboxes/%s/resume", a.id);
	r = api("POST", p, "{\"timeout\":300}");
	cr_assert_eq(r.status, 201);
	free(r.body);
	r = api("POST", p, "{\"timeout\":300}");
	cr_assert_eq(r.status, 409);
	free(r.body);
	/* kill: 204 then 404 with JSON code */
	kill_sb(a.id);
	snprintf(p, sizeof(p), "/sandboxes/%s", a.id);
	r = api("DELETE", p, NULL);
	cr_assert_eq(r.status, 404);
	j = jparse(&r);
	cr_assert_eq(json_integer_value(json_object_get(j, "code")), 404);
	json_decref(j);
	free(r.body);
	r = api("GET", "/sandboxes/0123456789ab", NULL);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"code\":404"));
	free(r.body);
	/* timeout: destroyed within ~1 s of the deadline */
	snprintf(p, sizeof(p), "/sandboxes/%s/timeout", b.id);
	r = api("POST", p, "{\"timeout\":1}");
	cr_assert_eq(r.status, 204);
	free(r.body);
	double t0 = now_s(), gone = 0;
	snprintf(p, sizeof(p), "/sandboxes/%s", b.id);
	while (now_s() - t0 < 10) {
		r = api("GET", p, NULL);
		long st = r.status;
		free(r.body);
		if (st == 404) {
			gone = now_s() - t0;
			break;
		}
		usleep(50000);
	}
	/* Never before the deadline, and gone at all; the delay itself is
	 * printed, not asserted (wall-clock bounds flake on a loaded machine). */
	cr_assert(gone > 0.5, "sandbox gone %.2f s after a 1 s timeout (never, or too early)", gone);
	fprintf(stderr, "server: 1 s timeout enforced after %.2f s\n", gone);
}

Test(server, process_stream)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	/* byte-exact framing of `echo hi` */
	char buf[512];
	struct resp r = envd(&a, "/process.Process/Start", sh_start("echo hi", buf, sizeof(buf), 0), 1, NULL, 0);
	cr_assert_eq(r.status, 200);
	const unsigned char *p = (const unsigned char *)r.body;
	cr_assert_eq(p[0], 0);
	size_t l0 = ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
	cr_assert(strncmp((const char *)p + 5, "{\"event\":{\"start\":{\"pid\":", 25) == 0);
	const char *data = "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}";
	cr_assert_eq(p[5 + l0], 0);
	cr_assert_eq(p[5 + l0 + 4], strlen(data));
	cr_assert(memcmp(p + 5 + l0 + 5, data, strlen(data)) == 0);
	cr_assert(memmem(r.body, r.len, "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}", 58));
	cr_assert(memcmp(r.body + r.len - 7, "\x02\x00\x00\x00\x02{}", 7) == 0, "no end-stream {}");
	free(r.body);
	/* non-zero exit and stderr */
	struct run x = run_cmd(&a, "echo oops >&2; exit 3", NULL);
	cr_assert_eq(x.exit_code, 3);
	cr_assert_str_eq(x.err, "oops\n");
	cr_assert_str_eq(x.error, "");
	/* Connect-Timeout-Ms kills the process */
	double t0 = now_s();
	x = run_cmd(&a, "sleep 30", "Connect-Timeout-Ms: 1000");
	cr_assert_lt(now_s() - t0, 5);
	cr_assert_str_eq(x.error, "deadline_exceeded");
	cr_assert(x.has_end);
	/* envs, cwd, user */
	r = envd(&a, "/process.Process/Start",
		 "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"echo $A:$(pwd):$(id -u)\"],\"envs\":{\"A\":\"1\"},"
		 "\"cwd\":\"/tmp\"},\"stdin\":false}", 1, "Authorization: Basic dXNlcjo=", 0);
	x = parse_run(&r);
	free(r.body);
	cr_assert_str_eq(x.out, "1:/tmp:1000\n");
	/* E2B's default user: the image has `user`, so no user means `user`;
	 * an explicit one wins */
	x = run_cmd(&a, "pwd; id -un", NULL);
	cr_assert_str_eq(x.out, "/home/user\nuser\n");
	r = envd(&a, "/process.Process/Start",
		 "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"pwd; id -un\"]},\"stdin\":false}", 1,
		 "Authorization: Basic cm9vdDo=", 0);
	x = parse_run(&r);
	free(r.body);
	cr_assert_str_eq(x.out, "/root\nroot\n");
	/* a malformed request is an error end-stream */
	r = envd(&a, "/process.Process/Start", "{\"process\":{}}", 1, NULL, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(memmem(r.body, r.len, "invalid_argument", 16));
	free(r.body);
	kill_sb(a.id);
}

struct bg {
	struct sbx_ref *sb;
	const char *method, *json;
	struct resp r;
};

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	b->r = envd(b->sb, b->method, b->json, 1, "Connect-Timeout-Ms: 20000", 30000);
	return NULL;
}

static int wait_pid(struct sbx_ref *a)
{
	for (int i = 0; i < 200; i++) {
		struct resp r = envd(a, "/process.Process/List", "{}", 0, NULL, 0);
		json_t *j = jparse(&r);
		free(r.body);
		json_t *ps = json_object_get(j, "processes");
		int pid = json_array_size(ps) ? (int)json_integer_value(json_object_get(json_array_get(ps, 0), "pid")) : 0;
		json_decref(j);
		if (pid)
			return pid;
		usleep(20000);
	}
	cr_assert_fail("process never listed");
	return 0;
}

Test(server, process_control)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	char buf[512], sel[128];
	/* SendInput + CloseStdin */
	struct bg b = { .sb = &a, .method = "/process.Process/Start",
			.json = sh_start("read x; echo got:$x; cat; echo done", buf, sizeof(buf), 1) };
	pthread_t t;
	pthread_create(&t, NULL, bg_main, &b);
	int pid = wait_pid(&a);
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"aGVsbG8K\"}}", pid);
	struct resp r = envd(&a, "/process.Process/SendInput", sel, 0, NULL, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, "{}");
	free(r.body);
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%d}}", pid);
	r = envd(&a, "/process.Process/CloseStdin", sel, 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	pthread_join(t, NULL);
	struct run x = parse_run(&b.r);
	free(b.r.body);
	cr_assert_str_eq(x.out, "got:hello\ndone\n");
	/* SendSignal SIGKILL ends it; Connect re-attaches */
	struct bg s1 = { .sb = &a, .method = "/process.Process/Start",
			 .json = sh_start("for i in $(seq 100); do echo tick; sleep 0.2; done", buf, sizeof(buf), 0) };
	pthread_create(&t, NULL, bg_main, &s1);
	pid = wait_pid(&a);
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%d}}", pid);
	struct bg s2 = { .sb = &a, .method = "/process.Process/Connect", .json = sel };
	pthread_t t2;
	pthread_create(&t2, NULL, bg_main, &s2);
	usleep(700000);
	char sig[160];
	snprintf(sig, sizeof(sig), "{\"process\":{\"pid\":%d},\"signal\":\"SIGNAL_SIGKILL\"}", pid);
	r = envd(&a, "/process.Process/SendSignal", sig, 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	x = parse_run(&s1.r);
	cr_assert(x.has_end && x.exit_code == -1, "killed: exit %d", x.exit_code);
	struct run y = parse_run(&s2.r);
	cr_assert_eq(y.pid, pid);
	cr_assert(y.has_end && strstr(y.out, "tick"), "re-attached stream: %s", y.out);
	free(s1.r.body);
	free(s2.r.body);
	r = envd(&a, "/process.Process/SendSignal", sig, 0, NULL, 0);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"not_found\""));
	free(r.body);
	r = envd(&a, "/process.Process/List", "{}", 0, NULL, 0);
	cr_assert_str_eq(r.body, "{\"processes\":[]}");
	free(r.body);
	kill_sb(a.id);
}

Test(server, filesystem_and_files)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	char idh[80], tokh[128];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", a.id);
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", a.token);
	const char *mh[] = { idh, tokh, "Content-Type: multipart/form-data; boundary=B0und", NULL };
	const char *mp = "--B0und\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/a/b.txt\"\r\n"
			 "Content-Type: application/octet-stream\r\n\r\nline1\nline2\r\n--B0und--\r\n";
	struct resp r = req("POST", "/files?path=%2Fhome%2Fuser%2Fa%2Fb.txt", mh, mp, strlen(mp), 1, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, "[{\"path\":\"/home/user/a/b.txt\",\"name\":\"b.txt\",\"type\":\"file\"}]");
	free(r.body);
	const char *gh[] = { idh, tokh, NULL };
	r = req("GET", "/files?path=%2Fhome%2Fuser%2Fa%2Fb.txt", gh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "line1\nline2");
	free(r.body);
	r = req("GET", "/files?path=/nope", gh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"code\":404"));
	free(r.body);
	r = req("GET", "/files?path=/home", gh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 400);
	free(r.body);
	const char *oh[] = { idh, tokh, "Content-Type: application/octet-stream", NULL };
	r = req("POST", "/files?path=/tmp/raw.bin", oh, "\x01\x02\x00\x03", 4, 1, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	free(r.body);
	/* file metadata (envd 0.6.2) as envd reads it: keys lowercased, empty
	 * keys dropped, the first of repeated headers kept; user.* xattrs */
	const char *xh[] = { idh, tokh, "Content-Type: application/octet-stream", "X-Metadata-Author: mish",
			     "x-metadata-PURPOSE: up", "X-Metadata-Author: second", "X-Metadata-: none", NULL };
	r = req("POST", "/files?path=/tmp/meta.bin", xh, "m", 1, 1, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(strstr(r.body, "\"metadata\":{\"author\":\"mish\",\"purpose\":\"up\"}"), "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/meta.bin\"}", 0, NULL, 0);
	cr_assert(strstr(r.body, "\"author\":\"mish\"") && strstr(r.body, "\"purpose\":\"up\""), "%s", r.body);
	free(r.body);
	/* a relative symlink's target, absolute and resolved, with its type */
	struct run ln = run_cmd(&a, "mkdir -p /tmp/l/d && ln -s ../../raw.bin /tmp/l/d/up && ln -s d/up /tmp/l/chain", NULL);
	cr_assert_eq(ln.exit_code, 0, "%s", ln.err);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/l/chain\"}", 0, NULL, 0);
	cr_assert(strstr(r.body, "\"symlinkTarget\":\"/tmp/raw.bin\"") && strstr(r.body, "FILE_TYPE_FILE") &&
		  strstr(r.body, "\"permissions\":\"Lrwxrwxrwx\""), "%s", r.body);
	free(r.body);
	/* filesystem RPCs */
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/raw.bin\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "\"size\":\"4\"") && strstr(r.body, "FILE_TYPE_FILE"), "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/none\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"code\":\"not_found\""));
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/MakeDir", "{\"path\":\"/tmp/d1/d2\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/MakeDir", "{\"path\":\"/tmp/d1/d2\"}", 0, NULL, 0);
	cr_assert(strstr(r.body, "already_exists"));
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Move", "{\"source\":\"/tmp/raw.bin\",\"destination\":\"/tmp/d1/r.bin\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(strstr(r.body, "\"path\":\"/tmp/d1/r.bin\""));
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/ListDir", "{\"path\":\"/tmp/d1\",\"depth\":1}", 0, NULL, 0);
	cr_assert(strstr(r.body, "r.bin") && strstr(r.body, "FILE_TYPE_DIRECTORY"), "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Remove", "{\"path\":\"/tmp/d1\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	/* removing what is not there succeeds, as envd's os.RemoveAll */
	r = envd(&a, "/filesystem.Filesystem/Remove", "{\"path\":\"/tmp/never/there\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200, "remove of a missing path: %ld %s", r.status, r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/d1\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 404);
	free(r.body);
	/* WatchDir: start first, then events; the deadline ends the stream */
	struct bg w = { .sb = &a, .method = "/filesystem.Filesystem/WatchDir", .json = "{\"path\":\"/tmp\"}" };
	char idh2[80];
	snprintf(idh2, sizeof(idh2), "%s", idh);
	pthread_t t;
	pthread_create(&t, NULL, bg_main, &w);
	usleep(500000);
	struct run x = run_cmd(&a, "echo x > /tmp/w.txt; rm /tmp/w.txt", NULL);
	cr_assert_eq(x.exit_code, 0);
	pthread_join(t, NULL);
	unsigned char fl[256];
	json_t *m[256];
	size_t n = frames(&w.r, fl, m, 256);
	cr_assert_geq(n, 3);
	cr_assert_not_null(json_object_get(m[0], "start"));
	int created = 0, removed = 0;
	for (size_t i = 1; i < n; i++) {
		json_t *fs = json_object_get(m[i], "filesystem");
		const char *type = json_string_value(json_object_get(fs, "type"));
		if (type && strcmp(json_string_value(json_object_get(fs, "name")), "w.txt") == 0) {
			created |= strcmp(type, "EVENT_TYPE_CREATE") == 0;
			removed |= strcmp(type, "EVENT_TYPE_REMOVE") == 0;
		}
		json_decref(m[i]);
	}
	json_decref(m[0]);
	cr_assert(created && removed, "watch events: %s", w.r.body);
	cr_assert_eq(fl[n - 1], 2);
	free(w.r.body);
	kill_sb(a.id);
}

Test(server, metrics)
{
	struct resp r = req("GET", "/v2/sandboxes", NULL, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 401);
	free(r.body);
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	run_cmd(&a, "true", NULL);
	kill_sb(a.id);
	r = req("GET", "/metrics", NULL, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "sbx_serve_sandboxes_live "));
	cr_assert(strstr(r.body, "sbx_serve_sandbox_creates_total "));
	cr_assert(strstr(r.body, "sbx_serve_create_seconds_bucket{le=\"+Inf\"}"));
	cr_assert(strstr(r.body, "sbx_serve_execs_total 1\n"), "%s", r.body);
	cr_assert(strstr(r.body, "sbx_serve_sandbox_creates_total 1\n"));
	cr_assert(strstr(r.body, "sbx_serve_sandboxes_live 0\n"));
	cr_assert(strstr(r.body, "sbx_serve_errors_total{code=\"401\"}"), "%s", r.body);
	cr_assert_null(strstr(r.body, S.key));
	free(r.body);
}

static size_t count_sandboxes(const char *state)
{
	char images[512];
	snprintf(images, sizeof(images), "%s/test-images", getenv("SBX_BUILD_ROOT"));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	sbx_runtime *r2 = NULL;
	cr_assert_eq(sbx_runtime_new(&r2, &o, NULL), 0);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, r2, "local", NULL, NULL), 0);
	sbx_sandbox_info_free(v, n);
	sbx_runtime_free(r2);
	return n;
}

/* `sbx serve` without --default-template serves the image `base`; a store
 * without it gets a 404 that says what to run. */
Test(server, missing_base_template_says_what_to_run)
{
	struct srv main_srv = S;
	struct srv c = { 0 };
	srv_start(&c, NULL, "--default-template=");
	S = c;
	struct resp r = api("POST", "/sandboxes", "{\"templateID\":\"base\"}");
	cr_assert_eq(r.status, 404, "%ld %s", r.status, r.body);
	cr_assert(strstr(r.body, "template 'base' not found"), "%s", r.body);
	cr_assert(strstr(r.body, "SBX_IMAGE_DIR=") && strstr(r.body, "make base"), "%s", r.body);
	cr_assert(strstr(r.body, "sbx serve --default-template IMAGE"), "%s", r.body);
	free(r.body);
	srv_stop(&c, SIGTERM);
	S = main_srv;
}

Test(server, crash_recovery_and_destroy_on_exit)
{
	struct srv main_srv = S;
	struct srv c = { 0 };
	srv_start(&c, NULL, "--max-sandboxes=100");
	S = c;
	struct sbx_ref v[5];
	for (int i = 0; i < 5; i++)
		v[i] = create_sb("{\"templateID\":\"base\"}", 1);
	srv_stop(&c, SIGKILL);
	/* one sandbox dies behind the server's back */
	char images[512];
	snprintf(images, sizeof(images), "%s/test-images", getenv("SBX_BUILD_ROOT"));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = c.state;
	o.image_dir = images;
	sbx_runtime *r2 = NULL;
	cr_assert_eq(sbx_runtime_new(&r2, &o, NULL), 0);
	sbx_sandbox_info *info = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&info, &n, r2, "local", NULL, NULL), 0);
	for (size_t i = 0; i < n; i++)
		if (strcmp(info[i].id, v[4].id) == 0)
			kill(info[i].pid, SIGKILL);
	sbx_sandbox_info_free(info, n);
	sbx_runtime_free(r2);
	usleep(200000);
	srv_start(&c, c.state, "--destroy-on-exit");
	S = c;
	for (int i = 0; i < 4; i++) {
		struct run x = run_cmd(&v[i], "echo back", NULL);
		cr_assert_str_eq(x.out, "back\n", "sandbox %s not served again", v[i].id);
	}
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s", v[4].id);
	struct resp r = api("GET", p, NULL);
	cr_assert_eq(r.status, 404, "dead sandbox was not reaped");
	free(r.body);
	cr_assert_eq(count_sandboxes(c.state), 4);
	int st = srv_stop(&c, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(count_sandboxes(c.state), 0, "--destroy-on-exit left sandboxes");
	S = main_srv;
}

Test(server, scale, .timeout = 1800)
{
	const char *e = getenv("SBX_SERVER_SCALE");
	int n = e ? atoi(e) : 500; /* checksrc: allow (test) */
	if (n <= 0)
		return; /* SBX_SERVER_SCALE=0 */
	struct srv main_srv = S;
	struct srv c = { 0 };
	srv_start(&c, NULL, "--destroy-on-exit");
	S = c;
	struct sbx_ref *v = calloc((size_t)n, sizeof(*v));
	double t0 = now_s();
	for (int i = 0; i < n; i++)
		v[i] = create_sb("{\"templateID\":\"base\",\"timeout\":3600}", 1);
	double t1 = now_s();
	/* a page smaller than the population must point to the next one */
	char page[64];
	snprintf(page, sizeof(page), "/v2/sandboxes?limit=%d", n > 100 ? 100 : (n > 1 ? n - 1 : 1));
	struct resp r = api("GET", page, NULL);
	if (n > 1)
		cr_assert_neq(r.next[0], '\0', "no X-Next-Token with %d sandboxes", n);
	free(r.body);
	r = req("GET", "/metrics", NULL, NULL, 0, 0, 0);
	char want[64];
	snprintf(want, sizeof(want), "sbx_serve_sandboxes_live %d\n", n);
	cr_assert(strstr(r.body, want), "live gauge: %s", r.body);
	free(r.body);
	cr_assert_eq(count_sandboxes(c.state), (size_t)n);
	struct run x = run_cmd(&v[n - 1], "echo last", NULL);
	cr_assert_str_eq(x.out, "last\n");
	for (int i = 0; i < n; i++)
		kill_sb(v[i].id);
	fprintf(stderr, "scale: %d sandboxes created in %.1f s, deleted in %.1f s\n", n, t1 - t0, now_s() - t1);
	cr_assert_eq(count_sandboxes(c.state), 0);
	srv_stop(&c, SIGTERM);
	free(v);
	S = main_srv;
}
