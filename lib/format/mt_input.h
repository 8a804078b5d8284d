/* SPDX-License-Identifier: MIT */
/*
 * mt_input.h - read any event stream mt understands, one record at a time:
 *
 *   MT_FMT_RAW       mt-trace's raw stream (mt_raw.h)
 *   MT_FMT_ARTIFACT  mt-encode's MessagePack artifact (header map, event
 *                    maps, trailer map)
 *   MT_FMT_JSONL     mt-encode --jsonl (the same maps as JSON lines)
 *   MT_FMT_MEMTRACK  a CodSpeed memtrack artifact after `zstd -dc`: event
 *                    maps only, no header or trailer
 *
 * The format is told from the first bytes, never from the file name.
 * Every later stage (mt-encode, mt-reconstruct, mt-report) reads through
 * this one interface, so they all agree on what a stream means.
 */
#ifndef MT_INPUT_H
#define MT_INPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "mt_raw.h"

enum mt_format {
	MT_FMT_UNKNOWN = 0,
	MT_FMT_RAW,
	MT_FMT_ARTIFACT,
	MT_FMT_JSONL,
	MT_FMT_MEMTRACK,
	MT_FMT_TIMELINES, /* mt-reconstruct's JSON: not an event stream */
};

/*
 * One decoded event.  str, frames and build_id point into the reader's
 * memory and stay valid until the next mt_input_next().
 *
 * 80 bytes: every reader clears a record per event, and at 88 bytes GCC
 * clears it with rep stosq, which cost 16 instructions an event (+14% for
 * mt-read) when the call stacks' fields came in.  So the counts of a
 * STACK's frames and of a CODE_FILE's build-id are the ones their event
 * already holds (ev.size, ev.flags, as in the raw stream), and the two
 * pointers share a place.
 */
struct mt_record {
	struct mt_event ev; /* kind is enum mt_event_kind, incl. MT_EV_LOST */
	const char *str;    /* EXEC path, MARKER name, CODE_FILE path; NULL
			     * otherwise (NUL-terminated; an EXEC's
			     * arguments follow it: mt_exec_args) */
	uint32_t str_len;
	/* call stacks (readers never return a STACK_REF record: its id
	 * comes here, with the event it belongs to; ids beyond 32 bits are
	 * refused) */
	uint32_t stack; /* the event's call stack id, 0: none */
	union {
		/* STACK (id in ev.addr, MT_STACK_* in ev.flags): ev.size
		 * MT_FRAME() values, innermost first */
		const uint64_t *frames;
		/* CODE_FILE (id in ev.addr): its ev.flags build-id bytes,
		 * NULL when none */
		const uint8_t *build_id;
	};
};

_Static_assert(sizeof(struct mt_record) <= 80,
	       "a record is cleared per event: keep it out of rep stosq");

struct mt_input;

/*
 * Open path ("-" or NULL for stdin).  Reads the stream header (if the
 * format has one) before returning.  On failure returns NULL and writes a
 * message "NAME: byte N: what" into err.
 */
struct mt_input *mt_input_open(const char *path, char *err, size_t errlen);

/* The same on an open stream; name is used in messages.  Takes f. */
struct mt_input *mt_input_fopen(FILE *f, const char *name, char *err,
				size_t errlen);

enum mt_format mt_input_format(const struct mt_input *in);
const char *mt_format_name(enum mt_format fmt);

/* Header now; trailer fields once mt_input_next() returned 0. */
const struct mt_meta *mt_input_meta(const struct mt_input *in);

/*
 * Next record: 1 = rec filled, 0 = clean end of stream (trailer seen, or
 * for MT_FMT_MEMTRACK end of file), -1 = the stream is truncated or corrupt;
 * mt_input_error() then says where and what, and mt_input_meta() holds what
 * was known (has_trailer false).
 */
int mt_input_next(struct mt_input *in, struct mt_record *rec);

const char *mt_input_error(const struct mt_input *in);

/* Byte offset of the next unread byte of the input (for messages and
 * progress); for zstd-compressed input, the compressed bytes consumed. */
uint64_t mt_input_offset(const struct mt_input *in);

/*
 * MT_FMT_TIMELINES, which mt_input_next() refuses (no event stream): the
 * document's bytes from its first on, decompressed when zstd, from a file
 * or a pipe, for a JSON parser (mt-report's).  Like read(2): > 0 bytes
 * given, 0 at the end, -1 on a read error or a damaged zstd frame
 * (mt_input_error() then says where and what).
 */
ssize_t mt_input_read_text(struct mt_input *in, void *dst, size_t cap);

void mt_input_close(struct mt_input *in);

/* Stable names of event kinds as used in artifacts ("Malloc", "Free",
 * ...); NULL for an unknown kind.  And back: MT_EV_NONE if unknown. */
const char *mt_kind_name(unsigned kind);
unsigned mt_kind_from_name(const char *name, size_t len);

/*
 * A PyCode record's payload (man/mt-format.5 "Python frames"): its name,
 * qualified name, file name and line table, pointing into rec->str.  0,
 * or -1 when the four lengths do not add up to the payload.
 */
struct mt_pycode {
	const char *name, *qualname, *file;
	const uint8_t *linetable;
	uint32_t name_len, qualname_len, file_len, linetable_len;
};

int mt_pycode_parse(const struct mt_record *rec, struct mt_pycode *code);

/*
 * An EXEC record's arguments (man/mt-format.5): the ev.size bytes after
 * its path's NUL, each argument ending in a NUL (the reader puts one after
 * the last in any case); NULL when the record has none (a trace of mt 0.4
 * or earlier: the path names the program).  ev.flags has
 * MT_EXEC_ARGS_CUT when they were cut, ev.old_size then the length of the
 * program's whole argument area.  The bytes are the traced program's: any
 * bytes but NUL, UTF-8 or not.
 */
static inline const char *mt_exec_args(const struct mt_record *rec)
{
	return rec->ev.kind == MT_EV_EXEC && rec->ev.size && rec->str
		   ? rec->str + rec->str_len + 1
		   : NULL;
}

#endif /* MT_INPUT_H */
