/* SPDX-License-Identifier: MIT */
/*
 * `sbx doctor`: preflight before burning GPUs. One verdict line per check,
 * exit 0 only when every check passes. The checks come from the registry:
 * for a remote provider (credential, endpoint, TTL rules from its
 * description) and the provider's own probes (desc->doctor).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/backend.h>
#include <sbx/sys/provider.h>

#include "util/config.h"
#include "util/http.h"
#include "cli.h"

static const char doctor_help[] =
	"usage: sbx doctor [--backend B] [--image NAME]\n\n"
	"Check that this machine and configuration can run episodes on backend B.\n"
	"local: root, kernel features, cgroups, state and image directories, and one real\n"
	"sandbox (from --image, default the first image in the store). Remote backends:\n"
	"credentials present and well-formed, endpoint reachable, TTL versus the episode\n"
	"cap (SBX_MAX_EPISODE_S, default 3600), disk quota arithmetic where known.\n"
	"Prints one line per check; exits 0 only when all pass.\n\nbackends:\n";

static int failures;

static void vverdict(int ok, const char *check, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static void vverdict(int ok, const char *check, const char *fmt, va_list ap)
{
	printf("%-4s %-16s ", ok ? "ok" : "FAIL", check);
	vprintf(fmt, ap);
	printf("\n");
	failures += !ok;
}

static void verdict(int ok, const char *check, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict(int ok, const char *check, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vverdict(ok, check, fmt, ap);
	va_end(ap);
}

/* What a provider's doctor probe emits through (sbx_doctor_emit). */
static void emit(void *payload, int ok, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void emit(void *payload, int ok, const char *check, const char *fmt, ...)
{
	(void)payload;
	va_list ap;
	va_start(ap, fmt);
	vverdict(ok, check, fmt, ap);
	va_end(ap);
}

static double env_num(const char *a, const char *b, double def)
{
	const char *v = sbx__env_dyn(a);
	if ((!v || !*v) && b)
		v = sbx__env_dyn(b);
	return v && *v ? strtod(v, NULL) : def;
}

static int discard_data(sbx_http_req *rq, const char *data, size_t len)
{
	(void)rq;
	(void)data;
	(void)len;
	return 0;
}

/* Through the one HTTP client layer (util/http.c): its user agent, scheme
 * limits and redaction, and no signals from a resolver timeout. */
static void endpoint(const char *url)
{
	sbx_http_req rq = { .url = url, .timeout_ms = 5000, .on_data = discard_data };
	sbx_error *err = NULL;
	int r = sbx__http_perform(&rq, &err);
	if (r < 0)
		verdict(0, "endpoint", "%s unreachable: %s", url, err && err->msg ? err->msg : rq.error);
	else
		verdict(rq.status > 0 && rq.status < 500, "endpoint", "%s answered HTTP %ld", url, rq.status);
	sbx_error_free(err);
}

static void remote_checks(const sbx_provider_desc *d)
{
	const char *backend = d->name;
	sbx_credential c;
	sbx_error *err = NULL;
	if (sbx_credential_resolve(&c, backend, &err) < 0) {
		verdict(0, "credentials", "%s", err->msg);
		sbx_error_free(err);
	} else {
		int ok = 1;
		for (size_t i = 0; i < c.n_values; i++)
			ok &= strlen(c.values[i]) >= 8 && !strpbrk(c.values[i], " \t\"'");
		verdict(ok, "credentials", "from %s%s%s", c.source == SBX_CRED_ENV ? "the environment" : "key file ",
			c.path ? c.path : "", ok ? "" : " (malformed: too short or contains quotes/spaces)");
	}
	const char *url = c.endpoint && *c.endpoint ? c.endpoint : d->endpoint_default;
	if (url)
		endpoint(url);
	double cap = env_num("SBX_MAX_EPISODE_S", "OPENENV_MAX_ROLLOUT_TIME_SECONDS", 3600);
	double ttl = d->ttl_vars[0] ? env_num(d->ttl_vars[0], d->ttl_vars[1], SBX_SANDBOX_TTL_DEFAULT_S)
				    : SBX_SANDBOX_TTL_DEFAULT_S;
	if (!(d->caps & SBX_PROVIDER_CAP_TTL_EXTEND)) {
		char raise[96] = "";
		if (ttl < cap && d->ttl_vars[0])
			snprintf(raise, sizeof(raise), " (raise %s)", d->ttl_vars[0]);
		verdict(ttl >= cap, "ttl", "%s TTL %.0fs cannot be extended; it must be >= the episode cap %.0fs%s",
			d->title, ttl, cap, raise);
	} else {
		ttl = sbx__sandbox_ttl_s(); /* what create will use */
		verdict(ttl >= 60, "ttl", "%.0fs, renewed every %.0fs by keepalive (episode cap %.0fs)", ttl, ttl / 6, cap);
	}
	if (!d->doctor) /* a provider's own checks do the quota math (daytona) */
		verdict(1, "disk quota", "%s reports no quota to check against (concurrency x storage_mb)", backend);
	sbx_credential_clear(&c);
}

int cmd_doctor(int argc, char **argv)
{
	const char *backend = NULL, *image = NULL;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", doctor_help);
			cli_print_backends(stdout);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
			backend = argv[++i];
		} else if (!strcmp(argv[i], "--image") && i + 1 < argc) {
			image = argv[++i];
		} else {
			return cli_usage_error("doctor", "unknown argument %s", argv[i]);
		}
	}
	char *name = NULL;
	sbx_error *err = NULL;
	if (sbx_backend_resolve(&name, backend, &err) < 0)
		return cli_fail("doctor", err);
	printf("sbx doctor: backend %s\n", name);
	failures = 0;
	const sbx_provider_desc *d = sbx_provider_describe(name);
	if (d->caps & SBX_PROVIDER_CAP_REMOTE)
		remote_checks(d);
	if (d->doctor) {
		sbx_doctor_ctx dc = { .backend = d->name, .image = image, .runtime = cli_runtime, .emit = emit };
		d->doctor(&dc);
	}
	printf("sbx doctor: %s (%d check%s failed)\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
	free(name);
	return failures ? EXIT_FAIL : EXIT_OK;
}
