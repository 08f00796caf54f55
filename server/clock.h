/* The one clock plxd measures with: CLOCK_MONOTONIC, which neither jumps
 * with the wall clock nor stops for anyone, in milliseconds (deadlines) and
 * microseconds (durations in logs and headers). */
#ifndef PLXD_CLOCK_H
#define PLXD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static inline uint64_t clock_ms(void)
{
	return clock_us() / 1000;
}

#endif
