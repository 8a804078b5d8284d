/* SPDX-License-Identifier: MIT */
/*
 * rawpack.c - the packed encoding of a raw batch's records (rawpack.h):
 * mt-trace's writer thread packs each batch (a few ns a record), or
 * --fast's drain the recorders' records as it reads them (the record
 * itself is packed in rawpack.h, for that drain to inline), readers
 * unpack it a chunk at a time.
 */
#include <string.h>

#include "rawpack.h"

enum {
	H_KIND = MT_RAWPACK_H_KIND,
	H_ADDR = MT_RAWPACK_H_ADDR,
	H_SIZE = MT_RAWPACK_H_SIZE,
	H_EXT = MT_RAWPACK_H_EXT,
	X_PID = MT_RAWPACK_X_PID,
	X_TID = MT_RAWPACK_X_TID,
	X_FLAGS = MT_RAWPACK_X_FLAGS,
	X_AUX = MT_RAWPACK_X_AUX,
	X_OLD_ADDR = MT_RAWPACK_X_OLD_ADDR,
	X_OLD_SIZE = MT_RAWPACK_X_OLD_SIZE,
	X_KNOWN = 0x3f,
};

enum { PAY_ZERO_PAD = 0, PAY_WHOLE = 1 };

static inline uint64_t unzigzag(uint64_t z)
{
	return z >> 1 ^ -(z & 1);
}

/* How many payload slots follow the record ev, the slot at index i of
 * count: 0 when its kind has none or they would not fit in the batch
 * (the slots after it are then records, as a reader takes them). */
static inline uint32_t payload_slots(const struct mt_event *ev, uint32_t i,
				     uint32_t count)
{
	uint32_t slots;

	if (!ev->aux || !mt_rawpack_has_payload(ev->kind))
		return 0;
	slots = ev->aux / MT_EVENT_SIZE + (ev->aux % MT_EVENT_SIZE != 0);
	return slots <= count - i - 1 ? slots : 0;
}

static bool zero_bytes(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static unsigned char *put_payload(unsigned char *p, const struct mt_event *s,
				  uint32_t slots, uint32_t len)
{
	const unsigned char *bytes = (const unsigned char *)s;
	size_t whole = (size_t)slots * MT_EVENT_SIZE;

	if (zero_bytes(bytes + len, whole - len)) {
		*p++ = PAY_ZERO_PAD;
		memcpy(p, bytes, len);
		return p + len;
	}
	*p++ = PAY_WHOLE;
	memcpy(p, bytes, whole);
	return p + whole;
}

size_t mt_rawpack_from(struct mt_rawpack_state *st,
		       const struct mt_event *slots, uint32_t first,
		       uint32_t count, unsigned char *out)
{
	unsigned char *p = out;

	for (uint32_t i = first; i < count; i++) {
		const struct mt_event *ev = &slots[i];
		uint32_t pay;

		p = mt_rawpack_record(st, ev, p);
		pay = payload_slots(ev, i, count);
		if (pay) {
			p = put_payload(p, ev + 1, pay, ev->aux);
			i += pay;
		}
	}
	return p - out;
}

size_t mt_rawpack(const struct mt_event *slots, uint32_t count,
		  unsigned char *out)
{
	struct mt_rawpack_state st = {0};

	return mt_rawpack_from(&st, slots, 0, count, out);
}

void mt_rawunpack_init(struct mt_rawunpack *u, const void *body, size_t bytes,
		       uint32_t count)
{
	memset(u, 0, sizeof(*u));
	u->start = u->p = body;
	u->end = u->start + bytes;
	u->count = u->left = count;
}

/* A varint at *pp of at most 64 bits; false if it runs past end or
 * beyond 64 bits.  With 10 bytes left (nearly always) no byte is checked
 * against the end, and only the tenth against the 64 bits. */
static inline bool get_varint(const unsigned char **pp,
			      const unsigned char *end, uint64_t *v)
{
	const unsigned char *p = *pp;
	uint64_t r = 0, b;

	if (__builtin_expect(end - p >= 10, 1)) {
		for (unsigned shift = 0; shift < 63; shift += 7) {
			b = *p++;
			r |= (b & 0x7f) << shift;
			if (!(b & 0x80)) {
				*pp = p;
				*v = r;
				return true;
			}
		}
		b = *p++;
		if (b > 1)
			return false;
		*pp = p;
		*v = r | b << 63;
		return true;
	}
	for (unsigned shift = 0; p < end; shift += 7) {
		b = *p++;
		if (shift == 63 && b > 1)
			return false;
		r |= (b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*v = r;
			return true;
		}
		if (shift == 63)
			return false;
	}
	return false;
}

static int failed(struct mt_rawunpack *u, const unsigned char *rec,
		  const char *what)
{
	u->err = what;
	u->err_at = rec - u->start;
	u->err_slot = u->count - u->left;
	return -1;
}

/* A 64-bit field, or one of at most max: returns -1 (the error set)
 * otherwise. */
#define GET64(var, what)                                                       \
	do {                                                                   \
		if (!get_varint(&p, end, &(var)))                              \
			return failed(u, rec, what ": a varint in the body");  \
	} while (0)
#define GET(var, max, what)                                                    \
	do {                                                                   \
		uint64_t v_;                                                   \
		GET64(v_, what);                                               \
		if (v_ > (max))                                                \
			return failed(u, rec, what " at most " #max);          \
		var = v_;                                                      \
	} while (0)

/* The fields the second header byte names, at p (after the time). */
static int unpack_rare(struct mt_rawunpack *u, struct mt_event *ev,
		       const unsigned char *rec, const unsigned char **pp,
		       unsigned x)
{
	const unsigned char *p = *pp, *end = u->end;
	uint64_t d;

	if (x & X_PID)
		GET(u->pid, UINT32_MAX, "pid");
	if (x & X_TID) {
		GET64(d, "tid");
		d = u->pid + unzigzag(d);
		if (d > UINT32_MAX)
			return failed(u, rec, "tid at most UINT32_MAX");
		u->tid = d;
	}
	ev->pid = u->pid;
	ev->tid = u->tid;
	if (x & X_FLAGS)
		GET(ev->flags, UINT16_MAX, "flags");
	if (x & X_AUX)
		GET(ev->aux, UINT32_MAX, "aux");
	*pp = p;
	return 0;
}

/* One record at u->p into ev; 0 or -1. */
static int unpack_record(struct mt_rawunpack *u, struct mt_event *ev)
{
	const unsigned char *p = u->p, *rec = p, *end = u->end;
	unsigned h, x = 0;
	uint64_t d;

	if (p >= end)
		return failed(u, rec, "a record, not the body's end");
	h = *p++;
	if (h & H_EXT) {
		if (p >= end)
			return failed(
			    u, rec, "a second header byte, not the body's end");
		x = *p++;
		if (x & ~X_KNOWN)
			return failed(
			    u, rec,
			    "bits 6 and 7 of the second header byte clear");
	}
	ev->kind = h & H_KIND;
	if (ev->kind == H_KIND)
		GET(ev->kind, UINT16_MAX, "kind");
	GET64(d, "timestamp");
	u->ts += unzigzag(d);
	ev->timestamp = u->ts;
	ev->pid = u->pid;
	ev->tid = u->tid;
	ev->flags = 0;
	ev->aux = 0;
	if (x && unpack_rare(u, ev, rec, &p, x))
		return -1;
	ev->addr = 0;
	if (h & H_ADDR) {
		GET64(d, "addr");
		u->addr += unzigzag(d);
		ev->addr = u->addr;
	}
	ev->size = 0;
	if (h & H_SIZE) {
		GET64(d, "size");
		ev->size = d;
	}
	ev->old_addr = 0;
	ev->old_size = 0;
	if (x & X_OLD_ADDR) {
		GET64(d, "old_addr");
		ev->old_addr = ev->addr + unzigzag(d);
	}
	if (x & X_OLD_SIZE) {
		GET64(d, "old_size");
		ev->old_size = d;
	}
	u->p = p;
	return 0;
}

/* The payload after the record ev (just unpacked, not counted yet): its
 * mode byte and bytes taken, to be handed out slot by slot. */
static int unpack_payload_start(struct mt_rawunpack *u,
				const struct mt_event *ev, uint32_t rec_at)
{
	uint32_t slots = payload_slots(ev, u->count - u->left, u->count);
	const unsigned char *rec = u->start + rec_at;
	size_t bytes;

	if (!slots)
		return 0;
	if (u->p >= u->end)
		return failed(u, rec,
			      "a payload mode byte, not the body's end");
	if (*u->p > PAY_WHOLE)
		return failed(u, rec, "a payload mode byte of 0 or 1");
	bytes = *u->p == PAY_WHOLE ? (size_t)slots * MT_EVENT_SIZE : ev->aux;
	u->p++;
	if ((size_t)(u->end - u->p) < bytes)
		return failed(u, rec, "the payload's bytes within the body");
	u->pay = u->p;
	u->pay_bytes = bytes;
	u->pay_slots = slots;
	u->p += bytes;
	return 0;
}

static void unpack_payload_slot(struct mt_rawunpack *u, struct mt_event *slot)
{
	uint32_t n =
	    u->pay_bytes < MT_EVENT_SIZE ? u->pay_bytes : MT_EVENT_SIZE;

	memcpy(slot, u->pay, n);
	memset((unsigned char *)slot + n, 0, MT_EVENT_SIZE - n);
	u->pay += n;
	u->pay_bytes -= n;
	u->pay_slots--;
	u->left--;
}

int mt_rawunpack(struct mt_rawunpack *u, struct mt_event *out, uint32_t *offs,
		 uint32_t max)
{
	uint32_t n = 0, rec_at = u->p - u->start;

	while (n < max && u->left) {
		if (u->pay_slots) {
			if (offs)
				offs[n] = rec_at;
			unpack_payload_slot(u, &out[n++]);
			continue;
		}
		rec_at = u->p - u->start;
		if (unpack_record(u, &out[n]) ||
		    unpack_payload_start(u, &out[n], rec_at))
			return -1;
		u->left--;
		if (offs)
			offs[n] = rec_at;
		n++;
	}
	if (!u->left && !u->pay_slots && u->p != u->end)
		return failed(u, u->p, "the body to end after the last record");
	return n;
}
