// SPDX-License-Identifier: MIT
/*
 * recon_series.c - timelines: sparse buckets in time order, each keeping
 * its maximum, widened (merging neighbours) when there are too many, so
 * that a series stays bounded and every peak stays visible.  series_set,
 * the per-event part, is inline in recon_int.h.
 */
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

/* Widen the buckets 2^k times, merging neighbours; keeping each maximum
 * is what keeps every peak visible. */
void series_widen(struct series *s, unsigned k)
{
	size_t o = 0;

	s->shift += k;
	for (size_t i = 0; i < s->n; i++) {
		struct point p = s->pts[i];

		p.idx >>= k;
		if (o > 0 && s->pts[o - 1].idx == p.idx) {
			struct point *q = &s->pts[o - 1];

			if (p.max > q->max)
				q->max = p.max;
			q->last = p.last;
		} else {
			s->pts[o++] = p;
		}
	}
	s->n = o;
}

/*
 * Double the bucket width until at most target points are left (or the
 * width is 2^63).  Doubling k times merges exactly what widening 2^k
 * times at once does, and two neighbours share a bucket once k reaches the
 * bit length of idx ^ the previous idx: so one pass counts neighbours by
 * that length, which tells the fewest doublings, and one pass merges.
 */
void series_coarsen(struct series *s, size_t target)
{
	size_t by_len[65] = {0}, left;
	unsigned k, k_max;

	if (s->n <= target || s->shift >= 63)
		return;
	for (size_t i = 1; i < s->n; i++) {
		uint64_t diff = s->pts[i].idx ^ s->pts[i - 1].idx;

		by_len[diff ? 64 - __builtin_clzll(diff) : 0]++;
	}
	k_max = 63 - s->shift;
	left = s->n - by_len[0];
	for (k = 1;; k++) {
		left -= by_len[k];
		if (left <= target || k == k_max)
			break;
	}
	series_widen(s, k);
}

int series_grow(struct series *s)
{
	size_t alloc = s->alloc ? s->alloc * 2 : 16;
	struct point *p = realloc(s->pts, alloc * sizeof(*p));

	if (!p)
		return -1;
	s->pts = p;
	s->alloc = alloc;
	return 0;
}

/* An ended process's series no longer grows: give back the slack. */
void series_shrink(struct series *s)
{
	struct point *p;

	if (s->n == s->alloc)
		return;
	if (!s->n) {
		free(s->pts);
		s->pts = NULL;
		s->alloc = 0;
		return;
	}
	p = realloc(s->pts, s->n * sizeof(*p));
	if (p) {
		s->pts = p;
		s->alloc = s->n;
	}
}

uint64_t series_width(const struct series *s, const struct series_cfg *cfg)
{
	return cfg->mode == MT_RES_FIXED ? cfg->width : 1ull << s->shift;
}

void series_drop(struct series *s)
{
	free(s->pts);
	s->pts = NULL;
	s->n = s->alloc = 0;
}
