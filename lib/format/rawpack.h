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
 * (Exec, Marker, Allocator, Stack, CodeFile) whose aux bytes fit in the
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
	       kind == MT_EV_CODE_FILE;
}

/* Packs count slots into out (mt_rawpack_bound(count) bytes of room);
 * returns the bytes written. */
size_t mt_rawpack(const struct mt_event *slots, uint32_t count,
		  unsigned char *out);

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
