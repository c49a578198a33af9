/*
 * clock.c - the one clock of timeouts, meters and budgets.
 */
#include "corral.h"

#include <time.h>

uint64_t corral_now_ms(void)
{
	struct timespec ts;

	/* cannot fail with a valid clock id and pointer */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
