/* SPDX-License-Identifier: MIT */
/*
 * mt_artifact.h - write the artifact mt-encode produces: a stream of
 * MessagePack maps (a Header map, one map per event, a Trailer map), or the
 * same maps as JSON Lines.  man/mt-format.5 lists every key; the reader is
 * mt_input.h.
 *
 * Output is buffered in large blocks and written to a file descriptor; a
 * map bigger than the buffer (a long command line or path) grows it.
 * Every function returns 0 or the first write error as -errno; after an
 * error the writer stays failed and writes nothing more.
 */
#ifndef MT_ARTIFACT_H
#define MT_ARTIFACT_H

#include <stdbool.h>
#include <stdint.h>

#include "mt_input.h"

enum mt_artifact_style {
	MT_ARTIFACT_MSGPACK = 0,
	MT_ARTIFACT_JSONL,
	/* CodSpeed memtrack's own artifact: its event kinds only, its key
	 * order, no Header or Trailer (mt_artifact_not_held() counts the
	 * rest) */
	MT_ARTIFACT_CODSPEED,
};

struct mt_artifact;

/* NULL if out of memory.  The fd stays the caller's. */
struct mt_artifact *mt_artifact_new(int fd, enum mt_artifact_style style);

/*
 * Compress what is written: each buffer of frame_bytes (whole maps only)
 * becomes one independent zstd frame at the given level (or
 * MT_ZSTD_LEVEL_AUTO, mt_zstd.h), compressed in
 * workers threads of zstd's own when workers > 0 (mt_zstd.h).
 * Only before anything is written; 0 or -errno.
 */
int mt_artifact_compress(struct mt_artifact *a, int level, int workers,
			 size_t frame_bytes);

/* Compressed bytes written so far (0 when not compressing). */
uint64_t mt_artifact_compressed_bytes(struct mt_artifact *a);

int mt_artifact_header(struct mt_artifact *a, const struct mt_meta *meta);
int mt_artifact_record(struct mt_artifact *a, const struct mt_record *rec);

/*
 * The trailer.  complete: the input ended with its own trailer, and meta's
 * trailer fields are known; otherwise error says why the stream is
 * incomplete.  "events" and "lost_events" are counted by the writer from
 * the records it wrote.
 */
int mt_artifact_trailer(struct mt_artifact *a, const struct mt_meta *meta,
			bool complete, const char *error);

/* Writes out what is buffered. */
int mt_artifact_flush(struct mt_artifact *a);

/* Flushes and frees; returns the first error seen, or 0. */
int mt_artifact_close(struct mt_artifact *a);

/* Event maps written so far (Lost records included). */
uint64_t mt_artifact_events(const struct mt_artifact *a);

/* Events lost by the tracer, the sum of the Lost records seen. */
uint64_t mt_artifact_lost(const struct mt_artifact *a);

/* MT_ARTIFACT_CODSPEED: records of kind the format could not hold as
 * they are (MT_EV_MREMAP: written as Munmap + Mmap; MT_EV_LOST: Lost
 * records, the events themselves are in mt_artifact_lost();
 * MT_EV_STACK_REF: events written without their call stack). */
uint64_t mt_artifact_not_held(const struct mt_artifact *a, unsigned kind);

/* true if s[0..len) is well-formed UTF-8. */
bool mt_utf8_valid(const char *s, size_t len);

#endif /* MT_ARTIFACT_H */
