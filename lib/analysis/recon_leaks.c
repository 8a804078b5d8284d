// SPDX-License-Identifier: MIT
/*
 * recon_leaks.c - leak ranking: what a process still held at exec, exit
 * or the end of the trace, counted in full, with the heaviest few kept in
 * a bounded min-heap (per process and for the tree) in a total order, so
 * which leaks are listed never depends on the order they were found in.
 */
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

/*
 * Whether leak x is listed before y: the bigger first, then the older,
 * then by address and pid.  A total order, so which leaks make the list
 * does not depend on the order they were found in (a hash table's).
 */
static bool leak_before(const struct leak *x, const struct leak *y)
{
	if (x->size != y->size)
		return x->size > y->size;
	if (x->first_t != y->first_t)
		return x->first_t < y->first_t;
	if (x->addr != y->addr)
		return x->addr < y->addr;
	return x->pid < y->pid;
}

static void leak_sift_down(struct leak_top *lt, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < lt->n && leak_before(&lt->v[m], &lt->v[l]))
			m = l;
		if (l + 1 < lt->n && leak_before(&lt->v[m], &lt->v[l + 1]))
			m = l + 1;
		if (m == i)
			return;
		struct leak tmp = lt->v[i];

		lt->v[i] = lt->v[m];
		lt->v[m] = tmp;
		i = m;
	}
}

void leak_add(struct leak_top *lt, const struct leak *lk)
{
	lt->count++;
	lt->bytes += lk->size;
	if (!lt->cap)
		return;
	/* most processes leak nothing: the array comes with the first */
	if (!lt->v && !(lt->v = calloc(lt->cap, sizeof(*lt->v))))
		return; /* out of memory: counted, not listed */
	if (lt->n < lt->cap) {
		size_t i = lt->n++;

		lt->v[i] = *lk;
		while (i > 0 && leak_before(&lt->v[(i - 1) / 2], &lt->v[i])) {
			struct leak tmp = lt->v[i];

			lt->v[i] = lt->v[(i - 1) / 2];
			lt->v[(i - 1) / 2] = tmp;
			i = (i - 1) / 2;
		}
	} else if (leak_before(lk, &lt->v[0])) {
		lt->v[0] = *lk;
		leak_sift_down(lt, 0);
	}
}

int leak_top_init(struct leak_top *lt, size_t cap)
{
	memset(lt, 0, sizeof(*lt));
	lt->cap = cap;
	return 0;
}

void leak_top_shrink(struct leak_top *lt)
{
	struct leak *v;

	if (!lt->v || lt->n == lt->cap)
		return;
	if (!lt->n) {
		free(lt->v);
		lt->v = NULL;
		return;
	}
	v = realloc(lt->v, lt->n * sizeof(*v));
	if (v)
		lt->v = v;
}

static int leak_cmp(const void *a, const void *b)
{
	const struct leak *x = a, *y = b;

	return leak_before(x, y) ? -1 : leak_before(y, x);
}

void leak_top_sort(struct leak_top *lt)
{
	if (lt->n) /* else v may be NULL: no array until the first leak */
		qsort(lt->v, lt->n, sizeof(*lt->v), leak_cmp);
}
