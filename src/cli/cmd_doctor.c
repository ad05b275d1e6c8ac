/* SPDX-License-Identifier: MIT */
/*
 * `sbx doctor`: preflight before burning GPUs. One verdict line per check,
 * exit 0 only when every check passes.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <sbx/backend.h>

#include "util/config.h"
#include "cli.h"

static const char doctor_help[] =
	"usage: sbx doctor [--backend B] [--image NAME]\n\n"
	"Check that this machine and configuration can run episodes on backend B.\n"
	"local: root, kernel features, cgroups, state and image directories, and one real\n"
	"sandbox (from --image, default the first image in the store). Remote backends:\n"
	"credentials present and well-formed, endpoint reachable, TTL versus the episode\n"
	"cap (SBX_MAX_EPISODE_S, default 3600), disk quota arithmetic where known.\n"
	"Prints one line per check; exits 0 only when all pass.\n";

static int failures;

static void verdict(int ok, const char *check, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict(int ok, const char *check, const char *fmt, ...)
{
	va_list ap;
	printf("%-4s %-16s ", ok ? "ok" : "FAIL", check);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	failures += !ok;
}

static double env_num(const char *a, const char *b, double def)
{
	const char *v = sbx__env_dyn(a);
	if ((!v || !*v) && b)
		v = sbx__env_dyn(b);
	return v && *v ? strtod(v, NULL) : def;
}

static int has_line(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char line[512];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void disk(const char *what, const char *path, double want_gib)
{
	struct statvfs s;
	if (statvfs(path, &s) < 0) {
		verdict(0, what, "%s: %s", path, strerror(errno));
		return;
	}
	double gib = (double)s.f_bavail * (double)s.f_frsize / (1024.0 * 1024 * 1024);
	verdict(gib >= want_gib, what, "%s: %.1f GiB free (want >= %.0f)", path, gib, want_gib);
}

static void local_checks(const char *image)
{
	verdict(geteuid() == 0, "root", geteuid() == 0 ? "running as root" : "the local provider needs root");
	struct utsname u;
	uname(&u);
	int maj = 0, min = 0;
	sscanf(u.release, "%d.%d", &maj, &min);
	verdict(maj > 5 || (maj == 5 && min >= 8), "kernel", "%s (need >= 5.8: openat2, pidfd, fsopen)", u.release);
	verdict(has_line("/proc/filesystems", "overlay"), "overlayfs", "in /proc/filesystems");
	verdict(has_line("/proc/self/status", "Seccomp:"), "seccomp", "filter mode supported");
	int v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 &&
		 has_line("/sys/fs/cgroup/cgroup.controllers", "memory");
	int v1 = access("/sys/fs/cgroup/memory/memory.failcnt", F_OK) == 0 &&
		 access("/sys/fs/cgroup/pids/cgroup.procs", F_OK) == 0;
	int hybrid = access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0 &&
		     has_line("/sys/fs/cgroup/unified/cgroup.controllers", "memory");
	verdict(v1 || v2 || hybrid, "cgroups", "%s", v2 || hybrid ? "v2 with memory+pids" : v1 ? "v1 memory+pids+cpu" : "none usable: limits unavailable");
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		verdict(0, "state dir", "cannot open the runtime");
		return;
	}
	verdict(access(sbx_runtime_state_dir(rt), W_OK) == 0, "state dir", "%s writable", sbx_runtime_state_dir(rt));
	disk("image disk", access(sbx_runtime_image_dir(rt), F_OK) == 0 ? sbx_runtime_image_dir(rt) : "/", 5);
	sbx_image **imgs = NULL;
	size_t n = 0;
	sbx_image_list(&imgs, &n, rt, NULL);
	const char *use = image ? image : n ? imgs[0]->name : NULL;
	verdict(use != NULL, "images", "%zu in %s%s", n, sbx_runtime_image_dir(rt),
		use ? "" : " (import one: sbx image import|bootstrap)");
	if (use) {
		sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
		o.image = use;
		sbx_sandbox *sb = NULL;
		sbx_error *err = NULL;
		int r = sbx_sandbox_create(&sb, rt, &o, &err);
		if (r == 0) {
			sbx_exec_opts e = SBX_EXEC_OPTS_INIT;
			e.shell = "echo ok";
			sbx_exec_result res;
			r = sbx_sandbox_exec(&res, sb, &e, &err);
			int ok = r == 0 && res.out && strcmp(res.out, "ok\n") == 0;
			sbx_exec_result_free(&res);
			r = sbx_sandbox_destroy(sb, ok ? &err : NULL);
			sbx_sandbox_free(sb);
			verdict(ok && r == 0, "sandbox", "create, exec and destroy on %s", use);
		} else {
			verdict(0, "sandbox", "create on %s: %s", use, err ? err->msg : "?");
		}
		sbx_error_free(err);
	}
	sbx_image_list_free(imgs, n);
	sbx_runtime_free(rt);
}

static size_t discard(void *p, size_t s, size_t n, void *u)
{
	(void)p;
	(void)u;
	return s * n;
}

static void endpoint(const char *url)
{
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	CURLcode rc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK)
		verdict(0, "endpoint", "%s unreachable: %s", url, curl_easy_strerror(rc));
	else
		verdict(code > 0 && code < 500, "endpoint", "%s answered HTTP %ld", url, code);
}

static void remote_checks(const char *backend)
{
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
	const char *def = !strcmp(backend, "e2b") ? "https://api.e2b.app" :
			  !strcmp(backend, "daytona") ? "https://app.daytona.io/api" : "https://api.modal.com";
	endpoint(c.endpoint && *c.endpoint ? c.endpoint : def);
	double cap = env_num("SBX_MAX_EPISODE_S", "OPENENV_MAX_ROLLOUT_TIME_SECONDS", 3600);
	if (!strcmp(backend, "modal")) {
		double ttl = env_num("OPENENV_MODAL_SANDBOX_TTL_S", "SBX_SANDBOX_TTL_S", SBX_SANDBOX_TTL_DEFAULT_S);
		verdict(ttl >= cap, "ttl", "Modal TTL %.0fs cannot be extended; it must be >= the episode cap %.0fs%s",
			ttl, cap, ttl >= cap ? "" : " (raise OPENENV_MODAL_SANDBOX_TTL_S)");
	} else {
		double ttl = sbx__sandbox_ttl_s(); /* what create will use */
		verdict(ttl >= 60, "ttl", "%.0fs, renewed every %.0fs by keepalive (episode cap %.0fs)", ttl, ttl / 6, cap);
	}
	verdict(1, "disk quota", "%s reports no quota to check against (concurrency x storage_mb)", backend);
	sbx_credential_clear(&c);
}

int cmd_doctor(int argc, char **argv)
{
	const char *backend = NULL, *image = NULL;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", doctor_help);
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
	if (!strcmp(name, "local"))
		local_checks(image);
	else
		remote_checks(name);
	printf("sbx doctor: %s (%d check%s failed)\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
	free(name);
	return failures ? EXIT_FAIL : EXIT_OK;
}
