/* SPDX-License-Identifier: MIT */
/*
 * input.c - the one reader of every event stream mt understands (see
 * mt_input.h): the raw stream, the MessagePack artifact, its JSON Lines
 * twin, and CodSpeed memtrack artifacts.  The format is told from content.
 *
 * All formats read through one growable byte buffer filled by big fread()s,
 * so that the raw path is a memcpy per record and error messages can name
 * the exact byte offset of what was wrong.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <msgpack.h>

#include "mt_allocators.h"
#include "mt_decimal.h"
#include "mt_input.h"

#define BUF_START   (64 * 1024)	  /* grows for long headers and objects */
#define RAW_BUF	    (256u * 1024) /* the raw stream: big reads */
#define DROP_STEP   (4u << 20)	  /* mapped input: pages let go at a time */
#define MP_BUF	    (1u << 20)	  /* MessagePack: big reads, rare moves */
#define MAX_HEADER  (16u << 20)	  /* raw stream header incl. strings */
#define MAX_OBJECT  (4u << 20)	  /* one MessagePack map or JSON line */
#define MAX_PAYLOAD (1u << 20)	  /* an EXEC path or MARKER name */

struct mt_input {
	FILE *f;
	char *name;
	enum mt_format fmt;
	struct mt_meta meta;
	char err[1024];
	int state; /* 0 reading, 1 clean end, -1 failed */

	/* buffer: bytes [start, end) of buf are unread; buf[0] is at file
	 * offset buf_off */
	unsigned char *buf;
	size_t cap, start, end;
	uint64_t buf_off;
	bool eof;
	bool mapped;	   /* buf is the whole file, mapped: nothing to read */
	size_t dropped;	   /* mapped: bytes before this are out of memory */
	size_t fast_until; /* the fast path may run while start is below */

	/* raw stream */
	uint32_t event_size;
	uint64_t batches_seen;
	uint64_t slots_seen;
	uint64_t lost_seen;
	uint64_t seq;	       /* of the current batch */
	uint32_t batch_count;  /* records in the current batch */
	uint32_t batch_left;   /* records of it not read yet */
	uint64_t body_off;     /* file offset of its first record */
	uint64_t pending_lost; /* LOST record still to yield */
	uint64_t last_ts;

	/* EXEC path / MARKER name of the last record */
	char *str;
	size_t str_cap;

	/* MessagePack and JSON Lines */
	/* one zone for every decoded map, cleared in between: no malloc per
	 * event */
	msgpack_zone zone;
	bool zone_ready;
	msgpack_object obj;
	uint64_t maps_seen; /* event maps, not header or trailer */
	uint64_t map_lost;  /* sum of their Lost counts */
	bool have_first;    /* memtrack: first event decoded at detection */
	struct mt_record first;
	uint64_t line; /* JSON Lines: current line number */
	/* MessagePack fast path: the keys of the last map of each kind */
	struct guesses *guesses;
};

/* ---- errors ---------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int
fail(struct mt_input *in, uint64_t off, const char *fmt, ...)
{
	char what[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(in->err, sizeof(in->err), "%s: byte %" PRIu64 ": %s", in->name,
		 off, what);
	in->state = -1;
	in->meta.has_trailer = false;
	return -1;
}

/* ---- buffer ---------------------------------------------------------- */

static size_t avail(const struct mt_input *in)
{
	return in->end - in->start;
}

static uint64_t offset_now(const struct mt_input *in)
{
	return in->buf_off + in->start;
}

/* Room for at least size bytes in the buffer. */
static bool grow(struct mt_input *in, size_t size)
{
	size_t cap = in->cap;
	unsigned char *buf;

	if (size <= cap || in->mapped) /* mapped: every byte is there */
		return true;
	while (cap < size)
		cap *= 2;
	buf = realloc(in->buf, cap);
	if (!buf) {
		fail(in, offset_now(in), "out of memory");
		return false;
	}
	in->buf = buf;
	in->cap = cap;
	return true;
}

/* Makes at least need bytes available unless the input ends first.
 * Returns false at end of input or on a read error (in->err set then). */
static bool fill(struct mt_input *in, size_t need)
{
	if (avail(in) >= need || in->mapped)
		return avail(in) >= need;
	if (in->start > 0) {
		memmove(in->buf, in->buf + in->start, avail(in));
		in->buf_off += in->start;
		in->end -= in->start;
		in->start = 0;
	}
	if (!grow(in, need))
		return false;
	while (avail(in) < need && !in->eof) {
		size_t n =
		    fread(in->buf + in->end, 1, in->cap - in->end, in->f);

		in->end += n;
		if (n == 0) {
			if (ferror(in->f)) {
				fail(in, in->buf_off + in->end,
				     "read error: %s", strerror(errno));
				return false;
			}
			in->eof = true;
		}
	}
	return avail(in) >= need;
}

static void consume(struct mt_input *in, size_t n)
{
	in->start += n;
}

static const unsigned char *cur(const struct mt_input *in)
{
	return in->buf + in->start;
}

static bool str_room(struct mt_input *in, size_t len)
{
	if (len + 1 > in->str_cap) {
		char *p = realloc(in->str, len + 1);

		if (!p)
			return false;
		in->str = p;
		in->str_cap = len + 1;
	}
	return true;
}

static bool keep_str(struct mt_input *in, const void *s, size_t len)
{
	if (!str_room(in, len))
		return false;
	memcpy(in->str, s, len);
	in->str[len] = '\0';
	return true;
}

/* ---- raw stream ------------------------------------------------------ */

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

	if (argc > size)
		return fail(in, off,
			    "stream header: %" PRIu32
			    " arguments cannot fit in %zu string bytes",
			    argc, size);
	in->meta.argv = calloc(argc + 1, sizeof(char *));
	if (!in->meta.argv)
		return fail(in, off, "out of memory");
	for (uint32_t i = 0; i <= argc; i++) {
		char *copy;

		nul = s < end ? memchr(s, '\0', end - s) : NULL;
		if (!nul)
			return fail(
			    in, off + (s - (end - size)),
			    "stream header: string %" PRIu32 " of %" PRIu32
			    " is not NUL-terminated within strings_size",
			    i + 1, argc + 1);
		copy = strndup((const char *)s, nul - s);
		if (!copy)
			return fail(in, off, "out of memory");
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

static int raw_open(struct mt_input *in)
{
	struct mt_raw_header hdr;
	size_t got;

	if (!fill(in, sizeof(hdr)) && in->state < 0)
		return -1;
	got = avail(in);
	if (memcmp(cur(in), MT_RAW_MAGIC,
		   got < MT_RAW_MAGIC_LEN ? got : MT_RAW_MAGIC_LEN))
		return fail(in, 0, "stream header: bad magic");
	if (got < sizeof(hdr))
		return fail(in, 0,
			    "stream header truncated: expected %zu bytes, "
			    "got %zu",
			    sizeof(hdr), got);
	memcpy(&hdr, cur(in), sizeof(hdr));
	if (hdr.version != MT_RAW_VERSION)
		return fail(in, 8,
			    "stream header: unsupported version %" PRIu32
			    " (this reader knows %d)",
			    hdr.version, MT_RAW_VERSION);
	if (hdr.event_size < MT_EVENT_SIZE)
		return fail(in, 16,
			    "stream header: event_size %" PRIu32
			    " is smaller than %d",
			    hdr.event_size, MT_EVENT_SIZE);
	if (hdr.event_size > MAX_OBJECT)
		return fail(in, 16,
			    "stream header: event_size %" PRIu32
			    " is too large",
			    hdr.event_size);
	if (hdr.header_size > MAX_HEADER ||
	    (uint64_t)hdr.header_size <
		sizeof(hdr) + (uint64_t)hdr.strings_size)
		return fail(in, 12,
			    "stream header: header_size %" PRIu32
			    " does not hold %zu + strings_size %" PRIu32
			    " bytes",
			    hdr.header_size, sizeof(hdr), hdr.strings_size);
	if (!fill(in, hdr.header_size)) {
		if (in->state < 0)
			return -1;
		return fail(in, 0,
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
	/* records are copied straight out of the buffer: read big chunks */
	if (!grow(in, RAW_BUF))
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
		return fail(in, off,
			    "trailer says %" PRIu64
			    " batches, stream had %" PRIu64,
			    m->batches, in->batches_seen);
	if (m->events != in->slots_seen)
		return fail(in, off,
			    "trailer says %" PRIu64
			    " events, stream had %" PRIu64,
			    m->events, in->slots_seen);
	if (m->lost != in->lost_seen)
		return fail(in, off,
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
		return fail(in, off,
			    "trailer truncated: expected %zu bytes, got %zu",
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
	if (raw_check_trailer(in, off))
		return -1;
	if (fill(in, 1))
		return fail(in, offset_now(in), "data after the trailer");
	if (in->state < 0)
		return -1;
	in->meta.has_trailer = true;
	in->state = 1;
	return 0;
}

static int raw_no_trailer(struct mt_input *in)
{
	if (in->batches_seen == 0)
		return fail(in, offset_now(in),
			    "truncated: no trailer after the stream header");
	return fail(in, offset_now(in),
		    "truncated: no trailer after batch %" PRIu64, in->seq);
}

/* Reads the next batch header, or the trailer (returns 0 then). */
static int raw_batch(struct mt_input *in)
{
	struct mt_raw_batch b;
	uint64_t off = offset_now(in);
	uint32_t magic;

	if (!fill(in, sizeof(magic))) {
		if (in->state < 0)
			return -1;
		if (avail(in) == 0)
			return raw_no_trailer(in);
	}
	magic = avail(in) >= 4 ? get_u32(cur(in)) : 0;
	if (magic == MT_TRAILER_MAGIC)
		return raw_trailer(in);
	if (avail(in) >= 4 && magic != MT_BATCH_MAGIC)
		return fail(in, off, "batch header: bad magic 0x%08" PRIx32,
			    magic);
	if (!fill(in, sizeof(b))) {
		if (in->state < 0)
			return -1;
		if (in->batches_seen == 0)
			return fail(in, off,
				    "batch header truncated (first batch): "
				    "expected %zu bytes, got %zu",
				    sizeof(b), avail(in));
		return fail(in, off,
			    "batch header truncated (after batch %" PRIu64
			    "): expected %zu bytes, got %zu",
			    in->seq, sizeof(b), avail(in));
	}
	memcpy(&b, cur(in), sizeof(b));
	if (b.seq != in->batches_seen)
		return fail(in, off,
			    "batch seq gap: expected %" PRIu64 ", got %" PRIu64,
			    in->batches_seen, b.seq);
	if ((uint64_t)b.count * in->event_size != b.bytes)
		return fail(in, off,
			    "batch %" PRIu64 ": bytes %" PRIu32
			    " != count %" PRIu32 " * event_size %" PRIu32,
			    b.seq, b.bytes, b.count, in->event_size);
	consume(in, sizeof(b));
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
	return fail(in, in->body_off,
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
		return fail(in, rec_off,
			    "batch %" PRIu64 ": record %" PRIu32
			    ": payload of %" PRIu32
			    " bytes runs past the batch (%" PRIu32
			    " records left, %" PRIu32 " needed)",
			    in->seq, index, len, in->batch_left, slots);
	if (len > MAX_PAYLOAD)
		return fail(in, rec_off,
			    "batch %" PRIu64 ": record %" PRIu32
			    ": payload of %" PRIu32 " bytes is too long",
			    in->seq, index, len);
	if (!str_room(in, len))
		return fail(in, rec_off, "out of memory");
	for (uint32_t i = 0; i < slots; i++) {
		uint32_t part = len - i * MT_DATA_PER_RECORD;

		if (part > MT_DATA_PER_RECORD)
			part = MT_DATA_PER_RECORD;
		if (!fill(in, in->event_size))
			return raw_body_truncated(in);
		memcpy(in->str + i * MT_DATA_PER_RECORD, cur(in), part);
		consume(in, in->event_size);
		in->batch_left--;
	}
	in->str[len] = '\0';
	rec->str = in->str;
	rec->str_len = len;
	return 0;
}

static int raw_next(struct mt_input *in, struct mt_record *rec)
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
		if (in->batch_left && fill(in, sizeof(uint64_t)))
			memcpy(&in->last_ts, cur(in), sizeof(uint64_t));
		memset(rec, 0, sizeof(*rec));
		rec->ev.kind = MT_EV_LOST;
		rec->ev.timestamp = in->last_ts;
		rec->ev.size = in->pending_lost;
		in->pending_lost = 0;
		return 1;
	}
	rec_off = offset_now(in);
	if (!fill(in, in->event_size))
		return raw_body_truncated(in);
	memcpy(&rec->ev, cur(in), sizeof(rec->ev));
	consume(in, in->event_size);
	in->batch_left--;
	rec->str = NULL;
	rec->str_len = 0;
	in->last_ts = rec->ev.timestamp;
	switch (rec->ev.kind) {
	case MT_EV_EXEC:
	case MT_EV_MARKER:
	case MT_EV_ALLOCATOR:
		return raw_payload(in, rec, rec_off) ? -1 : 1;
	case MT_EV_NONE:
	case MT_EV_DATA:
	case MT_EV_LOST:
		break;
	default:
		if (mt_kind_name(rec->ev.kind)) /* a kind artifacts can hold */
			return 1;
	}
	return fail(
	    in, rec_off,
	    "batch %" PRIu64 ": record %" PRIu32 ": unexpected event kind %u",
	    in->seq, in->batch_count - in->batch_left - 1, rec->ev.kind);
}

/* ---- maps: the fields of artifact / JSON Lines / memtrack objects ----- */

enum key {
	K_TYPE,
	K_PID,
	K_TID,
	K_TIMESTAMP,
	K_ADDR,
	K_SIZE,
	K_OLD_ADDR,
	K_OLD_SIZE,
	K_ALIGNMENT,
	K_PROT,
	K_FLAGS,
	K_PPID,
	K_PATH,
	K_NAME,
	K_EXIT_CODE,
	K_SIGNAL,
	K_STATUS,
	K_MEMBER,
	K_PSS,
	K_PSS_ANON,
	K_PSS_FILE,
	K_PSS_SHMEM,
	K_COUNT,
	K_KIND,
	/* header */
	K_FORMAT,
	K_VERSION,
	K_COMMAND,
	K_HOST,
	K_CLOCK,
	K_PAGE_SIZE,
	K_ROOT_PID,
	K_START_TIME,
	K_START_MONOTONIC,
	K_ALLOCATORS_TRACKED,
	K_SYSCALLS_TRACKED,
	K_RSS_TRACKED,
	K_PHYSICAL_TRACKED,
	/* trailer */
	K_COMPLETE,
	K_END_MONOTONIC,
	K_EVENTS,
	K_LOST_EVENTS,
	K_BATCHES,
	K_ERROR,
	K_MAX
};

static const char *const key_names[K_MAX] = {
    [K_TYPE] = "type",
    [K_PID] = "pid",
    [K_TID] = "tid",
    [K_TIMESTAMP] = "timestamp",
    [K_ADDR] = "addr",
    [K_SIZE] = "size",
    [K_OLD_ADDR] = "old_addr",
    [K_OLD_SIZE] = "old_size",
    [K_ALIGNMENT] = "alignment",
    [K_PROT] = "prot",
    [K_FLAGS] = "flags",
    [K_PPID] = "ppid",
    [K_PATH] = "path",
    [K_NAME] = "name",
    [K_EXIT_CODE] = "exit_code",
    [K_SIGNAL] = "signal",
    [K_STATUS] = "status",
    [K_MEMBER] = "member",
    [K_PSS] = "pss",
    [K_PSS_ANON] = "pss_anon",
    [K_PSS_FILE] = "pss_file",
    [K_PSS_SHMEM] = "pss_shmem",
    [K_COUNT] = "count",
    [K_KIND] = "kind",
    [K_FORMAT] = "format",
    [K_VERSION] = "version",
    [K_COMMAND] = "command",
    [K_HOST] = "host",
    [K_CLOCK] = "clock",
    [K_PAGE_SIZE] = "page_size",
    [K_ROOT_PID] = "root_pid",
    [K_START_TIME] = "start_time",
    [K_START_MONOTONIC] = "start_monotonic",
    [K_ALLOCATORS_TRACKED] = "allocators_tracked",
    [K_SYSCALLS_TRACKED] = "syscalls_tracked",
    [K_RSS_TRACKED] = "rss_tracked",
    [K_PHYSICAL_TRACKED] = "physical_tracked",
    [K_COMPLETE] = "complete",
    [K_END_MONOTONIC] = "end_monotonic",
    [K_EVENTS] = "events",
    [K_LOST_EVENTS] = "lost_events",
    [K_BATCHES] = "batches",
    [K_ERROR] = "error",
};

enum value_type { V_NONE, V_UINT, V_NEGATIVE, V_BOOL, V_STR, V_ARRAY, V_OTHER };

/* One value of a map, whatever the encoding.  Arrays are only read as
 * arrays of strings (the header's command), through str_at. */
struct value {
	enum value_type type;
	uint64_t u;
	bool b;
	const char *s;
	size_t len;
	const void *arr;
	size_t n;
	bool (*str_at)(const void *arr, size_t i, const char **s, size_t *len);
};

/* The values of one map; v[k] is only set when bit k of present is, so
 * that starting a map costs one store, not a memset of every value. */
struct fields {
	uint64_t present;
	struct value v[K_MAX];
};

_Static_assert(K_MAX <= 64, "present has a bit per key");

static const struct value absent; /* type V_NONE */

static const struct value *val(const struct fields *f, enum key k)
{
	return f->present >> k & 1 ? &f->v[k] : &absent;
}

static struct value *set(struct fields *f, enum key k)
{
	f->present |= 1ull << k;
	return &f->v[k];
}

/* Keys are found through a small open-addressing table, built once at
 * start-up: a map's keys are looked up for every event. */
#define KEY_SLOTS 256
static uint8_t key_lengths[K_MAX];
static uint8_t key_slots[KEY_SLOTS]; /* enum key + 1; 0 is empty */

static unsigned key_hash(const char *name, size_t len)
{
	return (len * 31 + (unsigned char)name[0] * 7 +
		(unsigned char)name[len - 1]) &
	       (KEY_SLOTS - 1);
}

__attribute__((constructor)) static void key_table(void)
{
	for (int k = 0; k < K_MAX; k++) {
		unsigned h;

		key_lengths[k] = strlen(key_names[k]);
		h = key_hash(key_names[k], key_lengths[k]);
		while (key_slots[h])
			h = (h + 1) & (KEY_SLOTS - 1);
		key_slots[h] = k + 1;
	}
}

/* Keys are a few bytes long: a loop beats a call to memcmp. */
static bool same_bytes(const char *a, const char *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

static enum key key_from_name(const char *name, size_t len)
{
	unsigned h;

	if (len == 0)
		return K_MAX;
	for (h = key_hash(name, len); key_slots[h];
	     h = (h + 1) & (KEY_SLOTS - 1)) {
		enum key k = key_slots[h] - 1;

		if (key_lengths[k] == len &&
		    same_bytes(key_names[k], name, len))
			return k;
	}
	return K_MAX;
}

static bool has(const struct fields *f, enum key k)
{
	return val(f, k)->type != V_NONE;
}

static bool str_is(const struct value *v, const char *s)
{
	return v->type == V_STR && v->len == strlen(s) &&
	       !memcmp(v->s, s, v->len);
}

/* Reads key k as an unsigned integer into *out (left alone if absent). */
static int get_uint(struct mt_input *in, uint64_t off, const struct fields *f,
		    enum key k, uint64_t *out)
{
	const struct value *v = val(f, k);

	if (v->type == V_NONE)
		return 0;
	if (v->type != V_UINT)
		return fail(in, off, "\"%s\": expected an unsigned integer",
			    key_names[k]);
	*out = v->u;
	return 0;
}

/* The same into a field of struct mt_event (__u64 is not uint64_t). */
static int get_ev(struct mt_input *in, uint64_t off, const struct fields *f,
		  enum key k, __u64 *out)
{
	uint64_t u = *out;

	if (get_uint(in, off, f, k, &u))
		return -1;
	*out = u;
	return 0;
}

static int get_u32f(struct mt_input *in, uint64_t off, const struct fields *f,
		    enum key k, uint32_t *out)
{
	uint64_t u = *out;

	if (get_uint(in, off, f, k, &u))
		return -1;
	if (u > UINT32_MAX)
		return fail(in, off, "\"%s\": %" PRIu64 " is out of range",
			    key_names[k], u);
	*out = u;
	return 0;
}

static int get_bool(struct mt_input *in, uint64_t off, const struct fields *f,
		    enum key k, bool *out)
{
	const struct value *v = val(f, k);

	if (v->type == V_NONE)
		return 0;
	if (v->type != V_BOOL)
		return fail(in, off, "\"%s\": expected true or false",
			    key_names[k]);
	*out = v->b;
	return 0;
}

static int get_str(struct mt_input *in, uint64_t off, const struct fields *f,
		   enum key k, const char **s, size_t *len)
{
	const struct value *v = val(f, k);

	if (v->type == V_NONE)
		return 0;
	if (v->type != V_STR)
		return fail(in, off, "\"%s\": expected a string", key_names[k]);
	*s = v->s;
	*len = v->len;
	return 0;
}

static int require(struct mt_input *in, uint64_t off, const struct fields *f,
		   const char *type, enum key k)
{
	if (has(f, k))
		return 0;
	return fail(in, off, "%s: missing \"%s\"", type, key_names[k]);
}

static const char *const rss_members[] = {"file", "anon", "swap", "shmem"};

static int fields_rss_member(struct mt_input *in, uint64_t off,
			     const struct fields *f, struct mt_event *ev)
{
	const struct value *v = val(f, K_MEMBER);

	if (v->type == V_UINT && v->u <= UINT32_MAX) {
		ev->aux = v->u;
		return 0;
	}
	for (unsigned i = 0; i < 4; i++) {
		if (str_is(v, rss_members[i])) {
			ev->aux = i;
			return 0;
		}
	}
	return fail(in, off,
		    "Rss: \"member\" is not file, anon, swap or shmem");
}

static int fields_exit_status(struct mt_input *in, uint64_t off,
			      const struct fields *f, struct mt_event *ev)
{
	uint64_t code = 0, sig = 0, status = 0;

	if (get_uint(in, off, f, K_EXIT_CODE, &code) ||
	    get_uint(in, off, f, K_SIGNAL, &sig) ||
	    get_uint(in, off, f, K_STATUS, &status))
		return -1;
	if (has(f, K_EXIT_CODE))
		ev->aux = (code & 0xff) << 8;
	else if (has(f, K_SIGNAL))
		ev->aux = sig & 0x7f;
	else
		ev->aux = status;
	return 0;
}

/* The per-kind keys of an event map, back into an event record. */
static int fields_kind_values(struct mt_input *in, uint64_t off,
			      const struct fields *f, struct mt_record *rec)
{
	struct mt_event *ev = &rec->ev;
	uint64_t u;
	const char *s = NULL;
	size_t len = 0;

	switch (ev->kind) {
	case MT_EV_ALIGNED_ALLOC:
		return get_ev(in, off, f, K_ALIGNMENT, &ev->old_size);
	case MT_EV_MMAP:
		u = 0;
		if (get_uint(in, off, f, K_PROT, &u))
			return -1;
		ev->flags = u;
		return get_u32f(in, off, f, K_FLAGS, &ev->aux);
	case MT_EV_FORK:
		return get_ev(in, off, f, K_PPID, &ev->old_addr);
	case MT_EV_ALLOCATOR:
		if (get_str(in, off, f, K_KIND, &s, &len))
			return -1;
		ev->flags = mt_alloc_family_from_name(s ? s : "", len);
		/* its path is a payload like an exec's */
		__attribute__((fallthrough));
	case MT_EV_EXEC:
	case MT_EV_MARKER:
		if (get_str(in, off, f,
			    ev->kind == MT_EV_MARKER ? K_NAME : K_PATH, &s,
			    &len))
			return -1;
		if (!keep_str(in, s ? s : "", len))
			return fail(in, off, "out of memory");
		rec->str = in->str;
		rec->str_len = len;
		ev->aux = len;
		return 0;
	case MT_EV_EXIT:
		return fields_exit_status(in, off, f, ev);
	case MT_EV_RSS:
		if (require(in, off, f, "Rss", K_MEMBER))
			return -1;
		return fields_rss_member(in, off, f, ev);
	case MT_EV_PSS:
		return get_ev(in, off, f, K_PSS, &ev->size) ||
		       get_ev(in, off, f, K_PSS_ANON, &ev->addr) ||
		       get_ev(in, off, f, K_PSS_FILE, &ev->old_addr) ||
		       get_ev(in, off, f, K_PSS_SHMEM, &ev->old_size);
	case MT_EV_LOST:
		return get_ev(in, off, f, K_COUNT, &ev->size);
	default:
		return 0;
	}
}

static int fields_to_record(struct mt_input *in, uint64_t off,
			    const struct fields *f, unsigned kind,
			    struct mt_record *rec)
{
	struct mt_event *ev = &rec->ev;
	uint32_t pid = 0, tid = 0;

	memset(rec, 0, sizeof(*rec));
	ev->kind = kind;
	if (require(in, off, f, mt_kind_name(kind), K_PID) ||
	    require(in, off, f, mt_kind_name(kind), K_TIMESTAMP) ||
	    get_u32f(in, off, f, K_PID, &pid) ||
	    get_u32f(in, off, f, K_TID, &tid) ||
	    get_ev(in, off, f, K_TIMESTAMP, &ev->timestamp) ||
	    get_ev(in, off, f, K_ADDR, &ev->addr) ||
	    get_ev(in, off, f, K_SIZE, &ev->size) ||
	    get_ev(in, off, f, K_OLD_ADDR, &ev->old_addr) ||
	    get_ev(in, off, f, K_OLD_SIZE, &ev->old_size))
		return -1;
	ev->pid = pid;
	ev->tid = tid;
	return fields_kind_values(in, off, f, rec);
}

static int header_command(struct mt_input *in, uint64_t off,
			  const struct value *v)
{
	if (v->type == V_NONE)
		return 0;
	if (v->type != V_ARRAY)
		return fail(in, off, "Header: \"command\": expected an array");
	in->meta.argv = calloc(v->n + 1, sizeof(char *));
	if (!in->meta.argv)
		return fail(in, off, "out of memory");
	for (size_t i = 0; i < v->n; i++) {
		const char *s;
		size_t len;

		if (!v->str_at(v->arr, i, &s, &len))
			return fail(in, off,
				    "Header: \"command\": element %zu is not "
				    "a string",
				    i);
		in->meta.argv[i] = strndup(s, len);
		if (!in->meta.argv[i])
			return fail(in, off, "out of memory");
		in->meta.argc = i + 1;
	}
	return 0;
}

static int header_clock(struct mt_input *in, uint64_t off,
			const struct value *v)
{
	static const struct {
		const char *name;
		uint32_t id;
	} clocks[] = {{"CLOCK_REALTIME", 0},
		      {"CLOCK_MONOTONIC", 1},
		      {"CLOCK_MONOTONIC_RAW", 4},
		      {"CLOCK_BOOTTIME", 7}};

	if (v->type == V_NONE)
		return 0;
	for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
		if (str_is(v, clocks[i].name)) {
			in->meta.clock_id = clocks[i].id;
			return 0;
		}
	}
	return fail(in, off, "Header: unknown \"clock\"");
}

static int header_flag(struct mt_input *in, uint64_t off,
		       const struct fields *f, enum key k, uint32_t bit)
{
	bool b = false;

	if (get_bool(in, off, f, k, &b))
		return -1;
	if (b)
		in->meta.flags |= bit;
	return 0;
}

static int fields_to_header(struct mt_input *in, uint64_t off,
			    const struct fields *f)
{
	struct mt_meta *m = &in->meta;
	uint64_t version = 0;
	const char *host = NULL;
	size_t host_len = 0;

	if (require(in, off, f, "Header", K_VERSION) ||
	    get_uint(in, off, f, K_VERSION, &version))
		return -1;
	if (version != 1)
		return fail(in, off,
			    "Header: unsupported artifact version %" PRIu64
			    " (this reader knows 1)",
			    version);
	m->version = version;
	if (get_str(in, off, f, K_HOST, &host, &host_len) ||
	    get_u32f(in, off, f, K_PAGE_SIZE, &m->page_size) ||
	    get_u32f(in, off, f, K_ROOT_PID, &m->root_pid) ||
	    get_uint(in, off, f, K_START_TIME, &m->start_realtime_ns) ||
	    get_uint(in, off, f, K_START_MONOTONIC, &m->start_monotonic_ns) ||
	    header_clock(in, off, val(f, K_CLOCK)) ||
	    header_flag(in, off, f, K_ALLOCATORS_TRACKED, MT_HDR_ALLOCATORS) ||
	    header_flag(in, off, f, K_SYSCALLS_TRACKED, MT_HDR_SYSCALLS) ||
	    header_flag(in, off, f, K_RSS_TRACKED, MT_HDR_RSS) ||
	    header_flag(in, off, f, K_PHYSICAL_TRACKED, MT_HDR_PHYSICAL) ||
	    header_command(in, off, val(f, K_COMMAND)))
		return -1;
	m->host = strndup(host ? host : "", host_len);
	if (!m->host)
		return fail(in, off, "out of memory");
	return 0;
}

/* The trailer of an artifact: checks it against what was read. */
static int fields_to_trailer(struct mt_input *in, uint64_t off,
			     const struct fields *f)
{
	struct mt_meta *m = &in->meta;
	bool complete = false;
	uint64_t code = 0, sig = 0;
	const char *error = NULL;
	size_t error_len = 0;

	if (require(in, off, f, "Trailer", K_COMPLETE) ||
	    require(in, off, f, "Trailer", K_EVENTS) ||
	    get_bool(in, off, f, K_COMPLETE, &complete) ||
	    get_uint(in, off, f, K_EXIT_CODE, &code) ||
	    get_uint(in, off, f, K_SIGNAL, &sig) ||
	    get_uint(in, off, f, K_END_MONOTONIC, &m->end_monotonic_ns) ||
	    get_uint(in, off, f, K_EVENTS, &m->events) ||
	    get_uint(in, off, f, K_LOST_EVENTS, &m->lost) ||
	    get_uint(in, off, f, K_BATCHES, &m->batches) ||
	    get_str(in, off, f, K_ERROR, &error, &error_len))
		return -1;
	m->exit_kind = MT_EXIT_UNKNOWN;
	if (has(f, K_EXIT_CODE)) {
		m->exit_kind = MT_EXIT_CODE;
		m->exit_value = code;
	} else if (has(f, K_SIGNAL)) {
		m->exit_kind = MT_EXIT_SIGNAL;
		m->exit_value = sig;
	}
	if (!complete)
		return fail(in, off, "the artifact is incomplete: %.*s",
			    (int)(error_len > 512 ? 512 : error_len),
			    error ? error : "(no reason given)");
	if (m->events != in->maps_seen)
		return fail(in, off,
			    "trailer says %" PRIu64
			    " events, artifact had %" PRIu64,
			    m->events, in->maps_seen);
	if (m->lost != in->map_lost)
		return fail(in, off,
			    "trailer says %" PRIu64
			    " lost events, Lost records had %" PRIu64,
			    m->lost, in->map_lost);
	return 0;
}

/* What an object of the stream is, once its fields are collected. */
enum object_role { OBJ_EVENT, OBJ_HEADER, OBJ_TRAILER };

static int fields_role(struct mt_input *in, uint64_t off,
		       const struct fields *f, enum object_role *role,
		       unsigned *kind)
{
	const struct value *t = val(f, K_TYPE);

	if (t->type != V_STR)
		return fail(in, off, "map without a string \"type\"");
	if (str_is(t, "Header")) {
		*role = OBJ_HEADER;
		return 0;
	}
	if (str_is(t, "Trailer")) {
		*role = OBJ_TRAILER;
		return 0;
	}
	*role = OBJ_EVENT;
	*kind = mt_kind_from_name(t->s, t->len);
	if (*kind == MT_EV_NONE)
		return fail(in, off, "unknown event type \"%.*s\"",
			    (int)(t->len > 64 ? 64 : t->len), t->s);
	return 0;
}

/* An object after the first: an event (returns 1) or the trailer (0). */
static int object_next(struct mt_input *in, uint64_t off,
		       const struct fields *f, struct mt_record *rec)
{
	enum object_role role;
	unsigned kind = MT_EV_NONE;

	if (fields_role(in, off, f, &role, &kind))
		return -1;
	if (role == OBJ_HEADER)
		return fail(in, off, "unexpected second Header");
	if (role == OBJ_TRAILER) {
		if (in->fmt == MT_FMT_MEMTRACK)
			return fail(in, off, "Trailer in a memtrack stream");
		if (fields_to_trailer(in, off, f))
			return -1;
		return 0;
	}
	if (fields_to_record(in, off, f, kind, rec))
		return -1;
	in->maps_seen++;
	if (kind == MT_EV_LOST)
		in->map_lost += rec->ev.size;
	return 1;
}

/* ---- MessagePack ----------------------------------------------------- */

/* Size of the MessagePack object at p, without decoding it, so that
 * msgpack-c is only handed whole objects whose container counts are
 * bounded by their byte size.  1 = *size set, 0 = need more bytes,
 * -1 = invalid (the 0xc1 byte). */
static int mp_object_size(const unsigned char *p, size_t len, size_t *size)
{
	static const unsigned char fixed[32] = {
	    /* 0xc0.. */ 1,
	    0,
	    1,
	    1,
	    2,
	    3,
	    5,
	    3,
	    4,
	    6,
	    5,
	    9,
	    2,
	    3,
	    5,
	    9,
	    /* 0xd0.. */ 2,
	    3,
	    5,
	    9,
	    3,
	    4,
	    6,
	    10,
	    18,
	    2,
	    3,
	    5,
	    3,
	    5,
	    3,
	    5,
	};
	uint64_t pending = 1;
	size_t off = 0;

	while (pending) {
		unsigned char c;
		uint64_t n = 0, extra = 0;
		size_t width = 0;

		if (off >= len)
			return 0;
		c = p[off];
		pending--;
		if (c <= 0x7f || c >= 0xe0) {
			off += 1;
			continue;
		}
		if (c <= 0x8f) {
			pending += 2 * (c & 0x0f);
			off += 1;
			continue;
		}
		if (c <= 0x9f) {
			pending += c & 0x0f;
			off += 1;
			continue;
		}
		if (c <= 0xbf) {
			off += 1 + (c & 0x1f);
			continue;
		}
		if (c == 0xc1)
			return -1;
		switch (c) {
		case 0xc4:
		case 0xd9:
			width = 1;
			break; /* bin8, str8 */
		case 0xc5:
		case 0xda:
			width = 2;
			break;
		case 0xc6:
		case 0xdb:
			width = 4;
			break;
		case 0xc7:
			width = 1;
			extra = 1;
			break; /* ext8: + type */
		case 0xc8:
			width = 2;
			extra = 1;
			break;
		case 0xc9:
			width = 4;
			extra = 1;
			break;
		case 0xdc:
		case 0xde:
			width = 2;
			break; /* array16, map16 */
		case 0xdd:
		case 0xdf:
			width = 4;
			break;
		default:
			off += fixed[c - 0xc0];
			continue;
		}
		if (len - off < 1 + width)
			return 0;
		for (size_t i = 0; i < width; i++)
			n = n << 8 | p[off + 1 + i];
		off += 1 + width;
		if (c == 0xdc || c == 0xdd)
			pending += n;
		else if (c == 0xde || c == 0xdf)
			pending += 2 * n;
		else
			off += extra + n;
		if (pending > len)
			return 0; /* each item takes a byte: more is needed */
	}
	if (off > len)
		return 0;
	*size = off;
	return 1;
}

static bool mp_str_at(const void *arr, size_t i, const char **s, size_t *len)
{
	const msgpack_object *o = &((const msgpack_object_array *)arr)->ptr[i];

	if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
		return false;
	*s = o->via.str.ptr;
	*len = o->via.str.size;
	return true;
}

static void mp_value(const msgpack_object *o, struct value *v)
{
	memset(v, 0, sizeof(*v));
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		v->type = V_UINT;
		v->u = o->via.u64;
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		v->type = V_NEGATIVE;
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		v->type = V_BOOL;
		v->b = o->via.boolean;
		break;
	case MSGPACK_OBJECT_STR:
	case MSGPACK_OBJECT_BIN: /* paths that are not UTF-8 */
		v->type = V_STR;
		v->s = o->via.str.ptr;
		v->len = o->via.str.size;
		break;
	case MSGPACK_OBJECT_ARRAY:
		v->type = V_ARRAY;
		v->arr = &o->via.array;
		v->n = o->via.array.size;
		v->str_at = mp_str_at;
		break;
	default:
		v->type = V_OTHER;
		break;
	}
}

/* Decodes the next MessagePack object into fields; *off gets its offset.
 * Returns 1, 0 at a clean end of input, -1 on error. */
/* Any object, through msgpack-c: NULL, or what is wrong with it. */
static const char *mp_fields(struct mt_input *in, size_t size, struct fields *f)
{
	const msgpack_object *o = &in->obj;
	size_t used = 0;

	msgpack_zone_clear(&in->zone);
	if (msgpack_unpack((const char *)cur(in), size, &used, &in->zone,
			   &in->obj) != MSGPACK_UNPACK_SUCCESS)
		return "invalid MessagePack object";
	if (o->type != MSGPACK_OBJECT_MAP)
		return "expected a map";
	f->present = 0;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		enum key k;

		if (kv->key.type != MSGPACK_OBJECT_STR)
			continue;
		k = key_from_name(kv->key.via.str.ptr, kv->key.via.str.size);
		if (k != K_MAX)
			mp_value(&kv->val, set(f, k));
	}
	return NULL;
}

static uint64_t be(const unsigned char *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

/* One value of a flat map at *p (bytes up to end) into v: 1, 0 if the
 * bytes end first, -1 for anything but an integer, bool, nil, float, str
 * or bin (msgpack-c then does it all). */
static int mp_flat_value(const unsigned char **p, const unsigned char *end,
			 struct value *v)
{
	const unsigned char *q = *p;
	unsigned char c;
	unsigned width = 0;
	int64_t i;

	if (q >= end)
		return 0;
	c = *q++;
	v->u = 0;
	v->b = false;
	v->s = NULL;
	v->len = 0;
	if (c <= 0x7f) {
		v->type = V_UINT;
		v->u = c;
	} else if (c >= 0xe0) {
		v->type = V_NEGATIVE;
	} else if ((c >= 0xa0 && c <= 0xbf) || (c >= 0xd9 && c <= 0xdb) ||
		   (c >= 0xc4 && c <= 0xc6)) {
		width = c <= 0xbf   ? 0
			: c >= 0xd9 ? 1u << (c - 0xd9)
				    : 1u << (c - 0xc4);
		if ((size_t)(end - q) < width)
			return 0;
		v->type = V_STR;
		v->len = width ? be(q, width) : (size_t)(c & 0x1f);
		if ((size_t)(end - q) - width < v->len)
			return 0;
		v->s = (const char *)q + width;
		q += width + v->len;
	} else if (c >= 0xcc && c <= 0xcf) {
		width = 1u << (c - 0xcc);
		if ((size_t)(end - q) < width)
			return 0;
		v->type = V_UINT;
		v->u = be(q, width);
		q += width;
	} else if (c >= 0xd0 && c <= 0xd3) {
		/* msgpack-c calls a signed integer >= 0 positive */
		width = 1u << (c - 0xd0);
		if ((size_t)(end - q) < width)
			return 0;
		i = (int64_t)(be(q, width) << (64 - 8 * width)) >>
		    (64 - 8 * width);
		v->type = i < 0 ? V_NEGATIVE : V_UINT;
		v->u = i < 0 ? 0 : (uint64_t)i;
		q += width;
	} else if (c == 0xc2 || c == 0xc3) {
		v->type = V_BOOL;
		v->b = c == 0xc3;
	} else if (c == 0xc0 || c == 0xca || c == 0xcb) {
		width = c == 0xca ? 4 : c == 0xcb ? 8 : 0;
		if ((size_t)(end - q) < width)
			return 0;
		v->type = V_OTHER;
		q += width;
	} else {
		return -1;
	}
	*p = q;
	return 1;
}

/* The common case in one pass and without msgpack-c: a map of string keys
 * to scalars (every event map).  1 = decoded, *size bytes long; 0 = the
 * bytes end first; -1 = something else, for mp_object_size and mp_fields. */
static int mp_flat_fields(const unsigned char *p, size_t avail,
			  struct fields *f, size_t *size)
{
	const unsigned char *start = p, *end = p + avail;
	uint64_t n;
	unsigned width;
	struct value key, v;
	int ret;

	if (avail == 0)
		return 0;
	if (*p >= 0x80 && *p <= 0x8f) {
		n = *p++ & 0x0f;
	} else if (*p == 0xde || *p == 0xdf) {
		width = *p++ == 0xde ? 2 : 4;
		if ((size_t)(end - p) < width)
			return 0;
		n = be(p, width);
		p += width;
	} else {
		return -1;
	}
	f->present = 0;
	while (n--) {
		enum key k;

		if (p >= end)
			return 0;
		/* keys must be str (msgpack-c's path skips bin keys) */
		if (!((*p >= 0xa0 && *p <= 0xbf) || (*p >= 0xd9 && *p <= 0xdb)))
			return -1;
		ret = mp_flat_value(&p, end, &key);
		if (ret > 0)
			ret = mp_flat_value(&p, end, &v);
		if (ret <= 0)
			return ret;
		k = key_from_name(key.s, key.len);
		if (k != K_MAX)
			*set(f, k) = v;
	}
	*size = p - start;
	return 1;
}

#ifdef MT_FUZZ_DIFF
/* Fuzzing: the fast path must agree with msgpack-c on every map. */
static void mp_check_fast(struct mt_input *in, size_t size,
			  const struct fields *fast)
{
	struct fields slow;
	size_t slow_size = 0;

	if (mp_object_size(cur(in), avail(in), &slow_size) != 1 ||
	    slow_size != size)
		__builtin_trap();
	if (mp_fields(in, size, &slow) || slow.present != fast->present)
		__builtin_trap();
	for (int k = 0; k < K_MAX; k++) {
		const struct value *a = val(fast, k), *b = val(&slow, k);

		if (a->type != b->type || a->u != b->u || a->b != b->b ||
		    a->len != b->len || (a->len && memcmp(a->s, b->s, a->len)))
			__builtin_trap();
	}
}
#endif

/* More bytes for an object that started at off: 1, or 0 at a clean end of
 * input (nothing left), or -1 with the error set. */
static int mp_more(struct mt_input *in, uint64_t off)
{
	if (avail(in) >= MAX_OBJECT)
		return fail(in, off, "MessagePack object larger than %u bytes",
			    MAX_OBJECT);
	if (fill(in, avail(in) + 1))
		return 1;
	if (in->state < 0)
		return -1;
	if (avail(in) == 0)
		return 0;
	return fail(in, off,
		    "truncated MessagePack object (%zu bytes before the end)",
		    avail(in));
}

static int mp_next_fields(struct mt_input *in, struct fields *f, uint64_t *off)
{
	const char *what;
	size_t size = 0;
	int ret;

	*off = offset_now(in);
	while ((ret = mp_flat_fields(cur(in), avail(in), f, &size)) >= 0) {
		if (ret > 0) {
#ifdef MT_FUZZ_DIFF
			mp_check_fast(in, size, f);
#endif
			consume(in, size);
			return 1;
		}
		ret = mp_more(in, *off);
		if (ret <= 0)
			return ret;
	}
	/* anything else: sized without decoding, so that msgpack-c is only
	 * handed whole objects, then decoded by msgpack-c */
	while ((ret = mp_object_size(cur(in), avail(in), &size)) == 0) {
		ret = mp_more(in, *off);
		if (ret <= 0)
			return ret;
	}
	if (ret < 0)
		return fail(in, *off, "invalid MessagePack (byte 0xc1)");
	what = mp_fields(in, size, f);
	if (what)
		return fail(in, *off, "%s", what);
	consume(in, size); /* its strings stay in the buffer until next fill */
	return 1;
}

/* ---- MessagePack event maps: the one-pass fast path ------------------ */

/*
 * Nearly every object of an artifact is an event map of a few short str
 * keys with unsigned integer values.  mp_fast_event decodes exactly those
 * straight into a record, in one pass, without struct fields; anything
 * else it declines, and the general path above decodes it, with its error
 * messages.  So the fast path needs no error handling of its own, but it
 * must agree with the general path on every map it accepts (MT_FUZZ_DIFF
 * checks that).
 *
 * It runs only while FAST_SLACK bytes are buffered (at the end of the
 * input, zeros make up the rest: pad_tail): a fixmap of at most 15
 * pairs whose keys and values are str8 or shorter, or integers, cannot
 * reach further (15 * (2 + 255 + 2 + 255) + 1 = 7711 bytes, plus 16 bytes
 * read past a name or 8 past an integer), so no byte needs its own bounds
 * check and names and integers are read as whole words.
 */
#define FAST_SLACK 8192u

/* A name of at most 16 bytes as two words, the bytes past it zeroed. */
struct name_words {
	uint64_t lo, hi;
};

static struct name_words name_mask[17]; /* [len]: len bytes of 0xff */

static struct name_words name_words(const unsigned char *s, size_t len)
{
	struct name_words w;

	memcpy(&w, s, sizeof(w));
	w.lo &= name_mask[len].lo;
	w.hi &= name_mask[len].hi;
	return w;
}

/* Names to small values (enum key, event kind) by open addressing on a
 * multiplicative hash of their words; verified word by word. */
#define NAME_SLOTS 128

struct name_table {
	struct name_words words[NAME_SLOTS];
	uint8_t len[NAME_SLOTS]; /* 0: empty */
	uint8_t value[NAME_SLOTS];
};

static struct name_table fast_keys, fast_kinds;
static struct name_words type_key; /* "type" as encoded */

static unsigned name_hash(struct name_words w)
{
	return ((w.lo ^ w.hi) * 0x87c37b91114253d5ull) >> 57;
}

static void name_add(struct name_table *t, const char *name, unsigned value)
{
	size_t len = strlen(name);
	unsigned char bytes[16] = {0};
	struct name_words w;
	unsigned h;

	memcpy(bytes, name, len);
	w = name_words(bytes, len);
	for (h = name_hash(w); t->len[h]; h = (h + 1) % NAME_SLOTS)
		;
	t->words[h] = w;
	t->len[h] = len;
	t->value[h] = value;
}

/* value of the name s (len <= 16), or none. */
static inline unsigned name_find(const struct name_table *t,
				 const unsigned char *s, size_t len,
				 unsigned none)
{
	struct name_words w = name_words(s, len);

	for (unsigned h = name_hash(w); t->len[h]; h = (h + 1) % NAME_SLOTS)
		if (t->len[h] == len && t->words[h].lo == w.lo &&
		    t->words[h].hi == w.hi)
			return t->value[h];
	return none;
}

/* The keys of the event maps the fast path takes. */
static const enum key fast_key_list[] = {
    K_TYPE,	K_PID,	     K_TID,  K_TIMESTAMP, K_ADDR, K_SIZE,   K_OLD_ADDR,
    K_OLD_SIZE, K_ALIGNMENT, K_PROT, K_FLAGS,	  K_PPID, K_MEMBER, K_COUNT,
};

static void fixed_tables(void);

__attribute__((constructor)) static void fast_tables(void)
{
	for (size_t len = 0; len <= 16; len++) {
		unsigned char ones[16] = {0};

		memset(ones, 0xff, len);
		memcpy(&name_mask[len], ones, sizeof(ones));
	}
	for (size_t i = 0; i < sizeof(fast_key_list) / sizeof(*fast_key_list);
	     i++)
		name_add(&fast_keys, key_names[fast_key_list[i]],
			 fast_key_list[i]);
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (mt_kind_name(kind) && strlen(mt_kind_name(kind)) <= 16)
			name_add(&fast_kinds, mt_kind_name(kind), kind);
	fixed_tables();
	type_key = name_words((const unsigned char *)"\xa4type\0\0\0\0\0\0\0\0"
						     "\0\0\0",
			      5);
}

/* A str of up to 255 bytes at *p (the names of event maps): its length,
 * or -1 for anything else. */
static inline int fast_str(const unsigned char **p, const unsigned char **s)
{
	const unsigned char *q = *p;
	int len;

	if (*q >= 0xa0 && *q <= 0xbf) {
		len = *q & 0x1f;
		q += 1;
	} else if (*q == 0xd9) {
		len = q[1];
		q += 2;
	} else {
		return -1;
	}
	*s = q;
	*p = q + len;
	return len;
}

/* An unsigned integer at *p (a positive fixint or uint 8..64). */
static inline bool fast_uint(const unsigned char **p, uint64_t *u)
{
	const unsigned char *q = *p;
	unsigned width;
	uint64_t word;

	if (*q <= 0x7f) {
		*u = *q;
		*p = q + 1;
		return true;
	}
	if (*q < 0xcc || *q > 0xcf)
		return false;
	width = 1u << (*q - 0xcc);
	memcpy(&word, q + 1, sizeof(word)); /* big-endian, width bytes */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	word = __builtin_bswap64(word);
#endif
	*u = word >> (64 - 8 * width);
	*p = q + 1 + width;
	return true;
}

/*
 * A guess at the str at some place of a map, as encoded (header and name,
 * at most 16 bytes): what the last map of the same kind had there.  Maps
 * of a kind repeat their keys in order and types repeat, so one masked
 * compare usually tells the key or kind without hashing; the header holds
 * the length, so equal bytes are the same str.  An empty guess masks
 * nothing out and expects zeros, which no str starts with, and its value
 * declines the map should it ever match.
 */
struct guess {
	struct name_words bytes, mask;
	uint8_t size;
	uint8_t value;
	/* a key's guess may take in its value's type byte too (the widths
	 * of a kind's values repeat as well): then the value is the
	 * big-endian word at val_at shifted right by val_shift, and the pair
	 * ends pair_size bytes on; pair_size 0: the key alone */
	uint8_t val_at, val_shift, pair_size;
};

#define GUESS_POS   16 /* a fixmap has at most 15 pairs */
#define GUESS_TYPES 32 /* types, by their first two bytes */

/*
 * The head of a map of a common kind (its count, type, pid, tid,
 * timestamp, addr and the key after them) as the last map of that kind
 * had it: a template of its bytes, and a mask of those that must match
 * (not the values; of a positive fixint, the top bit), so that one masked
 * compare of a few vectors checks every key and value type of the head,
 * and the values are read at known places.  Within a trace, the widths of
 * these values rarely change.
 */
#define SHAPE_CHUNKS 5 /* AlignedAlloc's head: 71 bytes, 75 with wide pids */
#define SHAPE_BYTES  (16 * SHAPE_CHUNKS)
#define SHAPE_SLOTS  16 /* by a hash of the kind's first bytes */
#define SHAPE_FIELDS 4	/* pid, tid, timestamp, addr */

typedef unsigned char bytes16 __attribute__((vector_size(16)));

struct shape {
	bytes16 bytes[SHAPE_CHUNKS], mask[SHAPE_CHUNKS];
	/* each value is the big-endian word at at, shifted right by shift */
	uint8_t at[SHAPE_FIELDS], shift[SHAPE_FIELDS];
	uint8_t size; /* of the head: where its tail starts */
	uint8_t kind;
} __attribute__((aligned(256))); /* a slot's offset: one shift */

struct guesses {
	struct shape shape[SHAPE_SLOTS];
	struct guess key[MT_EV_KIND_MAX][GUESS_POS]; /* by kind, position */
	struct guess type[GUESS_TYPES];
};

static struct guesses *guesses_new(void)
{
	struct guesses *gs =
	    aligned_alloc(_Alignof(struct guesses), sizeof(*gs));
	const struct guess key = {.mask = {~0ull, ~0ull}, .value = K_MAX},
			   type = {.mask = {~0ull, ~0ull}, .value = MT_EV_NONE};
	/* no map starts with 0xc1 (never used in MessagePack) */
	const struct shape none = {.bytes = {{0xc1}}, .mask = {{0xff}}};

	if (!gs)
		return NULL;
	for (unsigned i = 0; i < SHAPE_SLOTS; i++)
		gs->shape[i] = none;
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		for (unsigned i = 0; i < GUESS_POS; i++)
			gs->key[kind][i] = key;
	for (unsigned i = 0; i < GUESS_TYPES; i++)
		gs->type[i] = type;
	return gs;
}

static void guess_set(struct guess *g, const unsigned char *p, size_t size,
		      unsigned value)
{
	if (size > 16)
		return;
	g->mask = name_mask[size];
	g->bytes = name_words(p, size);
	g->size = size;
	g->value = value;
	g->pair_size = 0;
}

/* The key guess g (just matched at key) takes in the type byte of the
 * unsigned value after it: a positive fixint (any, so the type byte's top
 * bit is masked in) or uint 8..64 (this exact width). */
static void guess_value(struct guess *g, const unsigned char *key)
{
	const unsigned char *q = key + g->size;
	unsigned char mask[16], bytes[16];
	unsigned width;

	struct name_words w, km;

	if (g->size >= 16)
		return;
	km = name_mask[g->size];
	w = name_words(key, g->size);
	if (w.lo != (g->bytes.lo & km.lo) || w.hi != (g->bytes.hi & km.hi) ||
	    (*q > 0x7f && (*q < 0xcc || *q > 0xcf)))
		return; /* the guess is not this key's, or no such value */
	memcpy(mask, &km, sizeof(mask));
	memcpy(bytes, &w, sizeof(bytes));
	if (*q <= 0x7f) {
		mask[g->size] = 0x80;
		bytes[g->size] = 0;
		g->val_at = g->size;
		width = 1;
	} else {
		mask[g->size] = 0xff;
		bytes[g->size] = *q;
		g->val_at = g->size + 1;
		width = 1u << (*q - 0xcc);
	}
	memcpy(&g->mask, mask, sizeof(mask));
	memcpy(&g->bytes, bytes, sizeof(bytes));
	g->val_shift = 64 - 8 * width;
	g->pair_size = g->val_at + width;
}

/* The value at p + g->val_at, as guess_value found it. */
static inline uint64_t guessed_value(const unsigned char *p,
				     const struct guess *g)
{
	uint64_t word;

	memcpy(&word, p + g->val_at, sizeof(word)); /* big-endian */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	word = __builtin_bswap64(word);
#endif
	return word >> g->val_shift;
}

/* fast_name when the guess was wrong: the table, and a new guess. */
static unsigned fast_name_lookup(const unsigned char **p, struct guess *g,
				 const struct name_table *t, unsigned none)
{
	const unsigned char *start = *p, *s;
	unsigned value;
	int len;

	len = fast_str(p, &s);
	if (len < 0 || len > 16)
		return none;
	value = name_find(t, s, len, none);
	if (value != none)
		guess_set(g, start, *p - start, value);
	return value;
}

/* The str at *p looked up in t, through guess g: its value, or none. */
static inline __attribute__((always_inline)) unsigned
fast_name(const unsigned char **p, struct guess *g, const struct name_table *t,
	  unsigned none)
{
	struct name_words w;

	memcpy(&w, *p, sizeof(w));
	if ((w.lo & g->mask.lo) == g->bytes.lo &&
	    (w.hi & g->mask.hi) == g->bytes.hi) {
		*p += g->size;
		return g->value;
	}
	return fast_name_lookup(p, g, t, none);
}

/* What one event map held: unsigned values by key, the kind, the Rss
 * member when it is a name. */
struct fast_map {
	uint64_t present; /* bit per enum key */
	uint64_t u[K_MAX];
	unsigned kind;
	const unsigned char *member;
	int member_len;
};

/* The map's first pair, its type: an event kind, else the general path
 * decides (Header, Trailer, an error to report, or a map in another key
 * order). */
static inline bool fast_type(const unsigned char **p, struct fast_map *m,
			     struct guesses *gs)
{
	struct name_words w = name_words(*p, 5);
	struct guess *g;

	if (w.lo != type_key.lo || w.hi != type_key.hi)
		return false;
	*p += 5;
	g = &gs->type[((*p)[0] + (*p)[1]) % GUESS_TYPES];
	m->kind = fast_name(p, g, &fast_kinds, MT_EV_NONE);
	m->present = 1ull << K_TYPE;
	return m->kind != MT_EV_NONE;
}

/* An Rss member: a name or a number. */
static inline bool fast_member(const unsigned char **p, struct fast_map *m)
{
	m->member_len = fast_str(p, &m->member);
	if (m->member_len >= 0)
		return true;
	m->member = NULL;
	return fast_uint(p, &m->u[K_MEMBER]);
}

/* The pairs after the type, keys guessed from the last map of the kind:
 * false to decline the map. */
static inline bool fast_pairs(const unsigned char **p, struct fast_map *m,
			      unsigned n, struct guess *row)
{
	for (struct guess *g = row + 1; g < row + n; g++) {
		struct name_words w;
		const unsigned char *key = *p;
		unsigned k;

		memcpy(&w, key, sizeof(w));
		if ((w.lo & g->mask.lo) == g->bytes.lo &&
		    (w.hi & g->mask.hi) == g->bytes.hi && g->pair_size) {
			/* key and value type as guessed: one compare */
			m->u[g->value] = guessed_value(key, g);
			m->present |= 1ull << g->value;
			*p = key + g->pair_size;
			continue;
		}
		if (g->pair_size &&
		    ((w.lo ^ g->bytes.lo) & name_mask[g->size].lo) == 0 &&
		    ((w.hi ^ g->bytes.hi) & name_mask[g->size].hi) == 0) {
			/* the key as guessed, its value of another width */
			k = g->value;
			*p = key + g->size;
		} else {
			k = fast_name(p, g, &fast_keys, K_MAX);
		}
		if (k == K_MAX || k == K_TYPE)
			return false;
		m->present |= 1ull << k;
		if (k == K_MEMBER)
			if (!fast_member(p, m))
				return false;
		if (k != K_MEMBER) {
			if (!fast_uint(p, &m->u[k]))
				return false;
			guess_value(g, key);
		}
	}
	return true;
}

static bool fast_has(const struct fast_map *m, enum key k)
{
	return m->present >> k & 1;
}

/* An Rss member by name, as fields_rss_member reads it. */
static bool fast_rss_member(const struct fast_map *m, struct mt_event *ev)
{
	if (!m->member) {
		ev->aux = m->u[K_MEMBER];
		return m->u[K_MEMBER] <= UINT32_MAX;
	}
	for (unsigned i = 0; i < 4; i++) {
		if ((size_t)m->member_len == strlen(rss_members[i]) &&
		    !memcmp(m->member, rss_members[i], m->member_len)) {
			ev->aux = i;
			return true;
		}
	}
	return false;
}

/* The kind's own keys, as fields_kind_values reads them. */
static bool fast_kind_values(const struct fast_map *m, struct mt_event *ev)
{
	switch (ev->kind) {
	case MT_EV_ALIGNED_ALLOC:
		if (fast_has(m, K_ALIGNMENT))
			ev->old_size = m->u[K_ALIGNMENT];
		return true;
	case MT_EV_MMAP:
		ev->flags = fast_has(m, K_PROT) ? m->u[K_PROT] : 0;
		if (fast_has(m, K_FLAGS))
			ev->aux = m->u[K_FLAGS];
		return !fast_has(m, K_FLAGS) || m->u[K_FLAGS] <= UINT32_MAX;
	case MT_EV_FORK:
		if (fast_has(m, K_PPID))
			ev->old_addr = m->u[K_PPID];
		return true;
	case MT_EV_RSS:
		return fast_has(m, K_MEMBER) && fast_rss_member(m, ev);
	case MT_EV_LOST:
		if (fast_has(m, K_COUNT))
			ev->size = m->u[K_COUNT];
		return true;
	case MT_EV_EXEC: /* strings and exit statuses: the general path */
	case MT_EV_MARKER:
	case MT_EV_ALLOCATOR:
	case MT_EV_EXIT:
	case MT_EV_PSS:
		return false;
	default:
		return true;
	}
}

/* The fields every event has, as fields_to_record reads them (the keys
 * up to K_OLD_SIZE start at 0, absent or not). */
static bool fast_to_record(const struct fast_map *m, struct mt_record *rec)
{
	struct mt_event *ev = &rec->ev;

	if (m->kind == MT_EV_NONE || !fast_has(m, K_PID) ||
	    !fast_has(m, K_TIMESTAMP) || m->u[K_PID] > UINT32_MAX ||
	    m->u[K_TID] > UINT32_MAX)
		return false;
	memset(rec, 0, sizeof(*rec));
	ev->kind = m->kind;
	ev->pid = m->u[K_PID];
	ev->tid = m->u[K_TID];
	ev->timestamp = m->u[K_TIMESTAMP];
	ev->addr = m->u[K_ADDR];
	ev->size = m->u[K_SIZE];
	ev->old_addr = m->u[K_OLD_ADDR];
	ev->old_size = m->u[K_OLD_SIZE];
	return fast_kind_values(m, ev);
}

/*
 * The maps of the commonest kinds, in the key order lib/artifact.c writes
 * them (man/mt-format.5): every key and every value's type checked at a
 * fixed place, without a branch per pair; any difference (another order,
 * another key, a value not an unsigned integer) declines the map, and the
 * guessing path above takes it.  What is accepted reads as there.
 */
struct fixed_key {
	struct name_words bytes, mask; /* the key as encoded: a fixstr */
	uint8_t size;
};

/* How an unsigned integer is laid out, by its first byte: the value is
 * the big-endian word at at, shifted right by shift; bad if it is no
 * positive fixint or uint 8..64. */
struct uint_form {
	uint8_t at, shift, size, bad;
};

static struct fixed_key fixed_keys[K_MAX];
static struct uint_form uint_forms[256];

static void fixed_tables(void)
{
	for (unsigned k = 0; k < K_MAX; k++) {
		unsigned char bytes[16] = {0};
		size_t len = strlen(key_names[k]);

		if (len > 14)
			continue;
		bytes[0] = 0xa0 | len;
		memcpy(bytes + 1, key_names[k], len);
		fixed_keys[k].bytes = name_words(bytes, len + 1);
		fixed_keys[k].mask = name_mask[len + 1];
		fixed_keys[k].size = len + 1;
	}
	for (unsigned b = 0; b < 256; b++) {
		struct uint_form f = {0, 56, 1, 1};

		if (b <= 0x7f)
			f.bad = 0;
		else if (b >= 0xcc && b <= 0xcf)
			f = (struct uint_form){1, 64 - (8u << (b - 0xcc)),
					       1 + (1u << (b - 0xcc)), 0};
		uint_forms[b] = f;
	}
}

/* Byte i of a key literal of fewer than 16 bytes, at its place in a
 * little-endian word (i % 8), 0 past its end: constants the compiler
 * folds. */
#define KEY_BYTE(key, i)                                                       \
	((i) < sizeof(key) - 1                                                 \
	     ? (uint64_t)(unsigned char)(key)[(i) < sizeof(key) - 1 ? (i) : 0] \
		   << 8 * ((i) % 8)                                            \
	     : 0)
#define KEY_WORD(key, i)                                                       \
	(KEY_BYTE(key, i) | KEY_BYTE(key, i + 1) | KEY_BYTE(key, i + 2) |      \
	 KEY_BYTE(key, i + 3) | KEY_BYTE(key, i + 4) | KEY_BYTE(key, i + 5) |  \
	 KEY_BYTE(key, i + 6) | KEY_BYTE(key, i + 7))

/* The pair at *p, key (a literal: the fixstr as encoded, its header byte
 * in octal, e.g. "\243pid") and an unsigned value: the value; *bad gets
 * non-zero bits if the pair is anything else. */
#define FIXED_UINT(p, key, bad)                                                \
	fixed_uint(p, KEY_WORD(key, 0), KEY_WORD(key, 8), sizeof(key) - 1,     \
		   false, bad)
/* The same when the key may be known to be there already (shape_learn
 * takes the first key of a tail into the shape). */
#define FIRST_UINT(p, key, known, bad)                                         \
	fixed_uint(p, KEY_WORD(key, 0), KEY_WORD(key, 8), sizeof(key) - 1,     \
		   known, bad)

/* The key at p, as fixed_uint takes it: where its value starts. */
static inline __attribute__((always_inline)) const unsigned char *
fixed_key(const unsigned char *p, uint64_t key_lo, uint64_t key_hi,
	  unsigned size, bool known, uint64_t *bad)
{
	uint64_t word;

	if (known)
		return p + size;
	memcpy(&word, p, sizeof(word));
	if (size < 8)
		word &= (1ull << 8 * size) - 1;
	*bad |= word ^ key_lo;
	if (size > 8) {
		memcpy(&word, p + 8, sizeof(word));
		*bad |= (word & ((1ull << 8 * (size - 8)) - 1)) ^ key_hi;
	}
	return p + size;
}

static inline __attribute__((always_inline)) uint64_t
fixed_uint(const unsigned char **p, uint64_t key_lo, uint64_t key_hi,
	   unsigned size, bool known, uint64_t *bad)
{
	const unsigned char *q =
	    fixed_key(*p, key_lo, key_hi, size, known, bad);
	const struct uint_form *f;
	uint64_t word;

	f = &uint_forms[*q];
	*bad |= f->bad;
	memcpy(&word, q + f->at, sizeof(word)); /* big-endian */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	word = __builtin_bswap64(word);
#endif
	*p = q + f->size;
	return word >> f->shift;
}

/* The pair at *p, key (a literal, as FIXED_UINT takes it) and a str of up
 * to 255 bytes (the path of an Exec, the name of a Marker): into rec,
 * which points at it in the input (fast_took_str keeps a copy); *bad set
 * if the pair is anything else. */
#define FIXED_STR(p, key, rec, bad)                                            \
	fixed_str(p, KEY_WORD(key, 0), KEY_WORD(key, 8), sizeof(key) - 1, rec, \
		  bad)

static inline __attribute__((always_inline)) void
fixed_str(const unsigned char **p, uint64_t key_lo, uint64_t key_hi,
	  unsigned size, struct mt_record *rec, uint64_t *bad)
{
	const unsigned char *q =
				fixed_key(*p, key_lo, key_hi, size, false, bad),
			    *s;
	int len = fast_str(&q, &s);

	if (len < 0) {
		*bad |= 1;
		return;
	}
	rec->str = (const char *)s;
	rec->str_len = len;
	rec->ev.aux = len;
	*p = q;
}

/* An Exit's status: an exit code, a signal or a status, as
 * fields_exit_status reads it. */
static inline __attribute__((always_inline)) uint32_t
fixed_exit_status(const unsigned char **p, bool known, uint64_t *bad)
{
	switch ((*p)[1]) { /* the key's first letter (checked below) */
	case 'e':
		return (FIRST_UINT(p, "\251exit_code", known, bad) & 0xff) << 8;
	case 's':
		if ((*p)[2] == 'i')
			return FIRST_UINT(p, "\246signal", known, bad) & 0x7f;
		return FIRST_UINT(p, "\246status", known, bad);
	default:
		*bad |= 1;
		return 0;
	}
}

/* The Rss member pair at *p, by name: its number, *bad set otherwise. */
static inline __attribute__((always_inline)) uint32_t
fixed_rss_member(const unsigned char **p, bool known, uint64_t *bad)
{
	const unsigned char *q =
	    fixed_key(*p, KEY_WORD("\246member", 0), 0, 7, known, bad);
	unsigned size = 1 + (*q & 0x1f); /* of a fixstr */
	uint64_t name, file, anon, swap, shmem;

	if ((*q & 0xe0) != 0xa0 || size > 8) { /* no member's name */
		*bad |= 1;
		return 0;
	}
	memcpy(&name, q, sizeof(name));
	name &= ~0ull >> (64 - 8 * size);
	/* compared with each (no branch on which it is: they take turns) */
	file = name == KEY_WORD("\244file", 0);
	anon = name == KEY_WORD("\244anon", 0);
	swap = name == KEY_WORD("\244swap", 0);
	shmem = name == KEY_WORD("\245shmem", 0);
	*bad |= !(file | anon | swap | shmem);
	*p = q + size;
	return anon | swap << 1 | shmem * 3; /* as in rss_members */
}

/* Whether the head of a map of the kind ends with addr. */
static inline bool head_has_addr(unsigned kind)
{
	return kind != MT_EV_RSS && kind != MT_EV_FORK && kind != MT_EV_EXIT &&
	       kind != MT_EV_EXEC && kind != MT_EV_MARKER;
}

/* The pairs after a map's head (pid, tid, timestamp and addr if
 * head_has_addr; n pairs in all) into rec, as its kind writes them; *bad
 * gets non-zero bits if they are anything else.  shaped: the head had the
 * shape of its kind, which holds the count of pairs and the first key of
 * the tail too (and no strings). */
static inline __attribute__((always_inline)) void
fixed_tail(const unsigned char **p, unsigned n, unsigned kind,
	   struct mt_record *rec, uint64_t *bad, bool shaped)
{
	struct mt_event *ev = &rec->ev;
	unsigned pairs = 0; /* in a map of the kind */

	switch (kind) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_MUNMAP:
		pairs = 6;
		ev->size = FIRST_UINT(p, "\244size", shaped, bad);
		break;
	case MT_EV_FREE:
		pairs = 5;
		break;
	case MT_EV_REALLOC:
		pairs = 7;
		ev->size = FIRST_UINT(p, "\244size", shaped, bad);
		ev->old_addr = FIXED_UINT(p, "\250old_addr", bad);
		break;
	case MT_EV_ALIGNED_ALLOC:
		pairs = 7;
		ev->size = FIRST_UINT(p, "\244size", shaped, bad);
		ev->old_size = FIXED_UINT(p, "\251alignment", bad);
		break;
	case MT_EV_MMAP: {
		uint64_t flags;

		pairs = 8;
		ev->size = FIRST_UINT(p, "\244size", shaped, bad);
		/* prot cut to the 16 bits of flags, as the other paths do */
		ev->flags = FIXED_UINT(p, "\244prot", bad);
		flags = FIXED_UINT(p, "\245flags", bad);
		*bad |= flags >> 32;
		ev->aux = flags;
		break;
	}
	case MT_EV_MREMAP:
		pairs = 8;
		ev->size = FIRST_UINT(p, "\244size", shaped, bad);
		ev->old_addr = FIXED_UINT(p, "\250old_addr", bad);
		ev->old_size = FIXED_UINT(p, "\250old_size", bad);
		break;
	case MT_EV_BRK:
		pairs = 7;
		ev->old_addr = FIRST_UINT(p, "\250old_addr", shaped, bad);
		ev->size = FIXED_UINT(p, "\244size", bad);
		break;
	case MT_EV_RSS:
		pairs = 6;
		ev->aux = fixed_rss_member(p, shaped, bad);
		ev->size = FIXED_UINT(p, "\244size", bad);
		break;
	case MT_EV_FORK:
		pairs = 5;
		ev->old_addr = FIRST_UINT(p, "\244ppid", shaped, bad);
		break;
	case MT_EV_EXIT:
		pairs = 5;
		ev->aux = fixed_exit_status(p, shaped, bad);
		break;
	case MT_EV_EXEC:
		pairs = 5;
		*bad |= shaped;
		if (!shaped)
			FIXED_STR(p, "\244path", rec, bad);
		break;
	case MT_EV_MARKER:
		pairs = 5;
		*bad |= shaped;
		if (!shaped)
			FIXED_STR(p, "\244name", rec, bad);
		break;
	default:
		*bad |= 1;
		break;
	}
	if (!shaped) /* else the shape's template held the count */
		*bad |= n ^ pairs;
}

/* The map at p (after its type, n pairs in all) into rec if it has the
 * shape its kind is written in; *end: where it ends. */
static inline __attribute__((always_inline)) bool
fixed_event(const unsigned char *p, unsigned n, unsigned kind,
	    struct mt_record *rec, const unsigned char **end)
{
	struct mt_event *ev = &rec->ev;
	uint64_t bad = 0, pid, tid, ts;

	memset(rec, 0, sizeof(*rec));
	pid = FIXED_UINT(&p, "\243pid", &bad);
	tid = FIXED_UINT(&p, "\243tid", &bad);
	ts = FIXED_UINT(&p, "\251timestamp", &bad);
	if (head_has_addr(kind))
		ev->addr = FIXED_UINT(&p, "\244addr", &bad);
	fixed_tail(&p, n, kind, rec, &bad, false);
	if (bad || pid > UINT32_MAX || tid > UINT32_MAX)
		return false;
	ev->kind = kind;
	ev->pid = pid;
	ev->tid = tid;
	ev->timestamp = ts;
	*end = p;
	return true;
}

/* The slot of the shape of the map at p: a hash of its kind's header and
 * first three letters (every kind has three); the multiplier puts the
 * twelve kinds that have shapes in slots of their own. */
static inline struct shape *shape_slot(struct guesses *gs,
				       const unsigned char *p)
{
	uint32_t word;

	memcpy(&word, p + 6, sizeof(word)); /* after the map and type key */
	return &gs->shape[(word * 0xbe3edc0bu) >> 28];
}

/* The big-endian value of field i of the head at p. */
static inline uint64_t shape_value(const unsigned char *p,
				   const struct shape *s, unsigned i)
{
	uint64_t word;

	memcpy(&word, p + s->at[i], sizeof(word));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	word = __builtin_bswap64(word);
#endif
	return word >> s->shift[i];
}

/* Whether the SHAPE_BYTES at p match s. */
static inline bool shape_matches(const unsigned char *p, const struct shape *s)
{
	bytes16 diff = {0}, chunk;
	uint64_t half[2];

#pragma GCC unroll 8
	for (unsigned i = 0; i < SHAPE_CHUNKS; i++) {
		memcpy(&chunk, p + 16 * i, sizeof(chunk));
		diff |= (chunk ^ s->bytes[i]) & s->mask[i];
	}
	memcpy(half, &diff, sizeof(half));
	return !(half[0] | half[1]);
}

/* The event map at p into rec if its head has the shape of the last map
 * of its kind and its tail reads as fixed_event reads it; *size: its
 * length. */
static inline __attribute__((always_inline)) bool
shape_event(const unsigned char *p, struct mt_record *rec, size_t *size,
	    struct guesses *gs)
{
	const struct shape *s = shape_slot(gs, p);
	struct mt_event *ev = &rec->ev;
	const unsigned char *q;
	uint64_t bad = 0;

	if (!shape_matches(p, s))
		return false;
	memset(rec, 0, sizeof(*rec));
	ev->kind = s->kind;
	ev->pid = shape_value(p, s, 0); /* the shape holds no wider pid */
	ev->tid = shape_value(p, s, 1);
	ev->timestamp = shape_value(p, s, 2);
	ev->addr = shape_value(p, s, 3);
	q = p + s->size;
	fixed_tail(&q, *p & 0x0f, s->kind, rec, &bad, true);
	*size = q - p;
	return !bad;
}

/* A value's type byte at t: the shape of field i, whose value has width
 * bytes (0: a positive fixint, the type byte itself). */
static void shape_field(struct shape *s, unsigned char *mask, unsigned i,
			size_t t, unsigned width)
{
	if (!width) {
		mask[t] = 0x80;
		s->at[i] = t;
		s->shift[i] = 56;
		return;
	}
	memset(mask + t + 1, 0, width);
	s->at[i] = t + 1;
	s->shift[i] = 64 - 8 * width;
}

/* The shape of the map at map, which fixed_event took (its pairs start
 * at pairs): none if its head is too long, or its pid or tid could be
 * wider than 32 bits. */
static void shape_learn(struct guesses *gs, const unsigned char *map,
			const unsigned char *pairs, unsigned kind)
{
	static const enum key fields[SHAPE_FIELDS] = {K_PID, K_TID, K_TIMESTAMP,
						      K_ADDR};
	unsigned char bytes[SHAPE_BYTES], mask[SHAPE_BYTES];
	unsigned nfields = head_has_addr(kind) ? SHAPE_FIELDS : 3;
	struct shape s = {.kind = kind};
	size_t at = pairs - map;

	/* shaped_took copies no strings and counts no lost events */
	if (kind == MT_EV_EXEC || kind == MT_EV_MARKER || kind == MT_EV_LOST)
		return;
	memset(mask, 0xff, sizeof(mask));
	for (unsigned i = 0; i < nfields; i++) {
		size_t t = at + fixed_keys[fields[i]].size;
		unsigned width = map[t] <= 0x7f ? 0 : 1u << (map[t] - 0xcc);

		at = t + 1 + width;
		if (at > SHAPE_BYTES || (i < 2 && width > 4))
			return;
		shape_field(&s, mask, i, t, width);
	}
	if (nfields < SHAPE_FIELDS) {
		/* no addr: 0, the top bit of byte 7 (the first letter of
		 * the kind's name, or its str8 length: clear, and matched
		 * by the template) */
		s.at[3] = 7;
		s.shift[3] = 63;
	}
	s.size = at;
	/* the key after the head too (a fixstr: fixed_event found the
	 * kind's key there), which fixed_tail then need not check */
	if ((map[0] & 0x0f) > 1 + nfields) {
		at += 1 + (map[at] & 0x1f);
		if (at > SHAPE_BYTES)
			return;
	}
	memset(mask + at, 0, sizeof(mask) - at);
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = i < at ? map[i] & mask[i] : 0;
	memcpy(s.bytes, bytes, sizeof(bytes));
	memcpy(s.mask, mask, sizeof(mask));
	*shape_slot(gs, map) = s;
}

/* mp_fast_event but for the shape of the head: the map read pair by pair
 * (and the shape of its kind learnt from it). */
static inline __attribute__((always_inline)) bool
unshaped_event(const unsigned char *p, struct mt_record *rec, size_t *size,
	       struct guesses *gs)
{
	const unsigned char *start = p, *pairs;
	struct fast_map m;
	unsigned n;

	if (*p < 0x81 || *p > 0x8f)
		return false;
	n = *p++ & 0x0f;
	if (!fast_type(&p, &m, gs))
		return false;
	pairs = p;
	if (fixed_event(p, n, m.kind, rec, &p)) {
		shape_learn(gs, start, pairs, m.kind);
		*size = p - start;
		return true;
	}
	memset(m.u, 0, (K_OLD_SIZE + 1) * sizeof(*m.u));
	m.member = NULL;
	m.member_len = 0;
	if (!fast_pairs(&p, &m, n, gs->key[m.kind]))
		return false;
	if (!fast_to_record(&m, rec))
		return false;
	*size = p - start;
	return true;
}

/* The event map at p into rec, *size bytes long: true, or false to leave
 * it to the general path.  FAST_SLACK bytes at p must be readable. */
static inline __attribute__((always_inline)) bool
mp_fast_event(const unsigned char *p, struct mt_record *rec, size_t *size,
	      struct guesses *gs)
{
	return shape_event(p, rec, size, gs) ||
	       unshaped_event(p, rec, size, gs);
}

#ifdef MT_FUZZ_DIFF
/* Fuzzing: whatever the fast path accepts, the general path reads alike. */
static void mp_check_fast_event(struct mt_input *in, size_t size,
				const struct mt_record *fast)
{
	struct fields f;
	struct mt_record slow;
	enum object_role role;
	unsigned kind = MT_EV_NONE;
	size_t slow_size = 0;

	if (mp_flat_fields(cur(in), avail(in), &f, &slow_size) != 1 ||
	    slow_size != size || fields_role(in, 0, &f, &role, &kind) ||
	    role != OBJ_EVENT || fields_to_record(in, 0, &f, kind, &slow) ||
	    memcmp(&slow.ev, &fast->ev, sizeof(slow.ev)) ||
	    slow.str_len != fast->str_len || !slow.str != !fast->str ||
	    (slow.str && memcmp(slow.str, fast->str, slow.str_len)))
		__builtin_trap();
}
#endif

/* The map at the reader's position read: past it, and counted. */
static void fast_consume(struct mt_input *in, const struct mt_record *rec,
			 size_t size)
{
	consume(in, size);
	in->maps_seen++;
	if (rec->ev.kind == MT_EV_LOST)
		in->map_lost += rec->ev.size;
}

/* shape_event decoded the map at the reader's position into rec: as
 * fast_took_str, but that it holds no string, and is no Lost (no shape is
 * learnt of one): no count of lost events to add. */
static void shaped_took(struct mt_input *in, const struct mt_record *rec,
			size_t size)
{
#ifdef MT_FUZZ_DIFF
	mp_check_fast_event(in, size, rec);
#else
	(void)rec;
#endif
	consume(in, size);
	in->maps_seen++;
}

/* The map at the reader's position decoded into rec (its string, if any,
 * still in the input): past it, counted, the string copied as the general
 * path copies it.  1, or -1 if out of memory. */
static int fast_took_str(struct mt_input *in, struct mt_record *rec,
			 size_t size)
{
#ifdef MT_FUZZ_DIFF
	mp_check_fast_event(in, size, rec);
#endif
	if (rec->str) {
		if (!keep_str(in, rec->str, rec->str_len))
			return fail(in, offset_now(in), "out of memory");
		rec->str = in->str;
	}
	fast_consume(in, rec, size);
	return 1;
}

/* At the end of the input, FAST_SLACK bytes of zeros after it in the
 * buffer, so that the fast path can read as far as it may (maps that run
 * past the end are declined by size).  A mapped file cannot be padded:
 * its last maps go the general path. */
static bool pad_tail(struct mt_input *in)
{
	if (in->mapped || !in->eof || !grow(in, in->end + FAST_SLACK))
		return false;
	memset(in->buf + in->end, 0, FAST_SLACK);
	return true;
}

/* The next object if it is an event map the fast path takes: 1, 0 to
 * leave it to the general path, -1 on a read error. */
static int mp_fast_next(struct mt_input *in, struct mt_record *rec)
{
	size_t size;

	if (avail(in) < FAST_SLACK && !in->eof && !fill(in, FAST_SLACK) &&
	    in->state < 0)
		return -1;
	if (avail(in) < FAST_SLACK && !pad_tail(in))
		return 0;
	if (!mp_fast_event(cur(in), rec, &size, in->guesses) ||
	    size > avail(in))
		return 0;
	return fast_took_str(in, rec, size);
}

/* ---- JSON Lines ------------------------------------------------------ */

static bool js_str_at(const void *arr, size_t i, const char **s, size_t *len)
{
	json_t *e = json_array_get((json_t *)arr, i);

	if (!json_is_string(e))
		return false;
	*s = json_string_value(e);
	*len = json_string_length(e);
	return true;
}

static void js_value(json_t *j, struct value *v)
{
	memset(v, 0, sizeof(*v));
	switch (json_typeof(j)) {
	case JSON_INTEGER:
		if (json_integer_value(j) < 0) {
			v->type = V_NEGATIVE;
		} else {
			v->type = V_UINT;
			v->u = json_integer_value(j);
		}
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		v->type = V_BOOL;
		v->b = json_is_true(j);
		break;
	case JSON_STRING:
		v->type = V_STR;
		v->s = json_string_value(j);
		v->len = json_string_length(j);
		break;
	case JSON_ARRAY:
		v->type = V_ARRAY;
		v->arr = j;
		v->n = json_array_size(j);
		v->str_at = js_str_at;
		break;
	default:
		v->type = V_OTHER;
		break;
	}
}

/* The JSON object of the next non-empty line; *root must be released by
 * the caller with json_decref (the fields point into it). */
static int js_next_fields(struct mt_input *in, struct fields *f, uint64_t *off,
			  json_t **root)
{
	const unsigned char *nl;
	size_t len;
	json_error_t jerr;
	const char *key;
	json_t *jv;

	*root = NULL;
	for (;;) {
		size_t scanned = 0;

		*off = offset_now(in);
		while (!(nl = memchr(cur(in) + scanned, '\n',
				     avail(in) - scanned))) {
			scanned = avail(in);
			if (scanned >= MAX_OBJECT)
				return fail(in, *off,
					    "line %" PRIu64
					    ": longer than %u bytes",
					    in->line + 1, MAX_OBJECT);
			if (!fill(in, scanned + 1))
				break;
		}
		if (in->state < 0)
			return -1;
		len = nl ? (size_t)(nl - cur(in)) : avail(in);
		if (!nl && len == 0)
			return 0;
		in->line++;
		if (len > 0)
			break;
		consume(in, 1); /* an empty line */
	}
	*root = json_loadb((const char *)cur(in), len, JSON_ALLOW_NUL, &jerr);
	if (!*root)
		return fail(in, *off, "line %" PRIu64 ": invalid JSON: %s",
			    in->line, jerr.text);
	consume(in, nl ? len + 1 : len);
	if (!json_is_object(*root))
		return fail(in, *off, "line %" PRIu64 ": expected an object",
			    in->line);
	f->present = 0;
	json_object_foreach(*root, key, jv)
	{
		enum key k = key_from_name(key, strlen(key));

		if (k != K_MAX)
			js_value(jv, set(f, k));
	}
	return 1;
}

/* ---- detection and the object formats -------------------------------- */

static int next_fields(struct mt_input *in, struct fields *f, uint64_t *off,
		       json_t **root)
{
	*root = NULL;
	if (in->fmt == MT_FMT_JSONL)
		return js_next_fields(in, f, off, root);
	return mp_next_fields(in, f, off);
}

static int objects_next(struct mt_input *in, struct mt_record *rec)
{
	struct fields f;
	uint64_t off;
	json_t *root;
	int ret;

	if (in->have_first) {
		*rec = in->first;
		in->have_first = false;
		return 1;
	}
	ret = next_fields(in, &f, &off, &root);
	if (ret == 0) {
		if (in->fmt == MT_FMT_MEMTRACK) {
			in->meta.events = in->maps_seen;
			in->meta.lost = in->map_lost;
			in->state = 1;
			return 0;
		}
		return fail(in, off,
			    "truncated: no trailer after %" PRIu64 " events",
			    in->maps_seen);
	}
	if (ret > 0) {
		ret = object_next(in, off, &f, rec);
		json_decref(root);
	}
	if (ret == 0) {
		if (fill(in, 1))
			return fail(in, offset_now(in),
				    "data after the trailer");
		if (in->state < 0)
			return -1;
		in->meta.has_trailer = true;
		in->state = 1;
	}
	return ret;
}

/* A MessagePack stream: an mt artifact starts with its Header map, a
 * memtrack one with its first event. */
static int mp_open(struct mt_input *in)
{
	struct fields f;
	uint64_t off;
	enum object_role role;
	unsigned kind = MT_EV_NONE;
	int ret;

	in->guesses = guesses_new();
	if (!in->guesses || !grow(in, MP_BUF))
		return fail(in, 0, "out of memory");
	ret = mp_next_fields(in, &f, &off);
	if (ret <= 0)
		return -1;
	if (fields_role(in, off, &f, &role, &kind))
		return -1;
	if (role == OBJ_HEADER) {
		if (!str_is(val(&f, K_FORMAT), "mt"))
			return fail(in, off,
				    "Header: \"format\" is not \"mt\"");
		in->fmt = MT_FMT_ARTIFACT;
		return fields_to_header(in, off, &f);
	}
	if (role == OBJ_TRAILER)
		return fail(in, off, "stream starts with a Trailer");
	in->fmt = MT_FMT_MEMTRACK;
	if (fields_to_record(in, off, &f, kind, &in->first))
		return -1;
	/* the record's string lives in in->str until the first next() */
	in->have_first = true;
	in->maps_seen++;
	if (kind == MT_EV_LOST)
		in->map_lost += in->first.ev.size;
	return 0;
}

/* '{': JSON Lines if the first line is an mt Header, mt-reconstruct's
 * timelines if the document says so (it may span many lines). */
static int js_open(struct mt_input *in)
{
	const unsigned char *nl;
	json_t *first;
	json_error_t jerr;
	json_t *format;

	fill(in, in->cap);
	if (in->state < 0)
		return -1;
	nl = memchr(cur(in), '\n', avail(in));
	first = json_loadb((const char *)cur(in),
			   nl ? (size_t)(nl - cur(in)) : avail(in), 0, &jerr);
	format = json_object_get(first, "format");
	if (json_is_string(format) &&
	    !strcmp(json_string_value(format), "mt-timelines")) {
		json_decref(first);
		in->fmt = MT_FMT_TIMELINES;
		return 0;
	}
	if (!first && memmem(cur(in), avail(in), "\"mt-timelines\"", 14)) {
		in->fmt = MT_FMT_TIMELINES;
		return 0;
	}
	json_decref(first);
	in->fmt = MT_FMT_JSONL;
	{
		struct fields f;
		uint64_t off;
		json_t *root;
		int ret = js_next_fields(in, &f, &off, &root);

		if (ret > 0 && !str_is(val(&f, K_TYPE), "Header"))
			ret = fail(in, off, "line 1: not an mt Header");
		else if (ret > 0 && !str_is(val(&f, K_FORMAT), "mt"))
			ret = fail(in, off, "Header: \"format\" is not \"mt\"");
		else if (ret > 0)
			ret = fields_to_header(in, off, &f) ? -1 : 1;
		json_decref(root);
		return ret > 0 ? 0 : -1;
	}
}

static int detect(struct mt_input *in)
{
	unsigned char c;

	if (!fill(in, 1)) {
		if (in->state < 0)
			return -1;
		return fail(in, 0, "empty input");
	}
	c = cur(in)[0];
	if (c == (unsigned char)MT_RAW_MAGIC[0]) {
		in->fmt = MT_FMT_RAW;
		return raw_open(in);
	}
	if ((c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf)
		return mp_open(in);
	if (c == '{')
		return js_open(in);
	return fail(in, 0,
		    "unknown format (first byte 0x%02x): not an mt raw stream, "
		    "artifact, JSON Lines or memtrack artifact",
		    c);
}

/* ---- a mapped file that shrinks ---------------------------------------- */

/*
 * A mapped file cut shorter while it is read (another process truncating
 * it) makes the next touch of a page past its new end raise SIGBUS.  That
 * must be an error naming the file and the byte, like any other bad
 * input, not a crash: the handler finds the mapping the address is in,
 * says so with write(2) (all it may call) and exits 2.
 */
#define MAPPED_MAX 8

static struct {
	const unsigned char *base;
	size_t len;
	const char *name;
} mapped_files[MAPPED_MAX];

static size_t put_text(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return n;
}

static size_t put_u64(char *p, uint64_t v)
{
	unsigned n = mt_decimal_len(v);

	mt_put_decimal(p, v, n);
	return n;
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	const unsigned char *at = si->si_addr;
	char msg[512];
	size_t n = 0;

	(void)uctx;
	for (int i = 0; i < MAPPED_MAX; i++) {
		if (!mapped_files[i].base || at < mapped_files[i].base ||
		    at >= mapped_files[i].base + mapped_files[i].len)
			continue;
		n += put_text(msg + n, program_invocation_short_name);
		n += put_text(msg + n, ": ");
		if (strlen(mapped_files[i].name) < 256)
			n += put_text(msg + n, mapped_files[i].name);
		n += put_text(msg + n, ": byte ");
		n += put_u64(msg + n, (uint64_t)(at - mapped_files[i].base));
		n += put_text(msg + n, ": the file was cut shorter while "
				       "being read\n");
		if (write(STDERR_FILENO, msg, n) < 0)
			_exit(2);
		_exit(2);
	}
	/* not ours: the default action, as if no handler were there */
	signal(sig, SIG_DFL);
	raise(sig);
}

static bool guard_mapping(const void *base, size_t len, const char *name)
{
	static bool installed;
	struct sigaction sa = {.sa_sigaction = on_sigbus,
			       .sa_flags = SA_SIGINFO};

	if (!installed) {
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL))
			return false;
		installed = true;
	}
	for (int i = 0; i < MAPPED_MAX; i++) {
		if (!mapped_files[i].base) {
			mapped_files[i].name = name;
			mapped_files[i].len = len;
			mapped_files[i].base = base;
			return true;
		}
	}
	return false; /* too many at once: read this one instead */
}

static void unguard_mapping(const void *base)
{
	for (int i = 0; i < MAPPED_MAX; i++)
		if (mapped_files[i].base == base)
			mapped_files[i].base = NULL;
}

/* ---- API ------------------------------------------------------------- */

/* A regular file read from its start is mapped whole: its bytes are not
 * copied into the buffer, and the buffer never moves.  Anything else
 * (pipes, terminals, a stream already read into) is read with fread. */
static void map_file(struct mt_input *in)
{
	int fd = fileno(in->f);
	struct stat st;
	void *m;

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX ||
	    ftello(in->f) != 0)
		return;
	m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return;
	if (!guard_mapping(m, st.st_size, in->name)) {
		munmap(m, st.st_size);
		return;
	}
	madvise(m, st.st_size, MADV_SEQUENTIAL);
	free(in->buf);
	in->buf = m;
	in->cap = in->end = st.st_size;
	in->eof = true;
	in->mapped = true;
}

static struct mt_input *input_new(FILE *f, const char *name)
{
	struct mt_input *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->f = f;
	in->name = strdup(name);
	in->cap = BUF_START;
	in->buf = malloc(in->cap);
	in->zone_ready = msgpack_zone_init(&in->zone, 8192);
	if (!in->name || !in->buf || !in->zone_ready) {
		mt_input_close(in);
		return NULL;
	}
	map_file(in);
	return in;
}

struct mt_input *mt_input_fopen(FILE *f, const char *name, char *err,
				size_t errlen)
{
	struct mt_input *in = input_new(f, name ? name : "<input>");

	if (!in) {
		snprintf(err, errlen, "%s: out of memory", name);
		fclose(f);
		return NULL;
	}
	if (detect(in)) {
		snprintf(err, errlen, "%s", in->err);
		mt_input_close(in);
		return NULL;
	}
	if (in->fmt == MT_FMT_TIMELINES)
		fail(in, 0,
		     "mt-reconstruct timelines are not an event stream "
		     "(mt-report reads them)");
	return in;
}

struct mt_input *mt_input_open(const char *path, char *err, size_t errlen)
{
	FILE *f;

	if (!path || !strcmp(path, "-"))
		return mt_input_fopen(stdin, "<stdin>", err, errlen);
	f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	return mt_input_fopen(f, path, err, errlen);
}

enum mt_format mt_input_format(const struct mt_input *in)
{
	return in->fmt;
}

const char *mt_format_name(enum mt_format fmt)
{
	switch (fmt) {
	case MT_FMT_RAW:
		return "raw";
	case MT_FMT_ARTIFACT:
		return "artifact";
	case MT_FMT_JSONL:
		return "jsonl";
	case MT_FMT_MEMTRACK:
		return "memtrack";
	case MT_FMT_TIMELINES:
		return "timelines";
	default:
		return "unknown";
	}
}

const struct mt_meta *mt_input_meta(const struct mt_input *in)
{
	return &in->meta;
}

/* A mapped file's pages count in the reader's memory once touched: let
 * go of those read, so that memory stays a few MiB whatever the length
 * of the trace (they stay in the page cache; a later touch reads them
 * again). */
static void drop_read(struct mt_input *in)
{
	size_t upto = in->start & ~(DROP_STEP - 1);

	madvise(in->buf + in->dropped, upto - in->dropped, MADV_DONTNEED);
	in->dropped = upto;
}

/* Where the fast path may run with no other check: while start is below
 * fast_until, the stream is an artifact or memtrack stream in good state,
 * FAST_SLACK bytes are buffered and no mapped pages are due to be let go.
 * 0 sends every record the long way (next_record). */
static void fast_window(struct mt_input *in)
{
	size_t until = 0;

	if (!in->state && !in->have_first &&
	    (in->fmt == MT_FMT_ARTIFACT || in->fmt == MT_FMT_MEMTRACK) &&
	    in->end >= FAST_SLACK) {
		until = in->end - FAST_SLACK + 1;
		if (in->mapped && in->dropped + DROP_STEP < until)
			until = in->dropped + DROP_STEP;
	}
	in->fast_until = until;
}

static int next_record(struct mt_input *in, struct mt_record *rec)
{
	if (in->state)
		return in->state > 0 ? 0 : -1;
	if (in->mapped && in->start >= in->dropped + DROP_STEP)
		drop_read(in);
	if (in->fmt == MT_FMT_RAW)
		return raw_next(in, rec);
	if (in->fmt != MT_FMT_JSONL && !in->have_first) {
		int ret = mp_fast_next(in, rec);

		if (ret)
			return ret;
	}
	return objects_next(in, rec);
}

/* mt_input_next when the map is not of a known shape. */
static __attribute__((noinline)) int next_unshaped(struct mt_input *in,
						   struct mt_record *rec)
{
	size_t size;
	int ret;

	if (in->start < in->fast_until &&
	    unshaped_event(cur(in), rec, &size, in->guesses))
		return fast_took_str(in, rec, size);
	ret = next_record(in, rec);
	fast_window(in);
	return ret;
}

/* Nearly every record: a map of a known shape, with no call (so no
 * registers to save). */
int mt_input_next(struct mt_input *in, struct mt_record *rec)
{
	size_t size;

	if (in->start < in->fast_until &&
	    shape_event(cur(in), rec, &size, in->guesses)) {
		shaped_took(in, rec, size);
		return 1;
	}
	return next_unshaped(in, rec);
}

const char *mt_input_error(const struct mt_input *in)
{
	return in->err;
}

uint64_t mt_input_offset(const struct mt_input *in)
{
	return offset_now(in);
}

void mt_input_close(struct mt_input *in)
{
	if (!in)
		return;
	if (in->f && in->f != stdin)
		fclose(in->f);
	if (in->zone_ready)
		msgpack_zone_destroy(&in->zone);
	mt_meta_free(&in->meta);
	free(in->str);
	free(in->guesses);
	if (in->mapped) {
		unguard_mapping(in->buf);
		munmap(in->buf, in->cap);
	} else
		free(in->buf);
	free(in->name);
	free(in);
}
