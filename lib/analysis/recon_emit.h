// SPDX-License-Identifier: MIT
/*
 * recon_emit.h - the emitter of the timelines document (recon_emit.c):
 * the same calls write jansson's exact text to a FILE, streamed, or build
 * a json_t tree.
 */
#ifndef MT_RECON_EMIT_H
#define MT_RECON_EMIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define EMIT_DEPTH 16
#define EMIT_BUF   (64 * 1024)

#define KEY_MAX 64 /* longer keys (none here) take the general path */

struct emit {
	FILE *out;    /* text to out; NULL: a json_t tree */
	size_t flags; /* jansson's dump flags */
	char *buf;    /* text not yet written */
	size_t len;
	int depth;	       /* containers open */
	bool flat;	       /* text with no indentation: see text_room */
	char sep[2], colon[2]; /* flat: "," or ", ", ":" or ": " */
	unsigned sep_len, colon_len;
	bool items[EMIT_DEPTH];	   /* text: the container has items */
	json_t *stack[EMIT_DEPTH]; /* tree: the containers */
};

/* A text emitter writing to out in jansson's format for flags (its buf
 * is NULL when out of memory). */
struct emit emit_text(FILE *out, size_t flags);
/* A tree emitter adding to an existing object or array. */
struct emit emit_into(json_t *container);
/* Text: writes what is buffered. */
void text_flush(struct emit *e);
/* Text: n bytes as they are (a separator between streamed items). */
void emit_raw(struct emit *e, const char *s, size_t n);

void emit_open_k(struct emit *e, const char *key, size_t klen, bool array);
void emit_close(struct emit *e, bool array);
void emit_int_k(struct emit *e, const char *key, size_t klen, json_int_t v);
void emit_null_k(struct emit *e, const char *key, size_t klen);
void emit_bool_k(struct emit *e, const char *key, size_t klen, bool v);
/* A string of n bytes, valid UTF-8 (NUL bytes included). */
void emit_strn_k(struct emit *e, const char *key, size_t klen, const char *s,
		 size_t n);
/* A real as jansson writes it; nothing for NaN or infinities. */
void emit_real(struct emit *e, const char *key, double x);

/*
 * The keys below are literals: these wrappers, inlined, measure them when
 * compiling (strlen of a literal is a constant), so that writing a key
 * is a copy of known length.
 */
#define KEY_LEN(key) ((key) ? strlen(key) : 0)

static inline __attribute__((always_inline)) void
emit_open(struct emit *e, const char *key, bool array)
{
	emit_open_k(e, key, KEY_LEN(key), array);
}

static inline __attribute__((always_inline)) void
emit_int(struct emit *e, const char *key, json_int_t v)
{
	emit_int_k(e, key, KEY_LEN(key), v);
}

static inline __attribute__((always_inline)) void emit_null(struct emit *e,
							    const char *key)
{
	emit_null_k(e, key, KEY_LEN(key));
}

static inline __attribute__((always_inline)) void
emit_bool(struct emit *e, const char *key, bool v)
{
	emit_bool_k(e, key, KEY_LEN(key), v);
}

static inline __attribute__((always_inline)) void
emit_strn(struct emit *e, const char *key, const char *s, size_t n)
{
	emit_strn_k(e, key, KEY_LEN(key), s, n);
}

static inline __attribute__((always_inline)) void
emit_str(struct emit *e, const char *key, const char *s)
{
	emit_strn_k(e, key, KEY_LEN(key), s, strlen(s));
}

#endif /* MT_RECON_EMIT_H */
