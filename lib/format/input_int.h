/* SPDX-License-Identifier: MIT */
/*
 * input_int.h - what the files of the one reader (mt_input.h) share, and
 * nothing outside them includes: the reader's state, its byte buffer, its
 * error, and the fields of a map, which the artifact, JSON Lines and
 * memtrack readers fill and input_fields.c turns into records.
 *
 *   input.c          the API: open, format detection, next, close
 *   input_buffer.c   the byte buffer: big reads, or a mapped file and the
 *                    SIGBUS guard that makes its shrinking an error
 *   input_raw.c      mt-trace's raw stream
 *   input_fields.c   the keys of maps; fields to records, header, trailer
 *   input_msgpack.c  MessagePack maps, the general path (msgpack-c)
 *   input_fast.c     MessagePack event maps: the fast layer in front of it
 *   input_jsonl.c    JSON Lines (jansson)
 */
#ifndef MT_INPUT_INT_H
#define MT_INPUT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <msgpack.h>

#include "mt_input.h"
#include "mt_zstd.h"
#include "rawpack.h"

/* DROP_STEP is a size_t: it masks 64-bit offsets, and a 32-bit mask cut
 * the offsets of inputs over 4 GiB (their pages were never let go). */
#define BUF_START   (64 * 1024)	      /* grows for long headers and objects */
#define RAW_BUF	    (256u * 1024)     /* the raw stream: big reads */
#define DROP_STEP   ((size_t)4 << 20) /* mapped input: let go at a time */
#define MP_BUF	    (1u << 20)	      /* MessagePack: big reads, rare moves */
#define MAX_HEADER  (16u << 20)	      /* raw stream header incl. strings */
#define MAX_OBJECT  (4u << 20)	      /* one MessagePack map or JSON line */
#define MAX_PAYLOAD (1u << 20)	      /* an EXEC path or MARKER name */
/* compressed input: room for two of mt-encode's frames, decompressed */
#define ZBUF_BYTES ((size_t)MT_ZSTD_FRAME_BYTES * 2)
/* the page sizes a stream header may give (a power of two between) */
#define MT_PAGE_SIZE_MIN 4096u
#define MT_PAGE_SIZE_MAX (1u << 30)
/* a packed raw batch: slots unpacked at a time (7 KiB, stays in cache) */
#define PK_CHUNK 128u
/* bytes the fast layer may read past a map's start (input_fast.c) */
#define FAST_SLACK 8192u

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
	bool mapped; /* buf is the whole file, mapped: nothing to read */
	struct mt_zreader *zstd; /* compressed input: buf holds what it gives,
				  * buf_off counts decompressed bytes */
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
	uint64_t stacks_seen; /* STACK records (ids count from 1) */
	/* a packed batch: its body stays in the buffer, at start, until the
	 * batch is read (no fill until then); its slots are unpacked
	 * PK_CHUNK at a time into pk_slots */
	bool packed;
	uint32_t pk_bytes;
	uint32_t pk_ready; /* unpacked slots not taken yet, from pk_next */
	const struct mt_event *pk_next;
	struct mt_rawunpack pk;
	struct mt_event pk_slots[PK_CHUNK];
	uint32_t pk_offs[PK_CHUNK]; /* their records' offsets in the body */
	/* records raw_plain_next may take without a check but their kind's
	 * (raw_next sets it after every record it reads) */
	uint32_t raw_plain_left;
	uint32_t raw_plain_kinds; /* bit k: kind k is a record on its own */
	/* a Stack map's frames, a CodeFile map's build-id */
	uint64_t *frames;
	size_t frames_cap;
	uint8_t build_id[255];

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

/* ---- errors and the buffer (input_buffer.c) ------------------------- */

/* Sets the reader's error, "NAME: byte OFF: what", and its failed state;
 * returns -1. */
__attribute__((format(printf, 3, 4))) int
input_fail(struct mt_input *in, uint64_t off, const char *fmt, ...);

static inline size_t avail(const struct mt_input *in)
{
	return in->end - in->start;
}

static inline uint64_t offset_now(const struct mt_input *in)
{
	return in->buf_off + in->start;
}

static inline void consume(struct mt_input *in, size_t n)
{
	in->start += n;
}

static inline const unsigned char *cur(const struct mt_input *in)
{
	return in->buf + in->start;
}

/* Room for at least size bytes in the buffer. */
bool input_grow(struct mt_input *in, size_t size);

/* If the input starts with a zstd frame (or a skippable one), reads the
 * rest through mt_zreader: the buffer then holds decompressed bytes from
 * offset 0.  0, or -1 with the error set. */
int input_start_zstd(struct mt_input *in);

/* fill when the bytes are not buffered yet: reads. */
bool input_refill(struct mt_input *in, size_t need);

/* Makes at least need bytes available unless the input ends first.
 * Returns false at end of input or on a read error (in->err set then). */
static inline bool fill(struct mt_input *in, size_t need)
{
	if (avail(in) >= need || in->mapped)
		return avail(in) >= need;
	return input_refill(in, need);
}

/* in->str holds a copy of the len bytes at s, NUL-terminated. */
bool input_str_room(struct mt_input *in, size_t len);
bool input_keep_str(struct mt_input *in, const void *s, size_t len);

/* A regular file read from its start is mapped whole (and guarded). */
void input_map_file(struct mt_input *in);
void input_unmap_file(struct mt_input *in);
/* Lets go of the mapped pages read so far, DROP_STEP bytes at a time. */
void input_drop_read(struct mt_input *in);

/* ---- the raw stream (input_raw.c) ------------------------------------ */

int raw_open(struct mt_input *in);
int raw_next(struct mt_input *in, struct mt_record *rec);

_Static_assert(MT_EV_KIND_MAX <= 32, "raw_plain_kinds has a bit per kind");

/* Where the next record of the batch is: the buffer (a fixed batch) or
 * the unpacked slots (a packed one: at least one must be ready). */
static inline const unsigned char *raw_slot_at(const struct mt_input *in)
{
	return in->packed ? (const unsigned char *)in->pk_next : cur(in);
}

/* The slot at raw_slot_at taken. */
static inline void raw_slot_taken(struct mt_input *in)
{
	if (in->packed) {
		in->pk_next++;
		in->pk_ready--;
	} else {
		consume(in, in->event_size);
	}
	in->batch_left--;
}

/* A raw record's fixed part, at raw_slot_at, taken into rec: nothing of
 * its own after it yet (no string, no stack). */
static inline void raw_take_record(struct mt_input *in, struct mt_record *rec)
{
	memcpy(&rec->ev, raw_slot_at(in), sizeof(rec->ev));
	raw_slot_taken(in);
	rec->str = NULL;
	rec->str_len = 0;
	rec->stack = 0;
	rec->frames = NULL;
	in->last_ts = rec->ev.timestamp;
}

/*
 * The raw stream's common case, in mt_input_next without a call: a record
 * of a kind that stands alone (no payload after it, no StackRef before it)
 * in a batch and a buffer (or unpacked chunk) that hold it, as raw_next
 * would read it.  false: raw_next must (a payload, a StackRef, a batch
 * boundary, a refill, an unpacking, or an error before).
 */
static inline bool raw_plain_next(struct mt_input *in, struct mt_record *rec)
{
	const unsigned char *p;
	uint16_t kind;

	if (!in->raw_plain_left)
		return false;
	p = raw_slot_at(in);
	memcpy(&kind, p + offsetof(struct mt_event, kind), sizeof(kind));
	if (kind >= 32 || !(in->raw_plain_kinds >> kind & 1))
		return false;
	raw_take_record(in, rec);
	in->raw_plain_left--;
	return true;
}

/* ---- fields of a map (input_fields.c) -------------------------------- */

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
	K_STACK,
	K_FRAMES,
	K_TRUNCATED,
	K_FILE,
	K_BUILD_ID,
	K_OFFSET,
	K_CODE,
	K_FIRST_LINE,
	K_PYTHON,
	K_QUALNAME,
	K_LINETABLE,
	K_TRACER,
	K_ARGV,
	K_ARGV_BYTES,
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
	K_STACKS_TRACKED,
	K_ALLOCATORS_RECORDER,
	/* trailer */
	K_COMPLETE,
	K_END_MONOTONIC,
	K_EVENTS,
	K_LOST_EVENTS,
	K_BATCHES,
	K_ERROR,
	K_MAX
};

extern const char *const key_names[K_MAX];

enum value_type { V_NONE, V_UINT, V_NEGATIVE, V_BOOL, V_STR, V_ARRAY, V_OTHER };

/* One value of a map, whatever the encoding.  Arrays are only read as
 * arrays of strings (the header's command), through str_at, or of pairs
 * of unsigned integers (a stack's frames), through pair_at. */
struct value {
	enum value_type type;
	uint64_t u;
	bool b;
	const char *s;
	size_t len;
	const void *arr;
	size_t n;
	bool (*str_at)(const void *arr, size_t i, const char **s, size_t *len);
	bool (*pair_at)(const void *arr, size_t i, uint64_t *a, uint64_t *b);
};

/* The values of one map; v[k] is only set when bit k of present is, so
 * that starting a map costs one store, not a memset of every value. */
struct fields {
	uint64_t present;
	struct value v[K_MAX];
};

_Static_assert(K_MAX <= 64, "present has a bit per key");

extern const struct value absent; /* type V_NONE */

static inline const struct value *val(const struct fields *f, enum key k)
{
	return f->present >> k & 1 ? &f->v[k] : &absent;
}

static inline struct value *set(struct fields *f, enum key k)
{
	f->present |= 1ull << k;
	return &f->v[k];
}

/* Keys are found through a small open-addressing table, built once at
 * start-up: a map's keys are looked up for every event. */
#define KEY_SLOTS 256
extern uint8_t key_lengths[K_MAX];
extern uint8_t key_slots[KEY_SLOTS]; /* enum key + 1; 0 is empty */

static inline unsigned key_hash(const char *name, size_t len)
{
	return (len * 31 + (unsigned char)name[0] * 7 +
		(unsigned char)name[len - 1]) &
	       (KEY_SLOTS - 1);
}

/* Keys are a few bytes long: a loop beats a call to memcmp. */
static inline bool same_bytes(const char *a, const char *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The key called name, or K_MAX. */
static inline enum key key_from_name(const char *name, size_t len)
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

static inline bool has(const struct fields *f, enum key k)
{
	return val(f, k)->type != V_NONE;
}

static inline bool str_is(const struct value *v, const char *s)
{
	return v->type == V_STR && v->len == strlen(s) &&
	       !memcmp(v->s, s, v->len);
}

/* Rss members by number: file, anon, swap, shmem. */
extern const char *const rss_members[4];

/* What an object of the stream is, once its fields are collected. */
enum object_role { OBJ_EVENT, OBJ_HEADER, OBJ_TRAILER };

int fields_role(struct mt_input *in, uint64_t off, const struct fields *f,
		enum object_role *role, unsigned *kind);
int fields_to_record(struct mt_input *in, uint64_t off, const struct fields *f,
		     unsigned kind, struct mt_record *rec);
int fields_to_header(struct mt_input *in, uint64_t off, const struct fields *f);
/* An object after the first: an event (returns 1) or the trailer (0). */
int object_next(struct mt_input *in, uint64_t off, const struct fields *f,
		struct mt_record *rec);

/* ---- MessagePack (input_msgpack.c, input_fast.c) --------------------- */

/* The first map: an artifact's Header or a memtrack stream's first event. */
int mp_open(struct mt_input *in);
/* Decodes the next MessagePack map into f; *off gets its offset.
 * Returns 1, 0 at a clean end of input, -1 on error. */
int mp_next_fields(struct mt_input *in, struct fields *f, uint64_t *off);
#ifdef MT_FUZZ_DIFF
/* The map of size bytes at the reader's position through msgpack-c:
 * true if it is one map of exactly that size. */
bool mp_reference_fields(struct mt_input *in, size_t size, struct fields *f);
#endif

/* The fast layer's memory of the maps it has seen. */
struct guesses *guesses_new(void);

/* ---- JSON Lines (input_jsonl.c) -------------------------------------- */

int js_open(struct mt_input *in);
/* The fields of the next non-empty line; *root must be released by the
 * caller with json_decref (the fields point into it). */
struct json_t;
int js_next_fields(struct mt_input *in, struct fields *f, uint64_t *off,
		   struct json_t **root);

/* ---- the map formats' loop (input.c) --------------------------------- */

/* The next record of an artifact, JSON Lines or memtrack stream, from
 * the general path: 1, 0 at the clean end, -1 on an error. */
int objects_next(struct mt_input *in, struct mt_record *rec);

#endif /* MT_INPUT_INT_H */
