/* SPDX-License-Identifier: MIT */
/*
 * sbx-bench-network: what network=internet adds to a sandbox's create and
 * destroy, against the default (none). Rounds alternate the two modes so
 * both see the same machine load; each round is --n create -> exec `true`
 * -> destroy lifecycles of one mode. Prints the median, p90 and p99 of
 * create, exec and destroy per mode. A third mode is internet with a
 * one-entry deny_out, which gives the sandbox an nftables chain of its own
 * (whose removal costs destroy an RCU grace period). SBX_LOG=debug shows the
 * library's own split of each create (links+rules, addresses).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sbx.h>

#include "common.h"

static void log_stderr(sbx_log_level level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	fprintf(stderr, "sbx: %s\n", msg);
}

static const char *const names[] = { "none", "internet", "internet+list" };

static int one(sbx_runtime *rt, const char *image, int mode, double ph[3])
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.image = image;
	static const char *const list[] = { "192.0.2.0/24", NULL };
	so.network = mode ? SBX_NETWORK_INTERNET : SBX_NETWORK_NONE;
	so.deny_out = mode == 2 ? list : NULL;
	so.nofile_max = 1024;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	double t0 = bench_now();
	int r = sbx_sandbox_create(&sb, rt, &so, &err);
	double t1 = bench_now();
	if (r == 0) {
		const char *argv[] = { "true", NULL };
		sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
		eo.argv = argv;
		sbx_exec_result res = { 0 };
		r = sbx_sandbox_exec(&res, sb, &eo, &err);
		sbx_exec_result_free(&res);
	}
	double t2 = bench_now();
	if (sb && sbx_sandbox_destroy(sb, r == 0 ? &err : NULL) < 0)
		r = -1;
	double t3 = bench_now();
	sbx_sandbox_free(sb);
	if (r < 0) {
		fprintf(stderr, "sbx-bench-network: %s: %s\n", names[mode], err ? err->msg : "failed");
		sbx_error_free(err);
		return -1;
	}
	ph[0] = (t1 - t0) * 1e3;
	ph[1] = (t2 - t1) * 1e3;
	ph[2] = (t3 - t2) * 1e3;
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long n = 50, rounds = 4;
	const char *image = "busybox";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--n"))
			bench_parse_ulong(&n, argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			bench_parse_ulong(&rounds, argv[i + 1]);
		else if (!strcmp(argv[i], "--image"))
			image = argv[i + 1];
		else {
			fprintf(stderr, "usage: sbx-bench-network [--n 50] [--rounds 4] [--image busybox]\n");
			return 2;
		}
	}
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	const char *lv = getenv("SBX_LOG");
	if (lv && !strcmp(lv, "debug")) {
		ro.log = log_stderr;
		ro.log_level = SBX_LOG_DEBUG;
	}
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	if (sbx_runtime_new(&rt, &ro, &err) < 0) {
		fprintf(stderr, "sbx-bench-network: runtime: %s\n", err ? err->msg : "?");
		return 1;
	}
	static const char *const phase[] = { "create", "exec", "destroy" };
	bench_samples s[3][3];
	memset(s, 0, sizeof(s));
	double ph[3];
	/* Warm-up: the image, the namespace pool and the nftables table. */
	for (int m = 0; m < 3; m++)
		for (int k = 0; k < 3; k++)
			if (one(rt, image, m, ph) < 0)
				return 1;
	for (unsigned long r = 0; r < rounds; r++)
		for (int m = 0; m < 3; m++)
			for (unsigned long i = 0; i < n; i++) {
				if (one(rt, image, m, ph) < 0)
					return 1;
				for (int k = 0; k < 3; k++)
					bench_samples_add(&s[m][k], ph[k]);
			}
	for (int m = 0; m < 3; m++)
		for (int k = 0; k < 3; k++) {
			bench_stats st;
			bench_stats_compute(&st, &s[m][k]);
			char label[64];
			snprintf(label, sizeof(label), "%-13s %-7s", names[m], phase[k]);
			bench_stats_print(stdout, label, &st);
			bench_samples_free(&s[m][k]);
		}
	sbx_runtime_free(rt);
	return 0;
}
