// SPDX-License-Identifier: MIT
/*
 * recon_ranges.c - a process's mapped address ranges: sorted,
 * non-overlapping [start, end), with the bytes it mapped itself counted
 * (what it inherited at fork, or mapped outside the --section, is
 * tracked but not counted).  mmap replaces what was there (MAP_FIXED),
 * munmap trims, splits or drops.  Each range keeps the stack that mapped
 * it, so the address space's sites (mt_sites.h) get back exactly the bytes
 * unmapped, whoever unmaps them.
 */
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

/* first range whose end lies above addr */
size_t ranges_search(const struct ranges *r, uint64_t addr)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ranges_insert_at(struct ranges *r, size_t i, struct range x)
{
	if (r->n == r->alloc) {
		size_t alloc = r->alloc ? r->alloc * 2 : 16;
		struct range *v = realloc(r->v, alloc * sizeof(*v));

		if (!v)
			return -1;
		r->v = v;
		r->alloc = alloc;
	}
	memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(*r->v));
	r->v[i] = x;
	r->n++;
	if (!x.uncounted)
		r->own_bytes += x.end - x.start;
	if (x.tracer)
		r->tracer_bytes += x.end - x.start;
	return 0;
}

static void ranges_uncount(struct ranges *r, const struct range *x,
			   uint64_t bytes, struct mt_sites *sites)
{
	if (x->tracer)
		r->tracer_bytes -= bytes;
	if (x->uncounted)
		return;
	r->own_bytes -= bytes;
	if (sites)
		mt_sites_release(sites, MT_SITES_MAPPED, x->stack, bytes);
}

/* Unmap [start, end): trims, splits (a hole in a mapping) or drops. */
void ranges_remove(struct ranges *r, uint64_t start, uint64_t end,
		   struct mt_sites *sites)
{
	size_t i = ranges_search(r, start), j;

	if (i < r->n && r->v[i].start < start) {
		struct range *x = &r->v[i];

		if (x->end > end) { /* a hole inside one mapping */
			struct range tail = {end, x->end, x->uncounted,
					     x->stack, x->tracer};

			ranges_uncount(r, x, end - start, sites);
			x->end = start;
			/* the tail's bytes stay counted: insert re-adds */
			if (!tail.uncounted)
				r->own_bytes -= tail.end - tail.start;
			if (tail.tracer)
				r->tracer_bytes -= tail.end - tail.start;
			ranges_insert_at(r, i + 1, tail);
			return;
		}
		ranges_uncount(r, x, x->end - start, sites);
		x->end = start;
		i++;
	}
	for (j = i; j < r->n && r->v[j].end <= end; j++)
		ranges_uncount(r, &r->v[j], r->v[j].end - r->v[j].start, sites);
	if (j < r->n && r->v[j].start < end) {
		ranges_uncount(r, &r->v[j], end - r->v[j].start, sites);
		r->v[j].start = end;
	}
	if (j > i) {
		memmove(&r->v[i], &r->v[j], (r->n - j) * sizeof(*r->v));
		r->n -= j - i;
	}
}

/* Map [start, end), replacing whatever was there (MAP_FIXED); tracer:
 * mt-trace's own (never counted). */
void ranges_add(struct ranges *r, uint64_t start, uint64_t end, bool uncounted,
		bool tracer, uint32_t stack, struct mt_sites *sites)
{
	if (end <= start)
		return;
	uncounted |= tracer;
	ranges_remove(r, start, end, sites);
	ranges_insert_at(r, ranges_search(r, start),
			 (struct range){start, end, uncounted, stack, tracer});
	if (sites && !uncounted)
		mt_sites_alloc(sites, MT_SITES_MAPPED, stack, end - start,
			       true);
}

void ranges_clear(struct ranges *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}
