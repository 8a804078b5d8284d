/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fastdrain - libFuzzer entry: any bytes as the shared memory of
 * mt-trace --fast (lib/capture/recorder/mt_fast.h), which the traced command
 * maps read-write, drained by mt-trace's own drain (lib/capture/recorder/
 * tracer_fast_drain.c, linked as it is) a few times, the memory written
 * again between drains as a command running beside the drain would.
 *
 * The seam: the rest of mt-trace is replaced by what the drain calls of
 * it, each checking what it is given: the batch (slots and packed bytes,
 * as tracer_batch.c has them: BATCH_MAX_RECORDS at most), the stacks'
 * table (a STACK record no longer than a stack), the drain's start (the
 * limit, from the input), the clock.  mt-trace's private state (layout,
 * tails) is set as tracer_fast.c's make_shared() sets it.
 *
 * Nothing may crash, read or write out of bounds (ASan), loop without
 * end (libFuzzer's -timeout) or grow without bound (-rss_limit_mb); and
 * after each drain the staged events are sorted by time, of allocator
 * kinds or a STACK_REF followed by its event, no more than the rings
 * could hold, and the records counted lost no more than the rings hold.
 *
 * Input: 8 bytes of settings (ring size 64 or 128 records, the drain's
 * limit, how many drains, stacks on or off, packed or not), then one
 * chunk for each drain, copied over the memory before it: its first 128
 * bytes over the header, the next 768 over the first FUZZ_RINGS rings'
 * headers, the rest over their records (the other rings stay empty,
 * whatever rings_used says).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_event.h"
#include "mt_fast.h"
#include "mt_stack.h"
#include "tracer_fast.h"
#include "tracer_fast_int.h"
#include "tracer_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_RING_MAX 128u
#define FUZZ_RINGS    4u
#define DRAINS_MAX    4

static struct {
	unsigned char *mem; /* the shared memory */
	size_t size;
	struct mt_event *batch; /* BATCH_MAX_RECORDS slots */
	unsigned char *pack;	/* their packed bytes */
	uint64_t limit;
	uint64_t now;
	bool packing;
} fz;

/* ---- the rest of mt-trace, as the drain sees it -------------------------- */

bool mt_fast_drain_begin(struct mt_fast *f, uint64_t *limit)
{
	(void)f;
	*limit = fz.limit;
	return true;
}

void mt_fast_damaged(struct mt_fast *f, enum mt_fast_damage why)
{
	if (!f->damage)
		f->damage = why;
}

uint64_t mt_fast_clock_now(const struct mt_fast *f)
{
	(void)f;
	return fz.now;
}

void mt_tracer_stack_seen(struct tracer *t, const void *data, size_t size)
{
	const struct mt_stack_record *rec = data;

	(void)t;
	if (size < sizeof(rec->ev) || size > sizeof(*rec) ||
	    rec->ev.kind != MT_EV_STACK ||
	    (size - sizeof(rec->ev)) / 8 != rec->ev.size)
		abort();
	/* every frame read: ASan sees a read past what was written */
	volatile uint64_t sum = 0;
	for (uint64_t i = 0; i < rec->ev.size; i++)
		sum += rec->frames[i];
}

int mt_tracer_write_batch(struct tracer *t)
{
	t->out.batch_records = 0;
	t->out.batch_packed = t->out.batch_pack_bytes = 0;
	t->out.batch_pack_state = (struct mt_rawpack_state){0};
	return 0;
}

struct mt_event *mt_tracer_batch_room(struct tracer *t, size_t want,
				      size_t *room)
{
	if (t->out.batch_records == BATCH_MAX_RECORDS)
		mt_tracer_write_batch(t);
	*room = BATCH_MAX_RECORDS - t->out.batch_records;
	if (*room > want)
		*room = want;
	return &fz.batch[t->out.batch_records];
}

/* The recorder's PyCode records go in whole; a batch that cannot take
 * them is written first, as tracer_batch.c does. */
int mt_tracer_append(struct tracer *t, const struct mt_event *slots, size_t n)
{
	if (n > BATCH_MAX_RECORDS)
		abort();
	if (t->out.batch_records + n > BATCH_MAX_RECORDS)
		mt_tracer_write_batch(t);
	memcpy(&fz.batch[t->out.batch_records], slots, n * MT_EVENT_SIZE);
	t->out.batch_records += n;
	return 0;
}

void mt_tracer_appended(struct tracer *t, size_t n, uint64_t last_ns)
{
	(void)last_ns;
	t->out.batch_records += n;
	if (t->out.batch_records > BATCH_MAX_RECORDS)
		abort();
}

int mt_tracer_pack_room(struct tracer *t, size_t want, size_t *room,
			unsigned char **p, struct mt_rawpack_state **st)
{
	if (t->out.batch_records == BATCH_MAX_RECORDS)
		mt_tracer_write_batch(t);
	if (!fz.packing || t->out.batch_records != t->out.batch_packed)
		return 0;
	*room = BATCH_MAX_RECORDS - t->out.batch_records;
	if (*room > want)
		*room = want;
	*p = fz.pack + t->out.batch_pack_bytes;
	*st = &t->out.batch_pack_state;
	return 1;
}

void mt_tracer_packed(struct tracer *t, size_t n, unsigned char *end,
		      uint64_t last_ns)
{
	t->out.batch_pack_bytes = end - fz.pack;
	if (t->out.batch_pack_bytes > mt_rawpack_bound(BATCH_MAX_RECORDS))
		abort();
	t->out.batch_packed += n;
	mt_tracer_appended(t, n, last_ns);
}

void mt_tracer_keep_life_from(struct tracer *t, size_t first)
{
	if (first > t->staged.nlife)
		abort();
	t->staged.nlife = 0;
	t->staged.nlife_slots = 0;
}

/* ---- the memory and mt-trace's state of it ------------------------------- */

/* As make_shared() lays it out (tracer_fast.c), with small rings. */
static void layout(struct mt_fast *f, uint64_t ring_records, bool stacks)
{
	size_t rings_at = sizeof(struct mt_fast_header);
	size_t data_at = rings_at + NRINGS * sizeof(struct mt_fast_ring);

	fz.size = data_at +
		  (size_t)NRINGS * ring_records * sizeof(struct mt_fast_record);
	if (!fz.mem)
		fz.mem = calloc(1, sizeof(struct mt_fast_header) +
				       NRINGS * sizeof(struct mt_fast_ring) +
				       (size_t)NRINGS * FUZZ_RING_MAX *
					   sizeof(struct mt_fast_record));
	else
		memset(fz.mem, 0, fz.size);
	f->hdr = (struct mt_fast_header *)fz.mem;
	f->size = fz.size;
	f->ring_records = ring_records;
	f->nrings = NRINGS;
	f->rings = (struct mt_fast_ring *)(fz.mem + rings_at);
	f->records = (struct mt_fast_record *)(fz.mem + data_at);
	f->stack_depth = stacks ? MT_STACK_DEPTH_MAX : 0;
	/* the drain tells --stacks by f->stacks (no direct drain) */
	f->stacks = stacks ? (struct mt_fast_stacks *)fz.mem : NULL;
	f->memfd = f->wakefd = -1;
}

/* A chunk of the input over the header, the first rings' headers and
 * their records. */
static void write_over(const struct mt_fast *f, const uint8_t *p, size_t n)
{
	size_t part = sizeof(struct mt_fast_header);

	memcpy(f->hdr, p, n < part ? n : part);
	if (n <= part)
		return;
	p += part;
	n -= part;
	part = FUZZ_RINGS * sizeof(struct mt_fast_ring);
	memcpy(f->rings, p, n < part ? n : part);
	if (n <= part)
		return;
	p += part;
	n -= part;
	part = FUZZ_RINGS * f->ring_records * sizeof(struct mt_fast_record);
	memcpy(f->records, p, n < part ? n : part);
}

/* The staged events are as the drain promises. */
static void check_staged(const struct tracer *t, size_t before,
			 uint64_t ring_records)
{
	for (size_t k = 1; k < t->staged.nev; k++)
		if (t->staged.ev[k].timestamp < t->staged.ev[k - 1].timestamp)
			abort();
	for (size_t k = 0; k < t->staged.nev; k++) {
		const struct mt_event *e = &t->staged.ev[k];

		if (e->kind == MT_EV_STACK_REF) {
			if (k + 1 == t->staged.nev ||
			    t->staged.ev[k + 1].tid != e->tid ||
			    t->staged.ev[k + 1].timestamp != e->timestamp ||
			    t->staged.ev[k + 1].kind < MT_EV_MALLOC ||
			    t->staged.ev[k + 1].kind > MT_EV_ALIGNED_ALLOC)
				abort();
			k++;
		} else if (e->kind < MT_EV_MALLOC ||
			   e->kind > MT_EV_ALIGNED_ALLOC) {
			abort();
		}
	}
	if (t->staged.nev - before > (size_t)NRINGS * ring_records)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mt_fast f = {0};
	struct tracer t = {0};
	uint64_t ring_records;
	size_t prefix, at = 8, drains;
	uint64_t tails[NRINGS], heads[NRINGS], last[NRINGS];
	bool abandoned[NRINGS] = {0};
	int rc = 0;

	if (size < 8)
		return 0;
	if (!fz.batch) {
		fz.batch =
		    malloc((size_t)BATCH_MAX_RECORDS * sizeof(*fz.batch));
		fz.pack = malloc(mt_rawpack_bound(BATCH_MAX_RECORDS));
		if (!fz.batch || !fz.pack)
			abort();
	}
	ring_records = data[0] & 1 ? 128 : 64;
	layout(&f, ring_records, data[0] & 2);
	fz.packing = data[0] & 4;
	drains = 1 + (data[0] >> 3) % DRAINS_MAX;
	/* the limit and the clock: small times, or any */
	memcpy(&fz.limit, data + 1, 4);
	fz.limit = data[5] & 1 ? fz.limit : fz.limit << 24;
	fz.now = fz.limit + (data[6] << 20);
	memset(tails, 0, sizeof(tails));
	memset(heads, 0, sizeof(heads));
	memset(last, 0, sizeof(last));
	f.tail = tails;
	f.head = heads;
	f.ring_last = last;
	f.abandoned = abandoned;
	t.fast = &f;
	prefix = (size - at + drains - 1) / drains;
	for (size_t d = 0; d < drains && !rc; d++) {
		size_t n = size - at < prefix ? size - at : prefix;
		size_t before = t.staged.nev;

		write_over(&f, data + at, n);
		at += n;
		rc = mt_fast_collect(&t, UINT64_MAX);
		check_staged(&t, before, ring_records);
		if (f.dropped > (uint64_t)NRINGS * ring_records)
			abort();
		/* written, as mt_tracer_collect() would */
		t.staged.nev = 0;
	}
	free(t.staged.ev);
	free(f.runs);
	free(f.merged);
	free(f.calls);
	return 0;
}
