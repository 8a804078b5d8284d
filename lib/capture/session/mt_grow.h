/* SPDX-License-Identifier: MIT */
/* mt_grow.h - growing arrays for mt-trace's engine, which ends when out of
 * memory (mt_out_of_memory(), lib/README.md: nothing it could trace
 * without its tables). */
#ifndef MT_GROW_H
#define MT_GROW_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mt_log.h"
#include "mt_tracer.h"
#include "mt_xalloc.h"

static inline void mt_grow_fail(void)
{
	mt_out_of_memory();
}

/* p (an array of *cap elements of elem bytes) with room for need; exits
 * mt-trace when there is no memory for it, or when need elements of elem
 * bytes are more than an address space holds (the doubling, and the
 * bytes, never wrap). */
static inline void *mt_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 1024;

	if (need <= *cap)
		return p;
	if (!elem || need > SIZE_MAX / elem)
		mt_grow_fail();
	while (ncap < need)
		ncap = ncap <= SIZE_MAX / 2 ? ncap * 2 : need;
	if (ncap > SIZE_MAX / elem)
		ncap = need; /* doubled past what fits: just what is needed */
	p = mt_xreallocarray(p, ncap, elem);
	*cap = ncap;
	return p;
}

#endif /* MT_GROW_H */
