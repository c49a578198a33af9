/*
 * floor_stamp.c - the command for bench/launch.py's phase rows: prints
 * CLOCK_MONOTONIC in ns to stderr and exits.  Built static, so that the
 * time it marks is when the sandbox's command began, not when a dynamic
 * loader was done.
 */
#include <stdio.h>
#include <time.h>

int main(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	fprintf(stderr, "%lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
	return 0;
}
