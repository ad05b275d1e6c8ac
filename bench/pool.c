/* SPDX-License-Identifier: MIT */
/*
 * sbx-bench-pool: create latency from a warm pool against a cold create, in
 * one run and one runtime, and the memory an idle pooled sandbox costs.
 *
 *   latency  --rounds rounds of --n creates each way, interleaved: cold
 *            creates (a spec no pool matches) then creates served by a pool
 *            of --size (waited full before each timed create, so every one
 *            is a hand-out). Only sbx_sandbox_create() is timed; destroys
 *            are not. Prints both medians and the ratio pooled/cold.
 *   memory   a pool of --idle sandboxes, filled and settled: host memory
 *            used and Pss of their process trees, per sandbox.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/sbx.h>

#include "common.h"

static void die(const char *what, int r, sbx_error *e)
{
	fprintf(stderr, "pool: %s: %s\n", what, e && e->msg ? e->msg : strerror(-r));
	exit(1);
}

static double timed_create(sbx_runtime *rt, const sbx_sandbox_opts *so, int keepalive)
{
	sbx_sandbox *sb = NULL;
	sbx_error *e = NULL;
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.keepalive = keepalive;
	double t0 = bench_now();
	int r = sbx_sandbox_create_ex(&sb, rt, so, &ctl, &e);
	double ms = (bench_now() - t0) * 1000.0;
	if (r < 0)
		die("create", r, e);
	if (sbx_sandbox_destroy(sb, &e) < 0)
		die("destroy", -EIO, e);
	sbx_sandbox_free(sb);
	return ms;
}

static void add_pool(sbx_runtime *rt, const sbx_sandbox_opts *so, unsigned size)
{
	sbx_pool_opts po = SBX_POOL_OPTS_INIT;
	po.spec = so;
	po.size = size;
	sbx_error *e = NULL;
	int r = sbx_pool_add(rt, &po, &e);
	if (r < 0)
		die("pool add", r, e);
	if ((r = sbx_pool_wait(rt, 300, &e)) < 0)
		die("pool wait", r, e);
}

static void memory(sbx_runtime *rt, const char *image, unsigned idle)
{
	const char *lab[] = { "bench=idle", NULL };
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.image = image;
	so.labels = lab;
	bench_meminfo base;
	bench_memory_settle();
	bench_meminfo_read(&base);
	add_pool(rt, &so, idle);
	bench_sleep(2);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *e = NULL;
	int r = sbx_sandbox_list(&v, &n, rt, NULL, lab, &e);
	if (r < 0)
		die("list", r, e);
	pid_t *roots = bench_xcalloc(n ? n : 1, sizeof(*roots));
	for (size_t i = 0; i < n; i++)
		roots[i] = v[i].pid;
	bench_density_point pt = { .count = n };
	bench_density_measure(&pt, &base, NULL, roots, n);
	printf("memory: %zu idle pooled sandboxes: host used %.3f MiB each, attributed %.3f MiB each, "
	       "Pss %.3f MiB each (%zu processes)\n",
	       n, (double)pt.used / 1024.0 / (double)n, (double)bench_density_attributed(&pt) / 1024.0 / (double)n,
	       (double)pt.pss / 1024.0 / (double)n, pt.nproc);
	free(roots);
	sbx_sandbox_info_free(v, n);
}

int main(int argc, char **argv)
{
	const char *image = "busybox";
	unsigned long n = 50, rounds = 4, size = 4, idle = 50;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (!strcmp(argv[i], "--image") && v)
			image = argv[++i];
		else if (!strcmp(argv[i], "--n") && v)
			bad = bench_parse_ulong(&n, argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && v)
			bad = bench_parse_ulong(&rounds, argv[++i]);
		else if (!strcmp(argv[i], "--size") && v)
			bad = bench_parse_ulong(&size, argv[++i]);
		else if (!strcmp(argv[i], "--idle") && v)
			bad = bench_parse_ulong(&idle, argv[++i]);
		else
			bad = 1;
		if (bad || !n || !rounds || !size || size > 1024 || !idle || idle > 1024) {
			fprintf(stderr, "usage: sbx-bench-pool [--image NAME] [--n 50] [--rounds 4] [--size 4] [--idle 50]\n");
			return 2;
		}
	}
	sbx_runtime *rt = NULL;
	sbx_error *e = NULL;
	int r = sbx_runtime_new(&rt, NULL, &e);
	if (r < 0)
		die("runtime", r, e);
	const char *cold_l[] = { "bench=cold", NULL }, *warm_l[] = { "bench=warm", NULL },
		   *ttl_l[] = { "bench=warm-ttl", NULL };
	sbx_sandbox_opts cold = SBX_SANDBOX_OPTS_INIT, warm = SBX_SANDBOX_OPTS_INIT, wttl = SBX_SANDBOX_OPTS_INIT;
	cold.image = warm.image = wttl.image = image;
	cold.labels = cold_l;
	warm.labels = warm_l;
	wttl.labels = ttl_l;
	/* Episodes create with a TTL: a hand-out then sets the taker's (one
	 * set_timeout round trip to the sandbox). */
	cold.ttl_s = wttl.ttl_s = 600;
	add_pool(rt, &warm, (unsigned)size);
	add_pool(rt, &wttl, (unsigned)size);
	timed_create(rt, &cold, 0); /* warm-up: image and caches */
	bench_samples sc = { 0 }, sw = { 0 }, st = { 0 }, sk = { 0 };
	/* The fourth series: as episodes create (TTL renewed by keepalive). */
	const sbx_sandbox_opts *specs[4] = { &cold, &warm, &wttl, &wttl };
	bench_samples *out[4] = { &sc, &sw, &st, &sk };
	for (unsigned long k = 0; k < rounds; k++)
		for (int s = 0; s < 4; s++)
			for (unsigned long i = 0; i < n; i++) {
				/* Pools full: no refill competes with the timed create. */
				if ((r = sbx_pool_wait(rt, 300, &e)) < 0)
					die("pool wait", r, e);
				bench_samples_add(out[s], timed_create(rt, specs[s], s == 3));
			}
	bench_stats c, w, t, ka;
	bench_stats_compute(&ka, &sk);
	bench_stats_compute(&c, &sc);
	bench_stats_compute(&w, &sw);
	bench_stats_compute(&t, &st);
	bench_stats_print(stdout, "cold create (ttl 600)", &c);
	bench_stats_print(stdout, "pooled, no ttl       ", &w);
	bench_stats_print(stdout, "pooled, ttl 600      ", &t);
	bench_stats_print(stdout, "pooled, ttl+keepalive", &ka);
	printf("ratio pooled/cold, no ttl: median %.4fx, p90 %.4fx (target <= 0.1x)\n", w.median / c.median,
	       w.p90 / c.p90);
	printf("ratio pooled/cold, ttl:    median %.4fx, p90 %.4fx (target <= 0.1x)\n", t.median / c.median,
	       t.p90 / c.p90);
	bench_samples_free(&sc);
	bench_samples_free(&sw);
	printf("ratio pooled/cold, ttl+keepalive: median %.4fx, p90 %.4fx (target <= 0.1x)\n",
	       ka.median / c.median, ka.p90 / c.p90);
	bench_samples_free(&st);
	bench_samples_free(&sk);
	memory(rt, image, (unsigned)idle);
	sbx_runtime_free(rt);
	return 0;
}
