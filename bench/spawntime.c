/* SPDX-License-Identifier: MIT */
/*
 * sbx-bench-spawntime: runs a command many times with posix_spawn and reports
 * per-run wall time, with no shell in between. Used to measure the peers
 * (bubblewrap, crun) and the sbx CLI on the same footing as the library.
 *
 *   latency     (default) --n N runs one after another; median/p90/p99.
 *   throughput  --workers P --seconds S: P threads loop spawn+wait; runs/s.
 *   hold        --hold 100,1000: start that many long-running copies, measure
 *               host memory at each count, then kill them all.
 *
 * "{i}" in any argument is replaced by a unique run number (crun container ids).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

extern char **environ;

struct opts {
	const char *label;
	unsigned long n, warmup, workers;
	double seconds, settle;
	const char *hold;
	const char *samples; /* append raw latency samples (ms) here */
	bool json;
	char **cmd; /* NULL-terminated, from after "--" */
};

static atomic_ulong run_counter;
static atomic_int stop_all;

static void usage(FILE *f)
{
	fprintf(f, "usage: sbx-bench-spawntime [--label L] [--json]\n"
		   "         [--n N] [--warmup W] [--samples F]   latency (default N=100, W=5)\n"
		   "         [--workers P --seconds S]            throughput\n"
		   "         [--hold 100,1000 --settle S]         idle density\n"
		   "         -- CMD [ARGS...]   ({i} in ARGS becomes a unique run number)\n");
}

/* Replaces each "{i}" in `s` with `num`; owned result. */
static char *subst(const char *s, unsigned long num)
{
	char numbuf[32];
	int nl = snprintf(numbuf, sizeof(numbuf), "%lu", num);
	size_t cap = strlen(s) + 1, extra = 0;
	for (const char *p = strstr(s, "{i}"); p; p = strstr(p + 3, "{i}"))
		extra += (size_t)nl;
	char *out = bench_xcalloc(cap + extra, 1), *o = out;
	for (const char *p = s; *p;) {
		if (strncmp(p, "{i}", 3) == 0) {
			memcpy(o, numbuf, (size_t)nl);
			o += nl;
			p += 3;
		} else {
			*o++ = *p++;
		}
	}
	return out;
}

static char **build_argv(char **cmd, unsigned long num)
{
	size_t n = 0;
	while (cmd[n])
		n++;
	char **v = bench_xcalloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = subst(cmd[i], num);
	return v;
}

static void free_argv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Starts one copy with stdin and stdout on /dev/null, stderr inherited. */
/* own_group: the copy leads a process group of its own, so kill_all reaches
 * what it forked too: after one 5000-copy bwrap run, killing the outer
 * bwraps alone left 905 bwrap + sleep pairs, reparented to init. */
static int start(pid_t *pid_out, char **cmd, int own_group)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	if (own_group) {
		posix_spawnattr_setpgroup(&at, 0);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	}
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	char **argv = build_argv(cmd, atomic_fetch_add(&run_counter, 1));
	int r = posix_spawnp(pid_out, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	free_argv(argv);
	return -r;
}

/* Runs one copy to completion; 0, or the wait status / -errno on failure. */
static int run_once(char **cmd, double *ms_out)
{
	pid_t pid;
	double t0 = bench_now();
	int r = start(&pid, cmd, 0);
	if (r < 0)
		return r;
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	*ms_out = (bench_now() - t0) * 1000.0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : (st ? st : 1);
}

static void report_failure(const struct opts *o, unsigned long i, int r)
{
	char msg[160];
	if (r < 0)
		snprintf(msg, sizeof(msg), "run %lu: spawn %s: %s", i, o->cmd[0], strerror(-r));
	else if (WIFSIGNALED(r))
		snprintf(msg, sizeof(msg), "run %lu: killed by signal %d", i, WTERMSIG(r));
	else
		snprintf(msg, sizeof(msg), "run %lu: exit status %d", i, WEXITSTATUS(r));
	fprintf(stderr, "spawntime: %s: %s\n", o->label, msg);
	if (o->json) {
		printf("{\"tool\": \"spawntime\", \"label\": ");
		bench_json_str(stdout, o->label);
		printf(", \"error\": ");
		bench_json_str(stdout, msg);
		printf("}\n");
	}
}

static int mode_latency(const struct opts *o)
{
	bench_samples s = { 0 };
	double ms;
	for (unsigned long i = 0; i < o->warmup + o->n; i++) {
		int r = run_once(o->cmd, &ms);
		if (r != 0) {
			report_failure(o, i, r);
			bench_samples_free(&s);
			return 1;
		}
		if (i >= o->warmup)
			bench_samples_add(&s, ms);
	}
	int sr = o->samples ? bench_samples_save(&s, o->samples) : 0;
	if (sr < 0)
		fprintf(stderr, "spawntime: write %s: %s\n", o->samples, strerror(-sr));
	bench_stats st;
	bench_stats_compute(&st, &s);
	bench_stats_print(o->json ? stderr : stdout, o->label, &st);
	if (o->json) {
		printf("{\"tool\": \"spawntime\", \"mode\": \"latency\", \"label\": ");
		bench_json_str(stdout, o->label);
		printf(", ");
		bench_stats_json(stdout, &st);
		printf("}\n");
	}
	bench_samples_free(&s);
	return 0;
}

struct worker {
	pthread_t th;
	const struct opts *o;
	double start, end;
	bench_samples s;
	unsigned long done, failed;
	int first_err;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	double ms;
	while (!atomic_load(&stop_all) && bench_now() < w->end) {
		int r = run_once(w->o->cmd, &ms);
		if (r != 0) {
			w->failed++;
			if (!w->first_err)
				w->first_err = r;
			if (w->failed > 10)
				atomic_store(&stop_all, 1);
			continue;
		}
		if (bench_now() <= w->end) {
			w->done++;
			bench_samples_add(&w->s, ms);
		}
	}
	return NULL;
}

static int mode_throughput(const struct opts *o)
{
	struct worker *w = bench_xcalloc(o->workers, sizeof(*w));
	double t0 = bench_now();
	for (unsigned long i = 0; i < o->workers; i++) {
		w[i].o = o;
		w[i].start = t0;
		w[i].end = t0 + o->seconds;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "spawntime: pthread_create failed\n");
			abort();
		}
	}
	bench_samples all = { 0 };
	unsigned long done = 0, failed = 0;
	int first_err = 0;
	for (unsigned long i = 0; i < o->workers; i++) {
		pthread_join(w[i].th, NULL);
		done += w[i].done;
		failed += w[i].failed;
		if (!first_err)
			first_err = w[i].first_err;
		for (size_t k = 0; k < w[i].s.n; k++)
			bench_samples_add(&all, w[i].s.v[k]);
		bench_samples_free(&w[i].s);
	}
	free(w);
	if (failed) {
		report_failure(o, 0, first_err);
		bench_samples_free(&all);
		return 1;
	}
	bench_stats st;
	bench_stats_compute(&st, &all);
	double rate = (double)done / o->seconds;
	FILE *h = o->json ? stderr : stdout;
	fprintf(h, "%-22s %lu workers: %.1f runs/s (%lu in %.0f s), latency under load median %.2f ms p99 %.2f ms\n",
		o->label, o->workers, rate, done, o->seconds, st.median, st.p99);
	if (o->json) {
		printf("{\"tool\": \"spawntime\", \"mode\": \"throughput\", \"label\": ");
		bench_json_str(stdout, o->label);
		printf(", \"workers\": %lu, \"seconds\": %.1f, \"completed\": %lu, \"per_s\": %.2f, ",
		       o->workers, o->seconds, done, rate);
		bench_stats_json(stdout, &st);
		printf("}\n");
	}
	bench_samples_free(&all);
	return 0;
}

static void kill_all(pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kill(-pids[i], SIGKILL);
	for (size_t i = 0; i < n; i++)
		while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
			;
}

static int mode_hold(const struct opts *o)
{
	unsigned long *counts;
	size_t nc;
	if (bench_parse_counts(&counts, &nc, o->hold) < 0) {
		fprintf(stderr, "spawntime: --hold: expected counts like 100,1000\n");
		return 2;
	}
	bench_raise_nofile();
	unsigned long max = counts[nc - 1];
	pid_t *pids = bench_xcalloc(max, sizeof(*pids));
	bench_density_point *pts = bench_xcalloc(nc, sizeof(*pts));
	bench_meminfo base, after;
	bench_slabinfo base_slab;
	bench_memory_settle();
	bench_slabinfo_read(&base_slab);
	bench_meminfo_read(&base);
	size_t alive = 0, npts = 0;
	char err[200] = "";
	FILE *h = o->json ? stderr : stdout;
	fprintf(h, "%s: idle density\n", o->label);
	bench_density_print_header(h);
	for (size_t c = 0; c < nc && !err[0]; c++) {
		double t0 = bench_now();
		while (alive < counts[c]) {
			int r = start(&pids[alive], o->cmd, 1);
			if (r < 0) {
				snprintf(err, sizeof(err), "start #%zu: %s", alive + 1, strerror(-r));
				break;
			}
			alive++;
		}
		double create_s = bench_now() - t0;
		bench_sleep(o->settle);
		for (size_t i = 0; i < alive && !err[0]; i++) {
			int st;
			if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
				snprintf(err, sizeof(err), "copy #%zu exited early (status %d) with %zu alive",
					 i + 1, st, alive);
				pids[i] = pids[--alive];
			}
		}
		if (err[0])
			break;
		pts[npts].count = alive;
		pts[npts].create_s = create_s;
		bench_density_measure(&pts[npts], &base, &base_slab, pids, alive);
		bench_density_print(h, &pts[npts], npts ? &pts[npts - 1] : NULL);
		npts++;
	}
	if (err[0])
		fprintf(stderr, "spawntime: %s: stopped: %s\n", o->label, err);
	kill_all(pids, alive);
	bench_sleep(o->settle);
	bench_meminfo_read(&after);
	long residual = bench_meminfo_used(&after) - bench_meminfo_used(&base);
	fprintf(h, "  after killing all: host memory %+.1f MiB against the baseline (slab %+.1f)\n",
		(double)residual / 1024.0, (double)(after.slab - base.slab) / 1024.0);
	if (o->json) {
		printf("{\"tool\": \"spawntime\", \"mode\": \"density\", \"label\": ");
		bench_json_str(stdout, o->label);
		printf(", \"fit\": %zu, \"error\": ", alive);
		bench_json_str(stdout, err[0] ? err : NULL);
		printf(", \"residual_kib\": %ld, \"residual_slab_kib\": %ld, \"points\": [", residual,
		       after.slab - base.slab);
		for (size_t i = 0; i < npts; i++) {
			printf(i ? ", " : "");
			bench_density_json(stdout, &pts[i]);
		}
		printf("]}\n");
	}
	bench_slabinfo_free(&base_slab);
	free(pts);
	free(pids);
	free(counts);
	return err[0] ? 1 : 0;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	*o = (struct opts){ .label = "cmd", .n = 100, .warmup = 5, .seconds = 0, .settle = 2 };
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int r = 0;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else if (strcmp(a, "--json") == 0) {
			o->json = true;
			continue;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (!v) {
			r = -EINVAL;
		} else if (strcmp(a, "--samples") == 0) {
			o->samples = v;
		} else if (strcmp(a, "--label") == 0) {
			o->label = v;
		} else if (strcmp(a, "--n") == 0) {
			r = bench_parse_ulong(&o->n, v);
		} else if (strcmp(a, "--warmup") == 0) {
			r = bench_parse_ulong(&o->warmup, v);
		} else if (strcmp(a, "--workers") == 0) {
			r = bench_parse_ulong(&o->workers, v);
		} else if (strcmp(a, "--seconds") == 0) {
			r = bench_parse_double(&o->seconds, v);
		} else if (strcmp(a, "--settle") == 0) {
			r = bench_parse_double(&o->settle, v);
		} else if (strcmp(a, "--hold") == 0) {
			o->hold = v;
		} else {
			r = -EINVAL;
		}
		if (r < 0) {
			fprintf(stderr, "spawntime: bad option or value: %s\n", a);
			return -EINVAL;
		}
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "spawntime: no command (give it after --)\n");
		return -EINVAL;
	}
	if ((o->workers > 0) != (o->seconds > 0)) {
		fprintf(stderr, "spawntime: --workers and --seconds go together\n");
		return -EINVAL;
	}
	o->cmd = argv + i;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse_args(&o, argc, argv) < 0) {
		usage(stderr);
		return 2;
	}
	if (o.hold)
		return mode_hold(&o);
	if (o.workers)
		return mode_throughput(&o);
	return mode_latency(&o);
}
