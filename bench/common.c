/* SPDX-License-Identifier: MIT */
/* Shared benchmark helpers: clock, samples and stats, meminfo, Pss, JSON. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_sleep(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void *bench_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p) {
		fprintf(stderr, "bench: out of memory\n");
		abort();
	}
	return p;
}

void *bench_xreallocarray(void *p, size_t n, size_t size)
{
	void *q = reallocarray(p, n ? n : 1, size ? size : 1);
	if (!q) {
		fprintf(stderr, "bench: out of memory\n");
		abort();
	}
	return q;
}

void bench_samples_add(bench_samples *s, double ms)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = bench_xreallocarray(s->v, s->cap, sizeof(*s->v));
	}
	s->v[s->n++] = ms;
}

void bench_samples_free(bench_samples *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int bench_samples_save(const bench_samples *s, const char *path)
{
	FILE *f = fopen(path, "ae");
	if (!f)
		return -errno;
	for (size_t i = 0; i < s->n; i++)
		fprintf(f, "%.4f\n", s->v[i]);
	return fclose(f) == 0 ? 0 : -errno;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, size_t n, double p)
{
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

void bench_stats_compute(bench_stats *out, bench_samples *s)
{
	memset(out, 0, sizeof(*out));
	if (s->n == 0)
		return;
	qsort(s->v, s->n, sizeof(*s->v), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
	out->n = s->n;
	out->min = s->v[0];
	out->max = s->v[s->n - 1];
	out->mean = sum / (double)s->n;
	out->median = s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
	out->p90 = pct(s->v, s->n, 90);
	out->p99 = pct(s->v, s->n, 99);
}

void bench_stats_print(FILE *f, const char *label, const bench_stats *st)
{
	fprintf(f, "%-22s median %7.2f ms  p90 %7.2f  p99 %7.2f  mean %7.2f  min %6.2f  max %7.2f  (n=%zu, %.1f/s serial)\n",
		label, st->median, st->p90, st->p99, st->mean, st->min, st->max, st->n,
		st->mean > 0 ? 1000.0 / st->mean : 0.0);
}

void bench_stats_json(FILE *f, const bench_stats *st)
{
	fprintf(f, "\"n\": %zu, \"median_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, "
		   "\"mean_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"serial_per_s\": %.2f",
		st->n, st->median, st->p90, st->p99, st->mean, st->min, st->max,
		st->mean > 0 ? 1000.0 / st->mean : 0.0);
}

void bench_json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

int bench_parse_ulong(unsigned long *out, const char *s)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int bench_parse_double(double *out, const char *s)
{
	char *end;
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !(v >= 0))
		return -EINVAL;
	*out = v;
	return 0;
}

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return (x > y) - (x < y);
}

int bench_parse_counts(unsigned long **out, size_t *n_out, const char *s)
{
	size_t n = 0, cap = 8;
	unsigned long *v = bench_xcalloc(cap, sizeof(*v));
	const char *p = s;
	while (p && *p) {
		char *end;
		errno = 0;
		unsigned long x = strtoul(p, &end, 10);
		if (errno || end == p || x == 0 || (*end && *end != ',')) {
			free(v);
			return -EINVAL;
		}
		if (n == cap)
			v = bench_xreallocarray(v, cap *= 2, sizeof(*v));
		v[n++] = x;
		p = *end ? end + 1 : end;
	}
	if (n == 0) {
		free(v);
		return -EINVAL;
	}
	qsort(v, n, sizeof(*v), cmp_ulong);
	*out = v;
	*n_out = n;
	return 0;
}

/* Returns the slab caches' empty slabs to the page allocator. */
static void slab_shrink(void)
{
	DIR *d = opendir("/sys/kernel/slab");
	if (!d)
		return;
	struct dirent *e;
	char path[512];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/slab/%s/shrink", e->d_name);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)!write(fd, "1", 1);
			close(fd);
		}
	}
	closedir(d);
}

/*
 * Before a density baseline. Earlier phases (thousands of create/destroy
 * cycles) leave work behind: network namespaces are freed by a kernel
 * worker well after their last process, and slab caches keep empty slabs.
 * Waits until MemAvailable holds still (less than 2 MiB of change in a
 * second, at most 60 s), then returns empty slabs, so memory still being
 * freed does not offset the first sandboxes. The first count still reads
 * cheaper per sandbox: its first allocations are served from pages the
 * kernel keeps cached (per-CPU page lists, partly filled slabs), which
 * MemAvailable already counts as used. The marginal columns are the cost.
 */
void bench_memory_settle(void)
{
	bench_meminfo prev, cur;
	if (bench_meminfo_read(&prev) == 0) {
		for (int i = 0; i < 60; i++) {
			bench_sleep(1.0);
			if (bench_meminfo_read(&cur) < 0)
				break;
			long d = (long)cur.available - (long)prev.available;
			prev = cur;
			if (d < 2048 && d > -2048)
				break;
		}
	}
	slab_shrink();
	bench_sleep(0.5);
}


int bench_meminfo_read(bench_meminfo *out)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "MemTotal:", offsetof(bench_meminfo, total) },
		{ "MemAvailable:", offsetof(bench_meminfo, available) },
		{ "Slab:", offsetof(bench_meminfo, slab) },
		{ "SUnreclaim:", offsetof(bench_meminfo, sunreclaim) },
		{ "Shmem:", offsetof(bench_meminfo, shmem) },
		{ "PageTables:", offsetof(bench_meminfo, page_tables) },
		{ "KernelStack:", offsetof(bench_meminfo, kernel_stack) },
	};
	memset(out, 0, sizeof(*out));
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -errno;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			size_t kl = strlen(keys[i].key);
			if (strncmp(line, keys[i].key, kl) == 0)
				*(long *)((char *)out + keys[i].off) = strtol(line + kl, NULL, 10);
		}
	}
	fclose(f);
	return 0;
}

long bench_meminfo_used(const bench_meminfo *m)
{
	return m->total - m->available;
}

long bench_pss_kb(pid_t pid, long *anon_kb)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[256];
	long kb = 0, anon = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Pss:", 4) == 0)
			kb = strtol(line + 4, NULL, 10);
		else if (strncmp(line, "Pss_Anon:", 9) == 0)
			anon = strtol(line + 9, NULL, 10);
	}
	fclose(f);
	if (anon_kb)
		*anon_kb = anon;
	return kb;
}

/* Field 4 of /proc/PID/stat, after the parenthesised comm. */
pid_t bench_ppid(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	char *rp = strrchr(buf, ')');
	int ppid;
	char state;
	if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
		return -1;
	return (pid_t)ppid;
}

long bench_tree_pss(const pid_t *roots, size_t n, size_t *nproc_out, long *anon_out)
{
	size_t np = 0, cap = 4096;
	pid_t *pids = bench_xcalloc(cap, sizeof(*pids));
	pid_t *ppids = bench_xcalloc(cap, sizeof(*ppids));
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		unsigned long v;
		if (bench_parse_ulong(&v, de->d_name) < 0)
			continue;
		pid_t pp = bench_ppid((pid_t)v);
		if (pp < 0)
			continue;
		if (np == cap) {
			cap *= 2;
			pids = bench_xreallocarray(pids, cap, sizeof(*pids));
			ppids = bench_xreallocarray(ppids, cap, sizeof(*ppids));
		}
		pids[np] = (pid_t)v;
		ppids[np++] = pp;
	}
	if (d)
		closedir(d);

	/* Mark by pid (bounded by pid_max, at most 4M on Linux). */
	size_t maxpid = 1;
	for (size_t i = 0; i < np; i++)
		if ((size_t)pids[i] + 1 > maxpid)
			maxpid = (size_t)pids[i] + 1;
	for (size_t i = 0; i < n; i++)
		if (roots[i] > 0 && (size_t)roots[i] + 1 > maxpid)
			maxpid = (size_t)roots[i] + 1;
	uint8_t *in = bench_xcalloc(maxpid, 1);
	for (size_t i = 0; i < n; i++)
		if (roots[i] > 0)
			in[roots[i]] = 1;
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t i = 0; i < np; i++) {
			if (!in[pids[i]] && ppids[i] > 0 && in[ppids[i]]) {
				in[pids[i]] = 1;
				changed = true;
			}
		}
	}
	long total = 0, anon_total = 0;
	size_t counted = 0;
	for (size_t i = 0; i < np; i++) {
		if (in[pids[i]]) {
			long anon = 0;
			total += bench_pss_kb(pids[i], &anon);
			anon_total += anon;
			counted++;
		}
	}
	free(in);
	free(pids);
	free(ppids);
	if (nproc_out)
		*nproc_out = counted;
	if (anon_out)
		*anon_out = anon_total;
	return total;
}

void bench_raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

void bench_host_json(FILE *f)
{
	struct utsname u;
	if (uname(&u) < 0)
		memset(&u, 0, sizeof(u));
	fprintf(f, "\"kernel\": ");
	bench_json_str(f, u.release);
	fprintf(f, ", \"machine\": ");
	bench_json_str(f, u.machine);
	fprintf(f, ", \"cpus\": %ld", sysconf(_SC_NPROCESSORS_ONLN));
}

int bench_slabinfo_read(bench_slabinfo *out)
{
	memset(out, 0, sizeof(*out));
	FILE *f = fopen("/proc/slabinfo", "re");
	if (!f)
		return -errno;
	char line[512];
	size_t cap = 0;
	long page_kib = sysconf(_SC_PAGESIZE) / 1024;
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		long active, num, objsize, perslab, pages, active_slabs, num_slabs;
		if (line[0] == '#' || strncmp(line, "slabinfo", 8) == 0)
			continue;
		if (sscanf(line, "%63s %ld %ld %ld %ld %ld : tunables %*d %*d %*d : slabdata %ld %ld",
			   name, &active, &num, &objsize, &perslab, &pages, &active_slabs, &num_slabs) != 8)
			continue;
		if (out->n == cap) {
			cap = cap ? cap * 2 : 256;
			out->name = bench_xreallocarray(out->name, cap, sizeof(*out->name));
			out->kib = bench_xreallocarray(out->kib, cap, sizeof(*out->kib));
		}
		memcpy(out->name[out->n], name, sizeof(name));
		out->kib[out->n++] = num_slabs * pages * page_kib;
	}
	fclose(f);
	return 0;
}

void bench_slabinfo_free(bench_slabinfo *s)
{
	free(s->name);
	free(s->kib);
	memset(s, 0, sizeof(*s));
}

void bench_slabinfo_top(char *buf, size_t len, const bench_slabinfo *a, const bench_slabinfo *b,
			size_t k)
{
	long *delta = bench_xcalloc(b->n, sizeof(*delta));
	for (size_t i = 0; i < b->n; i++) {
		delta[i] = b->kib[i];
		for (size_t j = 0; j < a->n; j++)
			if (strcmp(a->name[j], b->name[i]) == 0) {
				delta[i] -= a->kib[j];
				break;
			}
	}
	size_t off = 0;
	buf[0] = '\0';
	for (size_t t = 0; t < k; t++) {
		size_t best = b->n;
		for (size_t i = 0; i < b->n; i++)
			if (delta[i] > 0 && (best == b->n || delta[i] > delta[best]))
				best = i;
		if (best == b->n || off >= len)
			break;
		int w = snprintf(buf + off, len - off, "%s%s +%.1f MiB", t ? ", " : "", b->name[best],
				 (double)delta[best] / 1024.0);
		if (w < 0)
			break;
		off += (size_t)w;
		delta[best] = 0;
	}
	free(delta);
}

void bench_density_measure(bench_density_point *pt, const bench_meminfo *base,
			   const bench_slabinfo *base_slab, const pid_t *roots, size_t n_roots)
{
	bench_meminfo now;
	pt->slab_top[0] = '\0';
	if (base_slab && base_slab->n) {
		bench_slabinfo cur;
		if (bench_slabinfo_read(&cur) == 0)
			bench_slabinfo_top(pt->slab_top, sizeof(pt->slab_top), base_slab, &cur, 5);
		bench_slabinfo_free(&cur);
	}
	pt->pss = bench_tree_pss(roots, n_roots, &pt->nproc, &pt->pss_anon);
	if (bench_meminfo_read(&now) < 0)
		memset(&now, 0, sizeof(now));
	pt->used = bench_meminfo_used(&now) - bench_meminfo_used(base);
	pt->slab = now.slab - base->slab;
	pt->kernel_stack = now.kernel_stack - base->kernel_stack;
	pt->page_tables = now.page_tables - base->page_tables;
	pt->shmem = now.shmem - base->shmem;
}

long bench_density_attributed(const bench_density_point *pt)
{
	return pt->pss_anon + pt->slab + pt->kernel_stack + pt->page_tables + pt->shmem;
}

void bench_density_print_header(FILE *f)
{
	fprintf(f, "  %6s  %10s  %9s  %9s  %10s  %9s  %9s  %8s  %8s  %7s  %6s\n", "count", "host MiB",
		"MiB/sbx", "marg/sbx", "attrib/sbx", "Pss/sbx", "slab/sbx", "kstk/sbx", "ptbl/sbx",
		"procs", "sbx/s");
}

void bench_density_print(FILE *f, const bench_density_point *pt, const bench_density_point *prev)
{
	double c = (double)pt->count;
	double marg = 0;
	if (prev && pt->count > prev->count)
		marg = (double)(pt->used - prev->used) / 1024.0 / (double)(pt->count - prev->count);
	else
		marg = (double)pt->used / 1024.0 / c;
	unsigned long step = pt->count - (prev ? prev->count : 0);
	fprintf(f, "  %6lu  %10.1f  %9.3f  %9.3f  %10.3f  %9.3f  %9.3f  %8.3f  %8.3f  %7zu  %6.0f\n",
		pt->count, (double)pt->used / 1024.0, (double)pt->used / 1024.0 / c, marg,
		(double)bench_density_attributed(pt) / 1024.0 / c, (double)pt->pss / 1024.0 / c,
		(double)pt->slab / 1024.0 / c, (double)pt->kernel_stack / 1024.0 / c,
		(double)pt->page_tables / 1024.0 / c, pt->nproc,
		pt->create_s > 0 ? (double)step / pt->create_s : 0.0);
	if (pt->slab_top[0])
		fprintf(f, "          slab growth: %s\n", pt->slab_top);
}

void bench_density_json(FILE *f, const bench_density_point *pt)
{
	double c = (double)pt->count;
	fprintf(f, "{\"count\": %lu, \"used_kib\": %ld, \"mib_per\": %.4f, \"attributed_mib_per\": %.4f, "
		   "\"pss_kib\": %ld, \"pss_anon_kib\": %ld, \"slab_kib\": %ld, \"kernel_stack_kib\": %ld, \"page_tables_kib\": %ld, "
		   "\"shmem_kib\": %ld, \"procs\": %zu, \"create_s\": %.3f, \"slab_top\": ",
		pt->count, pt->used, (double)pt->used / 1024.0 / c,
		(double)bench_density_attributed(pt) / 1024.0 / c, pt->pss, pt->pss_anon, pt->slab, pt->kernel_stack,
		pt->page_tables, pt->shmem, pt->nproc, pt->create_s);
	bench_json_str(f, pt->slab_top);
	fputc('}', f);
}
