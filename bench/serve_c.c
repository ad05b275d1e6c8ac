/* SPDX-License-Identifier: MIT */
/*
 * The lifecycle of bench/serve_sdk.mjs through sbx's own `e2b` provider
 * (its C client) instead of the npm SDK: create (template T) -> run
 * `/bin/bash -l -c true` -> kill, sequentially and by C concurrent
 * threads, against whatever E2B_API_URL / E2B_SANDBOX_URL /
 * E2B_API_KEY_FILE name (bench/serve.sh points them at its server).
 *
 *   sbx-bench-serve-c [--seq N] [--conc C] [--total M] [--warmup W]
 *                     [--template T] [--state DIR] [--json FILE]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sbx.h>

#include "common.h"

static sbx_runtime *rt;
static const char *tmpl = "base";

struct phase {
	pthread_mutex_t lk;
	bench_samples all, create, run, kill;
	unsigned long left, errors;
	char first_error[256];
};

static void fail(struct phase *ph, const char *what, sbx_error *e)
{
	pthread_mutex_lock(&ph->lk);
	if (!ph->errors++)
		snprintf(ph->first_error, sizeof(ph->first_error), "%s: %s", what, e && e->msg ? e->msg : "failed");
	pthread_mutex_unlock(&ph->lk);
	sbx_error_free(e);
}

/* One lifecycle: 0, or -1 after counting the error. */
static int lifecycle(struct phase *ph)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = "e2b";
	o.image = tmpl;
	o.ttl_s = 300;
	sbx_sandbox *sb = NULL;
	sbx_error *e = NULL;
	double t0 = bench_now();
	if (sbx_sandbox_create(&sb, rt, &o, &e) < 0) {
		fail(ph, "create", e);
		return -1;
	}
	double t1 = bench_now();
	const char *argv[] = { "/bin/bash", "-l", "-c", "true", NULL };
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.argv = argv;
	sbx_exec_result res = { 0 };
	int rc = sbx_sandbox_exec(&res, sb, &eo, &e);
	if (rc < 0 || res.exit_code != 0)
		fail(ph, "run", e);
	sbx_exec_result_free(&res);
	double t2 = bench_now();
	if (sbx_sandbox_destroy(sb, &e) < 0) {
		fail(ph, "kill", e);
		rc = -1;
	}
	sbx_sandbox_free(sb);
	double t3 = bench_now();
	if (rc < 0)
		return -1;
	pthread_mutex_lock(&ph->lk);
	bench_samples_add(&ph->all, (t3 - t0) * 1e3);
	bench_samples_add(&ph->create, (t1 - t0) * 1e3);
	bench_samples_add(&ph->run, (t2 - t1) * 1e3);
	bench_samples_add(&ph->kill, (t3 - t2) * 1e3);
	pthread_mutex_unlock(&ph->lk);
	return 0;
}

static void *worker(void *arg)
{
	struct phase *ph = arg;
	for (;;) {
		pthread_mutex_lock(&ph->lk);
		int go = ph->left > 0;
		if (go)
			ph->left--;
		pthread_mutex_unlock(&ph->lk);
		if (!go)
			return NULL;
		lifecycle(ph);
	}
}

static double run_phase(struct phase *ph, unsigned long total, unsigned long conc)
{
	pthread_mutex_init(&ph->lk, NULL);
	ph->left = total;
	pthread_t *t = bench_xcalloc(conc, sizeof(*t));
	double t0 = bench_now();
	for (unsigned long i = 0; i < conc; i++)
		if (pthread_create(&t[i], NULL, worker, ph) != 0) {
			fprintf(stderr, "bench: pthread_create failed\n");
			exit(1);
		}
	for (unsigned long i = 0; i < conc; i++)
		pthread_join(t[i], NULL);
	free(t);
	return bench_now() - t0;
}

static void row(FILE *f, const char *name, struct phase *ph, double wall)
{
	bench_stats a, c, r, k;
	bench_stats_compute(&a, &ph->all);
	bench_stats_compute(&c, &ph->create);
	bench_stats_compute(&r, &ph->run);
	bench_stats_compute(&k, &ph->kill);
	fprintf(f, "| %s | %zu | %lu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", name, a.n, ph->errors,
		a.median, a.p99, a.max, c.median, r.median, k.median, wall > 0 ? (double)a.n / wall : 0);
}

static void json_phase(FILE *f, const char *name, struct phase *ph, double wall)
{
	bench_stats a;
	bench_stats_compute(&a, &ph->all);
	fprintf(f, "  \"%s\": { \"errors\": %lu, \"wall_s\": %.3f, ", name, ph->errors, wall);
	bench_stats_json(f, &a);
	fprintf(f, " }");
}

int main(int argc, char **argv)
{
	unsigned long seq = 200, conc = 32, total = 320, warmup = 5;
	const char *state = NULL, *json = NULL;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (!strcmp(argv[i], "--seq") && v)
			bad = bench_parse_ulong(&seq, argv[++i]);
		else if (!strcmp(argv[i], "--conc") && v)
			bad = bench_parse_ulong(&conc, argv[++i]);
		else if (!strcmp(argv[i], "--total") && v)
			bad = bench_parse_ulong(&total, argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && v)
			bad = bench_parse_ulong(&warmup, argv[++i]);
		else if (!strcmp(argv[i], "--template") && v)
			tmpl = argv[++i];
		else if (!strcmp(argv[i], "--state") && v)
			state = argv[++i];
		else if (!strcmp(argv[i], "--json") && v)
			json = argv[++i];
		else
			bad = 1;
		if (bad || conc == 0) {
			fprintf(stderr, "usage: sbx-bench-serve-c [--seq N] [--conc C>0] [--total M] [--warmup W] "
					"[--template T] [--state DIR] [--json FILE]\n");
			return 2;
		}
	}
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	ro.state_dir = state;
	ro.default_provider = "e2b";
	sbx_error *e = NULL;
	if (sbx_runtime_new(&rt, &ro, &e) < 0) {
		fprintf(stderr, "bench: runtime: %s\n", e->msg);
		return 1;
	}
	struct phase w = { 0 }, s = { 0 }, c = { 0 };
	run_phase(&w, warmup, 1);
	double ws = run_phase(&s, seq, 1);
	double wc = run_phase(&c, total, conc);
	printf("# sbx e2b provider (C client): warmup %lu, sequential %lu, %lu at concurrency %lu\n\n", warmup, seq,
	       total, conc);
	printf("| phase | n | errors | p50 ms | p99 ms | max ms | create p50 | run p50 | kill p50 | lifecycles/s |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	row(stdout, "sequential", &s, ws);
	char name[32];
	snprintf(name, sizeof(name), "concurrent %lu", conc);
	row(stdout, name, &c, wc);
	if (s.errors || c.errors || w.errors)
		printf("errors: first: %s%s\n", s.first_error[0] ? s.first_error : c.first_error,
		       w.first_error[0] && !s.first_error[0] && !c.first_error[0] ? w.first_error : "");
	if (json) {
		FILE *f = fopen(json, "w");
		if (f) {
			fprintf(f, "{\n");
			json_phase(f, "sequential", &s, ws);
			fprintf(f, ",\n");
			json_phase(f, "concurrent", &c, wc);
			fprintf(f, "\n}\n");
			fclose(f);
		}
	}
	sbx_runtime_free(rt);
	return s.errors || c.errors ? 1 : 0;
}
