/* SPDX-License-Identifier: MIT */
/*
 * test_zstd - the zstd layer (mt_zstd.h): frames written by mt_zwriter
 * decoded by libzstd's one-shot API (an outside decoder), and mt_zreader
 * on frames, skippable and empty frames, every cut of a stream (an error
 * inside a frame, a clean end between frames), a flipped bit in every
 * byte, and output buffers of one byte.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "formats_test.h"
#include "mt_zstd.h"

struct bytes {
	unsigned char *p;
	size_t len;
};

/* len bytes of something compressible but not trivial */
static unsigned char *sample(size_t len)
{
	unsigned char *p = malloc(len);
	uint32_t x = 12345;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245 + 12345;
		p[i] =
		    i % 7 == 0 ? (unsigned char)(x >> 24) : "mt-trace"[i % 8];
	}
	return p;
}

/* src in frames of frame bytes, written through a memfd */
static struct bytes compress_frames(const unsigned char *src, size_t len,
				    size_t frame, size_t *frames)
{
	struct mt_zwriter *z = mt_zwriter_new(1, 0);
	int fd = memfd_create("zstd", 0);
	struct bytes out;

	*frames = 0;
	for (size_t off = 0; off < len; off += frame) {
		size_t n = len - off < frame ? len - off : frame;

		CHECK_INT(mt_zwriter_frame(z, fd, src + off, n), 0);
		++*frames;
	}
	CHECK_INT(mt_zwriter_wait(z), 0); /* a thread may write behind */
	out.len = lseek(fd, 0, SEEK_END);
	CHECK_INT(mt_zwriter_written(z), out.len);
	out.p = malloc(out.len + 1);
	if (pread(fd, out.p, out.len, 0) != (ssize_t)out.len)
		abort();
	close(fd);
	mt_zwriter_free(z);
	return out;
}

/* Everything the reader gives for in[0..len), in chunks of cap bytes;
 * returns the last mt_zreader_read() result (0 or -1). */
static ssize_t read_all(const void *in, size_t len, size_t cap,
			struct bytes *out, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)in, len ? len : 1, "r");
	struct mt_zreader *z;
	size_t cap_out = 1 << 16;
	ssize_t n;

	if (!len) /* fmemopen refuses a size of 0: read nothing */
		fseek(f, 0, SEEK_END);
	z = mt_zreader_new(f, NULL, 0);
	out->p = malloc(cap_out);
	out->len = 0;
	while ((n = mt_zreader_read(
		    z, out->p + out->len,
		    cap < cap_out - out->len ? cap : cap_out - out->len)) > 0) {
		out->len += n;
		if (cap_out - out->len < cap) {
			cap_out *= 2;
			out->p = realloc(out->p, cap_out);
		}
	}
	snprintf(err, errlen, "%s", mt_zreader_error(z));
	mt_zreader_free(z);
	fclose(f);
	return n;
}

static void test_frames_round_trip(void)
{
	size_t len = 300000, frames;
	unsigned char *src = sample(len);
	struct bytes z = compress_frames(src, len, 64 * 1024, &frames);
	unsigned char *plain = malloc(len);
	struct bytes got;
	char err[256];

	CHECK_INT(frames, 5);
	CHECK(mt_zstd_magic(z.p, z.len));
	CHECK(z.len < len / 2);
	/* libzstd's one-shot decoder reads the frames one after another */
	CHECK_INT(ZSTD_decompress(plain, len, z.p, z.len), len);
	CHECK(!memcmp(plain, src, len));
	/* each frame says its content size */
	CHECK_INT(ZSTD_getFrameContentSize(z.p, z.len), 64 * 1024);
	/* the reader, in large and in one-byte reads */
	CHECK_INT(read_all(z.p, z.len, 1 << 16, &got, err, sizeof(err)), 0);
	CHECK_INT(got.len, len);
	CHECK(got.len == len && !memcmp(got.p, src, len));
	free(got.p);
	CHECK_INT(read_all(z.p, z.len, 1, &got, err, sizeof(err)), 0);
	if (err[0])
		fprintf(stderr, "one-byte reads: %s (%zu bytes)\n", err,
			got.len);
	CHECK(got.len == len && !memcmp(got.p, src, len));
	free(got.p);
	free(plain);
	free(z.p);
	free(src);
}

/* A skippable frame, an empty frame and a frame made by libzstd itself. */
static void test_skippable_and_empty(void)
{
	unsigned char buf[4096], *p = buf;
	const char text[] = "hello, frames";
	struct bytes got;
	char err[256];
	size_t n;

	/* RFC 8878: magic 0x184D2A5X, a 32-bit length, that many bytes */
	memcpy(p, "\x53\x2a\x4d\x18\x07\x00\x00\x00skip me", 15);
	n = 15;
	CHECK(mt_zstd_magic(p, n));
	p += n;
	n = ZSTD_compress(p, 256, "", 0, 3); /* an empty frame */
	CHECK(!ZSTD_isError(n));
	p += n;
	n = ZSTD_compress(p, 256, text, sizeof(text), 3);
	p += n;
	CHECK_INT(read_all(buf, p - buf, 4096, &got, err, sizeof(err)), 0);
	CHECK_INT(got.len, sizeof(text));
	CHECK(got.len == sizeof(text) && !memcmp(got.p, text, sizeof(text)));
	free(got.p);
	/* only an empty frame: nothing, cleanly */
	n = ZSTD_compress(buf, 256, "", 0, 3);
	CHECK_INT(read_all(buf, n, 4096, &got, err, sizeof(err)), 0);
	CHECK_INT(got.len, 0);
	free(got.p);
	CHECK(!mt_zstd_magic("\x28\xb5\x2f", 3));
	CHECK(!mt_zstd_magic("\x89MTRAW", 6));
}

/* Every cut: a clean end exactly between frames (and nothing invented),
 * an error naming the frame and the end of input inside one. */
static void test_every_cut(void)
{
	size_t len = 20000, frames, ends[8], nends = 0, off = 0;
	unsigned char *src = sample(len);
	struct bytes z = compress_frames(src, len, 5000, &frames);
	int errors = 0, clean = 0, wrong = 0;

	CHECK_INT(frames, 4);
	while (off < z.len) { /* where each frame ends, by libzstd */
		off += ZSTD_findFrameCompressedSize(z.p + off, z.len - off);
		ends[nends++] = off;
	}
	CHECK_INT(nends, 4);
	for (size_t cut = 0; cut < z.len; cut++) {
		struct bytes got;
		char err[256], want[128];
		ssize_t ret = read_all(z.p, cut, 4096, &got, err, sizeof(err));
		size_t whole = 0, frame_start = 0;

		for (size_t i = 0; i < nends && ends[i] <= cut; i++) {
			whole++;
			frame_start = ends[i];
		}
		/* what came before the cut is always given, never more */
		if (got.len < whole * 5000 || got.len > len ||
		    memcmp(got.p, src, got.len))
			wrong++;
		if (ret == 0 && cut == frame_start) {
			clean++;
			if (got.len != whole * 5000)
				wrong++;
		} else if (ret < 0) {
			errors++;
			snprintf(want, sizeof(want),
				 "byte %zu: zstd frame at byte %zu cut short",
				 cut, frame_start);
			if (strncmp(err, want, strlen(want))) {
				fprintf(stderr, "cut %zu: %s\n", cut, err);
				wrong++;
			}
		} else {
			wrong++;
		}
		free(got.p);
	}
	CHECK_INT(wrong, 0);
	CHECK_INT(clean, 4); /* 0 and the 3 inner frame ends */
	CHECK_INT(errors, z.len - 4);
	free(z.p);
	free(src);
}

/* A flipped bit anywhere is an error (checksums, block checks), never
 * other bytes given as good: at worst the frames before it. */
static void test_flipped_bits(void)
{
	size_t len = 8000, frames;
	unsigned char *src = sample(len);
	struct bytes z = compress_frames(src, len, 4000, &frames);
	int undetected = 0;

	for (size_t i = 0; i < z.len; i++) {
		struct bytes got;
		char err[256];
		ssize_t ret;

		z.p[i] ^= 0x10;
		ret = read_all(z.p, z.len, 4096, &got, err, sizeof(err));
		if (ret == 0 && (got.len != len || memcmp(got.p, src, len)))
			undetected++;
		if (ret < 0 && strncmp(err, "byte ", 5))
			undetected++;
		z.p[i] ^= 0x10;
		free(got.p);
	}
	CHECK_INT(undetected, 0);
	free(z.p);
	free(src);
}

/*
 * Frames of random bytes (they stay about as long compressed) around the
 * reader's 2 MiB of compressed bytes: frames cross its end, so the reader
 * keeps a frame's head and reads on for its tail before decoding it whole;
 * one 3 MiB frame never fits and is streamed.  Every byte comes back, in
 * big and in small reads, and a flipped bit deep in the stream names the
 * frame it is in, by its compressed offset.
 */
static void test_frames_across_the_buffer(void)
{
	const size_t sizes[] = {700000, 700000, 700000, 700000, 3u << 20,
				700000, 700000, 700000, 1000};
	const size_t nframes = sizeof(sizes) / sizeof(sizes[0]);
	size_t len = 0, off = 0, frame_at[16], cap_out;
	struct mt_zwriter *zw = mt_zwriter_new(1, 0);
	int fd = memfd_create("zstd", 0);
	unsigned char *src, *comp, *out;
	uint64_t x = 88172645463325252ull;
	size_t comp_len;
	char err[256];

	for (size_t i = 0; i < nframes; i++)
		len += sizes[i];
	src = malloc(len);
	for (size_t i = 0; i < len; i++) { /* xorshift: incompressible */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		src[i] = (unsigned char)x;
	}
	for (size_t i = 0; i < nframes; i++) {
		frame_at[i] = mt_zwriter_written(zw);
		CHECK_INT(mt_zwriter_frame(zw, fd, src + off, sizes[i]), 0);
		off += sizes[i];
	}
	CHECK_INT(mt_zwriter_wait(zw), 0);
	comp_len = lseek(fd, 0, SEEK_END);
	CHECK(comp_len > len); /* random bytes: stored, a little longer */
	comp = malloc(comp_len);
	if (pread(fd, comp, comp_len, 0) != (ssize_t)comp_len)
		abort();
	close(fd);
	mt_zwriter_free(zw);
	cap_out = len + (4u << 20);
	out = malloc(cap_out);
	for (int pass = 0; pass < 3; pass++) {
		/* whole frames into 4 MiB; 64 KiB reads; then a bit flipped */
		size_t cap = pass == 1 ? 1u << 16 : 4u << 20, got = 0;
		FILE *f = fmemopen(comp, comp_len, "r");
		struct mt_zreader *z = mt_zreader_new(f, NULL, 0);
		ssize_t n;

		if (pass == 2)
			comp[frame_at[6] + 5000] ^= 0x20;
		while ((n = mt_zreader_read(z, out + got, cap)) > 0)
			got += n;
		snprintf(err, sizeof(err), "%s", mt_zreader_error(z));
		mt_zreader_free(z);
		fclose(f);
		if (pass < 2) {
			CHECK_INT(n, 0);
			CHECK_INT(got, len);
			CHECK(got == len && !memcmp(out, src, len));
			continue;
		}
		char want[64];

		CHECK_INT(n, -1);
		snprintf(want, sizeof(want),
			 "zstd frame at byte %zu: ", frame_at[6]);
		CHECK(strstr(err, want) != NULL);
		if (!strstr(err, want))
			fprintf(stderr, "flipped bit: %s (want %s)\n", err,
				want);
		/* the six frames before it came back whole, nothing of it */
		CHECK_INT(got, len - sizes[6] - sizes[7] - sizes[8]);
		CHECK(!memcmp(out, src, len - sizes[6] - sizes[7] - sizes[8]));
	}
	free(out);
	free(comp);
	free(src);
}

/*
 * Many frames given faster than they are compressed: with two CPUs or more
 * the writer's threads (one per CPU) each take any frame, and the frames
 * must still come out in the order given.  Each frame here is different
 * (its number in its first bytes) and of its own length, so a swap, a
 * loss or a frame written twice shows in libzstd's decoding of the file.
 * Run under `taskset -c 0` it checks the one-CPU path the same way.
 * give: by mt_zwriter_give(), each frame built in the buffer the writer
 * gave back last (a buffer still being compressed, given back too soon,
 * would be overwritten under the compressor).
 */
static void test_frames_in_order(bool give)
{
	const size_t nframes = 600;
	struct mt_zwriter *z = mt_zwriter_new(1, 0);
	int fd = memfd_create("zstd", 0);
	unsigned char *src, *comp, *plain;
	size_t len = 0, comp_len;
	size_t *sizes = malloc(nframes * sizeof(*sizes));
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < nframes; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		sizes[i] = 4096 + x % 20000;
		len += sizes[i];
	}
	src = sample(len);
	for (size_t i = 0, off = 0; i < nframes; off += sizes[i++]) {
		memcpy(src + off, &i, sizeof(i));
		if (give) {
			size_t want = sizes[i] + i % 3, cap = want;
			void *buf = malloc(cap);

			memcpy(buf, src + off, sizes[i]);
			CHECK_INT(mt_zwriter_give(z, fd, &buf, &cap, sizes[i]),
				  0);
			CHECK(cap >= want);
			memset(buf, 0xa5, cap); /* the caller's to write */
			free(buf);
		} else {
			CHECK_INT(mt_zwriter_frame(z, fd, src + off, sizes[i]),
				  0);
		}
	}
	CHECK_INT(mt_zwriter_wait(z), 0);
	comp_len = lseek(fd, 0, SEEK_END);
	CHECK_INT(mt_zwriter_written(z), comp_len);
	comp = malloc(comp_len);
	plain = malloc(len);
	if (pread(fd, comp, comp_len, 0) != (ssize_t)comp_len)
		abort();
	CHECK_INT(ZSTD_decompress(plain, len, comp, comp_len), len);
	CHECK(!memcmp(plain, src, len));
	/* frame by frame: each frame is the one given at its place */
	for (size_t i = 0, off = 0, at = 0; i < nframes && at < comp_len;
	     off += sizes[i++]) {
		size_t flen =
		    ZSTD_findFrameCompressedSize(comp + at, comp_len - at);

		CHECK_INT(ZSTD_getFrameContentSize(comp + at, flen), sizes[i]);
		at += flen;
	}
	close(fd);
	mt_zwriter_free(z);
	free(plain);
	free(comp);
	free(src);
	free(sizes);
}

/* ---- the writer's choice of compression per frame ------------------- */

/* MessagePack bytes of the shape mt-encode writes: a fixstr, a uint. */
static unsigned char *put_str(unsigned char *p, const char *s)
{
	size_t n = strlen(s);

	*p++ = 0xa0 | n;
	memcpy(p, s, n);
	return p + n;
}

static unsigned char *put_u(unsigned char *p, unsigned char tag, uint64_t v,
			    int bytes)
{
	*p++ = tag;
	for (int i = bytes - 1; i >= 0; i--)
		*p++ = v >> (8 * i);
	return p;
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/*
 * len bytes of event maps as an allocation-heavy trace's (Malloc and Free
 * of addresses spread over 1 MiB, sizes of 1-2 KB: zstd's quick search
 * makes smaller frames of them) or, paths true, maps of paths of random
 * names (Exec: level 1 makes the smaller frames, its literals coded).
 */
static void event_maps(unsigned char *dst, size_t len, bool paths, uint64_t *x)
{
	static uint64_t t = 1700000000000;
	unsigned char map[128], *p;
	size_t at = 0;

	while (at < len) {
		uint64_t r = xorshift(x);
		bool malloc_map = !paths && r & 1;
		char path[32] = "/usr/lib/";

		t += 900 + r % 3000;
		p = map;
		*p++ = 0x80 | (paths ? 5 : malloc_map ? 6 : 5);
		p = put_str(put_str(p, "type"), paths	     ? "Exec"
						: malloc_map ? "Malloc"
							     : "Free");
		p = put_u(put_str(p, "pid"), 0xce, 4242, 4);
		p = put_u(put_str(p, "tid"), 0xce, 4242, 4);
		p = put_u(put_str(p, "timestamp"), 0xcf, t, 8);
		if (paths) {
			for (int i = 9; i < 29; i++)
				path[i] = 'a' + xorshift(x) % 16;
			p = put_str(put_str(p, "path"), path);
		} else {
			p = put_u(put_str(p, "addr"), 0xcf,
				  0x55a3c6000000 + (r >> 20) % (1 << 20) * 16,
				  8);
			if (malloc_map)
				p = put_u(put_str(p, "size"), 0xcd,
					  1000 + (r >> 40) % 1000, 2);
		}
		memcpy(dst + at, map,
		       (size_t)(p - map) < len - at ? (size_t)(p - map)
						    : len - at);
		at += p - map;
	}
}

/* src[0..len) as one frame by libzstd itself: level 1, or level 1 with
 * the quick search mt_zstd.h's writer chooses between (zstd_io.c). */
static size_t reference_frame(void *dst, size_t cap, const void *src,
			      size_t len, bool quick)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	size_t n;

	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	if (quick) {
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_targetLength, 2);
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, 10);
	}
	n = ZSTD_compress2(cctx, dst, cap, src, len);
	ZSTD_freeCCtx(cctx);
	return n;
}

/*
 * With MT_ZSTD_LEVEL_AUTO each frame is exactly libzstd's level-1 frame
 * or its quick one: the frames 0, 64, 128, 192 (probes) the smaller of the
 * two, the others the way of the last probe at least 5 frames before them
 * (level 1 before the first).  The trace changes from allocation-heavy to
 * paths at frame 64 and back at 128, so both ways are chosen, and a
 * choice lags its probe.  Any level given is used for every frame.
 */
static void test_frames_chosen(void)
{
	enum { NFRAMES = 200, FRAME = 16384, PROBE = 64, LAG = 5 };
	struct mt_zwriter *z = mt_zwriter_new(MT_ZSTD_LEVEL_AUTO, 0);
	struct mt_zwriter *fixed = mt_zwriter_new(1, 0);
	int fd = memfd_create("zstd", 0), fixed_fd = memfd_create("zstd", 0);
	unsigned char *src = malloc((size_t)NFRAMES * FRAME);
	size_t cap = ZSTD_compressBound(FRAME), comp_len, at = 0;
	unsigned char *comp, *want = malloc(cap), *other = malloc(cap);
	bool quick_won[NFRAMES] = {0}, choice = false;
	int probes_quick = 0, probes_dense = 0;
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < NFRAMES; i++) {
		event_maps(src + i * FRAME, FRAME, i / PROBE == 1, &x);
		CHECK_INT(mt_zwriter_frame(z, fd, src + i * FRAME, FRAME), 0);
		CHECK_INT(
		    mt_zwriter_frame(fixed, fixed_fd, src + i * FRAME, FRAME),
		    0);
	}
	CHECK_INT(mt_zwriter_wait(z), 0);
	comp_len = lseek(fd, 0, SEEK_END);
	comp = malloc(comp_len);
	if (pread(fd, comp, comp_len, 0) != (ssize_t)comp_len)
		abort();
	for (size_t i = 0; i < NFRAMES && at < comp_len; i++) {
		const unsigned char *frame = src + i * FRAME;
		size_t dense_len = reference_frame(want, cap, frame, FRAME, 0);
		size_t quick_len = reference_frame(other, cap, frame, FRAME, 1);
		size_t flen =
		    ZSTD_findFrameCompressedSize(comp + at, comp_len - at);
		bool quick;

		if (i % PROBE == 0) {
			quick_won[i] = quick_len <= dense_len;
			quick = quick_won[i];
			probes_quick += quick;
			probes_dense += !quick;
		} else {
			if (i >= LAG)
				choice = quick_won[(i - LAG) / PROBE * PROBE];
			quick = choice;
		}
		if (quick)
			reference_frame(want, cap, frame, FRAME, 1);
		CHECK_INT(flen, quick ? quick_len : dense_len);
		CHECK(flen == (quick ? quick_len : dense_len) &&
		      !memcmp(comp + at, want, flen));
		at += flen;
	}
	CHECK_INT(at, comp_len);
	/* the data makes both ways win: else nothing above was chosen */
	CHECK_INT(probes_quick, 3);
	CHECK_INT(probes_dense, 1);
	/* a level given: level 1 for every frame, bigger here */
	CHECK_INT(mt_zwriter_wait(fixed), 0);
	CHECK(lseek(fixed_fd, 0, SEEK_END) > (off_t)comp_len);
	close(fd);
	close(fixed_fd);
	mt_zwriter_free(z);
	mt_zwriter_free(fixed);
	free(src);
	free(comp);
	free(want);
	free(other);
}

/* A write that fails: the error comes back (at once, or from a thread at
 * the next frame or the wait), and stays. */
static void test_write_error(void)
{
	struct mt_zwriter *z = mt_zwriter_new(1, 0);
	unsigned char *src = sample(8192);
	int fds[2], ret = 0;

	if (pipe(fds))
		abort();
	close(fds[0]); /* nobody reads: EPIPE (SIGPIPE ignored below) */
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < 20 && !ret; i++)
		ret = mt_zwriter_frame(z, fds[1], src, 8192);
	if (!ret)
		ret = mt_zwriter_wait(z);
	CHECK_INT(ret, -EPIPE);
	CHECK_INT(mt_zwriter_wait(z), -EPIPE);
	CHECK_INT(mt_zwriter_frame(z, fds[1], src, 8192), -EPIPE);
	CHECK_INT(mt_zwriter_written(z), 0);
	close(fds[1]);
	mt_zwriter_free(z);
	free(src);
}

int main(void)
{
	test_frames_round_trip();
	test_skippable_and_empty();
	test_every_cut();
	test_flipped_bits();
	test_frames_across_the_buffer();
	test_frames_in_order(false);
	test_frames_in_order(true);
	test_write_error();
	test_frames_chosen();
	return test_summary("test_zstd");
}
