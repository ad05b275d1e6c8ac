/* SPDX-License-Identifier: MIT */
/*
 * A create stuck in `creating`: `sbx serve` always answers `started`, so a
 * canned server on loopback plays Daytona here. The first sandbox never
 * leaves `creating`: the provider deletes it after SBX_DAYTONA_CREATE_TIMEOUT_S
 * and the core's create pipeline retries; the second starts. Also a create
 * that ends in `error` is deleted and not retried.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sbx/sbx.h>

#include "providers/daytona/daytona_int.h"

static int lfd, port;
static pthread_t thr;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int creates, deletes_stuck, deletes_ok, deletes_bad;
static const char *first_state = "creating";

/* Reads one request (headers, then Content-Length bytes). */
static int read_req(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	char *he = NULL;
	while (!he) {
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = '\0';
		he = strstr(buf, "\r\n\r\n");
	}
	const char *cl = strcasestr(buf, "content-length:");
	size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0;
	while (n - (size_t)(he + 4 - buf) < want) {
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	return 0;
}

static void reply(int fd, int status, const char *body)
{
	char h[256];
	int hn = snprintf(h, sizeof(h),
			  "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			  "Connection: close\r\n\r\n",
			  status, strlen(body));
	if (write(fd, h, (size_t)hn) < 0 || write(fd, body, strlen(body)) < 0)
		return;
}

static void sandbox(char *out, size_t cap, const char *id, const char *state)
{
	snprintf(out, cap, "{\"id\":\"%s\",\"state\":\"%s\",\"labels\":{},\"toolboxProxyUrl\":\"http://127.0.0.1:%d/toolbox\"}",
		 id, state, port);
}

static void *serve(void *arg)
{
	(void)arg;
	static char buf[1 << 16];
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		char body[512];
		if (read_req(fd, buf, sizeof(buf)) == 0) {
			pthread_mutex_lock(&mu);
			if (!strncmp(buf, "POST /api/sandbox ", 18)) {
				creates++;
				sandbox(body, sizeof(body), creates == 1 ? "stuck" : "good",
					creates == 1 ? first_state : "started");
				reply(fd, 200, body);
			} else if (!strncmp(buf, "GET /api/sandbox/stuck ", 23)) {
				sandbox(body, sizeof(body), "stuck", first_state);
				reply(fd, 200, body);
			} else if (!strncmp(buf, "DELETE /api/sandbox/stuck ", 26)) {
				deletes_stuck++;
				reply(fd, 200, "{}");
			} else if (!strncmp(buf, "DELETE /api/sandbox/good ", 25)) {
				deletes_ok++;
				reply(fd, 200, "{}");
			} else {
				deletes_bad++;
				reply(fd, 404, "{\"statusCode\":404,\"message\":\"not here\"}");
			}
			pthread_mutex_unlock(&mu);
		}
		close(fd);
	}
}

static void setup(void)
{
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t l = sizeof(a);
	getsockname(lfd, (struct sockaddr *)&a, &l);
	port = ntohs(a.sin_port);
	cr_assert_eq(listen(lfd, 16), 0);
	cr_assert_eq(pthread_create(&thr, NULL, serve, NULL), 0);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/api", port);
	setenv("DAYTONA_API_URL", url, 1);
	setenv("DAYTONA_API_KEY", "canned-key-0123456789", 1);
	setenv("SBX_DAYTONA_CREATE_TIMEOUT_S", "0.3", 1);
	setenv("SBX_BACKOFF_BASE_S", "0.01", 1);
	setenv("SBX_BACKOFF_CAP_S", "0.02", 1);
}

static void teardown(void)
{
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	pthread_join(thr, NULL);
}

TestSuite(daytona_create, .init = setup, .fini = teardown, .timeout = 60);

static sbx_runtime *runtime(void)
{
	char dir[512];
	const char *b = getenv("SBX_BUILD_ROOT");
	snprintf(dir, sizeof(dir), "%s/test-state/daytona-create-%d", b ? b : "/tmp", (int)getpid());
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = dir;
	o.default_provider = "daytona";
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &o, &err), 0, "%s", err ? err->msg : "?");
	return rt;
}

Test(daytona_create, a_stuck_create_is_deleted_and_retried)
{
	sbx_runtime *rt = runtime();
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.provider = "daytona";
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err);
	cr_assert_eq(r, 0, "create: %d %s", r, err ? err->msg : "");
	cr_assert_eq(ctl.attempts, 2, "a stuck create + its retry = 2 calls, got %u", ctl.attempts);
	pthread_mutex_lock(&mu);
	cr_assert_eq(creates, 2);
	cr_assert_eq(deletes_stuck, 1, "the stuck sandbox was deleted");
	pthread_mutex_unlock(&mu);
	cr_assert_str_eq(sbx_sandbox_id(sb), "good");
	cr_assert_eq(sbx_sandbox_destroy(sb, NULL), 0);
	sbx_sandbox_free(sb);
	pthread_mutex_lock(&mu);
	cr_assert_eq(deletes_ok, 1);
	pthread_mutex_unlock(&mu);
	sbx_runtime_free(rt);
}

Test(daytona_create, an_error_state_is_deleted_and_not_retried)
{
	first_state = "error";
	struct dtn_ctx *c = NULL;
	cr_assert_eq(sbx__dtn_ctx_new(&c, NULL, NULL), 0);
	struct dtn_create cr = { .image = "busybox" };
	struct dtn_info in;
	sbx_error *err = NULL;
	int r = sbx__dtn_create(&in, c, &cr, &err);
	cr_assert_eq(r, -EIO, "%d %s", r, err ? err->msg : "");
	cr_assert(strstr(err->msg, "ended in state error"), "%s", err->msg);
	cr_assert_null(strstr(err->msg, "canned-key"));
	sbx_error_free(err);
	pthread_mutex_lock(&mu);
	cr_assert_eq(deletes_stuck, 1, "the failed sandbox was deleted");
	pthread_mutex_unlock(&mu);
	sbx__dtn_ctx_free(c);
}
