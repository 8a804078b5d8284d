/* SPDX-License-Identifier: MIT */
/*
 * artifact.c - the artifact writer (mt_artifact.h).  Each map is written
 * once, as put_X(w, "key", value) calls; the map writer turns each call
 * into MessagePack or into JSON, so the two styles cannot disagree on keys.
 *
 * The MessagePack is encoded here (the mp_* functions, nothing else), not
 * by msgpack-c, for speed: msgpack-c's packer hands every few bytes to a
 * write callback, and the writer took ~1,450 instructions per event with
 * it; writing straight into the output buffer, each key's bytes fixed at
 * compile time, ~200; and with the maps of most events written by
 * event_msgpack (the style known at compile time, the writer's state in
 * registers, the head of a thread's map copied), ~160 on mt-gen's 1 M
 * events and ~107 on the allocation-heavy fixture's trace, whose events
 * come from one thread (callgrind, mt_artifact_record inclusive, mt-encode
 * -u).  The bytes are msgpack-c's own (the smallest int form, str8, bin
 * for non-UTF-8): test_artifact_msgpack compares them with msgpack-c's;
 * encode.bats compares event_msgpack's maps with the general path's.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "mt_allocators.h"
#include "mt_artifact.h"
#include "mt_zstd.h"

#define OUT_BUF (256u * 1024)

/*
 * A map has at most MAP_ENTRIES_MAX entries (a MessagePack fixmap up to
 * 15, a map16 past: the Header with every optional flag), each at most
 * ENTRY_MAX bytes in either style, string values aside (keys are at most
 * 22 bytes).  A map starts with MAP_ROOM free bytes and keeps that much
 * free after each string value, so ints, bools and names are written
 * without a check.
 */
#define MAP_ENTRIES_MAX 16
#define FIXMAP_MAX	15
#define ENTRY_MAX	64
#define MAP_ROOM	((MAP_ENTRIES_MAX + 1) * ENTRY_MAX)

/* The MessagePack type bytes the writer uses. */
enum {
	MP_FIXMAP = 0x80,
	MP_FIXARRAY = 0x90,
	MP_FIXSTR = 0xa0,
	MP_FALSE = 0xc2,
	MP_TRUE = 0xc3,
	MP_BIN8 = 0xc4,
	MP_BIN16 = 0xc5,
	MP_BIN32 = 0xc6,
	MP_UINT8 = 0xcc,
	MP_UINT16 = 0xcd,
	MP_UINT32 = 0xce,
	MP_UINT64 = 0xcf,
	MP_STR8 = 0xd9,
	MP_STR16 = 0xda,
	MP_STR32 = 0xdb,
	MP_ARRAY16 = 0xdc,
	MP_ARRAY32 = 0xdd,
};

/* A value picked at run time from a few (an event's type, an Rss member)
 * as MessagePack writes it, a fixstr header then the text: copied as one
 * fixed-size block, without a length-dependent memcpy. */
struct name {
	unsigned char fixstr; /* 0xa0 | length */
	char text[23];
};

/*
 * The head of an event map in MessagePack, its "type", "pid" and "tid"
 * entries: the same for every event of a kind from a thread, so kept from
 * the kind's last map and copied while the thread stays, always
 * HEAD_BYTES of it (a few vector moves; the bytes past len are
 * overwritten next).  Made at first for pid and tid 0xffffffff, so that
 * the test of the thread is the only one.
 */
#define HEAD_BYTES 64
struct head {
	uint64_t thread; /* pid << 32 | tid */
	size_t len;
	char bytes[HEAD_BYTES];
};

struct mt_artifact {
	int fd;
	enum mt_artifact_style style;
	struct mt_zwriter *zstd; /* NULL: plain bytes */
	char *buf;		 /* compressed: one frame's bytes */
	size_t len;		 /* bytes waiting in buf */
	size_t cap;
	int error;
	uint64_t events;
	uint64_t lost;
	/* CodSpeed style: records of each kind its format cannot hold */
	uint64_t not_held[MT_EV_KIND_MAX];
	struct name type_names[MT_EV_KIND_MAX]; /* fixstr 0: not a record */
	struct name rss_members[4];
	struct head heads[MT_EV_KIND_MAX]; /* MessagePack style */
	uint32_t fast_kinds; /* bit k: kind k's maps take event_msgpack */
};

_Static_assert(MT_EV_KIND_MAX <= 32, "fast_kinds has a bit per kind");

/* One map, written straight into the output buffer.  The buffer holds the
 * whole map until it ends: MessagePack's map header (the entry count) is
 * its first byte, known last. */
struct map_writer {
	struct mt_artifact *a;
	bool msgpack;
	char *start; /* the map's first byte */
	char *p;     /* where the next byte goes */
	unsigned n;  /* entries so far */
};

/* ---- output buffer --------------------------------------------------- */

static int write_out(struct mt_artifact *a, const char *p, size_t n)
{
	while (n > 0 && !a->error) {
		ssize_t w = write(a->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			a->error = w < 0 ? -errno : -EIO;
		else {
			p += w;
			n -= w;
		}
	}
	return a->error;
}

/* Compressed, what is buffered (whole maps) becomes one frame: written
 * behind by the writer's threads, if it has some (mt_zstd.h), which then
 * take the buffer and give another (the bytes in the old one past
 * a->len stay readable: room_slow moves a map from there). */
static int flush_buffer(struct mt_artifact *a)
{
	if (a->len && !a->error && a->zstd)
		a->error = mt_zwriter_give(a->zstd, a->fd, (void **)&a->buf,
					   &a->cap, a->len);
	else if (a->len && !a->error)
		write_out(a, a->buf, a->len);
	a->len = 0;
	return a->error;
}

int mt_artifact_flush(struct mt_artifact *a)
{
	if (!flush_buffer(a) && a->zstd)
		a->error = mt_zwriter_wait(a->zstd);
	return a->error;
}

/* Room for need more bytes after w->p, the map staying whole: writes out
 * what came before the map, then grows the buffer if the map alone is
 * that big (a long path or command line).  false if out of memory. */
static bool room_slow(struct map_writer *w, size_t need)
{
	struct mt_artifact *a = w->a;
	size_t in_map = w->p - w->start;
	char *buf;

	a->len = w->start - a->buf;
	/* the frame before the map, written behind: the buffer may change
	 * hands, the map's bytes are read from where they are */
	flush_buffer(a);
	memmove(a->buf, w->start, in_map);
	w->start = a->buf;
	w->p = a->buf + in_map;
	if (in_map + need <= a->cap)
		return true;
	buf = realloc(a->buf, in_map + need);
	if (!buf) {
		if (!a->error)
			a->error = -ENOMEM;
		return false;
	}
	a->buf = w->start = buf;
	a->cap = in_map + need;
	w->p = buf + in_map;
	return true;
}

static inline bool room(struct map_writer *w, size_t need)
{
	struct mt_artifact *a = w->a;

	return (size_t)(a->buf + a->cap - w->p) >= need || room_slow(w, need);
}

/* false after an error: nothing more is written */
static inline bool begin_map(struct mt_artifact *a, struct map_writer *w)
{
	*w = (struct map_writer){
	    .a = a,
	    .msgpack = a->style != MT_ARTIFACT_JSONL,
	    .start = a->buf + a->len,
	    .p = a->buf + a->len,
	};
	if (a->error || !room(w, MAP_ROOM))
		return false;
	*w->p++ = '{'; /* MessagePack's header goes there at the end */
	return true;
}

static inline int end_map(struct map_writer *w)
{
	struct mt_artifact *a = w->a;

	assert(w->n <= MAP_ENTRIES_MAX);
	if (w->msgpack && w->n > FIXMAP_MAX) {
		/* map16: two bytes more of header before the entries (the
		 * room an entry leaves holds them) */
		memmove(w->start + 3, w->start + 1, w->p - (w->start + 1));
		w->start[0] = (char)0xde;
		w->start[1] = (char)(w->n >> 8);
		w->start[2] = (char)w->n;
		w->p += 2;
	} else if (w->msgpack) {
		*w->start = MP_FIXMAP | w->n;
	} else {
		*w->p++ = '}';
		*w->p++ = '\n';
	}
	a->len = w->p - a->buf;
	return a->error;
}

/* ---- MessagePack ----------------------------------------------------- */

static inline char *mp_tag16(char *p, unsigned char tag, uint16_t v)
{
	v = htobe16(v);
	*p = tag;
	memcpy(p + 1, &v, sizeof(v));
	return p + 1 + sizeof(v);
}

static inline char *mp_tag32(char *p, unsigned char tag, uint32_t v)
{
	v = htobe32(v);
	*p = tag;
	memcpy(p + 1, &v, sizeof(v));
	return p + 1 + sizeof(v);
}

static inline char *mp_tag64(char *p, unsigned char tag, uint64_t v)
{
	v = htobe64(v);
	*p = tag;
	memcpy(p + 1, &v, sizeof(v));
	return p + 1 + sizeof(v);
}

/* The smallest form, as msgpack_pack_uint64() picks it.  Addresses and
 * timestamps take 64 bits: they are sorted out by the first two tests. */
static inline char *mp_uint(char *p, uint64_t u)
{
	if (u >= 0x10000) {
		if (u < 0x100000000)
			return mp_tag32(p, MP_UINT32, u);
		return mp_tag64(p, MP_UINT64, u);
	}
	if (u < 0x80) {
		*p = u;
		return p + 1;
	}
	if (u < 0x100) {
		p[0] = (char)MP_UINT8;
		p[1] = u;
		return p + 2;
	}
	return mp_tag16(p, MP_UINT16, u);
}

/* A str, bin or array header beyond the fix forms: the 8-bit form if the
 * type has one (tag8 != 0), else 16 or 32 bits. */
static char *mp_length(char *p, size_t len, unsigned char tag8,
		       unsigned char tag16, unsigned char tag32)
{
	if (tag8 && len < 0x100) {
		p[0] = tag8;
		p[1] = len;
		return p + 2;
	}
	if (len < 0x10000)
		return mp_tag16(p, tag16, len);
	return mp_tag32(p, tag32, len);
}

static char *mp_array_header(char *p, size_t n)
{
	if (n < 16) {
		*p = MP_FIXARRAY | n;
		return p + 1;
	}
	return mp_length(p, n, 0, MP_ARRAY16, MP_ARRAY32);
}

/* A key: a literal shorter than 32 bytes, so a fixstr, copied with a
 * constant length the compiler turns into a few stores. */
static inline char *mp_key(char *p, const char *key, size_t klen)
{
	*p = MP_FIXSTR | klen;
	memcpy(p + 1, key, klen);
	return p + 1 + klen;
}

/* A path is bytes: one that is not UTF-8 goes out as bin, so that
 * decoders which check str types still read the stream. */
static void mp_str_value(struct map_writer *w, const char *s, size_t len)
{
	char *p;

	if (!room(w, 5 + len + MAP_ROOM))
		return;
	p = w->p;
	if (!mt_utf8_valid(s, len))
		p = mp_length(p, len, MP_BIN8, MP_BIN16, MP_BIN32);
	else if (len < 32)
		*p++ = MP_FIXSTR | len;
	else
		p = mp_length(p, len, MP_STR8, MP_STR16, MP_STR32);
	memcpy(p, s, len);
	w->p = p + len;
}

/* ---- JSON Lines ------------------------------------------------------ */

static char *js_u64(char *p, uint64_t u)
{
	char digits[24];
	int i = sizeof(digits);

	do {
		digits[--i] = '0' + u % 10;
		u /= 10;
	} while (u);
	memcpy(p, digits + i, sizeof(digits) - i);
	return p + sizeof(digits) - i;
}

/* ,"key": -- keys need no escaping */
static char *js_key(const struct map_writer *w, const char *key, size_t klen)
{
	char *p = w->p;

	if (w->n)
		*p++ = ',';
	*p++ = '"';
	memcpy(p, key, klen);
	p += klen;
	*p++ = '"';
	*p++ = ':';
	return p;
}

/* Invalid UTF-8 bytes become U+FFFD: JSON strings hold text only. */
static char *utf8_sanitized(const char *s, size_t len, size_t *out_len)
{
	char *copy = malloc(len * 3 + 1);
	size_t n = 0;

	if (!copy)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t step = 1;

		while (step <= 4 && i + step <= len &&
		       !mt_utf8_valid(s + i, step))
			step++;
		if (step <= 4 && i + step <= len) {
			memcpy(copy + n, s + i, step);
			n += step;
			i += step;
		} else {
			memcpy(copy + n, "\xef\xbf\xbd", 3);
			n += 3;
			i++;
		}
	}
	*out_len = n;
	return copy;
}

/* Printable ASCII without '"' or '\\' is its own JSON text: type names
 * and most paths take this way, without jansson's allocations. */
static bool js_plain(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

static void js_bytes(struct map_writer *w, const char *s, size_t len)
{
	if (!room(w, len + MAP_ROOM))
		return;
	memcpy(w->p, s, len);
	w->p += len;
}

static void js_str_value(struct map_writer *w, const char *s, size_t len)
{
	char *fixed = NULL, *text;
	json_t *j;

	if (js_plain(s, len)) {
		js_bytes(w, "\"", 1);
		js_bytes(w, s, len);
		js_bytes(w, "\"", 1);
		return;
	}
	if (!mt_utf8_valid(s, len)) {
		fixed = utf8_sanitized(s, len, &len);
		s = fixed;
	}
	j = s ? json_stringn(s, len) : NULL;
	text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	if (text)
		js_bytes(w, text, strlen(text));
	else if (!w->a->error)
		w->a->error = -ENOMEM;
	free(text);
	json_decref(j);
	free(fixed);
}

/* ---- the entries, in either style ------------------------------------ */

/* Keys are literals: put_X(w, "key", ...) is put_X_k(w, "key", length,
 * ...), the length known at compile time. */
#define KEY(k) k, sizeof(k "") - 1

static inline void put_u64_k(struct map_writer *w, const char *key, size_t klen,
			     uint64_t u)
{
	if (w->msgpack)
		w->p = mp_uint(mp_key(w->p, key, klen), u);
	else
		w->p = js_u64(js_key(w, key, klen), u);
	w->n++;
}

static void put_bool_k(struct map_writer *w, const char *key, size_t klen,
		       bool b)
{
	char *p;

	if (w->msgpack) {
		p = mp_key(w->p, key, klen);
		*p++ = (char)(b ? MP_TRUE : MP_FALSE);
	} else {
		p = js_key(w, key, klen);
		memcpy(p, b ? "true" : "false", b ? 4 : 5);
		p += b ? 4 : 5;
	}
	w->p = p;
	w->n++;
}

static inline void put_name_k(struct map_writer *w, const char *key,
			      size_t klen, const struct name *v)
{
	size_t len = v->fixstr & 0x1f;
	char *p;

	if (w->msgpack) {
		p = mp_key(w->p, key, klen);
		memcpy(p, v, sizeof(*v));
		p += 1 + len;
	} else {
		p = js_key(w, key, klen);
		*p++ = '"';
		memcpy(p, v->text, len); /* names are plain JSON text */
		p += len;
		*p++ = '"';
	}
	w->p = p;
	w->n++;
}

static void put_str_k(struct map_writer *w, const char *key, size_t klen,
		      const char *s, size_t len)
{
	if (w->msgpack) {
		w->p = mp_key(w->p, key, klen);
		mp_str_value(w, s, len);
	} else {
		w->p = js_key(w, key, klen);
		js_str_value(w, s, len);
	}
	w->n++;
}

static void put_cstr_k(struct map_writer *w, const char *key, size_t klen,
		       const char *s)
{
	put_str_k(w, key, klen, s ? s : "", s ? strlen(s) : 0);
}

static void put_argv_k(struct map_writer *w, const char *key, size_t klen,
		       char *const *argv, size_t argc)
{
	if (w->msgpack) {
		w->p = mp_array_header(mp_key(w->p, key, klen), argc);
		for (size_t i = 0; i < argc; i++)
			mp_str_value(w, argv[i], strlen(argv[i]));
	} else {
		w->p = js_key(w, key, klen);
		js_bytes(w, "[", 1);
		for (size_t i = 0; i < argc; i++) {
			if (i)
				js_bytes(w, ",", 1);
			js_str_value(w, argv[i], strlen(argv[i]));
		}
		js_bytes(w, "]", 1);
	}
	w->n++;
}

/* An Exec's arguments, len bytes each ending in a NUL (mt_exec_args; a
 * last one without is ended by the bytes' end), as an array of strings. */
static void put_args_k(struct map_writer *w, const char *key, size_t klen,
		       const char *args, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i += strnlen(args + i, len - i) + 1)
		n++;
	if (w->msgpack) {
		if (!room(w, 5 + MAP_ROOM))
			return;
		w->p = mp_array_header(mp_key(w->p, key, klen), n);
	} else {
		w->p = js_key(w, key, klen);
		js_bytes(w, "[", 1);
	}
	for (size_t i = 0, k = 0; i < len; k++) {
		size_t one = strnlen(args + i, len - i);

		if (w->msgpack) {
			mp_str_value(w, args + i, one);
		} else {
			if (k)
				js_bytes(w, ",", 1);
			js_str_value(w, args + i, one);
		}
		i += one + 1;
	}
	if (!w->msgpack)
		js_bytes(w, "]", 1);
	w->n++;
}

/* A stack's frames: [[file, address], ...] (mt_event.h, MT_FRAME). */
static void put_frames_k(struct map_writer *w, const char *key, size_t klen,
			 const uint64_t *frames, uint32_t n)
{
	/* a pair takes at most 1 + 9 + 9 bytes, or "[65535,N]," in JSON */
	if (!room(w, (size_t)n * 32 + MAP_ROOM))
		return;
	if (w->msgpack) {
		char *p = mp_array_header(mp_key(w->p, key, klen), n);

		for (uint32_t i = 0; i < n; i++) {
			*p++ = (char)(MP_FIXARRAY | 2);
			p = mp_uint(p, MT_FRAME_FILE(frames[i]));
			p = mp_uint(p, MT_FRAME_ADDR(frames[i]));
		}
		w->p = p;
	} else {
		char *p = js_key(w, key, klen);

		*p++ = '[';
		for (uint32_t i = 0; i < n; i++) {
			if (i)
				*p++ = ',';
			*p++ = '[';
			p = js_u64(p, MT_FRAME_FILE(frames[i]));
			*p++ = ',';
			p = js_u64(p, MT_FRAME_ADDR(frames[i]));
			*p++ = ']';
		}
		*p++ = ']';
		w->p = p;
	}
	w->n++;
}

/* Bytes as lowercase hex text (a build-id). */
static void put_hex_k(struct map_writer *w, const char *key, size_t klen,
		      const uint8_t *bytes, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	char text[2 * 255];

	if (len > sizeof(text) / 2)
		len = sizeof(text) / 2;
	for (size_t i = 0; i < len; i++) {
		text[2 * i] = digits[bytes[i] >> 4];
		text[2 * i + 1] = digits[bytes[i] & 15];
	}
	put_str_k(w, key, klen, text, 2 * len);
}

#define put_u64(w, k, u)       put_u64_k(w, KEY(k), u)
#define put_bool(w, k, b)      put_bool_k(w, KEY(k), b)
#define put_name(w, k, v)      put_name_k(w, KEY(k), v)
#define put_str(w, k, s, len)  put_str_k(w, KEY(k), s, len)
#define put_cstr(w, k, s)      put_cstr_k(w, KEY(k), s)
#define put_argv(w, k, av, ac) put_argv_k(w, KEY(k), av, ac)
#define put_frames(w, k, f, n) put_frames_k(w, KEY(k), f, n)
#define put_args(w, k, s, len) put_args_k(w, KEY(k), s, len)
#define put_hex(w, k, b, len)  put_hex_k(w, KEY(k), b, len)

/* ---- the maps -------------------------------------------------------- */

static inline void put_exit_status(struct map_writer *w, uint32_t status)
{
	if (WIFEXITED(status))
		put_u64(w, "exit_code", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		put_u64(w, "signal", WTERMSIG(status));
	else
		put_u64(w, "status", status);
}

/* The kind-specific keys whose values are strings: a map of these kinds
 * may need more room than MAP_ROOM. */
static void event_string_keys(struct map_writer *w, const struct mt_record *rec,
			      unsigned kind)
{
	switch (kind) {
	case MT_EV_EXEC:
		put_str(w, "path", rec->str ? rec->str : "", rec->str_len);
		if (mt_exec_args(rec)) {
			put_args(w, "argv", mt_exec_args(rec), rec->ev.size);
			if (rec->ev.flags & MT_EXEC_ARGS_CUT)
				put_u64(w, "argv_bytes", rec->ev.old_size);
		}
		break;
	case MT_EV_MARKER:
		put_str(w, "name", rec->str ? rec->str : "", rec->str_len);
		break;
	case MT_EV_ALLOCATOR:
		put_cstr(w, "kind", mt_alloc_family_name(rec->ev.flags));
		put_str(w, "path", rec->str ? rec->str : "", rec->str_len);
		break;
	default:
		break;
	}
}

/* The kind-specific keys of the other kinds, all numbers and names (no
 * call: inlined where the style is known, each put_X is its style's
 * code); memtrack's kinds use memtrack's keys. */
static inline __attribute__((always_inline)) void
event_number_keys(struct map_writer *w, const struct mt_record *rec,
		  unsigned kind)
{
	const struct mt_event *ev = &rec->ev;

	switch (kind) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_MUNMAP:
		put_u64(w, "addr", ev->addr);
		put_u64(w, "size", ev->size);
		break;
	case MT_EV_FREE:
		put_u64(w, "addr", ev->addr);
		break;
	case MT_EV_REALLOC:
		put_u64(w, "addr", ev->addr);
		put_u64(w, "size", ev->size);
		put_u64(w, "old_addr", ev->old_addr);
		break;
	case MT_EV_ALIGNED_ALLOC:
		put_u64(w, "addr", ev->addr);
		put_u64(w, "size", ev->size);
		put_u64(w, "alignment", ev->old_size);
		break;
	case MT_EV_MMAP:
		put_u64(w, "addr", ev->addr);
		put_u64(w, "size", ev->size);
		put_u64(w, "prot", ev->flags);
		put_u64(w, "flags", ev->aux);
		break;
	case MT_EV_MREMAP:
		put_u64(w, "addr", ev->addr);
		put_u64(w, "size", ev->size);
		put_u64(w, "old_addr", ev->old_addr);
		put_u64(w, "old_size", ev->old_size);
		break;
	case MT_EV_BRK:
		put_u64(w, "addr", ev->addr);
		put_u64(w, "old_addr", ev->old_addr);
		put_u64(w, "size",
			ev->addr > ev->old_addr ? ev->addr - ev->old_addr
						: ev->old_addr - ev->addr);
		break;
	case MT_EV_FORK:
		put_u64(w, "ppid", ev->old_addr);
		break;
	case MT_EV_EXIT:
		put_exit_status(w, ev->aux);
		break;
	case MT_EV_RSS:
		if (ev->aux < 4)
			put_name(w, "member", &w->a->rss_members[ev->aux]);
		else
			put_u64(w, "member", ev->aux);
		put_u64(w, "size", ev->size);
		if (ev->flags & MT_RSS_TRACER)
			put_bool(w, "tracer", true);
		break;
	case MT_EV_PSS:
		put_u64(w, "pss", ev->size);
		put_u64(w, "pss_anon", ev->addr);
		put_u64(w, "pss_file", ev->old_addr);
		put_u64(w, "pss_shmem", ev->old_size);
		break;
	case MT_EV_LOST:
		put_u64(w, "count", ev->size);
		break;
	case MT_EV_CODE_MAP:
		put_u64(w, "file", ev->old_size);
		put_u64(w, "addr", ev->addr);
		put_u64(w, "size", ev->size);
		put_u64(w, "offset", ev->old_addr);
		break;
	default:
		break;
	}
}

/* The maps that say what stack and file ids mean, stamped with their first
 * use like every map (consumers expect pid, tid and timestamp on all). */
static int put_stack_or_file(struct mt_artifact *a, const struct name *type,
			     const struct mt_record *rec)
{
	struct map_writer w;

	if (!begin_map(a, &w))
		return a->error;
	put_name(&w, "type", type);
	put_u64(&w, "pid", rec->ev.pid);
	put_u64(&w, "tid", rec->ev.tid);
	put_u64(&w, "timestamp", rec->ev.timestamp);
	if (rec->ev.kind == MT_EV_STACK) {
		put_u64(&w, "stack", rec->ev.addr);
		put_frames(&w, "frames", rec->frames, rec->ev.size);
		put_bool(&w, "truncated", rec->ev.flags & MT_STACK_TRUNCATED);
	} else {
		put_u64(&w, "file", rec->ev.addr);
		put_str(&w, "path", rec->str ? rec->str : "", rec->str_len);
		if (rec->ev.flags) /* the build-id's length */
			put_hex(&w, "build_id", rec->build_id, rec->ev.flags);
	}
	return end_map(&w);
}

/* A PyCode record's map: its payload's four parts by name, the line
 * table in lowercase hex (mt_pycode_parse checked the lengths). */
static int put_pycode(struct mt_artifact *a, const struct name *type,
		      const struct mt_record *rec)
{
	static const char digits[] = "0123456789abcdef";
	struct mt_pycode code;
	struct map_writer w;
	char version[16], *hex;

	if (mt_pycode_parse(rec, &code))
		return a->error ? a->error : -EINVAL;
	hex = malloc(2 * code.linetable_len + 1);
	if (!hex)
		return -ENOMEM;
	for (size_t i = 0; i < code.linetable_len; i++) {
		hex[2 * i] = digits[code.linetable[i] >> 4];
		hex[2 * i + 1] = digits[code.linetable[i] & 15];
	}
	snprintf(version, sizeof(version), "%u.%u", rec->ev.flags >> 8,
		 rec->ev.flags & 0xff);
	if (!begin_map(a, &w)) {
		free(hex);
		return a->error;
	}
	put_name(&w, "type", type);
	put_u64(&w, "pid", rec->ev.pid);
	put_u64(&w, "tid", rec->ev.tid);
	put_u64(&w, "timestamp", rec->ev.timestamp);
	put_u64(&w, "code", rec->ev.addr);
	put_u64(&w, "first_line", rec->ev.size);
	put_cstr(&w, "python", version);
	put_str(&w, "name", code.name, code.name_len);
	put_str(&w, "qualname", code.qualname, code.qualname_len);
	put_str(&w, "path", code.file, code.file_len);
	put_str(&w, "linetable", hex, 2 * code.linetable_len);
	free(hex);
	return end_map(&w);
}

/* An event map's first entries, in either style. */
static inline void event_head(struct map_writer *w, const struct name *type,
			      const struct mt_event *ev)
{
	put_name(w, "type", type);
	put_u64(w, "pid", ev->pid);
	put_u64(w, "tid", ev->tid);
}

/* The head of kind's maps from thread pid, tid (struct head); its first
 * byte, the map's size, is set by end_map. */
static void make_head(struct mt_artifact *a, unsigned kind, uint32_t pid,
		      uint32_t tid)
{
	struct head *h = &a->heads[kind];
	const struct mt_event ev = {.pid = pid, .tid = tid};
	struct map_writer w = {
	    .a = a, .msgpack = true, .start = h->bytes, .p = h->bytes + 1};

	event_head(&w, &a->type_names[kind], &ev);
	h->len = w.p - h->bytes;
	assert(h->len <= HEAD_BYTES);
	h->thread = (uint64_t)pid << 32 | tid;
}

/* ---- API ------------------------------------------------------------- */

/* text is ASCII, plain JSON text, at most 22 bytes */
static void make_name(struct name *name, const char *text)
{
	size_t len = strlen(text);

	assert(len < sizeof(name->text));
	name->fixstr = MP_FIXSTR | len;
	memcpy(name->text, text, len);
}

/* The names records take, made once. */
static void make_names(struct mt_artifact *a)
{
	static const char *const rss_members[] = {"file", "anon", "swap",
						  "shmem"};

	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (mt_kind_name(kind))
			make_name(&a->type_names[kind], mt_kind_name(kind));
	for (unsigned i = 0; i < 4; i++)
		make_name(&a->rss_members[i], rss_members[i]);
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (a->type_names[kind].fixstr)
			make_head(a, kind, UINT32_MAX, UINT32_MAX);
}

/* The kinds event_msgpack writes: named, with no string (Exec, Marker,
 * Allocator), not Lost (counted apart), not Stack or CodeFile (maps of
 * their own). */
static uint32_t fast_kinds(const struct mt_artifact *a)
{
	uint32_t kinds = 0;

	if (a->style != MT_ARTIFACT_MSGPACK)
		return 0;
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (a->type_names[kind].fixstr && kind != MT_EV_EXEC &&
		    kind != MT_EV_MARKER && kind != MT_EV_ALLOCATOR &&
		    kind != MT_EV_LOST && kind != MT_EV_STACK &&
		    kind != MT_EV_CODE_FILE && kind != MT_EV_PYCODE)
			kinds |= 1u << kind;
	return kinds;
}

struct mt_artifact *mt_artifact_new(int fd, enum mt_artifact_style style)
{
	struct mt_artifact *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->buf = malloc(OUT_BUF);
	if (!a->buf) {
		free(a);
		return NULL;
	}
	a->cap = OUT_BUF;
	a->fd = fd;
	a->style = style;
	make_names(a);
	a->fast_kinds = fast_kinds(a);
	return a;
}

int mt_artifact_compress(struct mt_artifact *a, int level, int workers,
			 size_t frame_bytes)
{
	char *buf;

	if (a->zstd || a->len)
		return -EINVAL; /* only before the first byte */
	a->zstd = mt_zwriter_new(level, workers);
	if (!a->zstd)
		return -ENOMEM;
	if (frame_bytes < MAP_ROOM * 2)
		frame_bytes = MAP_ROOM * 2;
	buf = realloc(a->buf, frame_bytes);
	if (!buf)
		return -ENOMEM;
	a->buf = buf;
	a->cap = frame_bytes;
	return 0;
}

uint64_t mt_artifact_compressed_bytes(struct mt_artifact *a)
{
	return a->zstd ? mt_zwriter_written(a->zstd) : 0;
}

static const char *clock_name(uint32_t id)
{
	switch (id) {
	case 0:
		return "CLOCK_REALTIME";
	case 4:
		return "CLOCK_MONOTONIC_RAW";
	case 7:
		return "CLOCK_BOOTTIME";
	default:
		return "CLOCK_MONOTONIC";
	}
}

int mt_artifact_header(struct mt_artifact *a, const struct mt_meta *meta)
{
	struct map_writer w;

	if (a->style == MT_ARTIFACT_CODSPEED)
		return a->error; /* its events stand alone */
	if (!begin_map(a, &w))
		return a->error;
	put_cstr(&w, "type", "Header");
	put_cstr(&w, "format", "mt");
	put_u64(&w, "version", 1);
	put_argv(&w, "command", meta->argv, meta->argc > 0 ? meta->argc : 0);
	put_cstr(&w, "host", meta->host);
	put_cstr(&w, "clock", clock_name(meta->clock_id));
	put_u64(&w, "page_size", meta->page_size);
	put_u64(&w, "root_pid", meta->root_pid);
	put_u64(&w, "start_time", meta->start_realtime_ns);
	put_u64(&w, "start_monotonic", meta->start_monotonic_ns);
	put_bool(&w, "allocators_tracked", meta->flags & MT_HDR_ALLOCATORS);
	put_bool(&w, "syscalls_tracked", meta->flags & MT_HDR_SYSCALLS);
	put_bool(&w, "rss_tracked", meta->flags & MT_HDR_RSS);
	put_bool(&w, "physical_tracked", meta->flags & MT_HDR_PHYSICAL);
	if (meta->flags & MT_HDR_STACKS)
		put_bool(&w, "stacks_tracked", true);
	if (meta->flags & MT_HDR_ALLOCATORS)
		put_bool(&w, "allocators_recorder",
			 meta->flags & MT_HDR_RECORDER);
	return end_map(&w);
}

/* ---- CodSpeed's memtrack artifact ------------------------------------ */

/*
 * One event as memtrack (CodSpeed runner, crates/runner-shared) serializes
 * its MemtrackEvent with rmp-serde: a map of pid, tid, timestamp, addr,
 * then the variant's tag "type" and its fields in declaration order
 * (Realloc: old_addr, size; Free: none).  Integers take their smallest
 * form there too, so the bytes are the ones it writes.
 */
static int codspeed_map(struct mt_artifact *a, const struct mt_event *ev,
			unsigned kind, uint64_t addr, uint64_t size,
			const uint64_t *old_addr)
{
	struct map_writer w;

	a->events++;
	if (!begin_map(a, &w))
		return a->error;
	put_u64(&w, "pid", ev->pid);
	put_u64(&w, "tid", ev->tid);
	put_u64(&w, "timestamp", ev->timestamp);
	put_u64(&w, "addr", addr);
	put_name(&w, "type", &a->type_names[kind]);
	if (old_addr)
		put_u64(&w, "old_addr", *old_addr);
	if (kind != MT_EV_FREE)
		put_u64(&w, "size", size);
	return end_map(&w);
}

static int codspeed_record(struct mt_artifact *a, const struct mt_record *rec)
{
	const struct mt_event *ev = &rec->ev;

	if (rec->stack) /* the event goes, its call stack cannot */
		a->not_held[MT_EV_STACK_REF]++;
	switch (ev->kind) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_ALIGNED_ALLOC:
	case MT_EV_MMAP:
	case MT_EV_MUNMAP:
		return codspeed_map(a, ev, ev->kind, ev->addr, ev->size, NULL);
	case MT_EV_FREE:
		return codspeed_map(a, ev, ev->kind, ev->addr, 0, NULL);
	case MT_EV_REALLOC: {
		uint64_t old_addr = ev->old_addr;

		return codspeed_map(a, ev, ev->kind, ev->addr, ev->size,
				    &old_addr);
	}
	case MT_EV_MREMAP:
		/* what a move or resize amounts to; counted for the note */
		a->not_held[MT_EV_MREMAP]++;
		codspeed_map(a, ev, MT_EV_MUNMAP, ev->old_addr, ev->old_size,
			     NULL);
		return codspeed_map(a, ev, MT_EV_MMAP, ev->addr, ev->size,
				    NULL);
	case MT_EV_BRK:
		/* memtrack records the new break with size 0 */
		return codspeed_map(a, ev, ev->kind, ev->addr, 0, NULL);
	case MT_EV_LOST:
		a->lost += ev->size;
		a->not_held[MT_EV_LOST]++;
		return a->error;
	default:
		a->not_held[ev->kind]++;
		return a->error;
	}
}

uint64_t mt_artifact_not_held(const struct mt_artifact *a, unsigned kind)
{
	return kind < MT_EV_KIND_MAX ? a->not_held[kind] : 0;
}

uint64_t mt_artifact_lost(const struct mt_artifact *a)
{
	return a->lost;
}

/*
 * The maps of nearly every event in MessagePack (kinds in fast_kinds: no
 * string, so no room to find past MAP_ROOM): the head copied if the
 * kind's last map was the same thread's, the rest written with the style
 * known, and the writer's state in registers, never in memory (no call
 * takes it).
 */
static int event_msgpack(struct mt_artifact *a, const struct mt_record *rec,
			 unsigned kind)
{
	const struct mt_event *ev = &rec->ev;
	uint64_t thread = (uint64_t)ev->pid << 32 | ev->tid;
	struct head *h = &a->heads[kind];
	struct map_writer w;

	if (a->cap - a->len < MAP_ROOM)
		flush_buffer(a); /* cap >= 2 * MAP_ROOM */
	if (a->error)
		return a->error;
	w = (struct map_writer){
	    .a = a, .msgpack = true, .start = a->buf + a->len};
	if (h->thread == thread) {
		memcpy(w.start, h->bytes, HEAD_BYTES);
		w.p = w.start + h->len;
		w.n = 3;
	} else {
		/* written, then kept for the thread's next map of the kind
		 * (MAP_ROOM >= HEAD_BYTES bytes are there to copy) */
		w.p = w.start + 1;
		event_head(&w, &a->type_names[kind], ev);
		memcpy(h->bytes, w.start, HEAD_BYTES);
		h->len = w.p - w.start;
		h->thread = thread;
	}
	put_u64(&w, "timestamp", ev->timestamp);
	event_number_keys(&w, rec, kind);
	if (rec->stack)
		put_u64(&w, "stack", rec->stack);
	return end_map(&w);
}

/* Any other event map, in either style. */
static __attribute__((noinline)) int event_map(struct mt_artifact *a,
					       const struct mt_record *rec)
{
	struct map_writer w;

	if (!begin_map(a, &w))
		return a->error;
	event_head(&w, &a->type_names[rec->ev.kind], &rec->ev);
	put_u64(&w, "timestamp", rec->ev.timestamp);
	event_number_keys(&w, rec, rec->ev.kind);
	event_string_keys(&w, rec, rec->ev.kind);
	if (rec->stack)
		put_u64(&w, "stack", rec->stack);
	return end_map(&w);
}

int mt_artifact_record(struct mt_artifact *a, const struct mt_record *rec)
{
	const struct mt_event *ev = &rec->ev;
	unsigned kind = ev->kind;

	if (kind < 32 && (a->fast_kinds >> kind & 1)) {
		a->events++;
		return event_msgpack(a, rec, kind);
	}
	if (kind >= MT_EV_KIND_MAX || !a->type_names[kind].fixstr)
		return a->error ? a->error : -EINVAL;
	if (a->style == MT_ARTIFACT_CODSPEED)
		return codspeed_record(a, rec);
	a->events++;
	if (kind == MT_EV_LOST)
		a->lost += ev->size;
	if (kind == MT_EV_STACK || kind == MT_EV_CODE_FILE)
		return put_stack_or_file(a, &a->type_names[kind], rec);
	if (kind == MT_EV_PYCODE)
		return put_pycode(a, &a->type_names[kind], rec);
	return event_map(a, rec);
}

int mt_artifact_trailer(struct mt_artifact *a, const struct mt_meta *meta,
			bool complete, const char *error)
{
	struct map_writer w;

	if (a->style == MT_ARTIFACT_CODSPEED)
		return a->error;
	if (!begin_map(a, &w))
		return a->error;
	put_cstr(&w, "type", "Trailer");
	put_bool(&w, "complete", complete);
	if (complete) {
		if (meta->exit_kind == MT_EXIT_CODE)
			put_u64(&w, "exit_code", (uint32_t)meta->exit_value);
		else if (meta->exit_kind == MT_EXIT_SIGNAL)
			put_u64(&w, "signal", (uint32_t)meta->exit_value);
		put_u64(&w, "end_monotonic", meta->end_monotonic_ns);
	}
	put_u64(&w, "events", a->events);
	put_u64(&w, "lost_events", a->lost);
	if (complete)
		put_u64(&w, "batches", meta->batches);
	else
		put_cstr(&w, "error", error ? error : "incomplete");
	return end_map(&w);
}

int mt_artifact_close(struct mt_artifact *a)
{
	int ret;

	if (!a)
		return 0;
	ret = mt_artifact_flush(a);
	mt_zwriter_free(a->zstd);
	free(a->buf);
	free(a);
	return ret;
}

uint64_t mt_artifact_events(const struct mt_artifact *a)
{
	return a->events;
}

bool mt_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		/* overlong forms, surrogates, beyond U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += n + 1;
	}
	return true;
}
