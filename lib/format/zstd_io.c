/* SPDX-License-Identifier: MIT */
/*
 * zstd_io.c - zstd frames around mt's streams (mt_zstd.h): a writer that
 * makes one independent frame per block, and a streaming reader the input
 * layer puts under its buffer when a stream starts with a zstd magic.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "mt_zstd.h"

#define ZSTD_SKIPPABLE_MASK 0xfffffff0u

/*
 * A reader refuses frames whose window is bigger than this: it bounds the
 * memory one frame may ask for (a damaged header could ask for 2 GiB).
 * mt's frames need 1-4 MiB; zstd's own default limit is the same 128 MiB.
 */
#define WINDOW_LOG_MAX 27

/* Compressed bytes a reader buffers: whole frames of mt's (1 MiB of
 * MessagePack, 0.1-0.3 MiB compressed) with room to spare, so that most
 * frames decode in one call (decode_whole_frame). */
#define ZREAD_BYTES ((size_t)2 << 20)

bool mt_zstd_magic(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint32_t magic;

	if (len < 4)
		return false;
	magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
		(uint32_t)b[3] << 24;
	return magic == ZSTD_MAGICNUMBER ||
	       (magic & ZSTD_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

/* ---- writer ---------------------------------------------------------- */

struct mt_zwriter {
	ZSTD_CCtx *cctx;
	void *out;
	size_t out_cap;
	uint64_t written;
};

struct mt_zwriter *mt_zwriter_new(int level, int workers)
{
	struct mt_zwriter *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->cctx = ZSTD_createCCtx();
	z->out_cap = ZSTD_CStreamOutSize();
	z->out = malloc(z->out_cap);
	if (!z->cctx || !z->out) {
		mt_zwriter_free(z);
		return NULL;
	}
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level);
	/* a flipped bit must not decode into other events silently */
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 1);
	if (workers > 0 && !ZSTD_isError(ZSTD_CCtx_setParameter(
			       z->cctx, ZSTD_c_nbWorkers, workers)))
		/* the smallest job zstd takes: a frame splits into jobs the
		 * workers compress at once */
		ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_jobSize, 512 * 1024);
	return z;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= w;
	}
	return 0;
}

int mt_zwriter_frame(struct mt_zwriter *z, int fd, const void *src, size_t len)
{
	ZSTD_inBuffer in = {.src = src, .size = len};
	size_t left;

	/* the frame's header then says how long its content is */
	ZSTD_CCtx_setPledgedSrcSize(z->cctx, len);
	do {
		ZSTD_outBuffer out = {.dst = z->out, .size = z->out_cap};
		int ret;

		left = ZSTD_compressStream2(z->cctx, &out, &in, ZSTD_e_end);
		if (ZSTD_isError(left)) {
			ZSTD_CCtx_reset(z->cctx, ZSTD_reset_session_only);
			return -EINVAL;
		}
		ret = write_all(fd, z->out, out.pos);
		if (ret)
			return ret;
		z->written += out.pos;
	} while (left);
	return 0;
}

uint64_t mt_zwriter_written(const struct mt_zwriter *z)
{
	return z->written;
}

void mt_zwriter_free(struct mt_zwriter *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->cctx);
	free(z->out);
	free(z);
}

/* ---- reader ---------------------------------------------------------- */

struct mt_zreader {
	FILE *f;
	ZSTD_DStream *ds;
	unsigned char *buf; /* compressed bytes; buf[0] is at offset buf_off */
	size_t cap;
	ZSTD_inBuffer in;
	uint64_t buf_off;
	uint64_t frame_off; /* where the frame being decoded started */
	bool eof;
	bool in_frame;	 /* a frame is started and not yet complete */
	bool out_filled; /* the last call filled dst: zstd may hold more */
	char err[256];
};

struct mt_zreader *mt_zreader_new(FILE *f, const void *head, size_t head_len)
{
	struct mt_zreader *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->f = f;
	z->cap = ZREAD_BYTES;
	if (z->cap < head_len)
		z->cap = head_len;
	z->buf = malloc(z->cap);
	z->ds = ZSTD_createDStream();
	if (!z->buf || !z->ds) {
		mt_zreader_free(z);
		return NULL;
	}
	ZSTD_DCtx_setParameter(z->ds, ZSTD_d_windowLogMax, WINDOW_LOG_MAX);
	if (head_len) /* head may be NULL then */
		memcpy(z->buf, head, head_len);
	z->in = (ZSTD_inBuffer){.src = z->buf, .size = head_len};
	return z;
}

static ssize_t zfail(struct mt_zreader *z, uint64_t off, const char *what)
{
	snprintf(z->err, sizeof(z->err), "byte %" PRIu64 ": %s", off, what);
	return -1;
}

/* More compressed bytes after those not consumed yet (moved to the
 * buffer's start); false at the end of the input, when the buffer is
 * full, or on an error (with z->err set). */
static bool refill(struct mt_zreader *z)
{
	size_t left = z->in.size - z->in.pos;
	size_t n;

	if (z->eof || !z->f)
		return z->eof = true, false;
	if (z->in.pos > 0) {
		memmove(z->buf, z->buf + z->in.pos, left);
		z->buf_off += z->in.pos;
		z->in = (ZSTD_inBuffer){.src = z->buf, .size = left};
	}
	if (left == z->cap)
		return false;
	n = fread(z->buf + left, 1, z->cap - left, z->f);
	z->in.size += n;
	if (n == 0) {
		if (ferror(z->f)) {
			snprintf(z->err, sizeof(z->err),
				 "byte %" PRIu64 ": read error: %s",
				 z->buf_off + left, strerror(errno));
			return false;
		}
		z->eof = true;
	}
	return n > 0;
}

/*
 * The next frame decoded whole, straight into dst, when its header says
 * how long it is, that fits in cap, and all of its compressed bytes can be
 * buffered: one call to zstd, no streaming window, no copy out of it (mt's
 * frames are all like that).  > 0 bytes given, 0 when the frame must be
 * streamed instead (unknown or large size, a skippable or empty frame, cut
 * short, damaged: the streaming decoder then says how), -1 on a damaged
 * frame.
 */
static ssize_t decode_whole_frame(struct mt_zreader *z, void *dst, size_t cap)
{
	unsigned long long content;
	size_t frame_len, got;

	for (;;) {
		const unsigned char *src = z->buf + z->in.pos;
		size_t have = z->in.size - z->in.pos;

		content = ZSTD_getFrameContentSize(src, have);
		frame_len = ZSTD_findFrameCompressedSize(src, have);
		if (!ZSTD_isError(frame_len))
			break;
		/* the frame's end (or its header) is not buffered: read more;
		 * anything else is for the streaming decoder to name */
		if (ZSTD_getErrorCode(frame_len) != ZSTD_error_srcSize_wrong ||
		    z->err[0] || !refill(z))
			return 0;
	}
	if (content == ZSTD_CONTENTSIZE_UNKNOWN ||
	    content == ZSTD_CONTENTSIZE_ERROR || content == 0 || content > cap)
		return 0;
	z->frame_off = z->buf_off + z->in.pos;
	got =
	    ZSTD_decompressDCtx(z->ds, dst, cap, z->buf + z->in.pos, frame_len);
	if (ZSTD_isError(got)) {
		char what[160];

		snprintf(what, sizeof(what),
			 "zstd frame at byte %" PRIu64 ": %s", z->frame_off,
			 ZSTD_getErrorName(got));
		return zfail(z, z->frame_off, what);
	}
	z->in.pos += frame_len;
	return got;
}

/* One step of the decoder; -1 on damage, else 0. */
static int decode_step(struct mt_zreader *z, ZSTD_outBuffer *out)
{
	size_t before = z->in.pos;
	size_t ret;

	if (!z->in_frame)
		z->frame_off = z->buf_off + z->in.pos;
	ret = ZSTD_decompressStream(z->ds, out, &z->in);
	if (ZSTD_isError(ret)) {
		char what[160];

		snprintf(what, sizeof(what),
			 "zstd frame at byte %" PRIu64 ": %s", z->frame_off,
			 ZSTD_getErrorName(ret));
		zfail(z, z->buf_off + before, what);
		return -1;
	}
	/* 0: a frame is complete and all of it given out */
	z->in_frame = ret != 0;
	z->out_filled = out->pos == out->size;
	return 0;
}

ssize_t mt_zreader_read(struct mt_zreader *z, void *dst, size_t cap)
{
	ZSTD_outBuffer out = {.dst = dst, .size = cap};

	if (z->err[0])
		return -1;
	if (!z->in_frame) {
		ssize_t whole = decode_whole_frame(z, dst, cap);

		if (whole != 0 || z->err[0])
			return z->err[0] ? -1 : whole;
	}
	while (out.pos < out.size) {
		size_t had = out.pos;
		bool at_end = false;

		/* no input: zstd may still hold output of a frame it is in
		 * (it filled the last buffer), never between frames */
		if (z->in.pos == z->in.size &&
		    !(z->in_frame && z->out_filled) && !refill(z)) {
			if (z->err[0])
				return -1;
			if (!z->in_frame)
				break; /* end of input, between frames */
			at_end = true; /* zstd may still hold the frame's end */
		}
		if (decode_step(z, &out))
			return -1;
		if (at_end && out.pos == had && z->in_frame)
			break; /* nothing more will come: cut short */
		/* a frame's end with bytes given: let the caller use them */
		if (!z->in_frame && out.pos > 0)
			break;
	}
	if (out.pos > 0)
		return out.pos;
	if (z->in_frame) {
		char what[160];

		snprintf(what, sizeof(what),
			 "zstd frame at byte %" PRIu64
			 " cut short: the input ends inside it",
			 z->frame_off);
		return zfail(z, z->buf_off + z->in.size, what);
	}
	return 0;
}

const char *mt_zreader_error(const struct mt_zreader *z)
{
	return z->err;
}

uint64_t mt_zreader_offset(const struct mt_zreader *z)
{
	return z->buf_off + z->in.pos;
}

void mt_zreader_free(struct mt_zreader *z)
{
	if (!z)
		return;
	ZSTD_freeDStream(z->ds);
	free(z->buf);
	free(z);
}
