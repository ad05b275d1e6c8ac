/* SPDX-License-Identifier: MIT */
/*
 * sbx-bench-cpuid: what one CPUID instruction costs here (x86_64). In a
 * virtual machine every CPUID traps to the hypervisor, and glibc's start-up
 * (the dynamic loader's, or a static binary's) issues about a hundred of
 * them to size the caches: on a host where one costs microseconds, that is
 * most of what any glibc process costs to start, bubblewrap and the
 * sandbox's command included. bench/cli.sh records it with the floors.
 */
#include <cpuid.h>
#include <stdio.h>

#include "common.h"

int main(int argc, char **argv)
{
	unsigned long n = 2000;
	if (argc > 2 || (argc == 2 && (bench_parse_ulong(&n, argv[1]) < 0 || n == 0 || n > 100000000))) {
		fprintf(stderr, "usage: sbx-bench-cpuid [N]  (N: instructions timed, 1..100000000, default 2000)\n");
		return 2;
	}
	unsigned a, b, c, d, sink = 0;
	double t0 = bench_now();
	for (unsigned long i = 0; i < n; i++) {
		__cpuid_count(4, i & 3, a, b, c, d); /* the leaf glibc loops over */
		sink += a ^ b ^ c ^ d;
	}
	double us = (bench_now() - t0) * 1e6 / (double)n;
	printf("%.2f\n", us);
	return sink == 0xdeadbeef; /* keeps the loop */
}
