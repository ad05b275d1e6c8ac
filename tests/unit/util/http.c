/* SPDX-License-Identifier: MIT */
/*
 * The shared HTTP client against a small HTTP/1.1 server on loopback, made
 * here (a thread per connection): bounded bodies, streaming, uploads,
 * connection reuse, redirects and schemes, cancel, refused connections, and
 * that header values and URL queries never reach a log line.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sbx/version.h>

#include "util/http.h"
#include "util/log.h"

static int lfd = -1;
static int port;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int accepts;
static int held, released;  /* GET /hold: arrived, may answer */
static char last_req[8192];

/* The client may be gone (a cancelled transfer): no SIGPIPE. */
static ssize_t tx(int fd, const void *d, size_t n)
{
	return send(fd, d, n, MSG_NOSIGNAL);
}

static void reply(int fd, const char *status, const char *extra, const char *body, size_t n)
{
	char h[512];
	int k = snprintf(h, sizeof(h), "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%s\r\n", status, n, extra);
	if (tx(fd, h, (size_t)k) < 0 || (n && tx(fd, body, n) < 0))
		return;
}

/* Whether the request line is METHOD PATH (any query). */
static int is(const char *req, const char *method_path)
{
	size_t n = strlen(method_path);
	return strncmp(req, method_path, n) == 0 && (req[n] == ' ' || req[n] == '?');
}

static void *conn_main(void *u)
{
	int fd = (int)(intptr_t)u;
	char buf[65536];
	size_t have = 0;
	for (;;) {
		char *end;
		while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
			ssize_t n = read(fd, buf + have, sizeof(buf) - have);
			if (n <= 0)
				goto out;
			have += (size_t)n;
		}
		size_t hlen = (size_t)(end - buf) + 4, clen = 0;
		char *cl = strcasestr(buf, "\r\nContent-Length:");
		if (cl && cl < end)
			clen = strtoul(cl + 17, NULL, 10);
		while (have < hlen + clen) {
			ssize_t n = read(fd, buf + have, sizeof(buf) - have);
			if (n <= 0)
				goto out;
			have += (size_t)n;
		}
		pthread_mutex_lock(&mu);
		snprintf(last_req, sizeof(last_req), "%.*s", (int)(hlen + clen), buf);
		pthread_mutex_unlock(&mu);
		const char *body = buf + hlen;
		if (is(buf, "GET /hello") || is(buf, "HEAD /hello")) {
			reply(fd, "200 OK", "Content-Type: text/plain\r\nX-Thing:  v1 \r\n", "hello", 5);
		} else if (is(buf, "GET /big")) {
			static char big[100000];
			memset(big, 'b', sizeof(big));
			reply(fd, "200 OK", "", big, sizeof(big));
		} else if (is(buf, "GET /redir")) {
			reply(fd, "302 Found", "Location: /hello\r\n", "", 0);
		} else if (is(buf, "GET /ftp")) {
			reply(fd, "302 Found", "Location: ftp://127.0.0.1/x\r\n", "", 0);
		} else if (is(buf, "GET /hold")) {
			pthread_mutex_lock(&mu);
			held = 1;
			pthread_cond_broadcast(&cv);
			while (!released)
				pthread_cond_wait(&cv, &mu);
			pthread_mutex_unlock(&mu);
			reply(fd, "200 OK", "Connection: close\r\n", "held", 4);
			goto out;
		} else if (is(buf, "GET /slow")) {
			const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n";
			if (tx(fd, h, strlen(h)) < 0)
				goto out;
			for (int i = 0; i < 1000; i++) {
				if (tx(fd, "slow", 4) < 0)
					goto out;
				usleep(10000);
			}
			goto out;
		} else {
			reply(fd, "200 OK", "", body, clen);
		}
		memmove(buf, buf + hlen + clen, have - hlen - clen);
		have -= hlen + clen;
	}
out:
	close(fd);
	return NULL;
}

static void *accept_main(void *u)
{
	(void)u;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&mu);
		accepts++;
		pthread_mutex_unlock(&mu);
		pthread_t t;
		pthread_create(&t, NULL, conn_main, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static void server_start(void)
{
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(lfd, 16), 0);
	socklen_t l = sizeof(a);
	getsockname(lfd, (struct sockaddr *)&a, &l);
	port = ntohs(a.sin_port);
	pthread_t t;
	pthread_create(&t, NULL, accept_main, NULL);
	pthread_detach(t);
}

static char *url(const char *path)
{
	static char u[256];
	snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", port, path);
	return u;
}

static int n_accepts(void)
{
	pthread_mutex_lock(&mu);
	int n = accepts;
	pthread_mutex_unlock(&mu);
	return n;
}

TestSuite(util_http, .init = server_start);

static char seen_thing[64];
static int new_responses;

static void on_header(sbx_http_req *rq, const char *name, size_t nl, const char *v, size_t vl)
{
	(void)rq;
	if (!name)
		new_responses++;
	else if (nl == 7 && strncasecmp(name, "X-Thing", 7) == 0)
		snprintf(seen_thing, sizeof(seen_thing), "%.*s", (int)vl, v);
}

Test(util_http, bounded_body_headers_and_user_agent)
{
	sbx_buf b;
	sbx__buf_init(&b, 1024);
	sbx_http_req rq = { .url = url("/hello"), .resp = &b, .on_header = on_header };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_eq(rq.status, 200);
	cr_assert_str_eq(b.data, "hello");
	cr_assert_str_eq(seen_thing, "v1");
	cr_assert_eq(new_responses, 1);
	char ua[64];
	snprintf(ua, sizeof(ua), "User-Agent: sbx/%s\r\n", sbx_version_string());
	cr_assert_not_null(strstr(last_req, ua), "%s", last_req);
	sbx__buf_free(&b);

	sbx__buf_init(&b, 1000);
	sbx_error *e = NULL;
	rq = (sbx_http_req){ .url = url("/big?sig=sbxQUERYsecret1"), .resp = &b };
	cr_assert_eq(sbx__http_perform(&rq, &e), -E2BIG);
	cr_assert_eq(rq.fail, SBX_HTTP_SINK);
	cr_assert_not_null(strstr(e->msg, "larger than 1000 bytes"), "%s", e->msg);
	cr_assert_null(strstr(e->msg, "sbxQUERYsecret1"), "the query stays out: %s", e->msg);
	sbx_error_free(e);
	sbx__buf_free(&b);
}

static int refuse(sbx_http_req *rq, const char *d, size_t n)
{
	(void)d, (void)n;
	(*(int *)rq->payload)++;
	return -ENOSPC;
}

Test(util_http, callback_code_comes_back_unset)
{
	int calls = 0;
	sbx_error *e = NULL;
	sbx_http_req rq = { .url = url("/big"), .on_data = refuse, .payload = &calls };
	cr_assert_eq(sbx__http_perform(&rq, &e), -ENOSPC);
	cr_assert_eq(calls, 1);
	cr_assert_eq(rq.fail, SBX_HTTP_SINK);
	cr_assert_null(e, "the callback's error is the caller's to set");
}

struct feed {
	const char *parts[4];
	size_t i;
};

static long feed_read(sbx_http_req *rq, char *buf, size_t cap)
{
	struct feed *f = rq->payload;
	if (!f->parts[f->i])
		return 0;
	size_t n = strlen(f->parts[f->i]);
	cr_assert_leq(n, cap);
	memcpy(buf, f->parts[f->i++], n);
	return (long)n;
}

Test(util_http, uploads_from_memory_and_callback)
{
	sbx_buf b;
	sbx__buf_init(&b, 1024);
	sbx_http_req rq = { .method = "POST", .url = url("/echo"), .body = "abc", .body_len = 3,
			    .resp = &b, .headers = (const char *const[]){ "Expect:", NULL } };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_str_eq(b.data, "abc");
	b.len = 0;
	struct feed f = { .parts = { "one ", "two ", "three", NULL } };
	rq = (sbx_http_req){ .method = "PUT", .url = url("/echo"), .read = feed_read, .body_len = 13,
			     .payload = &f, .resp = &b,
			     .headers = (const char *const[]){ "Expect:", NULL } };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_str_eq(b.data, "one two three");
	cr_assert_not_null(strstr(last_req, "PUT /echo "));
	b.len = 0;
	rq = (sbx_http_req){ .method = "DELETE", .url = url("/echo"), .resp = &b };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_not_null(strstr(last_req, "DELETE /echo "));
	cr_assert_not_null(strstr(last_req, "Content-Length: 0"));
	sbx__buf_free(&b);
}

Test(util_http, connections_are_reused_across_requests_and_threads)
{
	int before = n_accepts();
	for (int i = 0; i < 5; i++) {
		sbx_http_req rq = { .url = url("/hello") };
		cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
		cr_assert_eq(rq.status, 200);
	}
	cr_assert_eq(n_accepts() - before, 1, "one connection for five requests");
}

static void *one_get(void *u)
{
	(void)u;
	sbx_http_req rq = { .url = url("/hello") };
	return (void *)(intptr_t)sbx__http_perform(&rq, NULL);
}

static void *hold_get(void *u)
{
	(void)u;
	sbx_http_req rq = { .url = url("/hold") };
	int r = sbx__http_perform(&rq, NULL);
	return (void *)(intptr_t)(r == 0 && rq.status == 200 ? 0 : -1);
}

Test(util_http, threads_reuse_kept_alive_connections)
{
	one_get(NULL);
	int before = n_accepts();
	for (int i = 0; i < 3; i++) {
		pthread_t t;
		void *r;
		pthread_create(&t, NULL, one_get, NULL);
		pthread_join(t, &r);
		cr_assert_eq((intptr_t)r, 0);
	}
	cr_assert_eq(n_accepts() - before, 0, "threads reuse the kept-alive connection");
}

/*
 * Proves the share, not just the handle pool: handle A's request is held
 * while B (a second handle) opens a connection of its own; A's connection is
 * then closed by the server. The next request gets A back from the pool (the
 * last one returned), which has no connection of its own left: it can only
 * reuse B's through the share.
 */
Test(util_http, handles_share_connections)
{
	pthread_t t;
	pthread_create(&t, NULL, hold_get, NULL);
	pthread_mutex_lock(&mu);
	while (!held)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	sbx_http_req rq = { .url = url("/hello") };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	pthread_mutex_lock(&mu);
	released = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	void *r;
	pthread_join(t, &r);
	cr_assert_eq((intptr_t)r, 0);
	int before = n_accepts();
	cr_assert_eq(before, 2);
	rq = (sbx_http_req){ .url = url("/hello") };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_eq(n_accepts(), before, "the other handle's connection was reused");
}

Test(util_http, redirects_and_schemes)
{
	sbx_http_req rq = { .url = url("/redir") };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_eq(rq.status, 302, "redirects are not followed unless asked");
	sbx_buf b;
	sbx__buf_init(&b, 1024);
	new_responses = 0;
	rq = (sbx_http_req){ .url = url("/redir"), .max_redirects = 2, .resp = &b,
			     .on_header = on_header };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_eq(rq.status, 200);
	cr_assert_str_eq(b.data, "hello");
	cr_assert_eq(new_responses, 2, "the header callback hears each response begin");
	sbx__buf_free(&b);
	sbx_error *e = NULL;
	rq = (sbx_http_req){ .url = url("/ftp"), .max_redirects = 2 };
	cr_assert_eq(sbx__http_perform(&rq, &e), -EPROTO);
	cr_assert_eq(rq.fail, SBX_HTTP_SCHEME);
	sbx_error_free(e);
	e = NULL;
	rq = (sbx_http_req){ .url = url("/hello"), .protocols = "https" };
	cr_assert_eq(sbx__http_perform(&rq, &e), -EPROTO);
	cr_assert_eq(rq.fail, SBX_HTTP_SCHEME);
	cr_assert_not_null(e);
	sbx_error_free(e);
}

static int cancel_after_first(sbx_http_req *rq, const char *d, size_t n)
{
	(void)d, (void)n;
	*(volatile int *)rq->payload = 1;
	return 0;
}

Test(util_http, cancel_and_refused)
{
	volatile int cancel = 0;
	sbx_error *e = NULL;
	sbx_http_req rq = { .url = url("/slow"), .on_data = cancel_after_first,
			    .payload = (void *)&cancel, .cancel = &cancel };
	cr_assert_eq(sbx__http_perform(&rq, &e), -ECANCELED);
	cr_assert_eq(rq.fail, SBX_HTTP_CANCEL);
	cr_assert_not_null(strstr(e->msg, "cancelled"), "%s", e->msg);
	sbx_error_free(e);
	e = NULL;

	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bind(s, (struct sockaddr *)&a, sizeof(a));
	socklen_t l = sizeof(a);
	getsockname(s, (struct sockaddr *)&a, &l);
	close(s);
	char u[128];
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/x", ntohs(a.sin_port));
	rq = (sbx_http_req){ .url = u };
	cr_assert_eq(sbx__http_perform(&rq, &e), -ECONNREFUSED);
	cr_assert_eq(rq.fail, SBX_HTTP_CONNECT);
	cr_assert_not_null(strstr(e->msg, "GET http://127.0.0.1:"), "%s", e->msg);
	sbx_error_free(e);
}

static char logged[16384];

static void sink(sbx_log_level level, const char *msg, void *payload)
{
	(void)level, (void)payload;
	size_t n = strlen(logged);
	snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
}

Test(util_http, header_values_and_queries_never_reach_the_log)
{
	sbx__log_set_sink(sink, NULL, SBX_LOG_DEBUG);
	const char *hdrs[] = { "Authorization: Bearer sbxTOKENabc123", "X-API-KEY: sbxKEYdef456",
			       "X-Plain: sbxPLAINghi789", NULL };
	sbx_http_req rq = { .url = url("/hello?X-Amz-Signature=sbxSIGjkl012"), .headers = hdrs };
	cr_assert_eq(sbx__http_perform(&rq, NULL), 0);
	cr_assert_not_null(strstr(last_req, "Authorization: Bearer sbxTOKENabc123\r\n"));
	cr_assert_not_null(strstr(last_req, "X-API-KEY: sbxKEYdef456\r\n"));
	rq = (sbx_http_req){ .url = url("/big?X-Amz-Signature=sbxSIGjkl012"), .headers = hdrs,
			     .resp = &(sbx_buf){ .max = 10 } };
	cr_assert_eq(sbx__http_perform(&rq, NULL), -E2BIG);
	free(rq.resp->data);
	sbx__log_set_sink(NULL, NULL, SBX_LOG_INFO);
	cr_assert_not_null(strstr(logged, "http: GET http://127.0.0.1:"), "%s", logged);
	cr_assert_not_null(strstr(logged, "/hello: HTTP 200"), "%s", logged);
	for (const char *s = "sbxTOKENabc123\0sbxKEYdef456\0sbxPLAINghi789\0sbxSIGjkl012\0***\0"; *s;
	     s += strlen(s) + 1)
		cr_assert_null(strstr(logged, s), "'%s' in the log:\n%s", s, logged);
	/* credential values are registered for redaction, plain ones are not */
	char probe[] = "x sbxTOKENabc123 sbxKEYdef456 sbxPLAINghi789";
	sbx__redact_inplace(probe);
	cr_assert_str_eq(probe, "x *** *** sbxPLAINghi789");
	sbx__redact_clear();
}
