/* SPDX-License-Identifier: MIT */
/*
 * input_msgpack.c - MessagePack streams (mt artifacts, CodSpeed memtrack
 * artifacts), the general path: any map, sized first so that msgpack-c
 * (the reference decoder) is only handed whole objects, with flat maps
 * of scalars decoded in one pass without it.  input_fast.c sits in front
 * and takes nearly every event map of an mt artifact.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "input_int.h"

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

/* [a, b]: two unsigned integers (a stack frame) */
static bool mp_pair_at(const void *arr, size_t i, uint64_t *a, uint64_t *b)
{
	const msgpack_object *o = &((const msgpack_object_array *)arr)->ptr[i];
	const msgpack_object *p = o->via.array.ptr;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2 ||
	    p[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    p[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return false;
	*a = p[0].via.u64;
	*b = p[1].via.u64;
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
		v->pair_at = mp_pair_at;
		break;
	default:
		v->type = V_OTHER;
		break;
	}
}

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
bool mp_reference_fields(struct mt_input *in, size_t size, struct fields *f)
{
	size_t ref_size = 0;

	return mp_object_size(cur(in), avail(in), &ref_size) == 1 &&
	       ref_size == size && !mp_fields(in, size, f);
}

/* Fuzzing: the flat decoder must agree with msgpack-c on every map. */
static void mp_check_fast(struct mt_input *in, size_t size,
			  const struct fields *fast)
{
	struct fields slow;

	if (!mp_reference_fields(in, size, &slow) ||
	    slow.present != fast->present)
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
		return input_fail(in, off,
				  "MessagePack object larger than %u bytes",
				  MAX_OBJECT);
	if (fill(in, avail(in) + 1))
		return 1;
	if (in->state < 0)
		return -1;
	if (avail(in) == 0)
		return 0;
	return input_fail(
	    in, off, "truncated MessagePack object (%zu bytes before the end)",
	    avail(in));
}

int mp_next_fields(struct mt_input *in, struct fields *f, uint64_t *off)
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
		return input_fail(in, *off, "invalid MessagePack (byte 0xc1)");
	what = mp_fields(in, size, f);
	if (what)
		return input_fail(in, *off, "%s", what);
	consume(in, size); /* its strings stay in the buffer until next fill */
	return 1;
}

/* A MessagePack stream: an mt artifact starts with its Header map, a
 * memtrack one with its first event. */
int mp_open(struct mt_input *in)
{
	struct fields f;
	uint64_t off;
	enum object_role role;
	unsigned kind = MT_EV_NONE;
	int ret;

	in->guesses = guesses_new();
	if (!in->guesses || !input_grow(in, MP_BUF))
		return input_fail(in, 0, "out of memory");
	ret = mp_next_fields(in, &f, &off);
	if (ret <= 0)
		return -1;
	if (fields_role(in, off, &f, &role, &kind))
		return -1;
	if (role == OBJ_HEADER) {
		if (!str_is(val(&f, K_FORMAT), "mt"))
			return input_fail(in, off,
					  "Header: \"format\" is not \"mt\"");
		in->fmt = MT_FMT_ARTIFACT;
		return fields_to_header(in, off, &f);
	}
	if (role == OBJ_TRAILER)
		return input_fail(in, off, "stream starts with a Trailer");
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
