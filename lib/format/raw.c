/* SPDX-License-Identifier: MIT */
/*
 * raw.c - the raw stream writer (mt-trace's output) and mt_meta_free.
 * The reader is in input_raw.c, behind mt_input.h; the packed batches'
 * record codec in rawpack.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "mt_raw.h"
#include "rawpack.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the raw stream is little-endian and written as the host stores it"
#endif

_Static_assert(sizeof(struct mt_event) == MT_EVENT_SIZE, "event record size");
_Static_assert(sizeof(struct mt_raw_header) == 64, "raw header size");
_Static_assert(sizeof(struct mt_raw_batch) == 32, "batch header size");
_Static_assert(sizeof(struct mt_raw_trailer) == 48, "trailer size");

void mt_meta_free(struct mt_meta *meta)
{
	if (!meta)
		return;
	free(meta->host);
	for (int i = 0; i < meta->argc && meta->argv; i++)
		free(meta->argv[i]);
	free(meta->argv);
	meta->host = NULL;
	meta->argv = NULL;
	meta->argc = 0;
}

/* Writes every byte of iov, resuming after short writes and EINTR. */
static int write_all_iov(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		ssize_t n = writev(fd, iov, iovcnt);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= n;
		}
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return write_all_iov(fd, &iov, 1);
}

static size_t strings_bytes(const struct mt_meta *meta)
{
	size_t n = strlen(meta->host ? meta->host : "") + 1;

	for (int i = 0; i < meta->argc; i++)
		n += strlen(meta->argv[i]) + 1;
	return n;
}

int mt_raw_write_header(int fd, const struct mt_meta *meta)
{
	struct mt_raw_header hdr = {0};
	size_t strings_size = strings_bytes(meta);
	size_t header_size = (sizeof(hdr) + strings_size + 7) & ~(size_t)7;
	char *buf, *p;
	int ret;

	if (header_size > UINT32_MAX || meta->argc < 0)
		return -E2BIG;
	memcpy(hdr.magic, MT_RAW_MAGIC, MT_RAW_MAGIC_LEN);
	hdr.version = MT_RAW_VERSION;
	hdr.header_size = header_size;
	hdr.event_size = MT_EVENT_SIZE;
	hdr.page_size = meta->page_size;
	hdr.clock_id = meta->clock_id;
	hdr.root_pid = meta->root_pid;
	hdr.flags = meta->flags;
	hdr.argc = meta->argc;
	hdr.start_monotonic_ns = meta->start_monotonic_ns;
	hdr.start_realtime_ns = meta->start_realtime_ns;
	hdr.strings_size = strings_size;

	buf = calloc(1, header_size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, &hdr, sizeof(hdr));
	p = buf + sizeof(hdr);
	p = stpcpy(p, meta->host ? meta->host : "") + 1;
	for (int i = 0; i < meta->argc; i++)
		p = stpcpy(p, meta->argv[i]) + 1;
	ret = write_all(fd, buf, header_size);
	free(buf);
	return ret;
}

int mt_raw_write_batch(int fd, uint64_t seq, uint64_t lost, const void *records,
		       uint32_t count)
{
	uint64_t bytes = (uint64_t)count * MT_EVENT_SIZE;
	struct mt_raw_batch batch = {
	    .magic = MT_BATCH_MAGIC,
	    .count = count,
	    .bytes = bytes,
	    .seq = seq,
	    .lost = lost,
	};
	struct iovec iov[2] = {
	    {.iov_base = &batch, .iov_len = sizeof(batch)},
	    {.iov_base = (void *)records, .iov_len = bytes},
	};

	if (bytes > UINT32_MAX)
		return -E2BIG;
	return write_all_iov(fd, iov, count ? 2 : 1);
}

#if defined(__x86_64__)
/*
 * zlib's CRC-32 of len bytes at p (a multiple of 16, at least 64) folded
 * with carry-less multiplies, 64 bytes a step (Intel, "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction", 2009;
 * the constants and steps of Linux's crc32-pclmul_asm.S): ~15x zlib
 * 1.2.13's tables here (a packed batch's check: the writer thread's
 * largest cost after packing).  state is the CRC register, not inverted.
 */
__attribute__((target("pclmul"))) static uint32_t
crc32_fold(uint32_t state, const unsigned char *p, size_t len)
{
	const __m128i k12 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k34 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x[4], t;

	for (int i = 0; i < 4; i++)
		x[i] = _mm_loadu_si128((const __m128i *)p + i);
	x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)state));
	p += 64;
	len -= 64;
	for (; len >= 64; p += 64, len -= 64)
		for (int i = 0; i < 4; i++) {
			t = _mm_clmulepi64_si128(x[i], k12, 0x00);
			x[i] = _mm_clmulepi64_si128(x[i], k12, 0x11);
			x[i] = _mm_xor_si128(
			    _mm_xor_si128(x[i], t),
			    _mm_loadu_si128((const __m128i *)p + i));
		}
	/* four lanes folded into one, then the 16-byte blocks left */
	for (int i = 1; i < 4; i++) {
		t = _mm_clmulepi64_si128(x[0], k34, 0x00);
		x[0] = _mm_clmulepi64_si128(x[0], k34, 0x11);
		x[0] = _mm_xor_si128(_mm_xor_si128(x[0], t), x[i]);
	}
	for (; len >= 16; p += 16, len -= 16) {
		t = _mm_clmulepi64_si128(x[0], k34, 0x00);
		x[0] = _mm_clmulepi64_si128(x[0], k34, 0x11);
		x[0] = _mm_xor_si128(_mm_xor_si128(x[0], t),
				     _mm_loadu_si128((const __m128i *)p));
	}
	/* 128 bits to 64, to 32, then Barrett's reduction */
	t = _mm_clmulepi64_si128(k34, x[0], 0x01);
	x[0] = _mm_xor_si128(_mm_srli_si128(x[0], 8), t);
	t = _mm_clmulepi64_si128(_mm_and_si128(x[0], mask32), k5, 0x00);
	x[0] = _mm_xor_si128(_mm_srli_si128(x[0], 4), t);
	t = _mm_clmulepi64_si128(_mm_and_si128(x[0], mask32), poly, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x00);
	x[0] = _mm_xor_si128(x[0], t);
	return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x[0], 4));
}
#endif

/* zlib's crc32(crc, p, len), the bulk of it folded when the CPU can. */
static uLong crc_of(uLong crc, const unsigned char *p, size_t len)
{
#if defined(__x86_64__)
	static int pclmul = -1;

	if (pclmul < 0)
		pclmul = __builtin_cpu_supports("pclmul");
	if (pclmul && len >= 64) {
		size_t bulk = len & ~(size_t)15;

		crc = ~crc32_fold(~(uint32_t)crc, p, bulk) & 0xffffffffu;
		p += bulk;
		len -= bulk;
	}
#endif
	return crc32(crc, p, len);
}

/* The CRC-32 of a packed batch: its header with check 0, then its body. */
uint32_t mt_raw_packed_check(const struct mt_raw_batch *b, const void *body)
{
	struct mt_raw_batch h = *b;
	uLong crc;

	h.check = 0;
	crc = crc32(0, (const Bytef *)&h, sizeof(h));
	return crc_of(crc, body, b->bytes);
}

/* The packed batch at b (its body packed after it, bytes long) given its
 * header and written. */
static int write_packed(int fd, uint64_t seq, uint64_t lost, uint32_t count,
			struct mt_raw_batch *b, size_t bytes)
{
	*b = (struct mt_raw_batch){
	    .magic = MT_BATCH_PACKED_MAGIC,
	    .count = count,
	    .bytes = bytes,
	    .seq = seq,
	    .lost = lost,
	};
	b->check = mt_raw_packed_check(b, b + 1);
	return write_all(fd, b, sizeof(*b) + bytes);
}

int mt_raw_write_packed_rest(int fd, uint64_t seq, uint64_t lost,
			     struct mt_event *slots, uint32_t count,
			     uint32_t packed, unsigned char *buf, size_t prefix,
			     struct mt_rawpack_state *st)
{
	struct mt_raw_batch *b = (struct mt_raw_batch *)buf;
	size_t bytes =
	    prefix + mt_rawpack_from(st, slots, packed, count,
				     (unsigned char *)(b + 1) + prefix);

	if (bytes > MT_RAW_PACKED_MAX) {
		struct mt_rawunpack u;

		mt_rawunpack_init(&u, b + 1, prefix, packed);
		if (packed &&
		    mt_rawunpack(&u, slots, NULL, packed) != (int)packed)
			return -EINVAL; /* not what mt_rawpack_record made */
		return mt_raw_write_batch(fd, seq, lost, slots, count);
	}
	return write_packed(fd, seq, lost, count, b, bytes);
}

int mt_raw_write_packed_batch(int fd, uint64_t seq, uint64_t lost,
			      const void *records, uint32_t count,
			      void **scratch, size_t *scratch_size)
{
	size_t need = sizeof(struct mt_raw_batch) + mt_rawpack_bound(count);
	struct mt_raw_batch *b;
	size_t bytes;

	if (*scratch_size < need) {
		void *grown = realloc(*scratch, need);

		if (!grown) /* the trace goes on, 56 bytes a record */
			return mt_raw_write_batch(fd, seq, lost, records,
						  count);
		*scratch = grown;
		*scratch_size = need;
	}
	b = *scratch;
	bytes = mt_rawpack(records, count, (unsigned char *)(b + 1));
	if (bytes > MT_RAW_PACKED_MAX)
		return mt_raw_write_batch(fd, seq, lost, records, count);
	return write_packed(fd, seq, lost, count, b, bytes);
}

int mt_raw_write_trailer(int fd, const struct mt_meta *meta)
{
	struct mt_raw_trailer trailer = {
	    .magic = MT_TRAILER_MAGIC,
	    .exit_kind = meta->exit_kind,
	    .exit_value = meta->exit_value,
	    .end_monotonic_ns = meta->end_monotonic_ns,
	    .events = meta->events,
	    .lost = meta->lost,
	    .batches = meta->batches,
	    .incomplete = meta->incomplete,
	};

	return write_all(fd, &trailer, sizeof(trailer));
}
