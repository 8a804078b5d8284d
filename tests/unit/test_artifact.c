/* SPDX-License-Identifier: MIT */
/*
 * test_artifact - the artifact writer and the readers of artifacts, JSON
 * Lines, memtrack artifacts and timelines: every kind written and read
 * back in both styles, maps built with msgpack-c's own packer (not our
 * writer) read by our reader, CodSpeed's real memtrack vector, and the
 * reader's errors.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <msgpack.h>

#include "formats_test.h"
#include "mt_allocators.h"
#include "mt_artifact.h"
#include "mt_input.h"

struct bytes {
	char *p;
	size_t len;
};

static int memfd(void)
{
	int fd = memfd_create("artifact", 0);

	if (fd < 0)
		abort();
	return fd;
}

static void take(int fd, struct bytes *b)
{
	off_t len = lseek(fd, 0, SEEK_END);

	b->p = malloc(len + 1);
	b->len = len;
	if (pread(fd, b->p, len, 0) != len)
		abort();
	b->p[len] = '\0';
	close(fd);
}

static struct mt_input *open_bytes(const void *p, size_t len, char *err,
				   size_t errlen)
{
	FILE *f = fmemopen((void *)p, len, "r");

	return mt_input_fopen(f, "t", err, errlen);
}

/* ---- every kind through the writer and back -------------------------- */

static char *args[] = {"cmd", "with \"quotes\"", "\xc3\xa9t\xc3\xa9"};

static const struct mt_meta meta = {
    .page_size = 4096,
    .clock_id = 1,
    .root_pid = 7,
    .flags = MT_HDR_SYSCALLS | MT_HDR_PHYSICAL,
    .start_monotonic_ns = 5,
    .start_realtime_ns = 1700000000000000000ull,
    .host = "h\n\\",
    .argc = 3,
    .argv = args,
    .exit_kind = MT_EXIT_CODE,
    .exit_value = 3,
    .end_monotonic_ns = 99,
    .batches = 4,
};

#define NREC 22
static const char bad_utf8[] = "/tmp/\xff\xfe-x";
/* an Exec's path, its NUL, its arguments each ending in a NUL */
static const char exec_args[] = "/bin/sh\0sh\0-c\0a b\0";

static void all_kinds(struct mt_record *r)
{
	memset(r, 0, NREC * sizeof(*r));
	for (int i = 0; i < NREC; i++) {
		r[i].ev.pid = 100 + i;
		r[i].ev.tid = 200 + i;
		r[i].ev.timestamp = 1000 + i;
	}
	r[0].ev.kind = MT_EV_MALLOC, r[0].ev.addr = 0x1000, r[0].ev.size = 10;
	r[1].ev.kind = MT_EV_FREE, r[1].ev.addr = 0x1000;
	r[2].ev.kind = MT_EV_CALLOC, r[2].ev.addr = 0x2000, r[2].ev.size = 30;
	r[3].ev.kind = MT_EV_REALLOC, r[3].ev.addr = 0x3000, r[3].ev.size = 40,
	r[3].ev.old_addr = 0x2000;
	r[4].ev.kind = MT_EV_ALIGNED_ALLOC, r[4].ev.addr = 0x4000,
	r[4].ev.size = 512, r[4].ev.old_size = 64;
	r[5].ev.kind = MT_EV_MMAP, r[5].ev.addr = 0x7f0000000000,
	r[5].ev.size = 8192, r[5].ev.flags = 3, r[5].ev.aux = 0x22;
	r[6].ev.kind = MT_EV_MUNMAP, r[6].ev.addr = 0x7f0000000000,
	r[6].ev.size = 4096;
	r[7].ev.kind = MT_EV_MREMAP, r[7].ev.addr = 0x7f1000000000,
	r[7].ev.size = 16384, r[7].ev.old_addr = 0x7f0000001000,
	r[7].ev.old_size = 4096;
	r[8].ev.kind = MT_EV_BRK, r[8].ev.addr = 0x5000,
	r[8].ev.old_addr = 0x4000, r[8].ev.size = 0x1000;
	r[9].ev.kind = MT_EV_FORK, r[9].ev.old_addr = 7;
	r[10].ev.kind = MT_EV_EXEC, r[10].str = "/bin/\"sh\"",
	r[10].str_len = 9, r[10].ev.aux = 9;
	r[11].ev.kind = MT_EV_EXIT, r[11].ev.aux = 2 << 8;
	r[12].ev.kind = MT_EV_EXIT, r[12].ev.aux = 11;
	r[13].ev.kind = MT_EV_RSS, r[13].ev.aux = 3, r[13].ev.size = 123;
	r[14].ev.kind = MT_EV_PSS, r[14].ev.size = 40, r[14].ev.addr = 30,
	r[14].ev.old_addr = 20, r[14].ev.old_size = 10;
	r[15].ev.kind = MT_EV_MARKER, r[15].str = "phase\t1", r[15].str_len = 7,
	r[15].ev.aux = 7;
	r[16].ev.kind = MT_EV_ENABLE;
	r[17].ev.kind = MT_EV_DISABLE;
	r[18].ev.kind = MT_EV_LOST, r[18].ev.size = 17;
	r[19].ev.kind = MT_EV_EXEC, r[19].str = bad_utf8,
	r[19].str_len = sizeof(bad_utf8) - 1,
	r[19].ev.aux = sizeof(bad_utf8) - 1;
	r[20].ev.kind = MT_EV_ALLOCATOR, r[20].ev.flags = MT_ALLOC_JEMALLOC,
	r[20].str = "/usr/lib/libjemalloc.so.2", r[20].str_len = 25,
	r[20].ev.aux = 25;
	/* arguments, cut: argv and argv_bytes (man/mt-format.5) */
	r[21].ev.kind = MT_EV_EXEC, r[21].str = exec_args, r[21].str_len = 7,
	r[21].ev.aux = sizeof(exec_args) - 1, r[21].ev.size = 10,
	r[21].ev.old_size = 9000, r[21].ev.flags = MT_EXEC_ARGS_CUT;
}

static void check_same(const struct mt_record *got,
		       const struct mt_record *want, bool exact_str)
{
	CHECK_INT(got->ev.kind, want->ev.kind);
	CHECK_INT(got->ev.pid, want->ev.pid);
	CHECK_INT(got->ev.tid, want->ev.tid);
	CHECK_INT(got->ev.timestamp, want->ev.timestamp);
	CHECK_INT(got->ev.addr, want->ev.addr);
	CHECK_INT(got->ev.size, want->ev.size);
	CHECK_INT(got->ev.old_addr, want->ev.old_addr);
	CHECK_INT(got->ev.old_size, want->ev.old_size);
	CHECK_INT(got->ev.flags, want->ev.flags);
	CHECK_INT(got->ev.aux, want->ev.aux);
	CHECK_INT(got->str_len, want->str_len);
	if (want->str && exact_str)
		CHECK(got->str && !memcmp(got->str, want->str, want->str_len));
}

static void round_trip(enum mt_artifact_style style)
{
	struct mt_record recs[NREC], rec;
	struct mt_artifact *a;
	struct bytes b;
	struct mt_input *in;
	const struct mt_meta *m;
	char err[512];
	int fd = memfd();

	all_kinds(recs);
	a = mt_artifact_new(fd, style);
	CHECK_INT(mt_artifact_header(a, &meta), 0);
	for (int i = 0; i < NREC; i++)
		CHECK_INT(mt_artifact_record(a, &recs[i]), 0);
	CHECK_INT(mt_artifact_events(a), NREC);
	CHECK_INT(mt_artifact_trailer(a, &meta, true, NULL), 0);
	CHECK_INT(mt_artifact_close(a), 0);
	take(fd, &b);

	in = open_bytes(b.p, b.len, err, sizeof(err));
	CHECK(in != NULL);
	if (!in) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK_INT(mt_input_format(in),
		  style == MT_ARTIFACT_JSONL ? MT_FMT_JSONL : MT_FMT_ARTIFACT);
	m = mt_input_meta(in);
	CHECK_STR(m->host, "h\n\\");
	CHECK_INT(m->argc, 3);
	CHECK_STR(m->argv[1], "with \"quotes\"");
	CHECK_STR(m->argv[2], "\xc3\xa9t\xc3\xa9");
	CHECK_INT(m->flags, MT_HDR_SYSCALLS | MT_HDR_PHYSICAL);
	CHECK_INT(m->clock_id, 1);
	CHECK_INT(m->root_pid, 7);
	CHECK_INT(m->start_realtime_ns, 1700000000000000000ull);
	for (int i = 0; i < NREC; i++) {
		CHECK_INT(mt_input_next(in, &rec), 1);
		/* JSON holds text only: bad bytes come back as U+FFFD */
		if (i == 19 && style == MT_ARTIFACT_JSONL) {
			CHECK_STR(rec.str, "/tmp/\xef\xbf\xbd\xef\xbf\xbd-x");
			continue;
		}
		check_same(&rec, &recs[i], true);
		if (i == 21) /* the arguments too */
			CHECK(mt_exec_args(&rec) &&
			      !memcmp(mt_exec_args(&rec), "sh\0-c\0a b\0", 10));
	}
	CHECK_INT(mt_input_next(in, &rec), 0);
	CHECK_INT(m->has_trailer, true);
	CHECK_INT(m->exit_kind, MT_EXIT_CODE);
	CHECK_INT(m->exit_value, 3);
	CHECK_INT(m->events, NREC);
	CHECK_INT(m->lost, 17);
	CHECK_INT(m->batches, 4);
	CHECK_INT(m->end_monotonic_ns, 99);
	mt_input_close(in);
	free(b.p);
}

static void test_jsonl_text(void)
{
	struct mt_record recs[NREC];
	struct mt_artifact *a;
	struct bytes b;
	int fd = memfd();

	all_kinds(recs);
	a = mt_artifact_new(fd, MT_ARTIFACT_JSONL);
	mt_artifact_header(a, &meta);
	mt_artifact_record(a, &recs[3]);
	mt_artifact_record(a, &recs[10]);
	mt_artifact_record(a, &recs[12]);
	mt_artifact_record(a, &recs[21]);
	mt_artifact_trailer(a, &meta, false, "byte 9: \"bad\"");
	CHECK_INT(mt_artifact_close(a), 0);
	take(fd, &b);
	CHECK_STR(
	    b.p,
	    "{\"type\":\"Header\",\"format\":\"mt\",\"version\":1,"
	    "\"command\":[\"cmd\",\"with "
	    "\\\"quotes\\\"\",\"\xc3\xa9t\xc3\xa9\"],"
	    "\"host\":\"h\\n\\\\\",\"clock\":\"CLOCK_MONOTONIC\","
	    "\"page_size\":4096,\"root_pid\":7,"
	    "\"start_time\":1700000000000000000,\"start_monotonic\":5,"
	    "\"allocators_tracked\":false,\"syscalls_tracked\":true,"
	    "\"rss_tracked\":false,\"physical_tracked\":true}\n"
	    "{\"type\":\"Realloc\",\"pid\":103,\"tid\":203,"
	    "\"timestamp\":1003,\"addr\":12288,\"size\":40,"
	    "\"old_addr\":8192}\n"
	    "{\"type\":\"Exec\",\"pid\":110,\"tid\":210,\"timestamp\":1010,"
	    "\"path\":\"/bin/\\\"sh\\\"\"}\n"
	    "{\"type\":\"Exit\",\"pid\":112,\"tid\":212,\"timestamp\":1012,"
	    "\"signal\":11}\n"
	    "{\"type\":\"Exec\",\"pid\":121,\"tid\":221,\"timestamp\":1021,"
	    "\"path\":\"/bin/sh\",\"argv\":[\"sh\",\"-c\",\"a b\"],"
	    "\"argv_bytes\":9000}\n"
	    "{\"type\":\"Trailer\",\"complete\":false,\"events\":4,"
	    "\"lost_events\":0,\"error\":\"byte 9: \\\"bad\\\"\"}\n");
	free(b.p);
}

/* ---- reading what others wrote ---------------------------------------- */

static void pk_key(msgpack_packer *pk, const char *k)
{
	msgpack_pack_str(pk, strlen(k));
	msgpack_pack_str_body(pk, k, strlen(k));
}

static void pk_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
	pk_key(pk, k);
	pk_key(pk, v);
}

static void pk_kv_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
	pk_key(pk, k);
	msgpack_pack_uint64(pk, v);
}

/* A memtrack stream as memtrack writes it: key order pid, tid, timestamp,
 * addr, type, size; Brk and Realloc without old_addr; an extra key. */
static void memtrack_stream(msgpack_sbuffer *sb, const char *last_type)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 6);
	pk_kv_u64(&pk, "pid", 1);
	pk_kv_u64(&pk, "tid", 11);
	pk_kv_u64(&pk, "timestamp", 100);
	pk_kv_u64(&pk, "addr", 16);
	pk_kv_str(&pk, "type", "Malloc");
	pk_kv_u64(&pk, "size", 42);
	msgpack_pack_map(&pk, 7);
	pk_kv_u64(&pk, "pid", 1);
	pk_kv_u64(&pk, "tid", 11);
	pk_kv_u64(&pk, "timestamp", 101);
	pk_kv_u64(&pk, "addr", 0x5000);
	pk_kv_str(&pk, "type", "Brk");
	pk_kv_u64(&pk, "size", 4096);
	pk_kv_str(&pk, "future_key", "ignored");
	msgpack_pack_map(&pk, 5);
	pk_kv_u64(&pk, "pid", 1);
	pk_kv_u64(&pk, "tid", 11);
	pk_kv_u64(&pk, "timestamp", 102);
	pk_kv_u64(&pk, "addr", 16);
	pk_kv_str(&pk, "type", last_type);
}

static void test_memtrack(void)
{
	msgpack_sbuffer sb;
	struct mt_input *in;
	struct mt_record rec;
	char err[512];
	uint64_t off;

	memtrack_stream(&sb, "Free");
	in = open_bytes(sb.data, sb.size, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_format(in), MT_FMT_MEMTRACK);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_MALLOC);
	CHECK_INT(rec.ev.pid, 1);
	CHECK_INT(rec.ev.tid, 11);
	CHECK_INT(rec.ev.timestamp, 100);
	CHECK_INT(rec.ev.addr, 16);
	CHECK_INT(rec.ev.size, 42);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_BRK);
	CHECK_INT(rec.ev.addr, 0x5000);
	CHECK_INT(rec.ev.old_addr, 0);
	CHECK_INT(rec.ev.size, 4096);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_FREE);
	CHECK_INT(mt_input_next(in, &rec), 0);
	CHECK_INT(mt_input_meta(in)->has_trailer, false);
	CHECK_INT(mt_input_meta(in)->events, 3);
	mt_input_close(in);
	msgpack_sbuffer_destroy(&sb);

	/* an unknown type is an error naming it and where it was */
	memtrack_stream(&sb, "Teleport");
	off = sb.size - 42; /* the third map: 1 + 5 + 5 + 11 + 6 + 14 bytes */
	in = open_bytes(sb.data, sb.size, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(mt_input_next(in, &rec), -1);
	snprintf(err, sizeof(err),
		 "t: byte %" PRIu64 ": unknown event type \"Teleport\"", off);
	CHECK_STR(mt_input_error(in), err);
	mt_input_close(in);
	msgpack_sbuffer_destroy(&sb);
}

/* CodSpeed's test vector, decompressed: {"pid": 1, "tid": 11,
 * "timestamp": 100, "addr": 16, "type": "Realloc", "size": 42} */
static const unsigned char codspeed_realloc[] =
    "\x86\xa3pid\x01\xa3tid\x0b\xa9timestamp\x64\xa4"
    "addr\x10"
    "\xa4type\xa7Realloc\xa4size\x2a";

static void check_codspeed_realloc(const void *p, size_t len)
{
	struct mt_input *in;
	struct mt_record rec;
	char err[512];

	in = open_bytes(p, len, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_format(in), MT_FMT_MEMTRACK);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_REALLOC);
	CHECK_INT(rec.ev.pid, 1);
	CHECK_INT(rec.ev.tid, 11);
	CHECK_INT(rec.ev.timestamp, 100);
	CHECK_INT(rec.ev.addr, 16);
	CHECK_INT(rec.ev.size, 42);
	CHECK_INT(rec.ev.old_addr, 0);
	CHECK_INT(mt_input_next(in, &rec), 0);
	mt_input_close(in);
}

static void test_codspeed_vector(void)
{
	/* the stored file, in the repository (tests/run runs units from the
	 * top of the tree); the zstd CLI decompresses it as an outside truth */
	const char *cmd = "zstd -dc tests/data/"
			  "codspeed-realloc.MemtrackArtifact.msgpack "
			  "2>/dev/null";
	char buf[256];
	size_t n = 0;
	FILE *p;

	check_codspeed_realloc(codspeed_realloc, sizeof(codspeed_realloc) - 1);
	p = popen(cmd, "r");
	if (p) {
		n = fread(buf, 1, sizeof(buf), p);
		pclose(p);
	}
	CHECK_INT(n, sizeof(codspeed_realloc) - 1);
	check_codspeed_realloc(buf, n);
}

/* ---- errors of artifact / JSON Lines readers -------------------------- */

static void expect_error(const char *text, size_t len, const char *msg)
{
	char err[512] = "";
	struct mt_input *in = open_bytes(text, len, err, sizeof(err));
	struct mt_record rec;
	int ret = -2;

	if (in) {
		while ((ret = mt_input_next(in, &rec)) > 0)
			;
		snprintf(err, sizeof(err), "%s", mt_input_error(in));
		mt_input_close(in);
	}
	CHECK(ret < 0);
	CHECK_STR(err, msg);
}

#define HEADER_LINE "{\"type\":\"Header\",\"format\":\"mt\",\"version\":1}\n"
#define EVENT_LINE                                                             \
	"{\"type\":\"Malloc\",\"pid\":1,\"tid\":1,\"timestamp\":5,"            \
	"\"addr\":4096,\"size\":8}\n"

static void test_jsonl_errors(void)
{
	const char *s;

	s = HEADER_LINE EVENT_LINE;
	expect_error(s, strlen(s),
		     "t: byte 113: truncated: no trailer after 1 events");
	s = HEADER_LINE EVENT_LINE
	    "{\"type\":\"Trailer\",\"complete\":true,\"events\":2}\n";
	expect_error(s, strlen(s),
		     "t: byte 113: trailer says 2 events, artifact had 1");
	s = HEADER_LINE EVENT_LINE
	    "{\"type\":\"Trailer\",\"complete\":false,\"events\":1,"
	    "\"error\":\"byte 7: cut\"}\n";
	expect_error(s, strlen(s),
		     "t: byte 113: the artifact is incomplete: byte 7: cut");
	s = HEADER_LINE EVENT_LINE
	    "{\"type\":\"Trailer\",\"complete\":true,\"events\":1}\n"
	    "{}\n";
	expect_error(s, strlen(s), "t: byte 159: data after the trailer");
	s = HEADER_LINE "{\"type\":\"Malloc\",\"pid\":1,\"tid\":1,"
			"\"timestamp\":-5}\n";
	expect_error(s, strlen(s),
		     "t: byte 44: \"timestamp\": expected an unsigned integer");
	s = HEADER_LINE "{\"type\":\"Free\",\"tid\":1,\"timestamp\":5}\n";
	expect_error(s, strlen(s), "t: byte 44: Free: missing \"pid\"");
	s = HEADER_LINE "{\"type\":\"Free\",\n";
	expect_error(s, strlen(s),
		     "t: byte 44: line 2: invalid JSON: string or '}' "
		     "expected near end of file");
	s = "{\"type\":\"Header\",\"format\":\"mt\",\"version\":2}\n";
	expect_error(s, strlen(s),
		     "t: byte 0: Header: unsupported artifact version 2 (this "
		     "reader knows 1)");
	s = "{\"type\":\"Malloc\"}\n";
	expect_error(s, strlen(s), "t: byte 0: line 1: not an mt Header");
	s = "\x01\x02";
	expect_error(s, 2,
		     "t: byte 0: unknown format (first byte 0x01): not an mt "
		     "raw stream, artifact, JSON Lines or memtrack artifact");
	/* MessagePack: a map cut short, and a map that is not an event */
	s = "\x86\xa3pid\x01\xa3tid";
	expect_error(s, strlen(s),
		     "t: byte 0: truncated MessagePack object (10 bytes before "
		     "the end)");
	s = "\x81\xa3pid\x01";
	expect_error(s, strlen(s), "t: byte 0: map without a string \"type\"");
	s = "\x81\xa4type\xa6Header";
	expect_error(s, strlen(s),
		     "t: byte 0: Header: \"format\" is not \"mt\"");
}

/* Integer encodings another packer may choose, and maps the flat-map
 * decoder leaves to msgpack-c: both paths must read them the same way. */
static void test_encodings(void)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct mt_input *in;
	struct mt_record rec;
	char err[512];

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	/* a flat map (the fast path): signed encodings of non-negative
	 * values, written by hand since msgpack-c packs ints minimally, and
	 * a bin key (ignored); 13 + 6 + 13 + 15 + 7 + 14 = 68 bytes */
	msgpack_pack_map(&pk, 6);
	pk_kv_str(&pk, "type", "Malloc");
	pk_key(&pk, "pid");
	msgpack_sbuffer_write(&sb, "\xd0\x05", 2); /* int8 5 */
	pk_key(&pk, "tid");
	msgpack_sbuffer_write(&sb, "\xd3\0\0\0\0\0\0\0\x06", 9);
	pk_key(&pk, "timestamp");
	msgpack_sbuffer_write(&sb, "\xd2\x00\x01\x11\x70", 5);
	msgpack_pack_bin(&pk, 4);
	msgpack_pack_bin_body(&pk, "size", 4);
	msgpack_pack_uint8(&pk, 99);
	pk_key(&pk, "addr");
	msgpack_pack_uint64(&pk, 0xffffffffffffffffull);
	/* a nested value under an unknown key: msgpack-c's path; 41 bytes */
	msgpack_pack_map(&pk, 4);
	pk_kv_str(&pk, "type", "Free");
	pk_key(&pk, "pid");
	msgpack_sbuffer_write(&sb, "\xd0\x07", 2);
	pk_key(&pk, "timestamp");
	msgpack_sbuffer_write(&sb, "\xd2\x00\x01\x11\x71", 5);
	pk_key(&pk, "future");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_nil(&pk);
	/* a negative pid, at byte 68 + 41 */
	msgpack_pack_map(&pk, 3);
	pk_kv_str(&pk, "type", "Free");
	pk_key(&pk, "pid");
	msgpack_sbuffer_write(&sb, "\xd0\xff", 2); /* int8 -1 */
	pk_kv_u64(&pk, "timestamp", 1);
	in = open_bytes(sb.data, sb.size, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK_INT(mt_input_format(in), MT_FMT_MEMTRACK);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.pid, 5);
	CHECK_INT(rec.ev.tid, 6);
	CHECK_INT(rec.ev.timestamp, 70000);
	CHECK_INT(rec.ev.size, 0); /* the bin key is not "size" */
	CHECK(rec.ev.addr == 0xffffffffffffffffull);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_FREE);
	CHECK_INT(rec.ev.pid, 7);
	CHECK_INT(rec.ev.timestamp, 70001);
	CHECK_INT(mt_input_next(in, &rec), -1);
	CHECK_STR(mt_input_error(in),
		  "t: byte 109: \"pid\": expected an unsigned integer");
	mt_input_close(in);
	msgpack_sbuffer_destroy(&sb);
}

static void test_timelines(void)
{
	static const char *const docs[] = {
	    "{\"format\":\"mt-timelines\",\"version\":1}\n",
	    "{\n  \"format\": \"mt-timelines\",\n  \"processes\": []\n}\n",
	};

	for (int i = 0; i < 2; i++) {
		char err[512];
		struct mt_record rec;
		struct mt_input *in =
		    open_bytes(docs[i], strlen(docs[i]), err, sizeof(err));

		CHECK(in != NULL);
		if (!in)
			continue;
		CHECK_INT(mt_input_format(in), MT_FMT_TIMELINES);
		CHECK_INT(mt_input_next(in, &rec), -1);
		CHECK_STR(
		    mt_input_error(in),
		    "t: byte 0: mt-reconstruct timelines are not an event "
		    "stream (mt-report reads them)");
		mt_input_close(in);
	}
}

static void test_kind_names(void)
{
	CHECK_STR(mt_kind_name(MT_EV_ALIGNED_ALLOC), "AlignedAlloc");
	CHECK_STR(mt_kind_name(MT_EV_LOST), "Lost");
	CHECK(mt_kind_name(MT_EV_DATA) == NULL);
	CHECK(mt_kind_name(MT_EV_KIND_MAX) == NULL);
	for (unsigned k = 1; k < MT_EV_KIND_MAX; k++) {
		const char *name = mt_kind_name(k);

		if (name)
			CHECK_INT(mt_kind_from_name(name, strlen(name)), k);
	}
	CHECK_INT(mt_kind_from_name("Mallo", 5), MT_EV_NONE);
	CHECK(mt_utf8_valid("\xe2\x82\xac", 3));
	CHECK(!mt_utf8_valid("\xe2\x82", 2));
	CHECK(!mt_utf8_valid("\xc0\x80", 2));	      /* overlong NUL */
	CHECK(!mt_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
	CHECK(!mt_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	round_trip(MT_ARTIFACT_MSGPACK);
	round_trip(MT_ARTIFACT_JSONL);
	test_jsonl_text();
	test_memtrack();
	test_codspeed_vector();
	test_jsonl_errors();
	test_encodings();
	test_timelines();
	test_kind_names();
	return test_summary("test_artifact");
}
