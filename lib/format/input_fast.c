/* SPDX-License-Identifier: MIT */
/*
 * input_fast.c - MessagePack event maps: the fast layer in front of the
 * general path (input_msgpack.c), and mt_input_next, its front door.
 *
 * Nearly every object of an artifact is an event map of a few short str
 * keys with unsigned integer values, in the order lib/format/artifact.c
 * writes them.  The fast layer decodes exactly those straight into a
 * record, in one pass, without struct fields: a map whose head (count,
 * type, pid, tid, timestamp, addr) has the shape of the last map of its
 * kind is checked with a few masked vector compares (shape_event);
 * another is read key by key at fixed places (fixed_event), and its shape
 * learnt.  Anything else (another key order, another key, a value that is
 * not an unsigned integer) it declines, and the general path
 * (input_msgpack.c) decodes it, with its error messages.  So the fast
 * layer needs no error handling of its own, but it must agree with
 * msgpack-c on every map it accepts (MT_FUZZ_DIFF checks that).
 *
 * It runs only while FAST_SLACK bytes are buffered (at the end of the
 * input, zeros make up the rest: pad_tail): a fixmap of at most 15
 * pairs whose keys and values are str8 or shorter, or integers, cannot
 * reach further (15 * (2 + 255 + 2 + 255) + 1 = 7711 bytes, plus 16 bytes
 * read past a name or 8 past an integer), so no byte needs its own bounds
 * check and names and integers are read as whole words.
 */

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "input_int.h"

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

/* Names to small values (event kinds) by open addressing on a
 * multiplicative hash of their words; verified word by word. */
#define NAME_SLOTS 128

struct name_table {
	struct name_words words[NAME_SLOTS];
	uint8_t len[NAME_SLOTS]; /* 0: empty */
	uint8_t value[NAME_SLOTS];
};

static struct name_table fast_kinds;
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

static void fixed_tables(void);

__attribute__((constructor)) static void fast_tables(void)
{
	for (size_t len = 0; len <= 16; len++) {
		unsigned char ones[16] = {0};

		memset(ones, 0xff, len);
		memcpy(&name_mask[len], ones, sizeof(ones));
	}
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

/*
 * A guess at the type of a map, as encoded (header and name, at most 16
 * bytes): what the last map whose type started with the same two bytes
 * had.  Types repeat, so one masked compare usually tells the kind
 * without hashing; the header holds the length, so equal bytes are the
 * same str.  An empty guess masks
 * nothing out and expects zeros, which no str starts with, and its value
 * declines the map should it ever match.
 */
struct guess {
	struct name_words bytes, mask;
	uint8_t size;
	uint8_t value;
};

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

/* The shapes of maps without and with a call stack apart: the test on
 * mt_input_next's path cost traces without stacks 5-6 instructions an
 * event; next_unshaped tries the others. */
struct guesses {
	struct shape shape[2][SHAPE_SLOTS]; /* [with a "stack"] */
	struct guess type[GUESS_TYPES];
};

struct guesses *guesses_new(void)
{
	struct guesses *gs =
	    aligned_alloc(_Alignof(struct guesses), sizeof(*gs));
	const struct guess type = {.mask = {~0ull, ~0ull}, .value = MT_EV_NONE};
	/* no map starts with 0xc1 (never used in MessagePack) */
	const struct shape none = {.bytes = {{0xc1}}, .mask = {{0xff}}};

	if (!gs)
		return NULL;
	for (unsigned i = 0; i < SHAPE_SLOTS; i++)
		gs->shape[0][i] = gs->shape[1][i] = none;
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

/* The map's first pair, its type: an event kind, or MT_EV_NONE for the
 * general path to decide (Header, Trailer, an error to report, or a map in
 * another key order). */
static inline unsigned fast_type(const unsigned char **p, struct guesses *gs)
{
	struct name_words w = name_words(*p, 5);
	struct guess *g;

	if (w.lo != type_key.lo || w.hi != type_key.hi)
		return MT_EV_NONE;
	*p += 5;
	g = &gs->type[((*p)[0] + (*p)[1]) % GUESS_TYPES];
	return fast_name(p, g, &fast_kinds, MT_EV_NONE);
}

/*
 * The maps of the commonest kinds, in the key order lib/format/artifact.c
 * writes them (man/mt-format.5): every key and every value's type checked
 * at a fixed place, without a branch per pair; any difference (another
 * order, another key, a value not an unsigned integer) declines the map,
 * and the general path takes it.
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

/* An event's "stack" pair at *p, after its own (man/mt-format.5): its id
 * from 1 to *stacks, the Stack maps read so far, as fields_stack_ref
 * checks it; *bad set otherwise. */
static inline __attribute__((always_inline)) void
fixed_stack(const unsigned char **p, struct mt_record *rec, uint64_t *bad,
	    const uint64_t *stacks)
{
	uint64_t stack = FIXED_UINT(p, "\245stack", bad);

	*bad |= !stack | (stack > *stacks);
	rec->stack = stack;
}

/* The pairs after a map's head (pid, tid, timestamp and addr if
 * head_has_addr; n pairs in all) into rec, as its kind writes them, and
 * unless shaped a "stack" after them if there is one more pair; *bad gets
 * non-zero bits if they are anything else.  shaped: the head had the shape
 * of its kind, which holds the count of pairs and the first key of the
 * tail too (and no strings), and says whether a stack follows. */
static inline __attribute__((always_inline)) void
fixed_tail(const unsigned char **p, unsigned n, unsigned kind,
	   struct mt_record *rec, uint64_t *bad, bool shaped,
	   const uint64_t *stacks)
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
	if (shaped) /* the shape's template held the count */
		return;
	if (n == pairs + 1) /* traced with call stacks */
		fixed_stack(p, rec, bad, stacks);
	else
		*bad |= n ^ pairs;
}

/* The map at p (after its type, n pairs in all) into rec if it has the
 * shape its kind is written in; *end: where it ends. */
static inline __attribute__((always_inline)) bool
fixed_event(const unsigned char *p, unsigned n, unsigned kind,
	    struct mt_record *rec, const unsigned char **end,
	    const uint64_t *stacks)
{
	struct mt_event *ev = &rec->ev;
	uint64_t bad = 0, pid, tid, ts;

	memset(rec, 0, sizeof(*rec));
	pid = FIXED_UINT(&p, "\243pid", &bad);
	tid = FIXED_UINT(&p, "\243tid", &bad);
	ts = FIXED_UINT(&p, "\251timestamp", &bad);
	if (head_has_addr(kind))
		ev->addr = FIXED_UINT(&p, "\244addr", &bad);
	fixed_tail(&p, n, kind, rec, &bad, false, stacks);
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
				       const unsigned char *p, bool stacked)
{
	uint32_t word;

	memcpy(&word, p + 6, sizeof(word)); /* after the map and type key */
	return &gs->shape[stacked][(word * 0xbe3edc0bu) >> 28];
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
 * length.  with_stack: by the shapes of maps that end with a "stack",
 * naming one of the *stacks Stack maps read so far. */
static inline __attribute__((always_inline)) bool
shape_event(const unsigned char *p, struct mt_record *rec, size_t *size,
	    struct guesses *gs, const uint64_t *stacks, bool with_stack)
{
	const struct shape *s = shape_slot(gs, p, with_stack);
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
	fixed_tail(&q, *p & 0x0f, s->kind, rec, &bad, true, stacks);
	if (with_stack)
		fixed_stack(&q, rec, &bad, stacks);
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
			const unsigned char *pairs, unsigned kind, bool stack)
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
	*shape_slot(gs, map, stack) = s;
}

/* mp_fast_event but for the shape of the head: the map read key by key at
 * fixed places (and the shape of its kind learnt from it). */
static inline __attribute__((always_inline)) bool
unshaped_event(const unsigned char *p, struct mt_record *rec, size_t *size,
	       struct guesses *gs, const uint64_t *stacks)
{
	const unsigned char *start = p, *pairs;
	unsigned n, kind;

	if (*p < 0x81 || *p > 0x8f)
		return false;
	n = *p++ & 0x0f;
	kind = fast_type(&p, gs);
	if (kind == MT_EV_NONE)
		return false;
	pairs = p;
	if (!fixed_event(p, n, kind, rec, &p, stacks))
		return false;
	shape_learn(gs, start, pairs, kind, rec->stack != 0);
	*size = p - start;
	return true;
}

/* The event map at p into rec, *size bytes long: true, or false to leave
 * it to the general path.  FAST_SLACK bytes at p must be readable. */
static inline __attribute__((always_inline)) bool
mp_fast_event(const unsigned char *p, struct mt_record *rec, size_t *size,
	      struct guesses *gs, const uint64_t *stacks)
{
	return shape_event(p, rec, size, gs, stacks, false) ||
	       shape_event(p, rec, size, gs, stacks, true) ||
	       unshaped_event(p, rec, size, gs, stacks);
}

#ifdef MT_FUZZ_DIFF
/* Fuzzing: whatever the fast layer accepts, msgpack-c (the reference
 * decoder) and input_fields.c read alike: the same size, the same record. */
static void mp_check_fast_event(struct mt_input *in, size_t size,
				const struct mt_record *fast)
{
	struct fields f;
	struct mt_record slow;
	enum object_role role;
	unsigned kind = MT_EV_NONE;

	if (!mp_reference_fields(in, size, &f) ||
	    fields_role(in, 0, &f, &role, &kind) || role != OBJ_EVENT ||
	    fields_to_record(in, 0, &f, kind, &slow) ||
	    memcmp(&slow.ev, &fast->ev, sizeof(slow.ev)) ||
	    slow.stack != fast->stack || slow.str_len != fast->str_len ||
	    !slow.str != !fast->str ||
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
		if (!input_keep_str(in, rec->str, rec->str_len))
			return input_fail(in, offset_now(in), "out of memory");
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
	if (in->mapped || !in->eof || !input_grow(in, in->end + FAST_SLACK))
		return false;
	memset(in->buf + in->end, 0, FAST_SLACK);
	return true;
}

/* The next object if it is an event map the fast layer takes: 1, 0 to
 * leave it to the general path, -1 on a read error. */
static int mp_fast_next(struct mt_input *in, struct mt_record *rec)
{
	size_t size;

	if (avail(in) < FAST_SLACK && !in->eof && !fill(in, FAST_SLACK) &&
	    in->state < 0)
		return -1;
	if (avail(in) < FAST_SLACK && !pad_tail(in))
		return 0;
	if (!mp_fast_event(cur(in), rec, &size, in->guesses,
			   &in->stacks_seen) ||
	    size > avail(in))
		return 0;
	return fast_took_str(in, rec, size);
}

/* Where the fast layer may run with no other check: while start is below
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
		input_drop_read(in);
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
	    shape_event(cur(in), rec, &size, in->guesses, &in->stacks_seen,
			true)) {
		shaped_took(in, rec, size);
		return 1;
	}
	if (in->start < in->fast_until &&
	    unshaped_event(cur(in), rec, &size, in->guesses, &in->stacks_seen))
		return fast_took_str(in, rec, size);
	ret = next_record(in, rec);
	if (in->fmt != MT_FMT_RAW) /* the raw stream has no fast layer */
		fast_window(in);
	return ret;
}

/* Nearly every record: a map of a known shape, with no call (so no
 * registers to save). */
int mt_input_next(struct mt_input *in, struct mt_record *rec)
{
	size_t size;

	if (in->start < in->fast_until &&
	    shape_event(cur(in), rec, &size, in->guesses, &in->stacks_seen,
			false)) {
		shaped_took(in, rec, size);
		return 1;
	}
	if (raw_plain_next(in, rec))
		return 1;
	return next_unshaped(in, rec);
}
