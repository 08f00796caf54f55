/* The one clock plxd measures with: CLOCK_MONOTONIC, which neither jumps
 * with the wall clock nor stops for anyone, in milliseconds (deadlines) and
 * microseconds (durations in logs and headers); and the calling thread's
 * CPU time, for what a run cost. */
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

/* getrusage's CPU time is only as fresh as the scheduler's last look at
 * the thread, up to a tick old: too coarse for a run of a millisecond.
 * 0 if not known. */
static inline uint64_t clock_thread_cpu_us(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static inline uint64_t clock_ms(void)
{
	return clock_us() / 1000;
}

/* ms from now on clock, as the absolute time a timed wait takes
 * (pthread_cond_timedwait on a condition variable of that clock,
 * pthread_timedjoin_np on CLOCK_REALTIME). */
static inline struct timespec clock_deadline(clockid_t clock, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
