/* SPDX-License-Identifier: MIT */
/* mt_grow.h - growing arrays for mt-trace's engine, which exits when out of
 * memory (nothing it could trace without its tables). */
#ifndef MT_GROW_H
#define MT_GROW_H

#include <stdio.h>
#include <stdlib.h>

#include "mt_tracer.h"

/* p (an array of *cap elements of elem bytes) with room for need; exits
 * mt-trace when there is no memory for it. */
static inline void *mt_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 1024;

	if (need <= *cap)
		return p;
	while (ncap < need)
		ncap *= 2;
	p = realloc(p, ncap * elem);
	if (!p) {
		fprintf(stderr, "mt-trace: out of memory\n");
		exit(MT_EXIT_TRACER_FAILED);
	}
	*cap = ncap;
	return p;
}

#endif /* MT_GROW_H */
