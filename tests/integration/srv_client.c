/* SPDX-License-Identifier: MIT */
/* Helpers of the `sbx serve` integration tests (srv_client.h). */
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
#include "srv_client.h"

struct srv S;
static int seq;
static pid_t started[16];
static int n_started;

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void srv_start(struct srv *s, const char *state, const char *extra)
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

int srv_stop(struct srv *s, int sig)
{
	int st = 0;
	if (s->pid > 0) {
		kill(s->pid, sig);
		waitpid(s->pid, &st, 0);
	}
	s->pid = 0;
	return st;
}

void suite_setup(void)
{
	setup();
	sbx_test_bash_image(rt);
	curl_global_init(CURL_GLOBAL_ALL);
	srv_start(&S, NULL, "--max-timeout=3600");
}

void suite_teardown(void)
{
	srv_stop(&S, SIGTERM);
	for (int i = 0; i < n_started; i++)
		if (kill(started[i], SIGTERM) == 0)
			waitpid(started[i], NULL, 0);
	teardown();
}

/* ---- HTTP ------------------------------------------------------------------ */



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
struct resp req(const char *method, const char *path, const char *const *hdrs, const void *body,
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

struct resp api(const char *method, const char *path, const char *json)
{
	char kh[200];
	snprintf(kh, sizeof(kh), "X-API-KEY: %s", S.key);
	const char *h[] = { kh, "Content-Type: application/json", NULL };
	return req(method, path, h, json, json ? strlen(json) : 0, json != NULL, 0);
}

json_t *jparse(struct resp *r)
{
	json_t *j = json_loadb(r->body, r->len, 0, NULL);
	cr_assert_not_null(j, "not JSON (status %ld): %s", r->status, r->body);
	return j;
}



struct sbx_ref create_sb(const char *body, int v2)
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

void kill_sb(const char *id)
{
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s", id);
	struct resp r = api("DELETE", p, NULL);
	cr_assert_eq(r.status, 204, "kill %s: %ld %s", id, r.status, r.body);
	free(r.body);
}

/* envd call: unary JSON or (stream) one envelope. */
struct resp envd(const struct sbx_ref *s, const char *method, const char *json, int stream,
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
size_t frames(const struct resp *r, unsigned char *flags, json_t **msgs, size_t max)
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

const char *sh_start(const char *cmd, char *buf, size_t len, int use_stdin)
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


struct run parse_run(const struct resp *r)
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

struct run run_cmd(const struct sbx_ref *s, const char *cmd, const char *hdr)
{
	char buf[4096];
	struct resp r = envd(s, "/process.Process/Start", sh_start(cmd, buf, sizeof(buf), 0), 1, hdr, 0);
	cr_assert_eq(r.status, 200, "start: %ld %s", r.status, r.body);
	cr_assert_str_eq(r.ctype, "application/connect+json");
	struct run x = parse_run(&r);
	free(r.body);
	return x;
}



void *bg_main(void *arg)
{
	struct bg *b = arg;
	b->r = envd(b->sb, b->method, b->json, 1, "Connect-Timeout-Ms: 20000", 30000);
	return NULL;
}

int wait_pid(struct sbx_ref *a)
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

size_t count_sandboxes(const char *state)
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
