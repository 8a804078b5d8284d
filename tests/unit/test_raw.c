/* SPDX-License-Identifier: MIT */
/*
 * test_raw - the raw stream writer and reader: a round trip, and every
 * error the reader reports, with its exact message and byte offset.
 * Streams are built with the lib writers (into a memfd) and then cut or
 * patched at offsets known from the layout in mt_raw.h.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mt_input.h"
#include "formats_test.h"
#include "stream_test.h"

static char *host = "box";
static char *args[] = {"prog", "-x", "a b"};

static struct mt_meta test_meta(void)
{
	return (struct mt_meta){
	    .page_size = 4096,
	    .clock_id = 1,
	    .root_pid = 42,
	    .flags = MT_HDR_ALLOCATORS | MT_HDR_RSS,
	    .start_monotonic_ns = 111,
	    .start_realtime_ns = 222,
	    .host = host,
	    .argc = 3,
	    .argv = args,
	    .exit_kind = MT_EXIT_SIGNAL,
	    .exit_value = 9,
	    .end_monotonic_ns = 999,
	};
}

/* header: 64 + "box\0prog\0-x\0a b\0" (16) = 80, already a multiple of 8 */
#define HDR	80
#define BATCH	32
#define EV	56
#define TRAILER 48

static struct mt_event ev_at(unsigned kind, uint64_t ts, uint64_t addr,
			     uint64_t size)
{
	return (struct mt_event){.timestamp = ts,
				 .pid = 42,
				 .tid = 43,
				 .kind = kind,
				 .addr = addr,
				 .size = size};
}

/* Two batches: [malloc, exec of a 57-byte path (2 payload slots), free]
 * with lost 0, then [calloc] with lost 5; the trailer counts 5 records. */
static void good_stream(struct stream *s)
{
	struct mt_meta m = test_meta();
	struct mt_event b0[4] = {ev_at(MT_EV_MALLOC, 1000, 0x10, 100),
				 ev_at(MT_EV_EXEC, 1001, 0, 0),
				 {0},
				 ev_at(MT_EV_FREE, 1002, 0x10, 0)};
	struct mt_event b1[1] = {ev_at(MT_EV_CALLOC, 1003, 0x20, 30)};
	struct mt_event batch0[5];
	const char *path =
	    "/usr/lib/a-path-that-is-fifty-seven-bytes-long/abcdefghij";
	int fd = memfd();

	b0[1].aux = strlen(path);
	memcpy(batch0, b0, 2 * EV);
	memset(&batch0[2], 0, 2 * EV);
	memcpy(&batch0[2], path, strlen(path));
	batch0[4] = b0[3];
	m.events = 6;
	m.lost = 5;
	m.batches = 2;
	CHECK_INT(mt_raw_write_header(fd, &m), 0);
	CHECK_INT(mt_raw_write_batch(fd, 0, 0, batch0, 5), 0);
	CHECK_INT(mt_raw_write_batch(fd, 1, 5, b1, 1), 0);
	CHECK_INT(mt_raw_write_trailer(fd, &m), 0);
	take(fd, s);
}

static struct mt_input *open_bytes(const void *p, size_t len, char *err,
				   size_t errlen)
{
	FILE *f = len ? fmemopen((void *)p, len, "r") : fopen("/dev/null", "r");

	return mt_input_fopen(f, "t", err, errlen);
}

/* Reads to the end; returns the final mt_input_next() result and copies
 * the error (or the open error) into err. */
static int drain(const void *p, size_t len, char *err, size_t errlen,
		 uint64_t *records)
{
	struct mt_input *in = open_bytes(p, len, err, errlen);
	struct mt_record rec;
	int ret;

	*records = 0;
	if (!in)
		return -2;
	while ((ret = mt_input_next(in, &rec)) > 0)
		(*records)++;
	snprintf(err, errlen, "%s", mt_input_error(in));
	mt_input_close(in);
	return ret;
}

static void expect_error(const struct stream *s, size_t len, const char *msg)
{
	char err[1024] = "";
	uint64_t n;
	int ret = drain(s->p, len, err, sizeof(err), &n);

	CHECK(ret < 0);
	CHECK_STR(err, msg);
}

static void test_round_trip(void)
{
	struct stream s;
	char err[256];
	struct mt_input *in;
	struct mt_record rec;
	const struct mt_meta *m;

	good_stream(&s);
	CHECK_INT(s.len, HDR + BATCH + 5 * EV + BATCH + EV + TRAILER);
	in = open_bytes(s.p, s.len, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_format(in), MT_FMT_RAW);
	m = mt_input_meta(in);
	CHECK_INT(m->version, MT_RAW_VERSION);
	CHECK_INT(m->page_size, 4096);
	CHECK_INT(m->root_pid, 42);
	CHECK_INT(m->flags, MT_HDR_ALLOCATORS | MT_HDR_RSS);
	CHECK_INT(m->start_monotonic_ns, 111);
	CHECK_INT(m->start_realtime_ns, 222);
	CHECK_STR(m->host, "box");
	CHECK_INT(m->argc, 3);
	CHECK_STR(m->argv[2], "a b");
	CHECK_INT(m->has_trailer, false);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_MALLOC);
	CHECK_INT(rec.ev.size, 100);
	CHECK(rec.str == NULL);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_EXEC);
	CHECK_INT(rec.str_len, 57);
	CHECK_STR(rec.str,
		  "/usr/lib/a-path-that-is-fifty-seven-bytes-long/abcdefghij");
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_FREE);
	CHECK_INT(rec.ev.timestamp, 1002);
	/* the lost count comes first, dated by the batch's first event */
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_LOST);
	CHECK_INT(rec.ev.size, 5);
	CHECK_INT(rec.ev.timestamp, 1003);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_CALLOC);
	CHECK_INT(rec.ev.addr, 0x20);
	CHECK_INT(mt_input_next(in, &rec), 0);
	CHECK_INT(mt_input_next(in, &rec), 0);
	CHECK_INT(m->has_trailer, true);
	CHECK_INT(m->exit_kind, MT_EXIT_SIGNAL);
	CHECK_INT(m->exit_value, 9);
	CHECK_INT(m->end_monotonic_ns, 999);
	CHECK_INT(m->events, 6);
	CHECK_INT(m->lost, 5);
	CHECK_INT(m->batches, 2);
	CHECK_INT(mt_input_offset(in), s.len);
	mt_input_close(in);
	free(s.p);
}

static void put_u32(struct stream *s, size_t off, uint32_t v)
{
	memcpy(s->p + off, &v, 4);
}

static void put_u64(struct stream *s, size_t off, uint64_t v)
{
	memcpy(s->p + off, &v, 8);
}

#define B0 HDR			  /* first batch header */
#define B1 (HDR + BATCH + 5 * EV) /* second batch header */
#define TR (B1 + BATCH + EV)	  /* trailer */

static void test_truncations(void)
{
	struct stream s;

	good_stream(&s);
	expect_error(&s, 0, "t: byte 0: empty input");
	expect_error(&s, 30,
		     "t: byte 0: stream header truncated: expected 64 bytes, "
		     "got 30");
	expect_error(&s, 70,
		     "t: byte 0: stream header truncated: expected 80 bytes, "
		     "got 70");
	expect_error(&s, HDR,
		     "t: byte 80: truncated: no trailer after the stream "
		     "header");
	expect_error(&s, HDR + 10,
		     "t: byte 80: batch header truncated (first batch): "
		     "expected 32 bytes, got 10");
	expect_error(&s, HDR + BATCH + 100,
		     "t: byte 112: batch 0: body truncated: expected 280 "
		     "bytes, got 100");
	/* cut inside the exec path's payload slots */
	expect_error(&s, HDR + BATCH + EV + EV + 20,
		     "t: byte 112: batch 0: body truncated: expected 280 "
		     "bytes, got 132");
	expect_error(&s, B1,
		     "t: byte 392: truncated: no trailer after batch 0");
	expect_error(&s, B1 + 3,
		     "t: byte 392: batch header truncated (after batch 0): "
		     "expected 32 bytes, got 3");
	expect_error(&s, TR,
		     "t: byte 480: truncated: no trailer after batch 1");
	expect_error(&s, TR + 47,
		     "t: byte 480: trailer truncated: expected 48 bytes, got "
		     "47");
	free(s.p);
}

static void test_corruptions(void)
{
	struct stream s;
	unsigned char *extra;

	good_stream(&s);
	s.p[3] = 'X';
	expect_error(&s, s.len, "t: byte 0: stream header: bad magic");
	free(s.p);

	good_stream(&s);
	put_u32(&s, 8, 3);
	expect_error(&s, s.len,
		     "t: byte 8: stream header: unsupported version 3 (this "
		     "reader knows 1 to 2)");
	free(s.p);

	good_stream(&s);
	put_u32(&s, 8, 0);
	expect_error(&s, s.len,
		     "t: byte 8: stream header: unsupported version 0 (this "
		     "reader knows 1 to 2)");
	free(s.p);

	good_stream(&s);
	put_u32(&s, 16, 48);
	expect_error(&s, s.len,
		     "t: byte 16: stream header: event_size 48 is smaller than "
		     "56");
	free(s.p);

	good_stream(&s);
	put_u32(&s, 12, 70); /* header_size below 64 + strings_size */
	expect_error(&s, s.len,
		     "t: byte 12: stream header: header_size 70 does not hold "
		     "64 + strings_size 16 bytes");
	free(s.p);

	good_stream(&s);
	s.p[64 + 15] = 'x'; /* the last string loses its NUL */
	expect_error(&s, s.len,
		     "t: byte 76: stream header: string 4 of 4 is not "
		     "NUL-terminated within strings_size");
	free(s.p);

	good_stream(&s);
	put_u32(&s, B1, 0xdeadbeef);
	expect_error(&s, s.len,
		     "t: byte 392: batch header: bad magic 0xdeadbeef");
	free(s.p);

	good_stream(&s);
	put_u64(&s, B1 + 16, 2);
	expect_error(&s, s.len,
		     "t: byte 392: batch seq gap: expected 1, got 2");
	free(s.p);

	good_stream(&s);
	put_u32(&s, B1 + 8, 57);
	expect_error(&s, s.len,
		     "t: byte 392: batch 1: bytes 57 != count 1 * event_size "
		     "56");
	free(s.p);

	good_stream(&s);
	put_u32(&s, B0 + BATCH + EV + 20, 5 * 56); /* exec aux: 5 slots */
	expect_error(&s, s.len,
		     "t: byte 168: batch 0: record 1: payload of 280 bytes "
		     "runs past the batch (3 records left, 5 needed)");
	free(s.p);

	good_stream(&s);
	put_u32(&s, B0 + BATCH + 16, MT_EV_DATA); /* a stray payload slot */
	expect_error(&s, s.len,
		     "t: byte 112: batch 0: record 0: unexpected event kind "
		     "13");
	free(s.p);

	good_stream(&s);
	put_u64(&s, TR + 24, 7);
	expect_error(&s, s.len,
		     "t: byte 480: trailer says 7 events, stream had 6");
	free(s.p);

	good_stream(&s);
	put_u64(&s, TR + 32, 4);
	expect_error(&s, s.len,
		     "t: byte 480: trailer says 4 lost events, batches had 5");
	free(s.p);

	good_stream(&s);
	put_u64(&s, TR + 40, 3);
	expect_error(&s, s.len,
		     "t: byte 480: trailer says 3 batches, stream had 2");
	free(s.p);

	good_stream(&s);
	extra = realloc(s.p, s.len + 1);
	s.p = extra;
	s.p[s.len] = 0;
	expect_error(&s, s.len + 1, "t: byte 528: data after the trailer");
	free(s.p);
}

/* A writer with event_size 64 (a later version with a longer record):
 * the reader skips the 8 extra bytes of each record. */
static void test_wider_events(void)
{
	unsigned char buf[HDR + BATCH + 3 * 64 + TRAILER] = {0};
	struct mt_raw_batch b = {
	    .magic = MT_BATCH_MAGIC, .count = 3, .bytes = 3 * 64};
	struct mt_raw_trailer t = {
	    .magic = MT_TRAILER_MAGIC, .events = 3, .batches = 1};
	struct mt_event e = ev_at(MT_EV_MARKER, 5, 0, 0);
	struct stream s;
	struct mt_input *in;
	struct mt_record rec;
	char err[256];

	good_stream(&s);
	memcpy(buf, s.p, HDR);
	free(s.p);
	memcpy(buf + 16, &(uint32_t){64}, 4);
	memcpy(buf + B0, &b, sizeof(b));
	e.aux = 60; /* two slots: 56 bytes from the first, 4 from the next */
	memcpy(buf + B0 + BATCH, &e, sizeof(e));
	memset(buf + B0 + BATCH + 64, 'a', 64);
	memcpy(buf + B0 + BATCH + 128, "bcdeFFFF", 8);
	memcpy(buf + B0 + BATCH + 3 * 64, &t, sizeof(t));
	in = open_bytes(buf, sizeof(buf), err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_MARKER);
	CHECK_INT(rec.str_len, 60);
	CHECK(rec.str &&
	      !memcmp(rec.str,
		      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		      "aaaaaabcde",
		      60));
	CHECK_INT(mt_input_next(in, &rec), 0);
	CHECK_INT(mt_input_offset(in), sizeof(buf));
	mt_input_close(in);
}

/* A batch with lost events and no records: the LOST record takes the
 * timestamp of the last event before it. */
static void test_lost_only_batch(void)
{
	struct mt_meta m = test_meta();
	struct mt_event e = ev_at(MT_EV_MALLOC, 77, 1, 2);
	struct stream s;
	struct mt_input *in;
	struct mt_record rec;
	char err[256];
	int fd = memfd();

	m.events = 1;
	m.lost = 3;
	m.batches = 2;
	CHECK_INT(mt_raw_write_header(fd, &m), 0);
	CHECK_INT(mt_raw_write_batch(fd, 0, 0, &e, 1), 0);
	CHECK_INT(mt_raw_write_batch(fd, 1, 3, NULL, 0), 0);
	CHECK_INT(mt_raw_write_trailer(fd, &m), 0);
	take(fd, &s);
	in = open_bytes(s.p, s.len, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_LOST);
	CHECK_INT(rec.ev.size, 3);
	CHECK_INT(rec.ev.timestamp, 77);
	CHECK_INT(mt_input_next(in, &rec), 0);
	mt_input_close(in);
	free(s.p);
}

static void test_writer_errors(void)
{
	struct mt_meta m = test_meta();
	int fds[2];

	/* a pipe without a reader: EPIPE, not a crash (SIGPIPE ignored) */
	signal(SIGPIPE, SIG_IGN);
	if (pipe(fds))
		abort();
	close(fds[0]);
	CHECK_INT(mt_raw_write_header(fds[1], &m), -EPIPE);
	CHECK_INT(mt_raw_write_trailer(fds[1], &m), -EPIPE);
	close(fds[1]);
	CHECK_INT(mt_raw_write_batch(-1, 0, 0, NULL, 0), -EBADF);
}

int main(void)
{
	test_round_trip();
	test_truncations();
	test_corruptions();
	test_wider_events();
	test_lost_only_batch();
	test_writer_errors();
	return test_summary("test_raw");
}
