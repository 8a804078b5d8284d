/* SPDX-License-Identifier: MIT */
/*
 * mt_zstd.h - zstd frames around any of mt's byte streams (libzstd).
 *
 * Writing: each block handed to mt_zwriter_frame() becomes one independent
 * frame (content size and checksum in it), so a reader can start at any
 * frame, and a file cut short still gives back every frame before the cut.
 * `zstd -dc` of the frames is exactly the bytes that went in.
 *
 * Reading: mt_zreader decompresses one frame after another (zstd frames,
 * skippable frames skipped) from a FILE into the caller's buffer, in a
 * window of bounded size whatever the length of the input; a frame cut
 * short or damaged is an error naming the compressed byte offset.  A frame
 * of known size that fits is decoded in one call; when the process may run
 * on a second CPU, the frames are decoded a few ahead in a thread of the
 * reader's own (the caller sees the same bytes, ends and errors).
 */
#ifndef MT_ZSTD_H
#define MT_ZSTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * The artifact's defaults, chosen by measurement (man/mt-encode.1 and
 * bench/RESULTS.md give the numbers): bytes of MessagePack per frame and
 * the zstd level.  MT_ZSTD_LEVEL_AUTO, the artifact's default, is that
 * level with, frame by frame, zstd's faster search where it made the
 * smaller frames (zstd_io.c, PROBE_EVERY); any other level is used for
 * every frame.
 */
#define MT_ZSTD_FRAME_BYTES (1u << 20)
#define MT_ZSTD_LEVEL	    1
#define MT_ZSTD_LEVEL_AUTO  0

/* The first 4 bytes of a zstd frame (28 b5 2f fd) or of a skippable frame
 * (5X 2a 4d 18): true if p[0..len) starts with either. */
bool mt_zstd_magic(const void *p, size_t len);

/* ---- writer ---------------------------------------------------------- */

struct mt_zwriter;

/* level: 1 to 19, or MT_ZSTD_LEVEL_AUTO.  NULL if out of memory.
 * workers > 0: zstd compresses in that many threads of its own (a frame
 * of 1 MiB or more is split among them). */
struct mt_zwriter *mt_zwriter_new(int level, int workers);

/*
 * Compresses src[0..len) into one frame and writes it to fd.  0, or
 * -errno (a short write is -EIO, a compression failure -EINVAL, no
 * memory for the frame -ENOMEM).  When the process may run on a second
 * CPU, the frame is copied, and compressed and written by one of the
 * writer's threads (one per CPU, frames written in the order given)
 * while the caller goes on: an error then shows at the next call or at
 * mt_zwriter_wait(), and no frame after it is written.
 */
int mt_zwriter_frame(struct mt_zwriter *z, int fd, const void *src, size_t len);

/*
 * mt_zwriter_frame() without the copy: the frame is the first len bytes
 * of *buf (a buffer of *cap bytes from malloc()), which the writer takes;
 * *buf and *cap become another buffer of at least *cap bytes, the
 * caller's to fill and free.  With no thread of the writer's the frame is
 * compressed at once and the buffer stays the caller's.
 */
int mt_zwriter_give(struct mt_zwriter *z, int fd, void **buf, size_t *cap,
		    size_t len);

/* Waits until every frame given is written; 0 or the first error. */
int mt_zwriter_wait(struct mt_zwriter *z);

/* Compressed bytes written so far (after waiting for them). */
uint64_t mt_zwriter_written(struct mt_zwriter *z);

void mt_zwriter_free(struct mt_zwriter *z);

/* ---- reader ---------------------------------------------------------- */

struct mt_zreader;

/*
 * Reads compressed bytes from f: first the head_len bytes at head (what
 * the caller already read from f, copied), then f from where it stands.
 * f stays the caller's, but is read by the reader's thread until
 * mt_zreader_free(): free the reader before closing f.  NULL if out of
 * memory.
 */
struct mt_zreader *mt_zreader_new(FILE *f, const void *head, size_t head_len);

/*
 * Up to cap decompressed bytes into dst: > 0 bytes given, 0 at the clean
 * end (every frame complete), -1 when the input is cut inside a frame,
 * damaged or unreadable; mt_zreader_error() then says "byte N: what",
 * N counted in compressed bytes.
 */
ssize_t mt_zreader_read(struct mt_zreader *z, void *dst, size_t cap);

/*
 * Bytes free before a block mt_zreader_take() gives: what the caller
 * keeps of its last block (an object cut by the block's end) goes there.
 */
#define MT_ZREAD_ROOM ((size_t)64 << 10)

/*
 * The next decoded block without a copy, when the reader decodes in its
 * own thread: the caller's buffer (*buf, *cap bytes) goes to the reader,
 * to be decoded into later, and *buf, *cap become the block's own buffer,
 * its bytes from *start on, the keep bytes that were at the old *buf +
 * *start copied just before them.  Returns the block's new bytes (> 0),
 * 0 at the clean end, -1 on an error (as mt_zreader_read; nothing
 * changes hands then), or -2 when it cannot be done (no thread, a buffer
 * smaller than MT_ZREAD_ROOM + a frame, keep over MT_ZREAD_ROOM): then
 * mt_zreader_read() copies instead.  Every buffer is malloc()'s: whoever
 * holds one at the end frees it.
 */
ssize_t mt_zreader_take(struct mt_zreader *z, unsigned char **buf, size_t *cap,
			size_t *start, size_t keep);

const char *mt_zreader_error(const struct mt_zreader *z);

/* Compressed bytes consumed so far. */
uint64_t mt_zreader_offset(const struct mt_zreader *z);

void mt_zreader_free(struct mt_zreader *z);

#endif /* MT_ZSTD_H */
