/*
 * cpuid_cost.c - what one CPUID instruction costs on this host, for
 * bench/serve.py to print beside the exec floors.  Every glibc program's
 * start runs CPUID dozens of times (init_cpu_features, and the cache
 * sizes through leaves 2 and 4); a hypervisor that traps it (this PVM
 * guest) makes that a large part of any exec, corral's command's or not.
 *
 *   cpuid_cost [N]     N CPUIDs of leaf 4 (default 2000); prints the
 *                      microseconds of one, or "n/a" on another arch
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int main(int argc, char **argv)
{
#if defined(__x86_64__) || defined(__i386__)
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
	unsigned int a, b, c, d, sink = 0;
	struct timespec t0, t1;

	if (n <= 0 || n > 1000000) {
		fprintf(stderr, "cpuid_cost: N must be 1..1000000, not %s\n", argv[1]);
		return 2;
	}
	if (clock_gettime(CLOCK_MONOTONIC, &t0) < 0)
		return perror("clock_gettime"), 1;
	for (long i = 0; i < n; i++) {
		__cpuid_count(4, i & 3, a, b, c, d);
		sink += a ^ b ^ c ^ d;
	}
	if (clock_gettime(CLOCK_MONOTONIC, &t1) < 0)
		return perror("clock_gettime"), 1;
	printf("%.3f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n / 1e3
	       + (sink & 0) * 1.0);
	return 0;
#else
	(void)argc;
	(void)argv;
	puts("n/a");
	return 0;
#endif
}
