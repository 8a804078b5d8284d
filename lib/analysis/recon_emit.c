// SPDX-License-Identifier: MIT
/*
 * recon_emit.c - the writer of the timelines document.
 *
 * The process objects are most of the document (a build starts tens of
 * thousands of processes), so their shape is written once, against an
 * emitter with two back ends: text in exactly jansson's format, which
 * mt_recon_write streams without building a tree per process, or a json_t
 * tree, for mt_recon_finish and the head of the document.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mt_decimal.h"
#include "recon_emit.h"
/* A text emitter writing to out in jansson's format for flags. */
struct emit emit_text(FILE *out, size_t flags)
{
	bool compact = flags & JSON_COMPACT;
	struct emit e = {.out = out,
			 .flags = flags,
			 .buf = malloc(EMIT_BUF),
			 .flat = !(flags & JSON_MAX_INDENT),
			 .sep = {',', ' '},
			 .colon = {':', ' '},
			 .sep_len = compact ? 1 : 2,
			 .colon_len = compact ? 1 : 2};

	return e;
}

/* A tree emitter adding to an existing object or array. */
struct emit emit_into(json_t *container)
{
	return (struct emit){.depth = 1, .stack = {container}};
}

void text_flush(struct emit *e)
{
	fwrite(e->buf, 1, e->len, e->out);
	e->len = 0;
}

/* Inline, so that the many puts of a byte or two are a store or two. */
static inline __attribute__((always_inline)) void
text_put(struct emit *e, const char *s, size_t n)
{
	if (e->len + n > EMIT_BUF) {
		text_flush(e);
		if (n > EMIT_BUF) {
			fwrite(s, 1, n, e->out);
			return;
		}
	}
	memcpy(e->buf + e->len, s, n);
	e->len += n;
}

/* A value as jansson writes it (strings, reals, booleans). */
static void text_json(struct emit *e, const json_t *v)
{
	char *s = json_dumps(v, e->flags | JSON_ENCODE_ANY);

	if (s)
		text_put(e, s, strlen(s));
	free(s);
}

/* A string jansson writes as it is: no quote, backslash or control
 * character, no slash or non-ASCII byte when the flags escape those.  The
 * strings here are valid UTF-8: exec paths made so by exec_path, the rest
 * literals. */
static bool text_plain(const struct emit *e, const char *s, size_t n)
{
	bool slash = e->flags & JSON_ESCAPE_SLASH;
	bool ascii = e->flags & JSON_ENSURE_ASCII;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c < 0x20 || c == '"' || c == '\\' || (slash && c == '/') ||
		    (ascii && c >= 0x80))
			return false;
	}
	return true;
}

/* Plain strings are copied; anything jansson would escape, it writes. */
static void text_string(struct emit *e, const char *s, size_t n)
{
	json_t *j;

	if (!text_plain(e, s, n)) {
		j = json_stringn(s, n);
		text_json(e, j);
		json_decref(j);
		return;
	}
	text_put(e, "\"", 1);
	text_put(e, s, n);
	text_put(e, "\"", 1);
}

/* jansson's dump_indent: a newline and depth indents, or in one-line
 * output a space where asked unless JSON_COMPACT. */
static void text_indent(struct emit *e, int depth, bool space)
{
	unsigned indent = e->flags & JSON_MAX_INDENT;

	if (indent) {
		text_put(e, "\n", 1);
		for (unsigned i = 0; i < depth * indent; i++)
			text_put(e, " ", 1);
	} else if (space && !(e->flags & JSON_COMPACT)) {
		text_put(e, " ", 1);
	}
}

/* A key and its separator.  The keys of the shapes below are this file's
 * literals, plain ASCII: copied as they are. */
static void text_key(struct emit *e, const char *key)
{
	size_t n = strlen(key);
	char *b;

	if (n > KEY_MAX) {
		text_string(e, key, n);
		text_put(e, ": ", e->flags & JSON_COMPACT ? 1 : 2);
		return;
	}
	if (e->len + n + 4 > EMIT_BUF)
		text_flush(e);
	b = e->buf + e->len;
	*b++ = '"';
	memcpy(b, key, n);
	b += n;
	*b++ = '"';
	*b++ = ':';
	if (!(e->flags & JSON_COMPACT))
		*b++ = ' ';
	e->len = b - e->buf;
}

/* Before a value: its separator and, in an object, its key. */
static void text_item(struct emit *e, const char *key)
{
	if (e->depth > 0) {
		if (e->items[e->depth - 1])
			text_put(e, ",", 1);
		text_indent(e, e->depth, e->items[e->depth - 1]);
		e->items[e->depth - 1] = true;
	}
	if (key)
		text_key(e, key);
}

/* Tree: v under key in the open object, or appended to the open array
 * (v is taken, as by json_object_set_new). */
static void tree_add(struct emit *e, const char *key, json_t *v)
{
	json_t *top = e->stack[e->depth - 1];

	if (key)
		json_object_set_new(top, key, v);
	else
		json_array_append_new(top, v);
}

/* n bytes of key (n <= KEY_MAX) to dst: a few wide moves, not a call */
static inline void copy_key(char *dst, const char *key, size_t n)
{
	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8)
			memcpy(dst + i, key + i, 8);
		memcpy(dst + n - 8, key + n - 8, 8); /* the tail, overlapping */
	} else if (n >= 4) {
		memcpy(dst, key, 4);
		memcpy(dst + n - 4, key + n - 4, 4);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = key[i];
	}
}

/*
 * Text: the separator and key of an item, and room for size more bytes
 * after them; returns where its value goes (the caller moves e->len past
 * it).  Flat output, where the document is most of its bytes, takes one
 * check for room and a few stores; indented output and the top level go
 * through text_item.
 */
static inline char *text_room(struct emit *e, const char *key, size_t klen,
			      size_t size)
{
	char *b;

	if (!e->flat || !e->depth || klen > KEY_MAX) {
		text_item(e, key);
		if (e->len + size > EMIT_BUF)
			text_flush(e);
		return e->buf + e->len;
	}
	if (e->len + 2 + KEY_MAX + 4 + size > EMIT_BUF)
		text_flush(e);
	b = e->buf + e->len;
	if (e->items[e->depth - 1]) {
		memcpy(b, e->sep, 2);
		b += e->sep_len;
	}
	e->items[e->depth - 1] = true;
	if (key) {
		*b++ = '"';
		copy_key(b, key, klen);
		b += klen;
		*b++ = '"';
		memcpy(b, e->colon, 2);
		b += e->colon_len;
	}
	return b;
}

void emit_open_k(struct emit *e, const char *key, size_t klen, bool array)
{
	if (e->depth == EMIT_DEPTH)
		abort(); /* the shapes below are a few levels deep */
	if (e->out) {
		char *b = text_room(e, key, klen, 1);

		*b++ = array ? '[' : '{';
		e->len = b - e->buf;
		e->items[e->depth++] = false;
		return;
	}
	json_t *c = array ? json_array() : json_object();

	if (e->depth)
		tree_add(e, key, c);
	e->stack[e->depth++] = c;
}

void emit_close(struct emit *e, bool array)
{
	e->depth--;
	if (!e->out)
		return;
	if (e->items[e->depth] && !e->flat)
		text_indent(e, e->depth, false);
	text_put(e, array ? "]" : "}", 1);
}

void emit_int_k(struct emit *e, const char *key, size_t klen, json_int_t v)
{
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	unsigned n = mt_decimal_len(u);
	char *b;

	if (!e->out) {
		tree_add(e, key, json_integer(v));
		return;
	}
	b = text_room(e, key, klen, n + 1);
	if (v < 0)
		*b++ = '-';
	mt_put_decimal(b, u, n);
	e->len = b + n - e->buf;
}

void emit_null_k(struct emit *e, const char *key, size_t klen)
{
	char *b;

	if (!e->out) {
		tree_add(e, key, json_null());
		return;
	}
	b = text_room(e, key, klen, 4);
	memcpy(b, "null", 4);
	e->len = b + 4 - e->buf;
}

void emit_bool_k(struct emit *e, const char *key, size_t klen, bool v)
{
	char *b;

	if (!e->out) {
		tree_add(e, key, json_boolean(v));
		return;
	}
	b = text_room(e, key, klen, 5);
	memcpy(b, v ? "true" : "false", v ? 4 : 5);
	e->len = b + (v ? 4 : 5) - e->buf;
}

/* A string of n bytes, valid UTF-8 (NUL bytes included). */
void emit_strn_k(struct emit *e, const char *key, size_t klen, const char *s,
		 size_t n)
{
	if (!e->out) {
		tree_add(e, key, json_stringn(s, n));
		return;
	}
	e->len = text_room(e, key, klen, 0) - e->buf;
	text_string(e, s, n);
}

/*
 * A real as jansson writes it: "%.*g" at the flags' precision (17 when
 * none), ".0" added when that reads as an integer, and the exponent
 * without "+" or leading zeros.  Formatting it here saves a json_t and a
 * json_dumps per process; test_write_is_jansson holds it to jansson's.
 */
static size_t real_text(char *out, size_t size, double x, size_t flags)
{
	int precision = (int)((flags >> 11) & 0x1F);
	int n = snprintf(out, size, "%.*g", precision ? precision : 17, x);
	char *exp, *digits;
	size_t len;

	if (n < 0 || (size_t)n + 3 > size)
		return 0;
	len = (size_t)n;
	if (!memchr(out, '.', len) && !memchr(out, 'e', len)) {
		memcpy(out + len, ".0", 3);
		len += 2;
	}
	exp = memchr(out, 'e', len);
	if (exp) {
		char *sign = exp + 1;

		digits = sign + (*sign == '-' || *sign == '+');
		if (*sign == '-')
			sign++; /* keep the minus */
		while (*digits == '0' && digits[1])
			digits++;
		memmove(sign, digits, out + len + 1 - digits);
		len -= digits - sign;
	}
	return len;
}

/* A real, or nothing when json_real refuses it (NaN, infinity). */
void emit_real(struct emit *e, const char *key, double x)
{
	char text[40];
	size_t n;
	char *b;

	if (!isfinite(x))
		return;
	if (!e->out) {
		tree_add(e, key, json_real(x));
		return;
	}
	n = real_text(text, sizeof(text), x, e->flags);
	if (!n)
		return;
	b = text_room(e, key, KEY_LEN(key), n);
	memcpy(b, text, n);
	e->len = b + n - e->buf;
}

void emit_raw(struct emit *e, const char *s, size_t n)
{
	text_put(e, s, n);
}
