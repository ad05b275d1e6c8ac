/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the benchmark programs: a monotonic clock, latency samples
 * and their order statistics, /proc/meminfo and Pss readers, and small JSON
 * and option-parsing helpers. Nothing here knows about sbx.
 */
#ifndef SBX_BENCH_COMMON_H
#define SBX_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);
/* Sleeps for `s` seconds (restarts on EINTR). */
void bench_sleep(double s);

/* Allocation that aborts on OOM (benchmarks have no recovery path). */
void *bench_xcalloc(size_t n, size_t size);
void *bench_xreallocarray(void *p, size_t n, size_t size);

/* A growable list of latency samples in milliseconds. */
typedef struct bench_samples {
	double *v;
	size_t n;
	size_t cap;
} bench_samples;

void bench_samples_add(bench_samples *s, double ms);
void bench_samples_free(bench_samples *s);

/* Appends the samples to `path`, one value in ms per line; -errno on failure. */
int bench_samples_save(const bench_samples *s, const char *path);

/* Order statistics of a sample set (nearest-rank percentiles). */
typedef struct bench_stats {
	size_t n;
	double min, median, p90, p99, max, mean;
} bench_stats;

/* Computes stats; sorts s->v in place. All zero when s is empty. */
void bench_stats_compute(bench_stats *out, bench_samples *s);
/* "median 5.10 ms  p90 ...  p99 ...  mean ...  (n=1000, 196.1/s)" on one line. */
void bench_stats_print(FILE *f, const char *label, const bench_stats *st);
/* `"median_ms": .., "p90_ms": .., ...` (no braces), for embedding in a JSON object. */
void bench_stats_json(FILE *f, const bench_stats *st);
/* Writes s as a JSON string literal, escaped. */
void bench_json_str(FILE *f, const char *s);

/* Parses a decimal unsigned integer / a non-negative double; -EINVAL on junk. */
int bench_parse_ulong(unsigned long *out, const char *s);
int bench_parse_double(double *out, const char *s);
/* Parses "100,1000,5000" into an ascending array (owned, free()); -EINVAL on junk. */
int bench_parse_counts(unsigned long **out, size_t *n_out, const char *s);

/* The /proc/meminfo fields the density modes look at, in KiB. */
typedef struct bench_meminfo {
	long total, available, slab, sunreclaim, shmem, page_tables, kernel_stack;
} bench_meminfo;

/* Reads /proc/meminfo; -errno on failure. */
/* Before a density baseline: lets deferred kernel frees finish, then
 * returns empty slabs to the page allocator (see common.c). */
void bench_memory_settle(void);
int bench_meminfo_read(bench_meminfo *out);
/* MemTotal - MemAvailable, KiB. */
long bench_meminfo_used(const bench_meminfo *m);

/* Pss in KiB of one process (and its anonymous part); 0 if it is gone or unreadable. */
long bench_pss_kb(pid_t pid, long *anon_kb);
/* Parent of pid from /proc/PID/stat; -1 if gone. */
pid_t bench_ppid(pid_t pid);

/*
 * Sums Pss (KiB, from /proc/PID/smaps_rollup) over every process in the
 * subtrees rooted at roots[0..n) (roots included). *nproc_out gets the number
 * of processes counted, *anon_out their Pss_Anon. Processes that vanish
 * meanwhile are skipped.
 */
long bench_tree_pss(const pid_t *roots, size_t n, size_t *nproc_out, long *anon_out);

/* Per-cache slab memory from /proc/slabinfo (root only), KiB. */
typedef struct bench_slabinfo {
	size_t n;
	char (*name)[64];
	long *kib;
} bench_slabinfo;

/* Reads /proc/slabinfo; -errno on failure (then *out is empty). */
int bench_slabinfo_read(bench_slabinfo *out);
void bench_slabinfo_free(bench_slabinfo *s);
/* "dentry +12.3 MiB, ..." for the k caches that grew most from a to b. */
void bench_slabinfo_top(char *buf, size_t len, const bench_slabinfo *a, const bench_slabinfo *b,
			size_t k);

/* Host memory with `count` idle sandboxes (or peer processes) alive, in KiB. */
typedef struct bench_density_point {
	unsigned long count; /* sandboxes alive */
	long used;           /* delta of MemTotal - MemAvailable against the baseline */
	long pss;            /* sum of Pss over the sandboxes' process trees */
	long pss_anon;       /* its anonymous part (file pages are page cache, shared) */
	size_t nproc;        /* processes in those trees */
	long slab, kernel_stack, page_tables, shmem; /* deltas against the baseline */
	double create_s;     /* wall time spent creating this step's sandboxes */
	char slab_top[256];  /* the slab caches that grew most, from bench_slabinfo_top */
} bench_density_point;

/*
 * Fills pt (except count and create_s) against `base` and `base_slab` (may be
 * NULL), for the process trees under roots.
 */
void bench_density_measure(bench_density_point *pt, const bench_meminfo *base,
			   const bench_slabinfo *base_slab, const pid_t *roots, size_t n_roots);
/* Pss_Anon plus the kernel-side deltas (slab, stacks, page tables, shmem): the part of `used` attributable to the sandboxes. */
long bench_density_attributed(const bench_density_point *pt);
/* One table row; `prev` (may be NULL) gives the marginal cost since the last row. */
void bench_density_print(FILE *f, const bench_density_point *pt, const bench_density_point *prev);
void bench_density_print_header(FILE *f);
/* `{"count": .., "used_kib": .., ...}` */
void bench_density_json(FILE *f, const bench_density_point *pt);

/* Raises RLIMIT_NOFILE to its hard limit (many children, many fds). */
void bench_raise_nofile(void);

/* Kernel and host one-liners for the report ("Linux 6.1.0 x86_64", "2 CPUs"). */
void bench_host_json(FILE *f);

#endif
