// SPDX-License-Identifier: MIT
/*
 * recon_temp.c - temporary heap blocks and block lifetimes.
 *
 * A block is temporary (heaptrack's "temporary allocation") when it is
 * freed, or released by realloc, before the thread that allocated it
 * allocates again: the allocation could have been on the stack, or
 * reused.  Each thread's latest allocation is kept (tid -> address, open
 * addressing); a block is temporary when it still is its thread's latest.
 * A thread's entry is overwritten by its next allocation and never
 * removed: a trace has a few thousand threads at most.
 *
 * Lifetimes: every heap block freed, by how long it lived, in decades of
 * time from 1 us to 10 s.
 */
#include <stdlib.h>

#include "recon_int.h"

struct thread_last {
	uint32_t tid; /* 0: empty slot (no thread has id 0) */
	uint64_t addr;
};

static size_t tid_home(size_t mask, uint32_t tid)
{
	return (size_t)((tid * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

static struct thread_last *last_find(const struct mt_recon *r, uint32_t tid)
{
	if (!r->last)
		return NULL;
	for (size_t i = tid_home(r->last_mask, tid);;
	     i = (i + 1) & r->last_mask) {
		if (r->last[i].tid == tid)
			return &r->last[i];
		if (!r->last[i].tid)
			return NULL;
	}
}

static int last_grow(struct mt_recon *r)
{
	size_t mask = r->last ? r->last_mask * 2 + 1 : 63;
	struct thread_last *v = calloc(mask + 1, sizeof(*v));

	if (!v)
		return -1;
	for (size_t i = 0; r->last && i <= r->last_mask; i++) {
		size_t j;

		if (!r->last[i].tid)
			continue;
		for (j = tid_home(mask, r->last[i].tid); v[j].tid;
		     j = (j + 1) & mask)
			;
		v[j] = r->last[i];
	}
	free(r->last);
	r->last = v;
	r->last_mask = mask;
	return 0;
}

void temp_allocated(struct mt_recon *r, uint32_t tid, uint64_t addr)
{
	struct thread_last *l = last_find(r, tid);
	size_t i;

	if (l) {
		l->addr = addr;
		return;
	}
	if ((!r->last || (r->last_used + 1) * 4 > (r->last_mask + 1) * 3) &&
	    last_grow(r) < 0)
		return; /* out of memory: its blocks are not temporary */
	for (i = tid_home(r->last_mask, tid); r->last[i].tid;
	     i = (i + 1) & r->last_mask)
		;
	r->last[i] = (struct thread_last){tid, addr};
	r->last_used++;
}

bool temp_released(struct mt_recon *r, uint32_t tid, uint64_t addr)
{
	struct thread_last *l = last_find(r, tid);

	if (!l || l->addr != addr)
		return false;
	l->addr = 0; /* a block is released once */
	return true;
}

uint64_t lifetime_from(unsigned b)
{
	uint64_t ns = 0;

	for (unsigned k = 0; k < b; k++)
		ns = ns ? ns * 10 : 1000;
	return ns;
}

void lifetime_count(struct mt_recon *r, uint64_t ns, uint64_t size)
{
	unsigned b = 0;

	while (b + 1 < LIFE_BUCKETS && ns >= lifetime_from(b + 1))
		b++;
	r->life_count[b]++;
	r->life_bytes[b] += size;
}

void temp_free(struct mt_recon *r)
{
	free(r->last);
	r->last = NULL;
}
