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

/* Milliseconds from now until deadline_ms, 0 once it has passed, capped so
 * that it fits poll's and epoll_wait's int timeout. */
static inline int clock_ms_until(uint64_t deadline_ms)
{
	uint64_t now = clock_ms();
	if (deadline_ms <= now)
		return 0;
	uint64_t left = deadline_ms - now;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

#endif
