/* SPDX-License-Identifier: MIT */
/*
 * rawpack.h - the packed encoding of a raw batch's records (MT_BATCH_PACKED,
 * man/mt-format.5 "Packed batches"): each 56-byte slot of a batch as a few
 * bytes, every field given back exactly.  raw.c packs what mt-trace
 * writes; input_raw.c unpacks, a chunk of slots at a time.
 *
 * A record: a header byte (kind code in bits 0-4, 31: the kind follows as
 * a varint; bit 5: addr != 0; bit 6: size != 0; bit 7: a second header
 * byte follows), the second header byte if any (bit 0: pid changed, 1:
 * tid changed, 2: flags != 0, 3: aux != 0, 4: old_addr != 0, 5: old_size
 * != 0), then the kind varint if escaped, the timestamp as a zigzag varint
 * delta from the previous record's, and the fields the bits name, in that
 * order: pid, tid (zigzag delta from pid), flags, aux, addr (zigzag delta
 * from the previous non-zero addr), size, old_addr (zigzag delta from
 * addr), old_size.  Varints are LEB128.  A record of a kind with a payload
 * (Exec, Marker, Allocator, Stack, CodeFile, PyCode) whose aux bytes fit in the
 * batch's slots left is followed by a mode byte and its payload: mode 0,
 * aux bytes (the last slot's padding is zero); mode 1, the slots' bytes
 * whole.  The previous values start at 0 in every batch.
 */
#ifndef MT_RAWPACK_H
#define MT_RAWPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mt_event.h"

/* The most bytes one slot takes packed: a record with every field at its
 * widest (header 2, kind 3, timestamp 10, pid 5, tid 5, flags 3, aux 5,
 * four 64-bit fields 10 each) and a payload mode byte. */
#define MT_RAWPACK_SLOT_MAX 74

static inline size_t mt_rawpack_bound(uint32_t count)
{
	return (size_t)count * MT_RAWPACK_SLOT_MAX;
}

/* The kinds whose record is followed by aux bytes of payload slots. */
static inline bool mt_rawpack_has_payload(unsigned kind)
{
	return kind == MT_EV_EXEC || kind == MT_EV_MARKER ||
	       kind == MT_EV_ALLOCATOR || kind == MT_EV_STACK ||
	       kind == MT_EV_CODE_FILE || kind == MT_EV_PYCODE;
}

/* Packs count slots into out (mt_rawpack_bound(count) bytes of room);
 * returns the bytes written. */
size_t mt_rawpack(const struct mt_event *slots, uint32_t count,
		  unsigned char *out);

/* What a record is packed against: the previous record's time, thread
 * and non-zero address; all 0 at a batch's start. */
struct mt_rawpack_state {
	uint64_t ts, addr;
	uint32_t pid, tid;
};

/* mt_rawpack of a batch whose slots before first are packed already
 * (st: the state after them): slots first..count-1 packed into out
 * (mt_rawpack_bound(count - first) bytes of room), st updated; the bytes
 * written.  Packing a batch in two parts so gives mt_rawpack's bytes when
 * no payload of the first part reaches past first. */
size_t mt_rawpack_from(struct mt_rawpack_state *st,
		       const struct mt_event *slots, uint32_t first,
		       uint32_t count, unsigned char *out);

enum {
	MT_RAWPACK_H_KIND = 0x1f, /* kind code; itself: a kind varint follows */
	MT_RAWPACK_H_ADDR = 0x20,
	MT_RAWPACK_H_SIZE = 0x40,
	MT_RAWPACK_H_EXT = 0x80,
	MT_RAWPACK_X_PID = 0x01,
	MT_RAWPACK_X_TID = 0x02,
	MT_RAWPACK_X_FLAGS = 0x04,
	MT_RAWPACK_X_AUX = 0x08,
	MT_RAWPACK_X_OLD_ADDR = 0x10,
	MT_RAWPACK_X_OLD_SIZE = 0x20,
};

static inline uint64_t mt_rawpack_zigzag(uint64_t delta)
{
	return delta << 1 ^ (uint64_t)((int64_t)delta >> 63);
}

static inline unsigned char *mt_rawpack_varint(unsigned char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (unsigned char)v | 0x80;
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	return p;
}

/*
 * The record ev (its own bytes: not a payload that follows it) packed at
 * p against st, which it updates; past its last byte.  mt_rawpack's
 * record, inline for --fast's drain, which packs the recorders' records
 * as it reads them (tracer_fast_drain.c): with flags and aux known zero
 * there, most of the tests fold away.  Always inline: a call takes the
 * event through memory (a drain loop with two calls was not inlined,
 * 1.5 ns a record slower).
 */
static inline __attribute__((always_inline)) unsigned char *
mt_rawpack_record(struct mt_rawpack_state *st, const struct mt_event *ev,
		  unsigned char *p)
{
	unsigned h =
	    ev->kind < MT_RAWPACK_H_KIND ? ev->kind : MT_RAWPACK_H_KIND;
	unsigned x = 0;

	h |= (ev->addr ? MT_RAWPACK_H_ADDR : 0) |
	     (ev->size ? MT_RAWPACK_H_SIZE : 0);
	/* nearly every record: the thread of the one before, a kind under
	 * 31, nothing but a time, an address and a size; on its own path
	 * (allocheavy's: 117 -> 103 instructions a record and a third of the
	 * mispredicted branches, callgrind and cachegrind --branch-sim) */
	if (((ev->pid ^ st->pid) | (ev->tid ^ st->tid) | ev->flags | ev->aux |
	     ev->old_addr | ev->old_size) == 0 &&
	    ev->kind < MT_RAWPACK_H_KIND) {
		*p++ = h;
		p = mt_rawpack_varint(
		    p, mt_rawpack_zigzag(ev->timestamp - st->ts));
		st->ts = ev->timestamp;
		if (ev->addr) {
			p = mt_rawpack_varint(
			    p, mt_rawpack_zigzag(ev->addr - st->addr));
			st->addr = ev->addr;
		}
		if (ev->size)
			p = mt_rawpack_varint(p, ev->size);
		return p;
	}
	x |= (ev->pid != st->pid ? MT_RAWPACK_X_PID : 0) |
	     (ev->tid != st->tid ? MT_RAWPACK_X_TID : 0);
	x |= (ev->flags ? MT_RAWPACK_X_FLAGS : 0) |
	     (ev->aux ? MT_RAWPACK_X_AUX : 0);
	x |= (ev->old_addr ? MT_RAWPACK_X_OLD_ADDR : 0) |
	     (ev->old_size ? MT_RAWPACK_X_OLD_SIZE : 0);
	if (x) {
		*p++ = h | MT_RAWPACK_H_EXT;
		*p++ = x;
	} else {
		*p++ = h;
	}
	if ((h & MT_RAWPACK_H_KIND) == MT_RAWPACK_H_KIND)
		p = mt_rawpack_varint(p, ev->kind);
	p = mt_rawpack_varint(p, mt_rawpack_zigzag(ev->timestamp - st->ts));
	st->ts = ev->timestamp;
	if (x) {
		if (x & MT_RAWPACK_X_PID)
			p = mt_rawpack_varint(p, ev->pid);
		if (x & MT_RAWPACK_X_TID)
			p = mt_rawpack_varint(
			    p, mt_rawpack_zigzag((uint64_t)ev->tid - ev->pid));
		st->pid = ev->pid;
		st->tid = ev->tid;
		if (x & MT_RAWPACK_X_FLAGS)
			p = mt_rawpack_varint(p, ev->flags);
		if (x & MT_RAWPACK_X_AUX)
			p = mt_rawpack_varint(p, ev->aux);
	}
	if (h & MT_RAWPACK_H_ADDR) {
		p = mt_rawpack_varint(p,
				      mt_rawpack_zigzag(ev->addr - st->addr));
		st->addr = ev->addr;
	}
	if (h & MT_RAWPACK_H_SIZE)
		p = mt_rawpack_varint(p, ev->size);
	if (x & MT_RAWPACK_X_OLD_ADDR)
		p = mt_rawpack_varint(
		    p, mt_rawpack_zigzag(ev->old_addr - ev->addr));
	if (x & MT_RAWPACK_X_OLD_SIZE)
		p = mt_rawpack_varint(p, ev->old_size);
	return p;
}

/* A packed batch body being unpacked. */
struct mt_rawunpack {
	const unsigned char *start, *p, *end;
	uint32_t count; /* slots of the batch */
	uint32_t left;	/* slots not produced yet */
	uint64_t ts, addr;
	uint32_t pid, tid;
	/* payload slots still to produce, and their bytes */
	const unsigned char *pay;
	uint32_t pay_bytes, pay_slots;
	/* after a failure: what was expected, and the body offset and slot
	 * index of the record it was in */
	const char *err;
	size_t err_at;
	uint32_t err_slot;
};

void mt_rawunpack_init(struct mt_rawunpack *u, const void *body, size_t bytes,
		       uint32_t count);

/* Up to max slots into out; offs (may be NULL) gets each slot's offset
 * in the body (a payload slot: its record's).  Returns the slots made (0
 * only when none is left), or -1 (u->err says why).  The last slot also
 * checks that the body ends there. */
int mt_rawunpack(struct mt_rawunpack *u, struct mt_event *out, uint32_t *offs,
		 uint32_t max);

#endif /* MT_RAWPACK_H */
