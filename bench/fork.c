/* SPDX-License-Identifier: MIT */
/*
 * Group fork on `local` (issue 18 item 4, issue 17's snapshot goal): a parent
 * that wrote SIZE MiB forks into N children, against 2 cold creates,
 * interleaved in one run; then fork(N) and a named snapshot against what the
 * parent wrote: 0, 100, 400 MiB in one file, 1000 and FILES small files. Acceptance: fork(8) of a parent with
 * 100 MiB written takes less time than 2 cold creates (issue 18); a snapshot of
 * a 100 MiB upper <= 50 ms (issue 17).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sbx/sbx.h>

#include "common.h"

static sbx_runtime *rt;
static const char *image;

/* --debug: the library's stage timings (create, fork) on stderr. */
static void log_stderr(sbx_log_level level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	fprintf(stderr, "%s\n", msg);
}

static sbx_sandbox *make(void)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = image;
	o.scratch = SBX_SCRATCH_DISK;
	o.storage_mb = 2048;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	if (sbx_sandbox_create(&sb, rt, &o, &err) < 0) {
		fprintf(stderr, "bench: create: %s\n", err->msg);
		exit(1);
	}
	return sb;
}

static void gone(sbx_sandbox *sb)
{
	sbx_sandbox_destroy(sb, NULL);
	sbx_sandbox_free(sb);
}

static void fill(sbx_sandbox *sb, unsigned mb)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "dd if=/dev/urandom of=/data bs=1M count=%u 2>/dev/null && sync", mb);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.argv = argv;
	sbx_exec_result res = { 0 };
	sbx_error *err = NULL;
	if (sbx_sandbox_exec(&res, sb, &eo, &err) < 0 || res.exit_code != 0) {
		fprintf(stderr, "bench: write %u MiB: %s\n", mb, err ? err->msg : "command failed");
		exit(1);
	}
	sbx_exec_result_free(&res);
}

/* files small files (a few bytes each) under /m. */
static void fill_files(sbx_sandbox *sb, unsigned long files)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p /m && cd /m && seq 1 %lu | xargs sh -c 'for f; do echo $f > $f; done' _ && sync", files);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.argv = argv;
	sbx_exec_result res = { 0 };
	sbx_error *err = NULL;
	if (sbx_sandbox_exec(&res, sb, &eo, &err) < 0 || res.exit_code != 0) {
		fprintf(stderr, "bench: write %lu files: %s\n", files, err ? err->msg : "command failed");
		exit(1);
	}
	sbx_exec_result_free(&res);
}

/* CPU time of this process (all its threads, the kernel work of their
 * syscalls included), ms. On a shared, loaded machine wall time mostly
 * measures the wait for a core; CPU time is what the work costs. */
static double self_cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Plus what the new sandboxes' inits used to build themselves (their cgroups). */
static double sandboxes_cpu_ms(sbx_sandbox **v, size_t n)
{
	double ms = 0;
	for (size_t i = 0; i < n; i++) {
		sbx_stats st;
		if (sbx_sandbox_stats(&st, v[i], NULL) == 0)
			ms += st.cpu_s * 1e3;
	}
	return ms;
}

struct cost {
	bench_samples wall, cpu;
};

static void cost_free(struct cost *c)
{
	bench_samples_free(&c->wall);
	bench_samples_free(&c->cpu);
}

static void do_fork(struct cost *c, sbx_sandbox *p, size_t n)
{
	sbx_sandbox **k = bench_xcalloc(n, sizeof(*k));
	sbx_error *err = NULL;
	double c0 = self_cpu_ms(), t0 = bench_now();
	if (sbx_sandbox_fork(k, n, p, NULL, &err) < 0) {
		fprintf(stderr, "bench: fork: %s\n", err->msg);
		exit(1);
	}
	bench_samples_add(&c->wall, (bench_now() - t0) * 1e3);
	bench_samples_add(&c->cpu, self_cpu_ms() - c0 + sandboxes_cpu_ms(k, n));
	for (size_t i = 0; i < n; i++)
		gone(k[i]);
	free(k);
}

static void do_cold2(struct cost *c)
{
	double c0 = self_cpu_ms(), t0 = bench_now();
	sbx_sandbox *v[2] = { make(), make() };
	bench_samples_add(&c->wall, (bench_now() - t0) * 1e3);
	bench_samples_add(&c->cpu, self_cpu_ms() - c0 + sandboxes_cpu_ms(v, 2));
	gone(v[0]);
	gone(v[1]);
}

/* Wall and CPU medians of a against b (2 cold creates of the same rounds). */
static void print_ratio(const char *label, struct cost *a, struct cost *b)
{
	bench_stats aw, ac, bw, bc;
	bench_stats_compute(&aw, &a->wall);
	bench_stats_compute(&ac, &a->cpu);
	bench_stats_compute(&bw, &b->wall);
	bench_stats_compute(&bc, &b->cpu);
	printf("%-28s wall %8.2f ms vs %7.2f = %6.2fx   cpu %8.2f ms vs %7.2f = %6.2fx\n", label, aw.median,
	       bw.median, aw.median / bw.median, ac.median, bc.median, ac.median / bc.median);
}

int main(int argc, char **argv)
{
	unsigned long rounds = 5, n = 8, mb = 100, files = 10000;
	int debug = 0;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--image") && v)
			image = argv[++i];
		else if (!strcmp(argv[i], "--debug"))
			debug = 1;
		else if (!strcmp(argv[i], "--rounds") && v && bench_parse_ulong(&rounds, v) == 0)
			i++;
		else if (!strcmp(argv[i], "--n") && v && bench_parse_ulong(&n, v) == 0)
			i++;
		else if (!strcmp(argv[i], "--mb") && v && bench_parse_ulong(&mb, v) == 0)
			i++;
		else if (!strcmp(argv[i], "--files") && v && bench_parse_ulong(&files, v) == 0)
			i++;
		else {
			fprintf(stderr, "usage: sbx-bench-fork --image NAME [--rounds 5] [--n 8] [--mb 100] [--files 10000] [--debug]\n");
			return 2;
		}
	}
	if (!image || !n || !rounds) {
		fprintf(stderr, "usage: sbx-bench-fork --image NAME [--rounds 5] [--n 8] [--mb 100] [--files 10000] [--debug]\n");
		return 2;
	}
	sbx_error *err = NULL;
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	if (debug) {
		ro.log = log_stderr;
		ro.log_level = SBX_LOG_DEBUG;
	}
	if (sbx_runtime_new(&rt, &ro, &err) < 0) {
		fprintf(stderr, "bench: runtime: %s\n", err->msg);
		return 1;
	}
	struct cost fork_n = { 0 }, cold2 = { 0 };
	sbx_sandbox *p = make();
	fill(p, (unsigned)mb);
	gone(make()); /* warm the image and the namespace pool */
	for (unsigned long r = 0; r < rounds; r++) {
		do_fork(&fork_n, p, n);
		do_cold2(&cold2);
	}
	gone(p);
	bench_stats sf, sc;
	bench_stats_compute(&sf, &fork_n.wall);
	bench_stats_compute(&sc, &cold2.wall);
	char label[128];
	snprintf(label, sizeof(label), "fork(%lu), %lu MiB written", n, mb);
	bench_stats_print(stdout, label, &sf);
	bench_stats_print(stdout, "2 cold creates", &sc);
	printf("ratio fork(%lu) / 2 cold creates: %.2fx (goal < 1)\n", n, sf.median / sc.median);
	print_ratio(label, &fork_n, &cold2);
	cost_free(&fork_n);
	cost_free(&cold2);
	/* fork(N) and a named snapshot against what the parent wrote: bytes
	 * (one file of 0, 100, 400 MiB) and files (small ones: the frozen
	 * layer is a copy per file, past FORK_COPY_MAX one snapshot per child). */
	struct { unsigned mb; unsigned long files; } cases[] = { { 0, 0 }, { 100, 0 }, { 400, 0 },
								 { 0, 1000 }, { 0, files } };
	for (size_t s = 0; s < sizeof(cases) / sizeof(cases[0]); s++) {
		sbx_sandbox *q = make();
		if (cases[s].mb)
			fill(q, cases[s].mb);
		if (cases[s].files)
			fill_files(q, cases[s].files);
		struct cost one = { 0 }, cold = { 0 };
		bench_samples snap = { 0 };
		for (unsigned long r = 0; r < rounds; r++) {
			do_fork(&one, q, n);
			do_cold2(&cold);
			char *name = NULL;
			double t0 = bench_now();
			if (sbx_sandbox_snapshot(&name, q, NULL, &err) < 0) {
				fprintf(stderr, "bench: snapshot: %s\n", err->msg);
				exit(1);
			}
			bench_samples_add(&snap, (bench_now() - t0) * 1e3);
			sbx_snapshot_remove(rt, NULL, name, NULL);
			free(name);
		}
		gone(q);
		char what[32];
		if (cases[s].files)
			snprintf(what, sizeof(what), "%lu files", cases[s].files);
		else
			snprintf(what, sizeof(what), "%u MiB upper", cases[s].mb);
		bench_stats sn;
		bench_stats_compute(&sn, &snap);
		snprintf(label, sizeof(label), "snapshot, %s", what);
		bench_stats_print(stdout, label, &sn);
		bench_samples_free(&snap);
		snprintf(label, sizeof(label), "fork(%lu), %s", n, what);
		print_ratio(label, &one, &cold);
		cost_free(&one);
		cost_free(&cold);
	}
	sbx_runtime_free(rt);
	return 0;
}
