/* SPDX-License-Identifier: MIT */
/*
 * input_raw.c - mt-trace's raw stream (mt_raw.h) read record by record:
 * the stream header and its strings, batches checked against their
 * sequence and sizes (a packed batch also against its CRC, before any of
 * its records is handed out), EXEC/MARKER payload slots, and the trailer
 * checked against what the batches held.  A stream without its trailer
 * is an error, never a clean end.
 */
#include <inttypes.h>
#include <stddef.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "input_int.h"

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static int raw_header_strings(struct mt_input *in, const unsigned char *s,
			      size_t size, uint32_t argc)
{
	const unsigned char *end = s + size;
	const unsigned char *nul;
	uint64_t off = offset_now(in) + sizeof(struct mt_raw_header);

	/* raw_header_check made sure argc <= size */
	in->meta.argv = calloc(argc + 1, sizeof(char *));
	if (!in->meta.argv)
		return input_fail(in, off, "out of memory");
	for (uint32_t i = 0; i <= argc; i++) {
		char *copy;

		nul = s < end ? memchr(s, '\0', end - s) : NULL;
		if (!nul)
			return input_fail(
			    in, off + (s - (end - size)),
			    "stream header: string %" PRIu32 " of %" PRIu32
			    " is not NUL-terminated within strings_size",
			    i + 1, argc + 1);
		copy = strndup((const char *)s, nul - s);
		if (!copy)
			return input_fail(in, off, "out of memory");
		if (i == 0) {
			in->meta.host = copy;
		} else {
			in->meta.argv[i - 1] = copy;
			in->meta.argc = i;
		}
		s = nul + 1;
	}
	return 0;
}

/* The clocks mt-trace may stamp events with (clock_gettime's ids). */
static bool known_clock(uint32_t id)
{
	return id == CLOCK_REALTIME || id == CLOCK_MONOTONIC ||
	       id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME;
}

#define HDR_AT(field) offsetof(struct mt_raw_header, field)

/*
 * Every field of the stream header that later arithmetic trusts, checked
 * before anything is sized or computed from it: a flipped bit must be an
 * error naming the field and its byte, never a huge allocation, a mapping
 * of the wrong size or a page rounding that is no rounding.
 */
static int raw_header_check(struct mt_input *in, const struct mt_raw_header *h)
{
	if (h->version < 1 || h->version > MT_RAW_VERSION)
		return input_fail(in, HDR_AT(version),
				  "stream header: unsupported version %" PRIu32
				  " (this reader knows 1 to %d)",
				  h->version, MT_RAW_VERSION);
	if (h->header_size > MAX_HEADER ||
	    (uint64_t)h->header_size < sizeof(*h) + (uint64_t)h->strings_size)
		return input_fail(in, HDR_AT(header_size),
				  "stream header: header_size %" PRIu32
				  " does not hold %zu + strings_size %" PRIu32
				  " bytes",
				  h->header_size, sizeof(*h), h->strings_size);
	if (h->event_size < MT_EVENT_SIZE)
		return input_fail(in, HDR_AT(event_size),
				  "stream header: event_size %" PRIu32
				  " is smaller than %d",
				  h->event_size, MT_EVENT_SIZE);
	if (h->event_size > MAX_OBJECT)
		return input_fail(in, HDR_AT(event_size),
				  "stream header: event_size %" PRIu32
				  " is too large (at most %u)",
				  h->event_size, MAX_OBJECT);
	if (h->page_size < MT_PAGE_SIZE_MIN ||
	    h->page_size > MT_PAGE_SIZE_MAX ||
	    (h->page_size & (h->page_size - 1)))
		return input_fail(in, HDR_AT(page_size),
				  "stream header: page_size %" PRIu32
				  " is not a power of two from %u to %u",
				  h->page_size, MT_PAGE_SIZE_MIN,
				  MT_PAGE_SIZE_MAX);
	if (!known_clock(h->clock_id))
		return input_fail(in, HDR_AT(clock_id),
				  "stream header: clock_id %" PRIu32
				  " is no clock mt-trace uses",
				  h->clock_id);
	if (h->argc > h->strings_size)
		return input_fail(
		    in, HDR_AT(argc),
		    "stream header: argc %" PRIu32
		    " arguments cannot fit in strings_size %" PRIu32 " bytes",
		    h->argc, h->strings_size);
	return 0;
}

/* The kinds raw_record takes as they are: named, with no payload after
 * them (raw_payload's kinds, Stack, CodeFile), not a StackRef, not Lost
 * (a record of the stream, never of a batch). */
static void raw_plain_kinds(struct mt_input *in)
{
	in->raw_plain_kinds = 0;
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (mt_kind_name(kind) && kind != MT_EV_EXEC &&
		    kind != MT_EV_MARKER && kind != MT_EV_ALLOCATOR &&
		    kind != MT_EV_STACK && kind != MT_EV_CODE_FILE &&
		    kind != MT_EV_PYCODE && kind != MT_EV_LOST)
			in->raw_plain_kinds |= 1u << kind;
}

int raw_open(struct mt_input *in)
{
	struct mt_raw_header hdr;
	size_t got;

	if (!fill(in, sizeof(hdr)) && in->state < 0)
		return -1;
	got = avail(in);
	if (memcmp(cur(in), MT_RAW_MAGIC,
		   got < MT_RAW_MAGIC_LEN ? got : MT_RAW_MAGIC_LEN))
		return input_fail(in, 0, "stream header: bad magic");
	if (got < sizeof(hdr))
		return input_fail(
		    in, 0,
		    "stream header truncated: expected %zu bytes, "
		    "got %zu",
		    sizeof(hdr), got);
	memcpy(&hdr, cur(in), sizeof(hdr));
	if (raw_header_check(in, &hdr))
		return -1;
	if (!fill(in, hdr.header_size)) {
		if (in->state < 0)
			return -1;
		return input_fail(in, 0,
				  "stream header truncated: expected %" PRIu32
				  " bytes, got %zu",
				  hdr.header_size, avail(in));
	}
	in->meta.version = hdr.version;
	in->meta.page_size = hdr.page_size;
	in->meta.clock_id = hdr.clock_id;
	in->meta.root_pid = hdr.root_pid;
	in->meta.flags = hdr.flags;
	in->meta.start_monotonic_ns = hdr.start_monotonic_ns;
	in->meta.start_realtime_ns = hdr.start_realtime_ns;
	in->event_size = hdr.event_size;
	raw_plain_kinds(in);
	/* records are copied straight out of the buffer: read big chunks */
	if (!input_grow(in, RAW_BUF))
		return -1;
	if (raw_header_strings(in, cur(in) + sizeof(hdr), hdr.strings_size,
			       hdr.argc))
		return -1;
	consume(in, hdr.header_size);
	return 0;
}

static int raw_check_trailer(struct mt_input *in, uint64_t off)
{
	const struct mt_meta *m = &in->meta;

	if (m->batches != in->batches_seen)
		return input_fail(in, off,
				  "trailer says %" PRIu64
				  " batches, stream had %" PRIu64,
				  m->batches, in->batches_seen);
	if (m->events != in->slots_seen)
		return input_fail(in, off,
				  "trailer says %" PRIu64
				  " events, stream had %" PRIu64,
				  m->events, in->slots_seen);
	if (m->lost != in->lost_seen)
		return input_fail(in, off,
				  "trailer says %" PRIu64
				  " lost events, batches had %" PRIu64,
				  m->lost, in->lost_seen);
	return 0;
}

static int raw_trailer(struct mt_input *in)
{
	struct mt_raw_trailer t;
	uint64_t off = offset_now(in);

	if (!fill(in, sizeof(t))) {
		if (in->state < 0)
			return -1;
		return input_fail(
		    in, off, "trailer truncated: expected %zu bytes, got %zu",
		    sizeof(t), avail(in));
	}
	memcpy(&t, cur(in), sizeof(t));
	consume(in, sizeof(t));
	in->meta.exit_kind = t.exit_kind;
	in->meta.exit_value = t.exit_value;
	in->meta.end_monotonic_ns = t.end_monotonic_ns;
	in->meta.events = t.events;
	in->meta.lost = t.lost;
	in->meta.batches = t.batches;
	in->meta.incomplete = t.incomplete;
	if (raw_check_trailer(in, off))
		return -1;
	if (t.incomplete)
		return input_fail(
		    in, off + offsetof(struct mt_raw_trailer, incomplete),
		    "trailer: mt-trace marked the trace incomplete: %s",
		    t.incomplete == MT_INCOMPLETE_SHARED_MEMORY
			? "the traced command wrote over its --fast "
			  "recorders' shared memory (records dropped)"
			: "for a reason this reader does not know");
	if (fill(in, 1))
		return input_fail(in, offset_now(in), "data after the trailer");
	if (in->state < 0)
		return -1;
	in->meta.has_trailer = true;
	in->state = 1;
	return 0;
}

static int raw_no_trailer(struct mt_input *in)
{
	if (in->batches_seen == 0)
		return input_fail(
		    in, offset_now(in),
		    "truncated: no trailer after the stream header");
	return input_fail(in, offset_now(in),
			  "truncated: no trailer after batch %" PRIu64,
			  in->seq);
}

static int raw_body_truncated(struct mt_input *in);

/* A packed batch's header (at cur(in), buffered) checked, its body
 * buffered and checked against its CRC: 1, or -1 (the error set). */
static int raw_packed_batch(struct mt_input *in, const struct mt_raw_batch *b)
{
	uint64_t off = offset_now(in);
	uint32_t crc;

	if (in->meta.version < 2)
		return input_fail(
		    in, off,
		    "batch %" PRIu64 ": a packed batch in a version %" PRIu32
		    " stream (packed batches came with version 2)",
		    b->seq, in->meta.version);
	if (in->event_size != MT_EVENT_SIZE)
		return input_fail(in, off,
				  "batch %" PRIu64
				  ": a packed batch in a stream of %" PRIu32
				  "-byte records (packed slots are %d bytes)",
				  b->seq, in->event_size, MT_EVENT_SIZE);
	if (b->bytes > MT_RAW_PACKED_MAX ||
	    b->bytes > mt_rawpack_bound(b->count) || (b->count && !b->bytes))
		return input_fail(in, off,
				  "batch %" PRIu64 ": packed body of %" PRIu32
				  " bytes for %" PRIu32
				  " records (expected 1 to %zu bytes a record, "
				  "at most %u in all)",
				  b->seq, b->bytes, b->count,
				  (size_t)MT_RAWPACK_SLOT_MAX,
				  MT_RAW_PACKED_MAX);
	if (!fill(in, sizeof(*b) + b->bytes)) {
		if (in->state < 0)
			return -1;
		return input_fail(in, off + sizeof(*b),
				  "batch %" PRIu64
				  ": packed body truncated: expected %" PRIu32
				  " bytes, got %zu",
				  b->seq, b->bytes, avail(in) - sizeof(*b));
	}
	crc = mt_raw_packed_check(b, cur(in) + sizeof(*b));
	if (crc != b->check)
		return input_fail(in, off,
				  "batch %" PRIu64 ": packed batch corrupt: "
				  "expected CRC-32 0x%08" PRIx32
				  " (its header), its bytes give 0x%08" PRIx32,
				  b->seq, b->check, crc);
	consume(in, sizeof(*b));
	in->packed = true;
	in->pk_bytes = b->bytes;
	in->pk_ready = 0;
	mt_rawunpack_init(&in->pk, cur(in), b->bytes, b->count);
	return 1;
}

/* The packed batch just read let go of: its body consumed. */
static void raw_packed_done(struct mt_input *in)
{
	if (!in->packed)
		return;
	consume(in, in->pk_bytes);
	in->packed = false;
	in->pk_ready = 0;
}

/* The next chunk of a packed batch unpacked: true, or false with the
 * error set. */
static bool raw_unpack(struct mt_input *in)
{
	int n = mt_rawunpack(&in->pk, in->pk_slots, in->pk_offs, PK_CHUNK);

	if (n > 0) {
		in->pk_next = in->pk_slots;
		in->pk_ready = n;
		return true;
	}
	/* 0: none left, though the batch's count says one is due (they
	 * agree; said rather than trusted) */
	if (n == 0)
		input_fail(in, in->body_off + in->pk_bytes,
			   "batch %" PRIu64 ": expected a packed record, "
			   "not the body's end",
			   in->seq);
	else
		input_fail(in, in->body_off + in->pk.err_at,
			   "batch %" PRIu64 ": packed record %" PRIu32
			   ": expected %s",
			   in->seq, in->pk.err_slot, in->pk.err);
	return false;
}

/* The next slot of the batch buffered or unpacked, at raw_slot_at: true,
 * or false with the error set (a body cut short, a packed record that
 * does not unpack). */
static bool raw_slot_ready(struct mt_input *in)
{
	if (in->packed)
		return in->pk_ready || raw_unpack(in);
	if (fill(in, in->event_size))
		return true;
	raw_body_truncated(in);
	return false;
}

/* The file offset of the next record (a packed batch's: of its bytes). */
static uint64_t raw_slot_offset(const struct mt_input *in)
{
	if (!in->packed)
		return offset_now(in);
	if (!in->pk_ready)
		return in->body_off + (in->pk.p - in->pk.start);
	return in->body_off + in->pk_offs[in->pk_next - in->pk_slots];
}

/* Reads the next batch header, or the trailer (returns 0 then). */
static int raw_batch(struct mt_input *in)
{
	struct mt_raw_batch b;
	uint64_t off;
	uint32_t magic;

	raw_packed_done(in);
	off = offset_now(in);

	if (!fill(in, sizeof(magic))) {
		if (in->state < 0)
			return -1;
		if (avail(in) == 0)
			return raw_no_trailer(in);
	}
	magic = avail(in) >= 4 ? get_u32(cur(in)) : 0;
	if (magic == MT_TRAILER_MAGIC)
		return raw_trailer(in);
	if (avail(in) >= 4 && magic != MT_BATCH_MAGIC &&
	    magic != MT_BATCH_PACKED_MAGIC)
		return input_fail(
		    in, off, "batch header: bad magic 0x%08" PRIx32, magic);
	if (!fill(in, sizeof(b))) {
		if (in->state < 0)
			return -1;
		if (in->batches_seen == 0)
			return input_fail(
			    in, off,
			    "batch header truncated (first batch): "
			    "expected %zu bytes, got %zu",
			    sizeof(b), avail(in));
		return input_fail(in, off,
				  "batch header truncated (after batch %" PRIu64
				  "): expected %zu bytes, got %zu",
				  in->seq, sizeof(b), avail(in));
	}
	memcpy(&b, cur(in), sizeof(b));
	if (b.seq != in->batches_seen)
		return input_fail(in, off,
				  "batch seq gap: expected %" PRIu64
				  ", got %" PRIu64,
				  in->batches_seen, b.seq);
	if (b.magic == MT_BATCH_PACKED_MAGIC) {
		if (raw_packed_batch(in, &b) < 0)
			return -1;
	} else if ((uint64_t)b.count * in->event_size != b.bytes) {
		return input_fail(in, off,
				  "batch %" PRIu64 ": bytes %" PRIu32
				  " != count %" PRIu32 " * event_size %" PRIu32,
				  b.seq, b.bytes, b.count, in->event_size);
	} else {
		consume(in, sizeof(b));
	}
	in->seq = b.seq;
	in->batches_seen++;
	in->batch_count = b.count;
	in->batch_left = b.count;
	in->body_off = offset_now(in);
	in->pending_lost = b.lost;
	in->lost_seen += b.lost;
	in->slots_seen += b.count;
	return 1;
}

static int raw_body_truncated(struct mt_input *in)
{
	uint64_t expected = (uint64_t)in->batch_count * in->event_size;
	uint64_t got = offset_now(in) - in->body_off + avail(in);

	if (in->state < 0)
		return -1;
	return input_fail(in, in->body_off,
			  "batch %" PRIu64 ": body truncated: expected %" PRIu64
			  " bytes, got %" PRIu64,
			  in->seq, expected, got);
}

/* Copies the payload slots that follow an EXEC or MARKER record. */
static int raw_payload(struct mt_input *in, struct mt_record *rec,
		       uint64_t rec_off)
{
	uint32_t len = rec->ev.aux;
	uint32_t slots = (len + MT_DATA_PER_RECORD - 1) / MT_DATA_PER_RECORD;
	uint32_t index = in->batch_count - in->batch_left - 1;

	if (slots > in->batch_left)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": payload of %" PRIu32
				  " bytes runs past the batch (%" PRIu32
				  " records left, %" PRIu32 " needed)",
				  in->seq, index, len, in->batch_left, slots);
	if (len > MAX_PAYLOAD)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": payload of %" PRIu32 " bytes is too long",
				  in->seq, index, len);
	if (!input_str_room(in, len))
		return input_fail(in, rec_off, "out of memory");
	for (uint32_t i = 0; i < slots; i++) {
		uint32_t part = len - i * MT_DATA_PER_RECORD;

		if (part > MT_DATA_PER_RECORD)
			part = MT_DATA_PER_RECORD;
		if (!raw_slot_ready(in))
			return -1;
		memcpy(in->str + i * MT_DATA_PER_RECORD, raw_slot_at(in), part);
		raw_slot_taken(in);
	}
	in->str[len] = '\0';
	rec->str = in->str;
	rec->str_len = len;
	return 0;
}

/* The index of the record just read in its batch (for messages). */
static uint32_t record_index(const struct mt_input *in)
{
	return in->batch_count - in->batch_left - 1;
}

/* A STACK record: its frames are the payload, 8 bytes each. */
static int raw_stack(struct mt_input *in, struct mt_record *rec,
		     uint64_t rec_off)
{
	const struct mt_event *ev = &rec->ev;

	if (ev->addr != in->stacks_seen + 1)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": Stack id %" PRIu64 " (expected %" PRIu64
				  ")",
				  in->seq, record_index(in), (uint64_t)ev->addr,
				  in->stacks_seen + 1);
	if (ev->addr > UINT32_MAX)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": more than %" PRIu32 " stacks",
				  in->seq, record_index(in), UINT32_MAX);
	if (ev->size == 0 || ev->aux != ev->size * sizeof(uint64_t))
		return input_fail(
		    in, rec_off,
		    "batch %" PRIu64 ": record %" PRIu32 ": Stack of %" PRIu64
		    " frames with a payload of %" PRIu32 " bytes (8 a frame)",
		    in->seq, record_index(in), (uint64_t)ev->size, ev->aux);
	if (raw_payload(in, rec, rec_off))
		return -1;
	/* in->str is malloc'ed: aligned for the frames */
	rec->frames = (const uint64_t *)(const void *)in->str;
	rec->str = NULL;
	rec->str_len = 0;
	in->stacks_seen++;
	return 0;
}

/* A CODE_FILE record: the build-id, then the path, as payload. */
static int raw_code_file(struct mt_input *in, struct mt_record *rec,
			 uint64_t rec_off)
{
	const struct mt_event *ev = &rec->ev;

	if (ev->addr == 0 || ev->addr > MT_FRAME_FILE_MAX ||
	    ev->flags > ev->aux)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": CodeFile %" PRIu64
				  " with a build-id of %u bytes in a payload "
				  "of %" PRIu32,
				  in->seq, record_index(in), (uint64_t)ev->addr,
				  ev->flags, ev->aux);
	if (raw_payload(in, rec, rec_off))
		return -1;
	rec->build_id = ev->flags ? (const uint8_t *)in->str : NULL;
	rec->str = in->str + ev->flags;
	rec->str_len = ev->aux - ev->flags;
	return 0;
}

/* An EXEC record: the path, then, when size is not 0, a NUL and the
 * arguments (size bytes); the reader's own NUL ends them. */
static int raw_exec(struct mt_input *in, struct mt_record *rec,
		    uint64_t rec_off)
{
	const struct mt_event *ev = &rec->ev;

	if (ev->size && ev->size >= ev->aux)
		return input_fail(
		    in, rec_off,
		    "batch %" PRIu64 ": record %" PRIu32 ": Exec with %" PRIu64
		    " bytes of arguments in a payload of %" PRIu32,
		    in->seq, record_index(in), (uint64_t)ev->size, ev->aux);
	if (raw_payload(in, rec, rec_off))
		return -1;
	if (ev->size) {
		rec->str_len = ev->aux - ev->size - 1;
		in->str[rec->str_len] = '\0';
	}
	return 0;
}

/* A PYCODE record: its payload's four parts must fill it. */
static int raw_pycode(struct mt_input *in, struct mt_record *rec,
		      uint64_t rec_off)
{
	struct mt_pycode code;

	if (raw_payload(in, rec, rec_off))
		return -1;
	if (rec->ev.addr == 0 || rec->ev.addr > MT_PYCODE_ID_MAX ||
	    mt_pycode_parse(rec, &code))
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": PyCode %" PRIu64 ": a payload of %" PRIu32
				  " bytes that is not four lengths and "
				  "their bytes",
				  in->seq, record_index(in),
				  (uint64_t)rec->ev.addr, rec->ev.aux);
	return 0;
}

/* One record and its payload, if any (a STACK_REF as it is). */
static int raw_record(struct mt_input *in, struct mt_record *rec,
		      uint64_t rec_off)
{
	if (!raw_slot_ready(in))
		return -1;
	raw_take_record(in, rec);
	switch (rec->ev.kind) {
	case MT_EV_EXEC:
		return raw_exec(in, rec, rec_off) ? -1 : 1;
	case MT_EV_MARKER:
	case MT_EV_ALLOCATOR:
		return raw_payload(in, rec, rec_off) ? -1 : 1;
	case MT_EV_STACK:
		return raw_stack(in, rec, rec_off) ? -1 : 1;
	case MT_EV_CODE_FILE:
		return raw_code_file(in, rec, rec_off) ? -1 : 1;
	case MT_EV_PYCODE:
		return raw_pycode(in, rec, rec_off) ? -1 : 1;
	case MT_EV_STACK_REF:
		return 1;
	case MT_EV_NONE:
	case MT_EV_DATA:
	case MT_EV_LOST:
		break;
	default:
		if (mt_kind_name(rec->ev.kind)) /* a kind artifacts can hold */
			return 1;
	}
	return input_fail(in, rec_off,
			  "batch %" PRIu64 ": record %" PRIu32
			  ": unexpected event kind %u",
			  in->seq, record_index(in), rec->ev.kind);
}

/* The events a call stack belongs to. */
static bool takes_a_stack(unsigned kind)
{
	return kind >= MT_EV_MALLOC && kind <= MT_EV_BRK;
}

/* A STACK_REF was read into rec: its id goes with the record after it,
 * which must be an event of the same thread in the same batch. */
static int raw_stack_ref(struct mt_input *in, struct mt_record *rec,
			 uint64_t rec_off)
{
	uint64_t id = rec->ev.addr;
	uint32_t tid = rec->ev.tid, index = record_index(in);
	int ret;

	if (id == 0 || id > in->stacks_seen)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": StackRef to stack %" PRIu64
				  ", not described before",
				  in->seq, index, id);
	if (in->batch_left == 0)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": StackRef ends its batch",
				  in->seq, index);
	if (!raw_slot_ready(in))
		return -1;
	ret = raw_record(in, rec, raw_slot_offset(in));
	if (ret != 1)
		return ret;
	if (!takes_a_stack(rec->ev.kind) || rec->ev.tid != tid)
		return input_fail(in, rec_off,
				  "batch %" PRIu64 ": record %" PRIu32
				  ": StackRef not followed by an allocation "
				  "or address-space event of thread %" PRIu32,
				  in->seq, index, tid);
	rec->stack = id;
	return 1;
}

static int raw_next_record(struct mt_input *in, struct mt_record *rec)
{
	uint64_t rec_off;
	int ret;

	while (in->batch_left == 0 && in->pending_lost == 0) {
		ret = raw_batch(in);
		if (ret <= 0)
			return ret;
	}
	if (in->pending_lost) {
		/* the first event of the batch dates the loss, if any */
		if (in->packed && in->batch_left && !raw_slot_ready(in))
			return -1;
		if (in->packed ? in->batch_left > 0
			       : in->batch_left && fill(in, sizeof(uint64_t)))
			memcpy(&in->last_ts, raw_slot_at(in), sizeof(uint64_t));
		memset(rec, 0, sizeof(*rec));
		rec->ev.kind = MT_EV_LOST;
		rec->ev.timestamp = in->last_ts;
		rec->ev.size = in->pending_lost;
		in->pending_lost = 0;
		return 1;
	}
	if (!raw_slot_ready(in))
		return -1;
	rec_off = raw_slot_offset(in);
	ret = raw_record(in, rec, rec_off);
	if (ret == 1 && rec->ev.kind == MT_EV_STACK_REF)
		return raw_stack_ref(in, rec, rec_off);
	return ret;
}

/* How many records from here raw_plain_next may take: those of the
 * current batch the buffer holds whole, and for a mapped file those
 * before its next pages to let go (next_record lets them go first). */
static void raw_plain_window(struct mt_input *in)
{
	size_t records = avail(in) / in->event_size;

	if (in->state || in->pending_lost) {
		in->raw_plain_left = 0;
		return;
	}
	if (in->packed) { /* the unpacked slots are all of the batch's */
		in->raw_plain_left = in->pk_ready;
		return;
	}
	if (in->mapped)
		records =
		    in->start < in->dropped + DROP_STEP
			? (in->dropped + DROP_STEP - in->start) / in->event_size
			: 0;
	if (records > in->batch_left)
		records = in->batch_left;
	if (records > avail(in) / in->event_size)
		records = avail(in) / in->event_size;
	in->raw_plain_left = records;
}

int raw_next(struct mt_input *in, struct mt_record *rec)
{
	int ret = raw_next_record(in, rec);

	raw_plain_window(in);
	return ret;
}
