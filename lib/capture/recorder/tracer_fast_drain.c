// SPDX-License-Identifier: MIT
/*
 * tracer_fast_drain.c - mt-trace --fast: the recorders' rings read into
 * the staged events at each drain, or, when one thread alone is busy,
 * straight into the batch.  The rest of --fast (start, the time line, the
 * processes with and without the recorder) is tracer_fast.c.
 *
 * Order: each ring is one thread's records in time order; the rings read
 * in one drain are merged (runs merged pairwise), then merged with the
 * staged BPF events (already sorted).  A record stamped after the drain's
 * calibration point stays in its ring until the next drain.
 *
 * Trust: the rings are the traced command's memory, which it may write
 * anything into.  Each ring's head is read once a drain and checked
 * against mt-trace's own tail (f->tail: the ring's is written, never read
 * back), each record's fields are read once and checked before use, and
 * a ring that holds something no recorder writes is given up: its
 * records counted lost, the trace marked incomplete, never read again;
 * the other rings go on.  So a drain reads at most a ring's capacity of
 * each ring, and writes no further than that.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt_log.h"
#include "mt_event.h"
#include "mt_fast.h"
#include "mt_grow.h"
#include "mt_stack.h"
#include "tracer_fast.h"
#include "tracer_fast_int.h"
#include "mt_xalloc.h"
#include "tracer_int.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* What a record's event takes of its ring and of the time line: read
 * once for a run of records into a local, which the packed bytes' stores
 * cannot alias (through f and r the compiler reads them again at every
 * record). */
struct ring_view {
	struct mt_tsc_line line;
	bool tsc;
	uint32_t pid, tid;
};

static inline struct ring_view view_of(const struct mt_fast *f,
				       const struct mt_fast_ring *r)
{
	return (struct ring_view){
	    .line = f->line, .tsc = f->tsc, .pid = r->pid, .tid = r->tid};
}

/* A record of the shared memory, each field read once (the traced
 * command may write it meanwhile: what was checked is what is used). */
static inline __attribute__((always_inline)) struct mt_fast_record
load_record(const struct mt_fast_record *p)
{
	return (struct mt_fast_record){
	    .when_kind = __atomic_load_n(&p->when_kind, __ATOMIC_RELAXED),
	    .addr = __atomic_load_n(&p->addr, __ATOMIC_RELAXED),
	    .size = __atomic_load_n(&p->size, __ATOMIC_RELAXED),
	    .extra = __atomic_load_n(&p->extra, __ATOMIC_RELAXED),
	};
}

/* A staged allocator event read from a recorder's ring, not the BPF
 * side's (a bit of flags, which allocator events leave 0: cleared before
 * it is written, one_event_per_call) */
#define FROM_RECORDER 0x4000

/* An allocator event's kind, as the recorders write them (mt_fast.h)? */
static inline bool event_kind(unsigned kind)
{
	return kind - MT_EV_MALLOC <= MT_EV_ALIGNED_ALLOC - MT_EV_MALLOC;
}

static inline __attribute__((always_inline)) struct mt_event
record_event(const struct ring_view *v, const struct mt_fast_record *rec)
{
	uint64_t when = rec->when_kind >> MT_FAST_KIND_BITS;
	unsigned kind = rec->when_kind & MT_FAST_KIND_MASK;
	struct mt_event e = {
	    .timestamp = v->tsc ? mt_tsc_line_ns(&v->line, when) : when,
	    .pid = v->pid,
	    .tid = v->tid,
	    .kind = kind,
	    .addr = rec->addr,
	    .size = rec->size,
	};

	if (kind == MT_EV_REALLOC)
		e.old_addr = rec->extra;
	else if (kind == MT_EV_ALIGNED_ALLOC)
		e.old_size = rec->extra;
	return e;
}

/*
 * A ring's record's time, never before its last one's (*last, updated).
 * One thread stamps its records in order, but two are placed on
 * different lines when a drain reads the first and a later drain the
 * second: a record stamped before a drain's calibration point and
 * published after it (its thread waited for room in a full ring) is
 * placed on the next line, extended back past that point, and the two
 * lines' slopes, each through points a few microseconds apart with some
 * ns of error each, part by tens of ns there (18 and 55 ns seen, 64-record
 * rings, a busy machine): the later record came out earlier.
 */
static inline uint64_t in_order(uint64_t ns, uint64_t *last)
{
	if (ns < *last)
		ns = *last;
	*last = ns;
	return ns;
}

/* Messages about rings given up, at most (the trace is marked incomplete
 * whatever their number) */
#define ABANDONED_SAID 8

/* Give up on ring i: the held records it holds are dropped (counted
 * lost), and it is never read nor returned to the pool again. */
static void abandon(struct mt_fast *f, uint32_t i, uint64_t held,
		    enum mt_fast_damage why, const char *what)
{
	static unsigned said;

	f->abandoned[i] = true;
	f->dropped += held;
	if (said++ < ABANDONED_SAID)
		mt_error("--fast: ring %u: %s: its %llu records are "
			 "dropped",
			 (unsigned)i, what, (unsigned long long)held);
	mt_fast_damaged(f, why);
}

/* Ring i's head, read once for this drain into f->head[i]: false, the
 * ring given up, when it cannot be one (before mt-trace's tail, or more
 * records than the ring holds). */
static bool take_head(struct mt_fast *f, uint32_t i)
{
	uint64_t head = __atomic_load_n(&f->rings[i].head, __ATOMIC_ACQUIRE);
	uint64_t tail = f->tail[i];

	f->head[i] = tail;
	/* unsigned: a head before the tail is a difference past it too */
	if (head - tail > f->ring_records) {
		abandon(f, i, f->ring_records, MT_FAST_DAMAGE_POSITIONS,
			head < tail ? "its head is before its tail"
				    : "its head is past its capacity");
		return false;
	}
	f->head[i] = head;
	return true;
}

/*
 * A record stamped after the drain's limit waits for the next drain; one
 * stamped past the recorders' clock now (and a sixteenth of its value
 * more, for the counters of other CPUs: a minute an hour up) is none a
 * recorder wrote, and would hold its ring for good.
 */
static bool stamped_in_future(const struct mt_fast *f,
			      const struct mt_fast_record *rec)
{
	uint64_t when = rec->when_kind >> MT_FAST_KIND_BITS;
	uint64_t now = mt_fast_clock_now(f);

	return when > now + (now >> 4);
}

/* A STACK record (rec, at ring index at) and the frames after it, to the
 * stacks' table (tracer_stacks.c), as if the BPF side had sent it; how
 * many records it took, or 0 when they are not what a recorder writes:
 * 1 to stack_depth frames, with the STACK_REF and the event after them
 * published at once. */
static uint64_t read_stack(struct tracer *t, const struct mt_fast *f,
			   const struct mt_fast_record *recs, uint64_t at,
			   uint64_t head, const struct mt_fast_record *rec)
{
	uint64_t mask = f->ring_records - 1;
	uint64_t nframes = rec->size, nrecs;
	struct mt_stack_record stack;

	if (nframes == 0 || nframes > f->stack_depth ||
	    nframes > MT_STACK_DEPTH_MAX)
		return 0;
	nrecs = 1 + (nframes + MT_FAST_FRAMES_PER_RECORD - 1) /
			MT_FAST_FRAMES_PER_RECORD;
	if (nrecs + 2 > head - at)
		return 0;
	memset(&stack.ev, 0, sizeof(stack.ev));
	stack.ev.kind = MT_EV_STACK;
	stack.ev.addr = rec->addr;
	stack.ev.size = nframes;
	stack.ev.flags = rec->extra & MT_STACK_TRUNCATED;
	for (uint64_t k = 0; k < nframes; k++) {
		const uint64_t *data =
		    (const uint64_t
			 *)&recs[(at + 1 + k / MT_FAST_FRAMES_PER_RECORD) &
				 mask];

		stack.frames[k] = __atomic_load_n(
		    &data[k % MT_FAST_FRAMES_PER_RECORD], __ATOMIC_RELAXED);
	}
	mt_tracer_stack_seen(t, &stack,
			     sizeof(stack.ev) + nframes * sizeof(uint64_t));
	return nrecs;
}

/*
 * A CPython code object (a STACK record with MT_FAST_STACK_PYCODE, at
 * ring index at) and its payload, straight to the stream as a PYCODE
 * record (lib/preload/python.c): before any stack that names it, which
 * waits in the staged events.  Stamped with the last record written, so
 * that the stream stays in time order.  How many ring records it took,
 * or 0 when they are not what a recorder writes: its four lengths must
 * add up to its payload.
 */
static uint64_t read_pycode(struct tracer *t, const struct mt_fast *f,
			    const struct mt_fast_record *recs, uint64_t at,
			    uint64_t head, const struct ring_view *v,
			    const struct mt_fast_record *rec)
{
	uint64_t mask = f->ring_records - 1, len = rec->size, nrecs;
	struct mt_event slots[1 + (MT_PYCODE_PAYLOAD_MAX + MT_EVENT_SIZE - 1) /
				      MT_EVENT_SIZE];
	unsigned char *payload = (unsigned char *)&slots[1];
	uint64_t sum = 16;

	if (len < 16 || len > MT_PYCODE_PAYLOAD_MAX || rec->addr == 0 ||
	    rec->addr > MT_PYCODE_ID_MAX)
		return 0;
	nrecs = 1 + (len + sizeof(*rec) - 1) / sizeof(*rec);
	if (nrecs > head - at)
		return 0;
	memset(slots, 0, sizeof(slots));
	for (uint64_t k = 0; k + 1 < nrecs; k++) {
		const struct mt_fast_record part =
		    load_record(&recs[(at + 1 + k) & mask]);
		size_t n = len - k * sizeof(part);

		memcpy(payload + k * sizeof(part), &part,
		       n < sizeof(part) ? n : sizeof(part));
	}
	for (int i = 0; i < 4; i++) {
		uint32_t n;

		memcpy(&n, payload + 4 * i, sizeof(n));
		sum += n;
	}
	if (sum != len)
		return 0;
	slots[0].timestamp = t->out.last_record_ns;
	slots[0].pid = v->pid;
	slots[0].tid = v->tid;
	slots[0].kind = MT_EV_PYCODE;
	slots[0].addr = rec->addr;
	slots[0].size = (uint32_t)(rec->extra >> 32);
	slots[0].flags = (uint16_t)(rec->extra >> 16);
	slots[0].aux = len;
	if (mt_tracer_append(t, slots,
			     1 + (len + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE))
		return 0;
	return nrecs;
}

/* The STACK_REF staged before the allocation the next record holds (same
 * pid, tid and time: the merge by time keeps them together). */
static struct mt_event stack_ref(const struct ring_view *v,
				 const struct mt_fast_record *rec)
{
	struct mt_event e = record_event(v, rec);

	e.kind = MT_EV_STACK_REF;
	e.size = e.old_addr = e.old_size = 0;
	return e;
}

/* Ring i's records before tail are read (mt-trace's own tail, written to
 * the ring for its producer): its thread, if it waits for room, goes
 * on. */
static void consumed(struct mt_fast *f, uint32_t i, uint64_t tail)
{
	struct mt_fast_ring *r = &f->rings[i];

	f->tail[i] = tail;
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	if (__atomic_load_n(&r->waiting, __ATOMIC_SEQ_CST)) {
		r->waiting = 0;
		syscall(SYS_futex, &r->tail, FUTEX_WAKE, INT_MAX, NULL, NULL,
			0);
	}
}

/* A staged record's time: on the time line, never before the ring's last
 * (in_order); false when after the drain's (max_ns): no recorder stamps
 * a record it publishes after mt-trace's calibration before it. */
static bool stage_time(struct mt_event *e, uint64_t max_ns, uint64_t *last)
{
	if (e->timestamp > max_ns)
		return false;
	e->timestamp = in_order(e->timestamp, last);
	return true;
}

/* Read ring i's records stamped up to limit (counter or ns) onto the end
 * of the staged events, as one run; wake its thread if it waits for
 * room.  A recorder writes a stack, its reference and the event with one
 * time and publishes them at once: the limit never splits them, and a
 * STACK_REF is staged with its event or not at all.  A record no
 * recorder writes gives the ring up (those before it are staged). */
static void read_ring(struct tracer *t, struct mt_fast *f, uint32_t i,
		      uint64_t limit, uint64_t max_ns)
{
	const struct mt_fast_record *recs =
	    f->records + (uint64_t)i * f->ring_records;
	const struct ring_view v = view_of(f, &f->rings[i]);
	uint64_t head = f->head[i], tail = f->tail[i];
	uint64_t mask = f->ring_records - 1;
	uint64_t *last = &f->ring_last[i];
	size_t start = t->staged.nev;
	const char *bad = NULL;

	if (head == tail)
		return;
	/* head - tail <= the ring's capacity (take_head) */
	t->staged.ev =
	    mt_grow(t->staged.ev, &t->staged.cap_ev,
		    t->staged.nev + (head - tail), sizeof(*t->staged.ev));
	while (tail != head) {
		const struct mt_fast_record rec =
		    load_record(&recs[tail & mask]);
		unsigned kind = rec.when_kind & MT_FAST_KIND_MASK;
		struct mt_fast_record next;
		struct mt_event *e = &t->staged.ev[t->staged.nev];

		if ((rec.when_kind >> MT_FAST_KIND_BITS) > limit) {
			/* after this drain's calibration */
			if (stamped_in_future(f, &rec))
				bad = "a record stamped in the future";
			break;
		}
		if (kind == MT_FAST_KIND_STACK &&
		    (rec.extra & MT_FAST_STACK_PYCODE)) {
			uint64_t n =
			    read_pycode(t, f, recs, tail, head, &v, &rec);

			if (!n) {
				bad = "a Python code record cut short or "
				      "inconsistent";
				break;
			}
			tail += n;
			continue;
		}
		if (kind == MT_FAST_KIND_STACK) {
			uint64_t n = read_stack(t, f, recs, tail, head, &rec);

			if (!n) {
				bad = "a stack record cut short or of "
				      "impossible size";
				break;
			}
			tail += n;
			continue;
		}
		if (kind == MT_FAST_KIND_STACK_REF) {
			/* its event, of the same time, published with it */
			if (head - tail < 2)
				next.when_kind = 0;
			else
				next = load_record(&recs[(tail + 1) & mask]);
			if (!event_kind(next.when_kind & MT_FAST_KIND_MASK) ||
			    next.when_kind >> MT_FAST_KIND_BITS !=
				rec.when_kind >> MT_FAST_KIND_BITS) {
				bad = "a stack reference without its event";
				break;
			}
			e[0] = stack_ref(&v, &rec);
			e[1] = record_event(&v, &next);
			e[1].flags |= FROM_RECORDER;
			if (!stage_time(&e[0], max_ns, last) ||
			    !stage_time(&e[1], max_ns, last)) {
				bad = "a record stamped after mt-trace read "
				      "the clock";
				break;
			}
			t->staged.nev += 2;
			tail += 2;
			continue;
		}
		if (!event_kind(kind)) {
			bad = "a record of no known kind";
			break;
		}
		*e = record_event(&v, &rec);
		e->flags |= FROM_RECORDER;
		if (!stage_time(e, max_ns, last)) {
			bad = "a record stamped after mt-trace read the clock";
			break;
		}
		t->staged.nev++;
		tail++;
	}
	if (bad)
		abandon(f, i, head - tail, MT_FAST_DAMAGE_RECORD, bad);
	else
		consumed(f, i, tail);
	if (t->staged.nev > start) {
		f->runs = mt_grow(f->runs, &f->cap_runs, f->nruns + 1,
				  sizeof(*f->runs));
		f->runs[f->nruns++] = t->staged.nev;
	}
}

/* Do the payloads of slots[0..n) end within them?  Then the slots pack
 * alone as they would in any batch (rawpack.c: a payload that would run
 * past the batch's end is not one). */
static bool payloads_within(const struct mt_event *slots, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t pay;

		if (!slots[i].aux || !mt_rawpack_has_payload(slots[i].kind))
			continue;
		pay = slots[i].aux / MT_EVENT_SIZE +
		      (slots[i].aux % MT_EVENT_SIZE != 0);
		if (pay > n - i - 1)
			return false;
		i += pay;
	}
	return true;
}

/* Can the staged events and lifecycle records up to until go straight
 * into the batch among a ring's records, one by one?  Not an event of a
 * kind that takes a path of its own (tracer_drain.c: mt_tracer_collect),
 * nor one whose payload would reach past its slots (the packer would
 * take the slots after them as its payload). */
static bool staged_plain(const struct tracer *t, uint64_t until)
{
	for (size_t k = 0;
	     k < t->staged.nev && t->staged.ev[k].timestamp <= until; k++) {
		const struct mt_event *e = &t->staged.ev[k];

		/* a probe's allocator event: maybe a recorder's call too
		 * (one_event_per_call, on the staged events only) */
		if (e->kind == MT_EV_STACK_REF || e->kind == MT_EV_CODE_MAP ||
		    event_kind(e->kind) || !payloads_within(e, 1))
			return false;
	}
	for (size_t j = 0;
	     j < t->staged.nlife && t->staged.life[j].timestamp <= until; j++)
		if (!payloads_within(
			&t->staged.life_slots[t->staged.life[j].first],
			t->staged.life[j].nslots))
			return false;
	return true;
}

/*
 * The usual drain of a busy program: one thread's ring holds records,
 * the staged BPF events and lifecycle records (RSS, brk, mmap: often
 * none) are plain ones, and there are no stacks.  Then the ring's records
 * up to the watermark go straight into the batch, the staged ones merged
 * in by time as they come, without staging and copying (allocheavy
 * --fast: ~5 ns an event of mt-trace's CPU), packed there as they are
 * read (no 56-byte slot written for the writer to read back).  Its
 * index, or UINT32_MAX when the drain must stage.
 */
static uint32_t sole_busy_ring(const struct tracer *t, const struct mt_fast *f,
			       uint32_t used, uint64_t until)
{
	uint32_t busy = UINT32_MAX;

	if (f->stacks || !staged_plain(t, until))
		return UINT32_MAX;
	for (uint32_t i = 0; i < used; i++) {
		if (f->abandoned[i] || f->head[i] == f->tail[i])
			continue;
		if (busy != UINT32_MAX)
			return UINT32_MAX;
		busy = i;
	}
	return busy;
}

/* A direct drain under way: the ring's records from tail to head, the
 * staged events from k to nstaged and the lifecycle records from j to
 * nlife (those up to until), merged. */
struct direct {
	const struct mt_fast_record *recs;
	uint64_t tail, head, mask, limit, until;
	uint64_t max_ns; /* no record is stamped later (stage_time) */
	bool bad;	 /* a record no recorder writes, at tail */
	const struct mt_event *staged;
	size_t k, nstaged;
	const struct staged_life *life;
	const struct mt_event *life_slots;
	size_t j, nlife, life_left; /* slots of the records from j on */
	uint64_t *ring_last;	    /* the ring's (in_order) */
	uint64_t last; /* the time of the last one into the batch */
	size_t need;   /* the next lifecycle record's slots, when they did
			  not fit */
};

/* The slots of the next staged event or lifecycle record, whichever is
 * first (a lifecycle record on equal times, as mt_tracer_collect has
 * it), its time and which it is; NULL when none is left. */
static const struct mt_event *next_staged(const struct direct *d,
					  size_t *nslots, uint64_t *when,
					  bool *is_life)
{
	bool ev = d->k < d->nstaged, life = d->j < d->nlife;

	*is_life = life && (!ev || d->life[d->j].timestamp <=
				       d->staged[d->k].timestamp);
	if (*is_life) {
		*nslots = d->life[d->j].nslots;
		*when = d->life[d->j].timestamp;
		return &d->life_slots[d->life[d->j].first];
	}
	if (!ev)
		return NULL;
	*nslots = 1;
	*when = d->staged[d->k].timestamp;
	return &d->staged[d->k];
}

/*
 * Up to room of the next records, staged events and lifecycle records'
 * slots, in time order (staged ones first on equal times, as merge2 and
 * mt_tracer_collect have it), into the batch: packed at *p against *st
 * (rawpack.h: the writer's bytes for the same slots), *p moved past them;
 * or, packed false, as slots at out.  How many slots; fewer than room
 * when none is left up to the watermark, or the next lifecycle record's
 * slots do not fit in room (d->need).  The records between two staged
 * ones go in a loop of their own, the event built in registers.
 */
static inline __attribute__((always_inline)) size_t
direct_run(struct direct *d, const struct ring_view *v, bool packed,
	   unsigned char **p, struct mt_rawpack_state *st, struct mt_event *out,
	   size_t room)
{
	/* in locals: the packed bytes' stores could alias *d and *v */
	const struct ring_view view = *v;
	const struct mt_fast_record *recs = d->recs;
	const uint64_t head = d->head, mask = d->mask, limit = d->limit,
		       until = d->until, max_ns = d->max_ns;
	struct mt_rawpack_state s = *st;
	unsigned char *o = packed ? *p : NULL;
	uint64_t tail = d->tail, last = d->last, ring_last = *d->ring_last;
	size_t n = 0;

	while (n < room) {
		size_t nslots = 0;
		uint64_t next = 0;
		bool is_life = false;
		const struct mt_event *e =
		    next_staged(d, &nslots, &next, &is_life);

		/* the ring's records before the next staged one */
		for (; n < room && tail != head; n++) {
			const struct mt_fast_record rec =
			    load_record(&recs[tail & mask]);
			struct mt_event ev;

			if ((rec.when_kind >> MT_FAST_KIND_BITS) > limit)
				break; /* after this drain's calibration */
			ev = record_event(&view, &rec);
			/* no stacks here: an allocator event, of a time
			 * before mt-trace read the clock */
			if (unlikely(!event_kind(ev.kind) ||
				     ev.timestamp > max_ns)) {
				d->bad = true;
				break;
			}
			if (ev.timestamp < ring_last) /* in_order */
				ev.timestamp = ring_last;
			if (e && ev.timestamp >= next)
				break; /* the staged one first */
			if (ev.timestamp > until)
				break; /* the next drain's */
			if (packed)
				o = mt_rawpack_record(&s, &ev, o);
			else
				out[n] = ev;
			last = ring_last = ev.timestamp;
			tail++;
		}
		if (n == room || !e || d->bad)
			break;
		/* the staged one, before the ring's next record, or with
		 * none left up to the watermark */
		if (nslots > room - n) {
			d->need = nslots; /* in a batch with room for it */
			break;
		}
		if (packed)
			o += mt_rawpack_from(&s, e, 0, nslots, o);
		else
			memcpy(&out[n], e, nslots * sizeof(*e));
		if (is_life) {
			d->j++;
			d->life_left -= nslots;
		} else {
			d->k++;
		}
		last = next;
		n += nslots;
	}
	d->tail = tail;
	d->last = last;
	*d->ring_last = ring_last;
	if (packed) {
		*st = s;
		*p = o;
	}
	return n;
}

/* Ring i's records stamped up to limit (counter or ns) and until (ns),
 * with the staged events and lifecycle records up to until, into the
 * batch, in place (sole_busy_ring): packed, or as slots when the batch
 * ends in slots already; the staged ones that went taken off t->staged.ev and
 * t->staged.life.  -1 if a write failed. */
static int read_ring_direct(struct tracer *t, struct mt_fast *f, uint32_t i,
			    uint64_t limit, uint64_t max_ns, uint64_t until)
{
	const struct ring_view v = view_of(f, &f->rings[i]);
	struct direct d = {
	    .recs = f->records + (uint64_t)i * f->ring_records,
	    .tail = f->tail[i],
	    .head = f->head[i], /* at most a ring's capacity on (take_head) */
	    .mask = f->ring_records - 1,
	    .limit = limit,
	    .max_ns = max_ns,
	    .until = until,
	    .staged = t->staged.ev,
	    .life = t->staged.life,
	    .life_slots = t->staged.life_slots,
	    .ring_last = &f->ring_last[i],
	};
	int rc = 0;

	while (d.nstaged < t->staged.nev &&
	       t->staged.ev[d.nstaged].timestamp <= until)
		d.nstaged++;
	for (; d.nlife < t->staged.nlife &&
	       t->staged.life[d.nlife].timestamp <= until;
	     d.nlife++)
		d.life_left += t->staged.life[d.nlife].nslots;
	for (;;) {
		size_t want = d.head - d.tail + d.nstaged - d.k + d.life_left;
		size_t room, n;
		unsigned char *p;
		struct mt_rawpack_state *st;
		struct mt_event *out;
		int packed;

		if (!want)
			break;
		/* a lifecycle record whole in one batch, as
		 * mt_tracer_append has it */
		if (d.need &&
		    t->out.batch_records + d.need > BATCH_MAX_RECORDS &&
		    mt_tracer_write_batch(t)) {
			rc = -1;
			break;
		}
		d.need = 0;
		packed = mt_tracer_pack_room(t, want, &room, &p, &st);
		if (packed < 0) {
			rc = -1;
			break;
		}
		d.last = 0;
		if (packed) {
			n = direct_run(&d, &v, true, &p, st, NULL, room);
			mt_tracer_packed(t, n, p, d.last);
		} else {
			if (!(out = mt_tracer_batch_room(t, want, &room))) {
				rc = -1;
				break;
			}
			n = direct_run(&d, &v, false, NULL,
				       &(struct mt_rawpack_state){0}, out,
				       room);
			mt_tracer_appended(t, n, d.last);
		}
		if ((n < room && !d.need) || d.bad)
			break;
	}
	/* stopped at a record after the limit: is it one of the future? */
	if (!d.bad && d.tail != d.head) {
		const struct mt_fast_record rec =
		    load_record(&d.recs[d.tail & d.mask]);

		d.bad = (rec.when_kind >> MT_FAST_KIND_BITS) > limit &&
			stamped_in_future(f, &rec);
	}
	if (d.bad)
		abandon(f, i, d.head - d.tail, MT_FAST_DAMAGE_RECORD,
			"a record no recorder writes");
	else
		consumed(f, i, d.tail);
	/* t->staged.ev is NULL until the first event: memmove's arguments may
	 * not */
	if (d.k) {
		memmove(t->staged.ev, t->staged.ev + d.k,
			(t->staged.nev - d.k) * sizeof(*t->staged.ev));
		t->staged.nev -= d.k;
	}
	if (d.j)
		mt_tracer_keep_life_from(t, d.j);
	return rc;
}

static bool exited(const struct mt_fast *f, uint32_t pid)
{
	for (size_t i = 0; i < f->nexited; i++)
		if ((uint32_t)f->exited[i] == pid)
			return true;
	return false;
}

/* A drained ring whose thread is done (released, or its process exited)
 * goes back to the pool. */
static void maybe_reclaim(struct mt_fast *f, uint32_t i)
{
	struct mt_fast_ring *r = &f->rings[i];
	uint32_t state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);

	/* the head again, after the state: a record published before the
	 * thread let the ring go is not lost */
	if (f->abandoned[i] || state == MT_FAST_RING_FREE ||
	    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) != f->tail[i])
		return;
	if (state != MT_FAST_RING_RELEASED &&
	    !exited(f, __atomic_load_n(&r->pid, __ATOMIC_RELAXED)))
		return;
	r->head = r->tail = 0;
	f->tail[i] = 0;
	r->pid = r->tid = 0;
	f->ring_last[i] = 0; /* its next thread's from its start */
	__atomic_store_n(&r->state, MT_FAST_RING_FREE, __ATOMIC_RELEASE);
}

/* Merge sorted a[0..na) and b[0..nb) into out; a first on equal times. */
static void merge2(const struct mt_event *a, size_t na,
		   const struct mt_event *b, size_t nb, struct mt_event *out)
{
	size_t i = 0, j = 0, k = 0;

	while (i < na && j < nb)
		out[k++] = b[j].timestamp < a[i].timestamp ? b[j++] : a[i++];
	memcpy(out + k, a + i, (na - i) * sizeof(*a));
	k += na - i;
	memcpy(out + k, b + j, (nb - j) * sizeof(*b));
}

/* Runs that follow each other in time are one: the usual drain (one
 * thread, after the events staged before, which are older) needs no
 * merge and no copy. */
static void join_ordered_runs(const struct tracer *t, struct mt_fast *f)
{
	size_t nr = 1;

	for (size_t k = 1; k < f->nruns; k++) {
		size_t last = f->runs[nr - 1];

		if (last == 0 || t->staged.ev[last - 1].timestamp <=
				     t->staged.ev[last].timestamp)
			f->runs[nr - 1] = f->runs[k];
		else
			f->runs[nr++] = f->runs[k];
	}
	f->nruns = nr;
}

/* The runs of the staged events (each sorted) merged into one, pairwise:
 * the ones staged before first on equal times, then ring by ring. */
static void merge_runs(struct tracer *t, struct mt_fast *f)
{
	join_ordered_runs(t, f);
	while (f->nruns > 1) {
		size_t from = 0, nr = 0;

		f->merged = mt_grow(f->merged, &f->cap_merged, t->staged.nev,
				    sizeof(*f->merged));
		for (size_t k = 0; k < f->nruns; k += 2) {
			size_t mid = f->runs[k];
			size_t end = k + 1 < f->nruns ? f->runs[k + 1] : mid;

			merge2(t->staged.ev + from, mid - from,
			       t->staged.ev + mid, end - mid, f->merged + from);
			f->runs[nr++] = end;
			from = end;
		}
		f->nruns = nr;
		struct mt_event *swap = t->staged.ev;
		size_t cap = t->staged.cap_ev;

		t->staged.ev = f->merged;
		t->staged.cap_ev = f->cap_merged;
		f->merged = swap;
		f->cap_merged = cap;
	}
}

/* The rings claimed so far: the count the recorders raise, taken as
 * never going back and never past the pool. */
static uint32_t rings_used(struct mt_fast *f)
{
	uint32_t used = __atomic_load_n(&f->hdr->rings_used, __ATOMIC_ACQUIRE);

	if (used > f->nrings)
		used = f->nrings;
	if (used > f->rings_used)
		f->rings_used = used;
	return f->rings_used;
}

/* Thread tid's last allocator event written (a new entry when none). */
static struct last_call *last_call(struct mt_fast *f, uint32_t tid)
{
	size_t mask, k;

	if (f->ncalls * 2 >= f->cap_calls) {
		size_t cap = f->cap_calls ? f->cap_calls * 2 : 64;
		struct last_call *v = mt_xcalloc(cap, sizeof(*v)),
				 *old = f->calls;

		for (size_t i = 0; i < f->cap_calls; i++) {
			if (!old[i].tid)
				continue;
			for (k = old[i].tid & (cap - 1); v[k].tid;
			     k = (k + 1) & (cap - 1))
				;
			v[k] = old[i];
		}
		free(old);
		f->calls = v;
		f->cap_calls = cap;
	}
	mask = f->cap_calls - 1;
	for (k = tid & mask; f->calls[k].tid && f->calls[k].tid != tid;
	     k = (k + 1) & mask)
		;
	if (!f->calls[k].tid) {
		f->calls[k].tid = tid;
		f->ncalls++;
	}
	return &f->calls[k];
}

/*
 * Is e the second sight of its thread's last call, by the other path?  A
 * program whose executable holds its own operator new (-static-libstdc++)
 * is probed there, and the glibc malloc that operator new calls is the
 * recorder's: both see one call.  The two come one right after the
 * other on the thread, the same block (and size), one from each path:
 * the first is kept (the probe's free at its entry, the recorder's
 * allocation before the probe's return), the second dropped.  No program
 * makes two such calls in a row (the same block allocated twice, or
 * freed twice).  Otherwise e becomes the thread's last call.
 */
static bool seen_twice(struct mt_fast *f, const struct mt_event *e)
{
	uint8_t cls = e->kind == MT_EV_FREE ? 2 : 1;
	uint8_t src = e->flags & FROM_RECORDER ? 2 : 1;
	struct last_call *c = last_call(f, e->tid);

	if (c->src && c->src != src && c->cls == cls && c->addr == e->addr &&
	    (cls == 2 || c->size == e->size)) {
		c->src = 0; /* paired: a third is another call */
		return true;
	}
	*c = (struct last_call){e->tid, cls, src, e->addr, e->size};
	return false;
}

/*
 * The staged events up to until, as they will be written: one call seen
 * by both paths written once (seen_twice), with its STACK_REF; the
 * recorders' mark cleared.
 */
static void one_event_per_call(struct tracer *t, struct mt_fast *f,
			       uint64_t until)
{
	size_t out = 0, i;

	for (i = 0; i < t->staged.nev && t->staged.ev[i].timestamp <= until;
	     i++) {
		struct mt_event *e = &t->staged.ev[i];

		if (event_kind(e->kind) && seen_twice(f, e)) {
			/* its stack reference goes with it */
			if (out &&
			    t->staged.ev[out - 1].kind == MT_EV_STACK_REF &&
			    t->staged.ev[out - 1].tid == e->tid &&
			    t->staged.ev[out - 1].timestamp == e->timestamp)
				out--;
			continue;
		}
		e->flags &= ~FROM_RECORDER;
		if (out != i)
			t->staged.ev[out] = *e;
		out++;
	}
	if (out == i)
		return;
	memmove(&t->staged.ev[out], &t->staged.ev[i],
		(t->staged.nev - i) * sizeof(*t->staged.ev));
	t->staged.nev -= i - out;
}

/* The ring's last record written straight into the batch: its thread's
 * last call (seen_twice), when it was an allocator event. */
static void direct_last(struct mt_fast *f, uint32_t i, uint64_t before,
			uint64_t tail)
{
	struct mt_fast_record rec;
	struct mt_event e;
	struct ring_view v;

	if (tail == before)
		return;
	rec = load_record(&f->records[(uint64_t)i * f->ring_records +
				      ((tail - 1) & (f->ring_records - 1))]);
	v = view_of(f, &f->rings[i]);
	e = record_event(&v, &rec);
	if (event_kind(e.kind)) {
		e.flags = FROM_RECORDER;
		seen_twice(f, &e);
	}
}

int mt_fast_collect(struct tracer *t, uint64_t until)
{
	struct mt_fast *f = t->fast;
	uint32_t used = rings_used(f), direct;
	uint64_t limit, max_ns;
	int rc = 0;

	if (!mt_fast_drain_begin(f, &limit))
		return 0;
	/* no record is stamped after the drain's clock reading (1 ms for
	 * the time line's rounding) */
	max_ns = (f->tsc ? f->cur.ns : limit) + 1000000;
	for (uint32_t i = 0; i < used; i++) {
		if (!f->abandoned[i])
			take_head(f, i);
		/* a record published after an earlier drain wrote past its
		 * stamp (its thread was preempted between the two) is placed
		 * at that drain's watermark: per thread, the file is in time
		 * order */
		if (f->ring_last[i] < t->staged.written_until)
			f->ring_last[i] = t->staged.written_until;
	}
	direct = sole_busy_ring(t, f, used, until);
	if (direct != UINT32_MAX) {
		uint64_t before = f->tail[direct];

		if (read_ring_direct(t, f, direct, limit, max_ns, until))
			rc = -1;
		direct_last(f, direct, before, f->tail[direct]);
	}
	/* the events staged before (sorted) are the first run */
	f->runs = mt_grow(f->runs, &f->cap_runs, 1, sizeof(*f->runs));
	f->runs[0] = t->staged.nev;
	f->nruns = 1;
	for (uint32_t i = 0; i < used; i++) {
		/* a ring that was empty a moment ago waits for the next
		 * drain: its records would follow later ones in the batch */
		if (direct == UINT32_MAX && !f->abandoned[i])
			read_ring(t, f, i, limit, max_ns);
		maybe_reclaim(f, i);
	}
	f->nexited = 0;
	merge_runs(t, f);
	one_event_per_call(t, f, until);
	return rc;
}
