#!/bin/bash
# Oracle solution: rewrite stats.c with the bugs fixed, then build.
set -euo pipefail
cd /app
cat > stats.c <<'C'
/* stats: summary statistics of integers read from stdin. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *pa, const void *pb)
{
	long a = *(const long *)pa, b = *(const long *)pb;
	return (a > b) - (a < b);
}

int main(void)
{
	size_t cap = 16, n = 0;
	long *v = malloc(cap * sizeof *v);
	long x;
	long double sum = 0;

	if (!v)
		return 2;
	while (scanf("%ld", &x) == 1) {
		if (n == cap) {
			long *nv = realloc(v, 2 * cap * sizeof *v);
			if (!nv) {
				free(v);
				return 2;
			}
			v = nv;
			cap *= 2;
		}
		v[n++] = x;
		sum += x;
	}
	if (n == 0) {
		fprintf(stderr, "error: no input\n");
		free(v);
		return 1;
	}
	qsort(v, n, sizeof *v, cmp);

	bool even = n % 2 == 0;
	double median = even ? ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0 : (double)v[n / 2];

	printf("count=%zu\n", n);
	printf("min=%ld\n", v[0]);
	printf("max=%ld\n", v[n - 1]);
	printf("mean=%.2f\n", (double)(sum / n));
	printf("median=%.2f\n", median);
	free(v);
	return 0;
}
C
make clean
make
