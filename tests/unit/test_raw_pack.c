/* SPDX-License-Identifier: MIT */
/*
 * test_raw_pack - packed raw batches (rawpack.h, mt_raw.h): the codec
 * gives back every byte of every slot (all kinds, edge values, payloads
 * with and without zero padding, random bytes); a stream written packed
 * reads record for record as the same stream written fixed; a cut at
 * every byte and a corrupt byte anywhere in a packed batch is an error
 * naming its byte, never records passed off as the batch's; a batch
 * packed in two parts (--fast's drain packs its records as it reads
 * them, the writer the slots after them) is the same bytes; a batch's
 * check is zlib's CRC-32.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "mt_input.h"
#include "rawpack.h"
#include "formats_test.h"
#include "stream_test.h"

#define MAXS 4096

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

/* Packs n slots and unpacks them chunk slots at a time: every byte must
 * come back, and the body must be read to its end. */
static void round_trip(const struct mt_event *slots, uint32_t n, uint32_t chunk,
		       const char *what)
{
	unsigned char *body = malloc(mt_rawpack_bound(n) + 1);
	struct mt_event *out = calloc(n + 1, sizeof(*out));
	struct mt_rawunpack u;
	size_t bytes = mt_rawpack(slots, n, body);
	uint32_t got = 0;
	int r = 1;

	CHECK(bytes <= mt_rawpack_bound(n));
	mt_rawunpack_init(&u, body, bytes, n);
	while (got < n && (r = mt_rawunpack(&u, out + got, NULL, chunk)) > 0)
		got += r;
	if (got != n || memcmp(out, slots, (size_t)n * sizeof(*out)) ||
	    u.p != u.end) {
		fprintf(stderr, "%s: %u of %u slots (r %d, %s)\n", what, got, n,
			r, u.err ? u.err : "");
		for (uint32_t i = 0; i < got; i++)
			if (memcmp(&out[i], &slots[i], sizeof(*out))) {
				fprintf(stderr, "  slot %u differs\n", i);
				break;
			}
	}
	CHECK_INT(got, n);
	CHECK(memcmp(out, slots, (size_t)n * sizeof(*out)) == 0);
	CHECK(mt_rawunpack(&u, out, NULL, chunk) == 0);
	free(body);
	free(out);
}

/* n 64-bit frames into the payload slots at s */
static void put_frames(struct mt_event *s, const uint64_t *frames, size_t n)
{
	memset(s, 0,
	       (n * 8 + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE * MT_EVENT_SIZE);
	memcpy(s, frames, n * 8);
}

static void fill_path(struct mt_event *slots, const char *s, size_t len)
{
	memset(slots, 0,
	       (len + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE * MT_EVENT_SIZE);
	memcpy(slots, s, len);
}

/* Every kind, every field at 0, at small values and at its widest, deltas
 * both ways, pid and tid changes (tid below pid), and each payload case. */
/* len slots of random bytes, most with a kind (payloads among them) */
static void random_slots(struct mt_event *s, uint32_t len)
{
	for (uint32_t i = 0; i < len * MT_EVENT_SIZE / 8; i++) {
		uint64_t v = rnd() >> (rnd() % 64);

		memcpy((char *)s + i * 8, &v, 8);
	}
	for (uint32_t i = 0; i < len; i++)
		if (rnd() % 3)
			s[i].kind %= MT_EV_KIND_MAX + 2;
}

static uint32_t every_kind(struct mt_event *s)
{
	static const uint64_t edges[] = {
	    0, 1, 0x7f, 0x80, 0xffffffffull, 1ull << 63, UINT64_MAX};
	const char *path = "/usr/lib/x86_64-linux-gnu/a-path-of-more-than-"
			   "fifty-six-bytes.so";
	uint32_t n = 0;

	for (unsigned kind = 0; kind <= MT_EV_KIND_MAX + 10; kind++) {
		s[n] = (struct mt_event){.timestamp = 1000 + kind * 7,
					 .pid = 100 + kind / 4,
					 .tid = 100 + kind / 4 - kind % 3,
					 .kind = kind,
					 .flags = kind * 3,
					 .aux = kind % 5 ? 0 : kind,
					 .addr = 0x5555000 + (kind % 3) * 64,
					 .size = kind * 16,
					 .old_addr = kind % 2 ? 0x5555000 : 0,
					 .old_size = kind % 4 ? 0 : 77};
		if (mt_rawpack_has_payload(kind))
			s[n].aux = 0; /* below, with their payloads */
		n++;
	}
	for (size_t i = 0; i < sizeof(edges) / sizeof(*edges); i++)
		for (size_t j = 0; j < sizeof(edges) / sizeof(*edges); j++) {
			uint64_t a = edges[i], b = edges[j];

			s[n++] = (struct mt_event){.timestamp = b,
						   .pid = a,
						   .tid = b,
						   .kind = MT_EV_MREMAP,
						   .flags = a,
						   .aux = b,
						   .addr = a,
						   .size = b,
						   .old_addr = b,
						   .old_size = a};
			s[n++] = (struct mt_event){.timestamp = a,
						   .kind = 0xffff,
						   .addr = b,
						   .old_addr = a};
		}
	/* payloads: zero padded, exactly whole slots, padding not zero */
	s[n] = (struct mt_event){.timestamp = 5, .kind = MT_EV_EXEC};
	s[n].aux = strlen(path);
	fill_path(&s[n + 1], path, strlen(path));
	n += 1 + (strlen(path) + 55) / 56;
	s[n] = (struct mt_event){
	    .timestamp = 6, .kind = MT_EV_MARKER, .aux = 2 * MT_EVENT_SIZE};
	memset(&s[n + 1], 'm', 2 * MT_EVENT_SIZE);
	n += 3;
	s[n] = (struct mt_event){
	    .timestamp = 7, .kind = MT_EV_ALLOCATOR, .flags = 1, .aux = 3};
	memset(&s[n + 1], 0xee, MT_EVENT_SIZE); /* padding not zero */
	n += 2;
	s[n] = (struct mt_event){.timestamp = 8,
				 .kind = MT_EV_STACK,
				 .addr = 1,
				 .size = 3,
				 .aux = 24};
	put_frames(&s[n + 1],
		   (uint64_t[]){MT_FRAME(1, 0x1234), MT_FRAME(2, 0x5678),
				MT_FRAME(0, 0x7fff0000)},
		   3);
	n += 2;
	s[n] = (struct mt_event){.timestamp = 9,
				 .kind = MT_EV_CODE_FILE,
				 .addr = 1,
				 .flags = 4,
				 .aux = 10};
	fill_path(&s[n + 1], "\1\2\3\4/lib/x", 10);
	n += 2;
	/* a payload that would run past the batch: its slots are records */
	s[n] = (struct mt_event){
	    .timestamp = 10, .kind = MT_EV_EXEC, .aux = 3 * MT_EVENT_SIZE};
	s[n + 1] = (struct mt_event){.timestamp = 11, .kind = MT_EV_FREE};
	n += 2;
	return n;
}

static void test_codec(void)
{
	struct mt_event *s = calloc(MAXS, sizeof(*s));
	uint32_t n = every_kind(s);

	round_trip(s, n, 128, "every kind");
	round_trip(s, n, 1, "every kind, a slot at a time");
	round_trip(s, n, 7, "every kind, 7 at a time");
	round_trip(s, 0, 1, "no slot");
	/* random bytes as slots (kinds with payloads among them) */
	for (int r = 0; r < 200; r++) {
		uint32_t len = 1 + rnd() % 300;

		random_slots(s, len);
		round_trip(s, len, 1 + rnd() % 130, "random slots");
	}
	free(s);
}

/* ---- a batch packed in two parts --------------------------------------- */

/* Where each record of slots[0..n) starts, as mt_rawpack walks them (its
 * payload slots skipped); how many. */
static uint32_t record_starts(const struct mt_event *s, uint32_t n,
			      uint32_t *starts)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t slots =
		    s[i].aux / MT_EVENT_SIZE + (s[i].aux % MT_EVENT_SIZE != 0);

		starts[k++] = i;
		if (s[i].aux && mt_rawpack_has_payload(s[i].kind) &&
		    slots <= n - i - 1)
			i += slots;
	}
	return k;
}

/* mt_rawpack_from: slots[0..first) then slots[first..n) packed in turn,
 * the state carried, are mt_rawpack's bytes, at every record start. */
static void split_at_every_record(const struct mt_event *s, uint32_t n,
				  const char *what)
{
	unsigned char *whole = malloc(mt_rawpack_bound(n) + 1);
	unsigned char *two = malloc(mt_rawpack_bound(n) + 1);
	uint32_t *starts = malloc((n + 1) * sizeof(*starts));
	size_t bytes = mt_rawpack(s, n, whole);
	uint32_t k = record_starts(s, n, starts);
	int bad = 0;

	starts[k++] = n;
	for (uint32_t j = 0; j < k; j++) {
		struct mt_rawpack_state st = {0};
		size_t a = mt_rawpack_from(&st, s, 0, starts[j], two);
		size_t b = mt_rawpack_from(&st, s, starts[j], n, two + a);

		bad += a + b != bytes || memcmp(two, whole, bytes);
		if (a + b != bytes || memcmp(two, whole, bytes))
			fprintf(stderr,
				"%s: split at slot %u: not mt_rawpack's\n",
				what, starts[j]);
	}
	CHECK_INT(bad, 0);
	free(whole);
	free(two);
	free(starts);
}

/* The batch as mt_raw_write_packed_batch writes it, to a memfd. */
static void write_whole(struct stream *out, const struct mt_event *s,
			uint32_t n)
{
	int fd = memfd();
	void *scratch = NULL;
	size_t scratch_size = 0;

	CHECK_INT(
	    mt_raw_write_packed_batch(fd, 9, 4, s, n, &scratch, &scratch_size),
	    0);
	free(scratch);
	take(fd, out);
}

/* mt_raw_write_packed_rest with s[0..first) packed as --fast's drain
 * does (a record without payload by mt_rawpack_record, one with its
 * payload slots by mt_rawpack_from; first a record's start) and the
 * rest left in the slots: the bytes mt_raw_write_packed_batch writes. */
static void write_rest(struct stream *out, const struct mt_event *s, uint32_t n,
		       uint32_t first)
{
	struct mt_event *slots = calloc(n + 1, sizeof(*slots));
	unsigned char *buf =
	    malloc(sizeof(struct mt_raw_batch) + mt_rawpack_bound(n));
	unsigned char *p = buf + sizeof(struct mt_raw_batch);
	struct mt_rawpack_state st = {0};
	int fd = memfd();

	/* the packed records' slots are not there: the writer must not
	 * read them */
	memset(slots, 0xa5, first * sizeof(*slots));
	memcpy(slots + first, s + first, (n - first) * sizeof(*slots));
	for (uint32_t i = 0; i < first; i++) {
		uint32_t pay =
		    s[i].aux / MT_EVENT_SIZE + (s[i].aux % MT_EVENT_SIZE != 0);

		if (s[i].aux && mt_rawpack_has_payload(s[i].kind) &&
		    pay <= n - i - 1) {
			p += mt_rawpack_from(&st, &s[i], 0, 1 + pay, p);
			i += pay;
		} else {
			p = mt_rawpack_record(&st, &s[i], p);
		}
	}
	CHECK_INT(mt_raw_write_packed_rest(
		      fd, 9, 4, slots, n, first, buf,
		      p - (buf + sizeof(struct mt_raw_batch)), &st),
		  0);
	take(fd, out);
	free(slots);
	free(buf);
}

static void same_stream(const struct mt_event *s, uint32_t n, uint32_t first,
			const char *what)
{
	struct stream a, b;

	write_whole(&a, s, n);
	write_rest(&b, s, n, first);
	if (a.len != b.len || memcmp(a.p, b.p, a.len))
		fprintf(stderr,
			"%s: %u of %u packed first: %zu bytes, want %zu\n",
			what, first, n, b.len, a.len);
	CHECK(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);
	free(a.p);
	free(b.p);
}

static void test_split(void)
{
	struct mt_event *s = calloc(MAXS, sizeof(*s));
	uint32_t *starts = malloc((MAXS + 1) * sizeof(*starts));
	uint32_t n = every_kind(s), k;

	split_at_every_record(s, n, "every kind");
	for (int r = 0; r < 100; r++) {
		uint32_t len = 1 + rnd() % 300;

		random_slots(s, len);
		split_at_every_record(s, len, "random slots");
	}
	/* the writer, the first part ending at each record's start (every
	 * kind's, then random slots', payloads among them) */
	n = every_kind(s);
	k = record_starts(s, n, starts);
	starts[k++] = n;
	for (uint32_t j = 0; j < k; j++)
		same_stream(s, n, starts[j], "every kind");
	for (int r = 0; r < 50; r++) {
		uint32_t len = 1 + rnd() % 300;

		for (uint32_t i = 0; i < len * MT_EVENT_SIZE / 8; i++) {
			uint64_t v = rnd() >> (rnd() % 64);

			memcpy((char *)s + i * 8, &v, 8);
		}
		for (uint32_t i = 0; i < len; i++)
			s[i].kind %= MT_EV_KIND_MAX + 2;
		k = record_starts(s, len, starts);
		starts[k++] = len;
		for (int m = 0; m < 4; m++)
			same_stream(s, len, starts[rnd() % k], "random slots");
	}
	free(starts);
	free(s);
}

/* A batch over MT_RAW_PACKED_MAX packed goes fixed: the records packed
 * first are unpacked into their slots, the batch the same bytes as
 * mt_raw_write_packed_batch's (fixed too). */
static void test_rest_too_big(void)
{
	uint32_t n = MT_RAW_PACKED_MAX / 60, magic;
	struct mt_event *s = calloc(n, sizeof(*s));
	struct stream whole;

	for (uint32_t i = 0; i < n; i++)
		/* deltas of 2^62 either way: 10-byte varints */
		s[i] = (struct mt_event){
		    .timestamp = i % 2 ? 0 : 1ull << 62,
		    .pid = i,
		    .tid = UINT32_MAX - i,
		    .kind = 0xffff,
		    .flags = 0xffff,
		    .aux = UINT32_MAX,
		    .addr = i % 2 ? 1 : 1 + (1ull << 62),
		    .size = UINT64_MAX,
		    .old_addr = (i % 2 ? 1 : 1 + (1ull << 62)) + (1ull << 62),
		    .old_size = UINT64_MAX};
	write_whole(&whole, s, n);
	memcpy(&magic, whole.p, sizeof(magic));
	CHECK_INT(magic, MT_BATCH_MAGIC); /* fixed */
	free(whole.p);
	same_stream(s, n, 1000, "over MT_RAW_PACKED_MAX");
	free(s);
}

/* ---- the check ------------------------------------------------------- */

/* mt_raw_packed_check (folded with carry-less multiplies where the CPU
 * has them) is zlib's crc32 of the header, check 0, then the body: at
 * every length to 300, at random ones to 1 MiB, at every alignment. */
static void test_check(void)
{
	size_t max = 1 << 20;
	unsigned char *buf = malloc(max + 64);
	int bad = 0;

	for (size_t i = 0; i < max + 64; i++)
		buf[i] = rnd();
	for (int r = 0; r < 3000; r++) {
		size_t len =
		    r <= 300 ? (size_t)r : rnd() % (r < 2900 ? 5000 : max);
		size_t off = rnd() % 64;
		struct mt_raw_batch b = {.magic = MT_BATCH_PACKED_MAGIC,
					 .count = r,
					 .bytes = len,
					 .check = 0xdeadbeef,
					 .seq = rnd(),
					 .lost = r};
		struct mt_raw_batch h = b;
		uLong want;

		h.check = 0;
		want = crc32(0, (const Bytef *)&h, sizeof(h));
		want = crc32(want, buf + off, len);
		if (mt_raw_packed_check(&b, buf + off) != want && bad++ < 5)
			fprintf(
			    stderr,
			    "check of %zu bytes at +%zu: %08x, want %08lx\n",
			    len, off, mt_raw_packed_check(&b, buf + off), want);
	}
	CHECK_INT(bad, 0);
	free(buf);
}

/* ---- streams --------------------------------------------------------- */

static char *host = "box";
static char *args[] = {"prog"};

/* A stream of every kind a reader takes, with payloads and stacks, in
 * three batches (the second lost-only), written fixed or packed. */
static void kinds_stream(struct stream *st, bool packed)
{
	struct mt_meta m = {.page_size = 4096,
			    .clock_id = 1,
			    .root_pid = 7,
			    .host = host,
			    .argc = 1,
			    .argv = args,
			    .exit_kind = MT_EXIT_CODE};
	struct mt_event s[64] = {0}, t[4] = {0};
	const char *path = "/usr/bin/a-program-with-a-long-name-over-one-slot";
	uint32_t n = 0;
	void *scratch = NULL;
	size_t scratch_size = 0;
	int fd = memfd();

	for (unsigned k = MT_EV_MALLOC; k <= MT_EV_EXIT; k++)
		if (k != MT_EV_EXEC)
			s[n++] = (struct mt_event){
			    .timestamp = 100 + k,
			    .pid = 7 + (k == MT_EV_FORK),
			    .tid = 7 + k % 2,
			    .kind = k,
			    .flags = k == MT_EV_MMAP ? 3 : 0,
			    .aux = k == MT_EV_MMAP ? 34 : 0,
			    .addr = 0x1000 * k,
			    .size = 16 * k,
			    .old_addr = k >= MT_EV_REALLOC ? 0x800 : 0,
			    .old_size = k == MT_EV_MREMAP ? 4096 : 0};
	s[n] = (struct mt_event){.timestamp = 200,
				 .pid = 7,
				 .tid = 7,
				 .kind = MT_EV_EXEC,
				 .aux = strlen(path)};
	fill_path(&s[n + 1], path, strlen(path));
	n += 2;
	s[n++] = (struct mt_event){.timestamp = 201,
				   .pid = 7,
				   .tid = 7,
				   .kind = MT_EV_RSS,
				   .aux = 1,
				   .size = 8192};
	s[n++] = (struct mt_event){.timestamp = 202,
				   .pid = 7,
				   .tid = 7,
				   .kind = MT_EV_PSS,
				   .size = 1,
				   .addr = 2,
				   .old_addr = 3,
				   .old_size = 4};
	s[n] = (struct mt_event){.timestamp = 203,
				 .pid = 7,
				 .tid = 7,
				 .kind = MT_EV_MARKER,
				 .aux = 4};
	fill_path(&s[n + 1], "mark", 4);
	n += 2;
	s[n++] = (struct mt_event){.timestamp = 204, .kind = MT_EV_ENABLE};
	s[n++] = (struct mt_event){.timestamp = 205, .kind = MT_EV_DISABLE};
	s[n] = (struct mt_event){.timestamp = 206,
				 .pid = 7,
				 .tid = 7,
				 .kind = MT_EV_ALLOCATOR,
				 .flags = 1,
				 .aux = 8};
	fill_path(&s[n + 1], "/lib/c.6", 8);
	n += 2;
	s[n] = (struct mt_event){.timestamp = 207,
				 .kind = MT_EV_CODE_FILE,
				 .addr = 1,
				 .old_addr = 8,
				 .old_size = 99,
				 .flags = 2,
				 .aux = 8};
	fill_path(&s[n + 1], "\xab\xcd/lib/x", 8);
	n += 2;
	s[n++] = (struct mt_event){.timestamp = 208,
				   .pid = 7,
				   .tid = 7,
				   .kind = MT_EV_CODE_MAP,
				   .addr = 0x7000,
				   .size = 4096,
				   .old_size = 1};
	s[n] = (struct mt_event){.timestamp = 209,
				 .kind = MT_EV_STACK,
				 .addr = 1,
				 .size = 2,
				 .aux = 16};
	put_frames(&s[n + 1],
		   (uint64_t[]){MT_FRAME(1, 0x10), MT_FRAME(1, 0x20)}, 2);
	n += 2;
	s[n++] = (struct mt_event){.timestamp = 210,
				   .pid = 7,
				   .tid = 9,
				   .kind = MT_EV_STACK_REF,
				   .addr = 1};
	s[n++] = (struct mt_event){.timestamp = 210,
				   .pid = 7,
				   .tid = 9,
				   .kind = MT_EV_MALLOC,
				   .addr = 0x9000,
				   .size = 5};
	t[0] = (struct mt_event){.timestamp = 300,
				 .pid = 7,
				 .tid = 7,
				 .kind = MT_EV_FREE,
				 .addr = 0x9000};
	t[1] = (struct mt_event){.timestamp = 301,
				 .pid = 7,
				 .tid = 7,
				 .kind = MT_EV_EXIT,
				 .aux = 3 << 8};
	m.events = n + 2;
	m.lost = 5;
	m.batches = 3;
	CHECK_INT(mt_raw_write_header(fd, &m), 0);
	if (packed) {
		CHECK_INT(mt_raw_write_packed_batch(fd, 0, 0, s, n, &scratch,
						    &scratch_size),
			  0);
		CHECK_INT(mt_raw_write_packed_batch(fd, 1, 3, NULL, 0, &scratch,
						    &scratch_size),
			  0);
		CHECK_INT(mt_raw_write_packed_batch(fd, 2, 2, t, 2, &scratch,
						    &scratch_size),
			  0);
	} else {
		CHECK_INT(mt_raw_write_batch(fd, 0, 0, s, n), 0);
		CHECK_INT(mt_raw_write_batch(fd, 1, 3, NULL, 0), 0);
		CHECK_INT(mt_raw_write_batch(fd, 2, 2, t, 2), 0);
	}
	CHECK_INT(mt_raw_write_trailer(fd, &m), 0);
	free(scratch);
	take(fd, st);
}

static struct mt_input *open_bytes(const void *p, size_t len, char *err,
				   size_t errlen)
{
	FILE *f = len ? fmemopen((void *)p, len, "r") : fopen("/dev/null", "r");

	return mt_input_fopen(f, "t", err, errlen);
}

/* Every record of the stream, as text (fields, string, frames, stack),
 * into out; returns the final mt_input_next() result, the error in err. */
static int records_of(const struct stream *s, size_t len, char *out,
		      size_t outlen, char *err, size_t errlen, int *nrec)
{
	struct mt_input *in = open_bytes(s->p, len, err, errlen);
	struct mt_record r;
	size_t o = 0;
	int ret;

	*nrec = 0;
	out[0] = '\0';
	if (!in)
		return -2;
	while ((ret = mt_input_next(in, &r)) > 0) {
		const struct mt_event *e = &r.ev;

		(*nrec)++;
		o += snprintf(out + o, outlen - o,
			      "%u %" PRIu64 " %u/%u %u %u %" PRIx64 " %" PRIu64
			      " %" PRIx64 " %" PRIu64 " s%u",
			      e->kind, (uint64_t)e->timestamp, e->pid, e->tid,
			      e->flags, e->aux, (uint64_t)e->addr,
			      (uint64_t)e->size, (uint64_t)e->old_addr,
			      (uint64_t)e->old_size, r.stack);
		if (e->kind == MT_EV_STACK)
			for (uint64_t f = 0; f < e->size; f++)
				o += snprintf(out + o, outlen - o, " f%" PRIx64,
					      r.frames[f]);
		else if (r.str)
			o += snprintf(out + o, outlen - o, " \"%.*s\"",
				      (int)r.str_len, r.str);
		o += snprintf(out + o, outlen - o, "\n");
	}
	snprintf(err, errlen, "%s", mt_input_error(in));
	mt_input_close(in);
	return ret;
}

#define OUT 16384

/* Packed and fixed, the same records, every kind through the writer and
 * the reader; and the packed stream is the smaller. */
static void test_stream_round_trip(void)
{
	static char a[OUT], b[OUT];
	struct stream fixed, packed;
	char err[1024];
	int na, nb;

	kinds_stream(&fixed, false);
	kinds_stream(&packed, true);
	CHECK_INT(records_of(&fixed, fixed.len, a, OUT, err, sizeof(err), &na),
		  0);
	CHECK_STR(err, "");
	CHECK_INT(
	    records_of(&packed, packed.len, b, OUT, err, sizeof(err), &nb), 0);
	CHECK_STR(err, "");
	CHECK_INT(nb, na);
	/* the first batch: 23 records, the StackRef's own not one; then
	 * two Lost records and the last batch's 2 */
	CHECK_INT(na, 26);
	CHECK_STR(b, a);
	CHECK(packed.len < fixed.len / 3);
	free(fixed.p);
	free(packed.p);
}

/* A cut at every byte: an error naming a byte, after exactly the records
 * of the batches whole before it. */
static void test_truncations(void)
{
	static char out[OUT];
	struct stream s, fixed;
	char err[1024];
	size_t hdr = 80; /* 64 + "box\0prog\0", padded to 8 */
	size_t end0;
	uint32_t bytes0;
	int n, whole;

	kinds_stream(&s, true);
	kinds_stream(&fixed, false);
	records_of(&fixed, fixed.len, out, OUT, err, sizeof(err), &whole);
	memcpy(&bytes0, s.p + hdr + 8, 4);
	end0 = hdr + 32 + bytes0;
	for (size_t len = 0; len < s.len; len++) {
		int ret = records_of(&s, len, out, OUT, err, sizeof(err), &n);

		CHECK(ret < 0);
		if (ret >= 0 || !strstr(err, ": byte ")) {
			fprintf(stderr, "cut at %zu: %d, \"%s\"\n", len, ret,
				err);
			continue;
		}
		/* the first batch's records only once it is all there */
		if (len < end0)
			CHECK_INT(n, 0);
		else
			CHECK(n >= 22 && n <= whole);
	}
	/* exact messages: in the first batch's body, and its header */
	records_of(&s, hdr + 32 + 10, out, OUT, err, sizeof(err), &n);
	CHECK_INT(n, 0);
	{
		char want[256];
		uint32_t bytes;

		memcpy(&bytes, s.p + hdr + 8, 4);
		snprintf(want, sizeof(want),
			 "t: byte %zu: batch 0: packed body truncated: "
			 "expected %u bytes, got 10",
			 hdr + 32, bytes);
		CHECK_STR(err, want);
	}
	records_of(&s, hdr + 20, out, OUT, err, sizeof(err), &n);
	CHECK_STR(err, "t: byte 80: batch header truncated (first batch): "
		       "expected 32 bytes, got 20");
	records_of(&s, s.len - 1, out, OUT, err, sizeof(err), &n);
	CHECK_INT(n, whole);
	free(s.p);
	free(fixed.p);
}

/* A changed byte anywhere in a packed batch, its header or its body:
 * an error at that batch, and none of its records handed out. */
static void test_corruptions(void)
{
	static char out[OUT];
	struct stream s;
	char err[1024];
	size_t hdr = 80, end0;
	uint32_t bytes0;
	int n;

	kinds_stream(&s, true);
	memcpy(&bytes0, s.p + hdr + 8, 4);
	end0 = hdr + 32 + bytes0;
	for (size_t at = hdr; at < end0; at++) {
		for (int bit = 0; bit < 8; bit += 3) {
			int ret;

			s.p[at] ^= 1 << bit;
			ret = records_of(&s, s.len, out, OUT, err, sizeof(err),
					 &n);
			s.p[at] ^= 1 << bit;
			CHECK(ret < 0);
			CHECK_INT(n, 0);
			if (ret >= 0 || n || !strstr(err, "t: byte 80: ")) {
				fprintf(stderr, "byte %zu bit %d: %d, %d, %s\n",
					at, bit, ret, n, err);
				continue;
			}
		}
	}
	/* the body: the CRC says so */
	s.p[end0 - 1] ^= 0x10;
	records_of(&s, s.len, out, OUT, err, sizeof(err), &n);
	CHECK(strstr(err, "t: byte 80: batch 0: packed batch corrupt: "
			  "expected CRC-32 0x") != NULL);
	s.p[end0 - 1] ^= 0x10;
	free(s.p);
}

/* Bytes that pass the CRC (a writer's bug, or made so) and do not unpack:
 * the packed record, its byte and what was expected. */
static void test_bad_records(void)
{
	static char out[OUT];
	struct stream s;
	struct mt_raw_batch b;
	char err[1024];
	size_t hdr = 80;
	int n;

	kinds_stream(&s, true);
	memcpy(&b, s.p + hdr, sizeof(b));
	/* the first record's header byte with unknown bits in its second
	 * byte: record 0 starts the body */
	CHECK(s.p[hdr + 32] & 0x80);
	s.p[hdr + 33] |= 0x40;
	b.check = mt_raw_packed_check(&b, s.p + hdr + 32);
	memcpy(s.p + hdr, &b, sizeof(b));
	records_of(&s, s.len, out, OUT, err, sizeof(err), &n);
	CHECK_STR(err, "t: byte 112: batch 0: packed record 0: expected bits "
		       "6 and 7 of the second header byte clear");
	CHECK_INT(n, 0);
	free(s.p);

	/* one count more than the body holds */
	kinds_stream(&s, true);
	memcpy(&b, s.p + hdr, sizeof(b));
	b.count++;
	b.check = mt_raw_packed_check(&b, s.p + hdr + 32);
	memcpy(s.p + hdr, &b, sizeof(b));
	records_of(&s, s.len, out, OUT, err, sizeof(err), &n);
	{
		char want[256];

		snprintf(want, sizeof(want),
			 "t: byte %zu: batch 0: packed record %u: expected a "
			 "record, not the body's end",
			 hdr + 32 + b.bytes, b.count - 1);
		CHECK_STR(err, want);
	}
	free(s.p);

	/* a packed batch in a version 1 stream */
	kinds_stream(&s, true);
	s.p[8] = 1;
	records_of(&s, s.len, out, OUT, err, sizeof(err), &n);
	CHECK_STR(err, "t: byte 80: batch 0: a packed batch in a version 1 "
		       "stream (packed batches came with version 2)");
	free(s.p);

	/* a body longer than any count of records packs into */
	kinds_stream(&s, true);
	memcpy(&b, s.p + hdr, sizeof(b));
	b.count = 1;
	memcpy(s.p + hdr, &b, sizeof(b));
	records_of(&s, s.len, out, OUT, err, sizeof(err), &n);
	CHECK(strstr(err, "t: byte 80: batch 0: packed body of ") != NULL);
	free(s.p);
}

int main(void)
{
	test_codec();
	test_split();
	test_rest_too_big();
	test_check();
	test_stream_round_trip();
	test_truncations();
	test_corruptions();
	test_bad_records();
	return test_summary("test_raw_pack");
}
