/* SPDX-License-Identifier: MIT */
/*
 * sbx-bench-lifecycle: sandbox lifecycle benchmarks through the public API.
 *
 *   latency     create -> exec `true` -> destroy, --n times in a row; median,
 *               p90, p99, mean, and the split between the three calls.
 *   throughput  --workers processes (one runtime each, as sbx_runtime wants)
 *               loop the lifecycle for --seconds; completed lifecycles/s.
 *   density     create idle sandboxes up to each of --counts, keep them alive,
 *               and measure host memory per sandbox; then destroy them all and
 *               check the memory comes back. Stops at the first failed create
 *               and reports how many fitted.
 *
 * The peers (bubblewrap, crun) are measured by sbx-bench-spawntime; the
 * driver bench/lifecycle.sh runs everything in one go and prints the ratios.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/sbx.h>

#include "common.h"

enum mode { MODE_LATENCY, MODE_THROUGHPUT, MODE_DENSITY };

struct opts {
	enum mode mode;
	const char *image, *provider, *label, *counts, *cmd;
	const char *samples; /* append raw latency samples (ms) here */
	unsigned long n, warmup, workers;
	double seconds, settle;
	bool json;
	sbx_userns userns;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sbx-bench-lifecycle [--mode latency|throughput|density] [--image NAME]\n"
		"         [--provider NAME] [--userns private|host] [--label L] [--cmd PROG] [--json]\n"
		"  latency:    [--n 1000] [--warmup 10] [--samples FILE]\n"
		"  throughput: [--seconds 20] [--workers 2]\n"
		"  density:    [--counts 100,1000,3000,5000] [--settle 2]\n"
		"State and images come from SBX_STATE_DIR and SBX_IMAGE_DIR.\n");
}

static void print_err(const char *what, int r, sbx_error *e)
{
	fprintf(stderr, "lifecycle: %s: %s (%s)\n", what, e && e->msg ? e->msg : strerror(-r),
		sbx_error_code_name(r));
}

static void log_stderr(sbx_log_level level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	fprintf(stderr, "sbx: %s\n", msg);
}

static int runtime_open(sbx_runtime **out)
{
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	/* SBX_LOG=debug shows the library's per-stage timings of each call. */
	const char *lv = getenv("SBX_LOG");
	if (lv && strcmp(lv, "debug") == 0) {
		ro.log = log_stderr;
		ro.log_level = SBX_LOG_DEBUG;
	}
	sbx_error *e = NULL;
	int r = sbx_runtime_new(out, &ro, &e);
	if (r < 0)
		print_err("runtime", r, e);
	sbx_error_free(e);
	return r;
}

/* One create -> exec -> destroy. ph[0..2] get the three calls' times in ms. */
static int lifecycle(sbx_runtime *rt, const struct opts *o, double ph[3], sbx_error **err)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.image = o->image;
	so.provider = o->provider;
	so.userns = o->userns;
	sbx_sandbox *sb = NULL;
	double t0 = bench_now();
	int r = sbx_sandbox_create(&sb, rt, &so, err);
	if (r < 0)
		return r;
	double t1 = bench_now();
	const char *argv[] = { o->cmd, NULL };
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.argv = argv;
	sbx_exec_result res;
	r = sbx_sandbox_exec(&res, sb, &eo, err);
	double t2 = bench_now();
	if (r == 0 && res.exit_code != 0)
		r = sbx_error_set(err, -EPROTO, "'%s' exited %d: %.200s", o->cmd, res.exit_code,
				  res.err ? res.err : "");
	sbx_exec_result_free(&res);
	int rd = sbx_sandbox_destroy(sb, r < 0 ? NULL : err);
	sbx_sandbox_free(sb);
	double t3 = bench_now();
	ph[0] = (t1 - t0) * 1000.0;
	ph[1] = (t2 - t1) * 1000.0;
	ph[2] = (t3 - t2) * 1000.0;
	return r < 0 ? r : rd;
}

/*
 * Runs one lifecycle to check the setup; when `true` is not found on the
 * sandbox's PATH (exit 127), falls back to /bin/true and says so.
 */
static int probe(sbx_runtime *rt, struct opts *o)
{
	double ph[3];
	sbx_error *e = NULL;
	int r = lifecycle(rt, o, ph, &e);
	if (r == -EPROTO && strcmp(o->cmd, "true") == 0 && e && strstr(e->msg, "exited 127")) {
		fprintf(stderr, "lifecycle: 'true' not found on the sandbox PATH; using /bin/true\n");
		sbx_error_free(e);
		e = NULL;
		o->cmd = "/bin/true";
		r = lifecycle(rt, o, ph, &e);
	}
	if (r < 0)
		print_err("first lifecycle", r, e);
	sbx_error_free(e);
	return r;
}

static void json_head(const struct opts *o, const char *mode)
{
	printf("{\"tool\": \"lifecycle\", \"mode\": \"%s\", \"label\": ", mode);
	bench_json_str(stdout, o->label);
	printf(", \"image\": ");
	bench_json_str(stdout, o->image);
	printf(", \"cmd\": ");
	bench_json_str(stdout, o->cmd);
	printf(", ");
	bench_host_json(stdout);
}

static int mode_latency(struct opts *o)
{
	sbx_runtime *rt;
	if (runtime_open(&rt) < 0)
		return 1;
	int rc = 1;
	bench_samples tot = { 0 }, phs[3] = { { 0 } };
	if (probe(rt, o) < 0)
		goto out;
	for (unsigned long i = 0; i < o->warmup + o->n && !interrupted; i++) {
		double ph[3];
		sbx_error *e = NULL;
		double t0 = bench_now();
		int r = lifecycle(rt, o, ph, &e);
		double ms = (bench_now() - t0) * 1000.0;
		if (r < 0) {
			char what[64];
			snprintf(what, sizeof(what), "lifecycle %lu", i);
			print_err(what, r, e);
			sbx_error_free(e);
			goto out;
		}
		if (i < o->warmup)
			continue;
		bench_samples_add(&tot, ms);
		for (int k = 0; k < 3; k++)
			bench_samples_add(&phs[k], ph[k]);
	}
	if (interrupted)
		goto out;
	int sr = o->samples ? bench_samples_save(&tot, o->samples) : 0;
	if (sr < 0)
		fprintf(stderr, "lifecycle: write %s: %s\n", o->samples, strerror(-sr));
	bench_stats st, pst[3];
	bench_stats_compute(&st, &tot);
	for (int k = 0; k < 3; k++)
		bench_stats_compute(&pst[k], &phs[k]);
	FILE *h = o->json ? stderr : stdout;
	bench_stats_print(h, o->label, &st);
	bench_stats_print(h, "  create", &pst[0]);
	bench_stats_print(h, "  exec", &pst[1]);
	bench_stats_print(h, "  destroy+free", &pst[2]);
	if (o->json) {
		static const char *const names[3] = { "create", "exec", "destroy" };
		json_head(o, "latency");
		printf(", ");
		bench_stats_json(stdout, &st);
		for (int k = 0; k < 3; k++) {
			printf(", \"%s\": {", names[k]);
			bench_stats_json(stdout, &pst[k]);
			printf("}");
		}
		printf("}\n");
	}
	rc = 0;
out:
	bench_samples_free(&tot);
	for (int k = 0; k < 3; k++)
		bench_samples_free(&phs[k]);
	sbx_runtime_free(rt);
	return rc;
}

/* Per-worker results, in memory shared with the parent. */
#define MAX_SAMPLES 200000

struct shared {
	double start, end;
	unsigned long done, failed;
	char err[256];
	size_t n;
	double ms[MAX_SAMPLES];
};

static void worker(struct shared *sh, struct opts *o, int gate)
{
	sbx_runtime *rt;
	char c;
	if (runtime_open(&rt) < 0 || probe(rt, o) < 0) {
		snprintf(sh->err, sizeof(sh->err), "worker setup failed (see above)");
		sh->failed = 1;
		_exit(1);
	}
	/* Gate: the parent closes its end once every worker is ready. */
	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	double end = sh->end;
	while (!interrupted && bench_now() < end) {
		double ph[3];
		sbx_error *e = NULL;
		double t0 = bench_now();
		int r = lifecycle(rt, o, ph, &e);
		double t1 = bench_now();
		if (r < 0) {
			if (!sh->failed++)
				snprintf(sh->err, sizeof(sh->err), "%s",
					 e && e->msg ? e->msg : strerror(-r));
			sbx_error_free(e);
			if (sh->failed > 10)
				break;
			continue;
		}
		if (t1 <= end) {
			sh->done++;
			if (sh->n < MAX_SAMPLES)
				sh->ms[sh->n++] = (t1 - t0) * 1000.0;
		}
	}
	sbx_runtime_free(rt);
	_exit(0);
}

static int mode_throughput(struct opts *o)
{
	size_t nw = o->workers;
	struct shared *sh = mmap(NULL, nw * sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("lifecycle: mmap");
		return 1;
	}
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) < 0) {
		perror("lifecycle: pipe");
		return 1;
	}
	pid_t *pids = bench_xcalloc(nw, sizeof(*pids));
	fflush(NULL);
	for (size_t i = 0; i < nw; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(gate[1]);
			worker(&sh[i], o, gate[0]);
		}
		if (pids[i] < 0) {
			perror("lifecycle: fork");
			abort();
		}
	}
	close(gate[0]);
	/* Give every worker time to set up (runtime, probe) before the clock starts. */
	bench_sleep(2.0);
	double t0 = bench_now();
	for (size_t i = 0; i < nw; i++) {
		sh[i].start = t0;
		sh[i].end = t0 + o->seconds;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	close(gate[1]);
	unsigned long done = 0, failed = 0;
	const char *err = NULL;
	bench_samples all = { 0 };
	for (size_t i = 0; i < nw; i++) {
		int st;
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (!sh[i].failed)
				sh[i].failed = 1;
		}
		done += sh[i].done;
		failed += sh[i].failed;
		if (sh[i].failed && !err)
			err = sh[i].err[0] ? sh[i].err : "worker died";
		for (size_t k = 0; k < sh[i].n; k++)
			bench_samples_add(&all, sh[i].ms[k]);
	}
	bench_stats st;
	bench_stats_compute(&st, &all);
	double rate = (double)done / o->seconds;
	FILE *h = o->json ? stderr : stdout;
	fprintf(h, "%-22s %zu workers: %.1f lifecycles/s (%lu in %.0f s), latency under load median %.2f ms p99 %.2f ms\n",
		o->label, nw, rate, done, o->seconds, st.median, st.p99);
	if (failed)
		fprintf(stderr, "lifecycle: throughput: %lu failures; first: %s\n", failed, err);
	if (o->json) {
		json_head(o, "throughput");
		printf(", \"workers\": %zu, \"seconds\": %.1f, \"completed\": %lu, \"failures\": %lu, "
		       "\"per_s\": %.2f, ",
		       nw, o->seconds, done, failed, rate);
		bench_stats_json(stdout, &st);
		if (failed) {
			printf(", \"error\": ");
			bench_json_str(stdout, err);
		}
		printf("}\n");
	}
	bench_samples_free(&all);
	free(pids);
	munmap(sh, nw * sizeof(*sh));
	return failed ? 1 : 0;
}

/*
 * Roots of the sandboxes' process trees: for each init pid from the list, its
 * highest ancestor below us or pid 1 (a per-sandbox monitor, say); plus our
 * own pid, so children of ours the list does not name are counted.
 */
static size_t sandbox_roots(pid_t **out, sbx_runtime *rt, const struct opts *o)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0, k = 0;
	pid_t self = getpid();
	if (sbx_sandbox_list(&v, &n, rt, o->provider, NULL, NULL) < 0)
		n = 0;
	pid_t *roots = bench_xcalloc(n + 2, sizeof(*roots));
	for (size_t i = 0; i < n; i++) {
		pid_t p = v[i].pid;
		if (p <= 0)
			continue;
		for (int depth = 0; depth < 16; depth++) {
			pid_t pp = bench_ppid(p);
			if (pp <= 1 || pp == self)
				break;
			p = pp;
		}
		roots[k++] = p;
	}
	sbx_sandbox_info_free(v, n);
	/* Ourselves too, for any helper children; main() subtracts our own Pss. */
	roots[k++] = self;
	*out = roots;
	return k;
}

static void destroy_all(sbx_sandbox **sbs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sbx_error *e = NULL;
		int r = sbx_sandbox_destroy(sbs[i], &e);
		if (r < 0)
			print_err("destroy", r, e);
		sbx_error_free(e);
		sbx_sandbox_free(sbs[i]);
	}
}

static int mode_density(struct opts *o)
{
	unsigned long *counts;
	size_t nc;
	if (bench_parse_counts(&counts, &nc, o->counts) < 0) {
		fprintf(stderr, "lifecycle: --counts: expected counts like 100,1000,5000\n");
		return 2;
	}
	bench_raise_nofile();
	sbx_runtime *rt;
	if (runtime_open(&rt) < 0) {
		free(counts);
		return 1;
	}
	unsigned long max = counts[nc - 1];
	sbx_sandbox **sbs = bench_xcalloc(max, sizeof(*sbs));
	bench_density_point *pts = bench_xcalloc(nc, sizeof(*pts));
	size_t alive = 0, npts = 0;
	char err[300] = "";
	bench_meminfo base, after;
	bench_slabinfo base_slab;
	bench_memory_settle();
	bench_slabinfo_read(&base_slab);
	bench_meminfo_read(&base);
	FILE *h = o->json ? stderr : stdout;
	fprintf(h, "%s: idle density (image %s)\n", o->label, o->image);
	bench_density_print_header(h);
	for (size_t c = 0; c < nc && !err[0] && !interrupted; c++) {
		sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
		so.image = o->image;
		so.provider = o->provider;
		so.userns = o->userns;
		double t0 = bench_now();
		while (alive < counts[c] && !interrupted) {
			sbx_error *e = NULL;
			int r = sbx_sandbox_create(&sbs[alive], rt, &so, &e);
			if (r < 0) {
				snprintf(err, sizeof(err), "create #%zu: %s (%s)", alive + 1,
					 e && e->msg ? e->msg : strerror(-r), sbx_error_code_name(r));
				sbx_error_free(e);
				break;
			}
			alive++;
		}
		double create_s = bench_now() - t0;
		if (err[0] || interrupted)
			break;
		bench_sleep(o->settle);
		pid_t *roots;
		size_t nr = sandbox_roots(&roots, rt, o);
		pts[npts].count = alive;
		pts[npts].create_s = create_s;
		bench_density_measure(&pts[npts], &base, &base_slab, roots, nr);
		free(roots);
		long self_anon = 0, self_pss = bench_pss_kb(getpid(), &self_anon);
		pts[npts].pss -= self_pss;
		pts[npts].pss_anon -= self_anon;
		if (pts[npts].nproc > 0)
			pts[npts].nproc--;
		bench_density_print(h, &pts[npts], npts ? &pts[npts - 1] : NULL);
		npts++;
	}
	if (interrupted)
		snprintf(err, sizeof(err), "interrupted");
	if (err[0])
		fprintf(stderr, "lifecycle: density stopped with %zu sandboxes alive: %s\n", alive, err);
	double t0 = bench_now();
	destroy_all(sbs, alive);
	double destroy_s = bench_now() - t0;
	bench_sleep(o->settle);
	bench_meminfo_read(&after);
	long residual = bench_meminfo_used(&after) - bench_meminfo_used(&base);
	fprintf(h, "  destroyed %zu in %.1f s (%.0f/s); host memory now %+.1f MiB against the baseline (slab %+.1f)\n",
		alive, destroy_s, destroy_s > 0 ? (double)alive / destroy_s : 0.0,
		(double)residual / 1024.0, (double)(after.slab - base.slab) / 1024.0);
	if (o->json) {
		json_head(o, "density");
		printf(", \"fit\": %zu, \"error\": ", alive);
		bench_json_str(stdout, err[0] ? err : NULL);
		printf(", \"destroy_s\": %.3f, \"residual_kib\": %ld, \"residual_slab_kib\": %ld, \"points\": [",
		       destroy_s, residual, after.slab - base.slab);
		for (size_t i = 0; i < npts; i++) {
			printf(i ? ", " : "");
			bench_density_json(stdout, &pts[i]);
		}
		printf("]}\n");
	}
	bench_slabinfo_free(&base_slab);
	free(pts);
	free(sbs);
	free(counts);
	sbx_runtime_free(rt);
	return err[0] ? 1 : 0;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	*o = (struct opts){ .mode = MODE_LATENCY, .image = "busybox", .label = "sbx (library)",
			    .counts = "100,1000,3000,5000", .cmd = "true", .n = 1000, .warmup = 10,
			    .workers = 2, .seconds = 20, .settle = 2 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int r = 0;
		if (strcmp(a, "--json") == 0) {
			o->json = true;
			continue;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (!v) {
			r = -EINVAL;
		} else if (strcmp(a, "--mode") == 0) {
			if (strcmp(v, "latency") == 0)
				o->mode = MODE_LATENCY;
			else if (strcmp(v, "throughput") == 0)
				o->mode = MODE_THROUGHPUT;
			else if (strcmp(v, "density") == 0)
				o->mode = MODE_DENSITY;
			else
				r = -EINVAL;
		} else if (strcmp(a, "--image") == 0) {
			o->image = v;
		} else if (strcmp(a, "--provider") == 0) {
			o->provider = v;
		} else if (strcmp(a, "--userns") == 0) {
			r = sbx_userns_parse(&o->userns, v);
		} else if (strcmp(a, "--samples") == 0) {
			o->samples = v;
		} else if (strcmp(a, "--label") == 0) {
			o->label = v;
		} else if (strcmp(a, "--cmd") == 0) {
			o->cmd = v;
		} else if (strcmp(a, "--counts") == 0) {
			o->counts = v;
		} else if (strcmp(a, "--n") == 0) {
			r = bench_parse_ulong(&o->n, v);
		} else if (strcmp(a, "--warmup") == 0) {
			r = bench_parse_ulong(&o->warmup, v);
		} else if (strcmp(a, "--workers") == 0) {
			r = bench_parse_ulong(&o->workers, v);
			if (r == 0 && (o->workers == 0 || o->workers > 256))
				r = -EINVAL;
		} else if (strcmp(a, "--seconds") == 0) {
			r = bench_parse_double(&o->seconds, v);
			if (r == 0 && o->seconds <= 0)
				r = -EINVAL;
		} else if (strcmp(a, "--settle") == 0) {
			r = bench_parse_double(&o->settle, v);
		} else {
			r = -EINVAL;
		}
		if (r < 0) {
			fprintf(stderr, "lifecycle: bad option or value: %s\n", a);
			return -EINVAL;
		}
		i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse_args(&o, argc, argv) < 0) {
		usage(stderr);
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	switch (o.mode) {
	case MODE_LATENCY:
		return mode_latency(&o);
	case MODE_THROUGHPUT:
		return mode_throughput(&o);
	case MODE_DENSITY:
		return mode_density(&o);
	default:
		return 2;
	}
}
