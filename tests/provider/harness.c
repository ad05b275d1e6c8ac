/* SPDX-License-Identifier: MIT */
/*
 * Harness of the provider conformance suite (harness.h). Criterion runs each
 * test in a process of its own, so every test gets its own runtime, state
 * dir and (for e2b) server: nothing carries over between tests or runs.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

struct conf C;
static atomic_int throttle_logs;

double conf_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void conf_sleep(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static const char *build_root(void)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	cr_assert(b && *b, "SBX_BUILD_ROOT not set (run through meson test)");
	return b;
}

/* Warnings and errors go to the test's stderr (shown on failure); the
 * pipeline's throttle warning is counted for the backoff tests. */
const char *volatile conf_secret;
atomic_int conf_secret_leaks;

static void log_sink(sbx_log_level level, const char *msg, void *payload)
{
	(void)payload;
	const char *sec = conf_secret;
	if (sec && strstr(msg, sec))
		atomic_fetch_add(&conf_secret_leaks, 1);
	if (strstr(msg, "create throttled"))
		atomic_fetch_add(&throttle_logs, 1);
	if (level <= SBX_LOG_WARN)
		fprintf(stderr, "[%s] %s\n", C.name ? C.name : "?", msg);
}

int conf_throttle_logs(void)
{
	return atomic_load(&throttle_logs);
}

sbx_runtime *conf_runtime(void)
{
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = C.state;
	o.image_dir = C.images;
	o.default_provider = C.name;
	o.log = log_sink;
	o.log_level = SBX_LOG_WARN;
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	int r = sbx_runtime_new(&rt, &o, &err);
	cr_assert_eq(r, 0, "runtime: %s", ERRMSG(err));
	return rt;
}

/* ---- sbx serve for e2b ---------------------------------------------------- */

static void srv_start(const char *extra)
{
	char bin[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", build_root());
	static int seq;
	snprintf(C.srv_state, sizeof(C.srv_state), "%s/test-state/conf-srv-%d-%d", build_root(), (int)getpid(),
		 seq++);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	C.srv_pid = fork();
	cr_assert_geq(C.srv_pid, 0);
	if (C.srv_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", C.srv_state,
		      "--image-dir", C.images, "--destroy-on-exit", "--no-access-log", extra, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	int port = 0, ready = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!port)
			port = (int)strtol(line, NULL, 10);
		if (strstr(line, "ready url=")) {
			ready = 1;
			break;
		}
	}
	fclose(f);
	cr_assert(port > 0 && ready, "sbx serve did not start (port %d)", port);
	char base[64];
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
	snprintf(C.keyfile, sizeof(C.keyfile), "%s/server/api-key", C.srv_state);
	/* The key travels as a file path, never as a value. */
	char api[80];
	snprintf(api, sizeof(api), "%s/api", base);
	setenv("DAYTONA_API_URL", api, 1);
	setenv("DAYTONA_API_KEY_FILE", C.keyfile, 1);
	unsetenv("DAYTONA_API_KEY");
	setenv("E2B_API_URL", base, 1);
	setenv("E2B_SANDBOX_URL", base, 1);
	setenv("E2B_API_KEY_FILE", C.keyfile, 1);
	unsetenv("E2B_API_KEY");
	unsetenv("E2B_DOMAIN");
}

static void srv_stop(void)
{
	if (C.srv_pid > 0) {
		kill(C.srv_pid, SIGTERM);
		waitpid(C.srv_pid, NULL, 0);
	}
	C.srv_pid = 0;
}

void conf_restart_server(const char *extra)
{
	cr_assert(CONF_SERVED(C.kind));
	sbx_runtime_free(C.rt);
	srv_stop();
	srv_start(extra);
	C.rt = conf_runtime(); /* the provider reads its endpoint when it starts */
}

/* ---- setup ------------------------------------------------------------------ */

void conf_setup(void)
{
	sbx_test_require_root();
	const char *p = getenv("SBX_CONF_PROVIDER");
	cr_assert(p && *p, "SBX_CONF_PROVIDER is not set (local, faulty, e2b or daytona)");
	if (!strcmp(p, "local"))
		C.kind = CONF_LOCAL, C.name = "local";
	else if (!strcmp(p, "faulty"))
		C.kind = CONF_FAULTY, C.name = "faulty";
	else if (!strcmp(p, "e2b"))
		C.kind = CONF_E2B, C.name = "e2b";
	else if (!strcmp(p, "daytona"))
		C.kind = CONF_DAYTONA, C.name = "daytona";
	else
		cr_assert_fail("SBX_CONF_PROVIDER=%s: expected local, faulty, e2b or daytona", p);
	snprintf(C.images, sizeof(C.images), "%s/test-images", build_root());
	snprintf(C.state, sizeof(C.state), "%s/test-state/conf-%s-%d", build_root(), C.name, (int)getpid());
	snprintf(C.run, sizeof(C.run), "%s-%d-%ld", C.name, (int)getpid(), (long)time(NULL));
	snprintf(C.label, sizeof(C.label), "conf.run=%s", C.run);
	C.labels[0] = C.label;
	C.labels[1] = NULL;
	/* Fast backoff for the throttle cases; nothing else throttles. */
	setenv("SBX_BACKOFF_BASE_S", "0.02", 1);
	setenv("SBX_BACKOFF_CAP_S", "0.05", 1);
	unsetenv("SBX_CREATE_MAX_RETRIES");
	if (C.kind == CONF_FAULTY) {
		cr_assert_eq(sbx_faulty_register(NULL), 0);
		sbx_faulty_config fc = { .seed = 1 };
		sbx_faulty_configure(&fc);
	}
	C.rt = conf_runtime();
	sbx_test_busybox_image(C.rt);
	if (CONF_SERVED(C.kind)) {
		srv_start(NULL);
		/* the provider reads E2B_* when it starts: a runtime made after the server */
		sbx_runtime_free(C.rt);
		C.rt = conf_runtime();
	}
}

void conf_teardown(void)
{
	if (!C.rt)
		return;
	/* A failed test may have left sandboxes: collect ours, then stop. */
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	const char *filter[] = { C.label, NULL };
	if (sbx_sandbox_list(&v, &n, C.rt, C.name, filter, NULL) == 0) {
		for (size_t i = 0; i < n; i++) {
			fprintf(stderr, "[%s] teardown: removing left-over sandbox %s\n", C.name, v[i].id);
			sbx_sandbox_destroy_id(C.rt, C.name, v[i].id, NULL);
		}
		sbx_sandbox_info_free(v, n);
	}
	sbx_runtime_free(C.rt);
	C.rt = NULL;
	srv_stop();
}

/* ---- helpers ---------------------------------------------------------------- */

sbx_sandbox_opts conf_opts(void)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = C.name;
	o.image = "busybox";
	o.ttl_s = 300;
	o.labels = C.labels;
	return o;
}

sbx_sandbox *conf_create(const sbx_sandbox_opts *o)
{
	sbx_sandbox_opts d = conf_opts();
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, C.rt, o ? o : &d, &err);
	cr_assert_eq(r, 0, "create on %s: %d %s", C.name, r, ERRMSG(err));
	cr_assert_not_null(sb);
	return sb;
}

void conf_destroy(sbx_sandbox *sb)
{
	sbx_error *err = NULL;
	int r = sbx_sandbox_destroy(sb, &err);
	cr_assert_eq(r, 0, "destroy %s: %d %s", sbx_sandbox_id(sb), r, ERRMSG(err));
	sbx_sandbox_free(sb);
}

sbx_exec_result conf_exec(sbx_sandbox *sb, const sbx_exec_opts *o)
{
	sbx_exec_result res;
	memset(&res, 0, sizeof(res));
	sbx_error *err = NULL;
	int r = sbx_sandbox_exec(&res, sb, o, &err);
	cr_assert_eq(r, 0, "exec on %s: %d %s", C.name, r, ERRMSG(err));
	return res;
}

sbx_exec_result conf_sh(sbx_sandbox *sb, const char *cmd)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	return conf_exec(sb, &o);
}

size_t conf_count(const char *extra)
{
	const char *filter[] = { C.label, extra, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	int r = sbx_sandbox_list(&v, &n, C.rt, C.name, filter, &err);
	cr_assert_eq(r, 0, "list on %s: %d %s", C.name, r, ERRMSG(err));
	sbx_sandbox_info_free(v, n);
	return n;
}

size_t conf_wait_count(const char *extra, size_t want, double max_s)
{
	double until = conf_now() + max_s;
	size_t n;
	while ((n = conf_count(extra)) != want && conf_now() < until)
		conf_sleep(0.05);
	return n;
}

void conf_fill(unsigned char *buf, size_t len, unsigned seed)
{
	unsigned long long x = 0x9e3779b97f4a7c15ull ^ seed;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)(x >> 24);
	}
}

void conf_sha256(const void *buf, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned n = 0;
	cr_assert_eq(EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL), 1);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
