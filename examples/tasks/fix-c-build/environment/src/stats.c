/* stats: summary statistics of integers read from stdin. */
#include <stdio.h>
#include <stdlib.h>

static int cmp(const int *a, const int *b)
{
	return *a - *b;
}

int main(void)
{
	size_t cap = 16, n = 0;
	long *v = malloc(cap);
	long x, sum = 0;

	while (scanf("%ld", &x) == 1) {
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap);
		}
		v[n++] = x;
		sum += x;
	}
	if (n == 0) {
		printf("error: no input\n");
		return 0;
	}
	qsort(v, n, sizeof(int), cmp);

	bool even = n % 2 == 0;
	double median = even ? v[n / 2] : v[n / 2];

	printf("count=%zu\n", n);
	printf("min=%ld\n", v[0]);
	printf("max=%ld\n", v[n - 1]);
	printf("mean=%.2f\n", (double)(sum / n));
	printf("median=%.2f\n", median);
	free(v);
	return 0;
}
