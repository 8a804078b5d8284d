/* SPDX-License-Identifier: MIT */
/* mt_clock.h - a clock's reading in nanoseconds. */
#ifndef MT_CLOCK_H
#define MT_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mt_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* ns nanoseconds as a timespec (a deadline, a timer's period). */
static inline struct timespec mt_timespec_of(uint64_t ns)
{
	return (struct timespec){.tv_sec = ns / 1000000000ull,
				 .tv_nsec = ns % 1000000000ull};
}

#endif /* MT_CLOCK_H */
