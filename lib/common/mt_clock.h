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

#endif /* MT_CLOCK_H */
