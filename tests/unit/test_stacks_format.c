/* SPDX-License-Identifier: MIT */
/*
 * test_stacks_format - the call stack records (man/mt-format.5, "Call
 * stacks") through every format: a raw stream written with the lib
 * writer, read back; the artifact and JSON Lines mt-encode's writer makes
 * of it, read back the same; and each error the raw reader reports about
 * them, with its message.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_artifact.h"
#include "mt_input.h"

#define MAX_SLOTS 64

static char *host = "box";
static char *args[] = {"prog"};

/* The records of a small traced run with stacks, as mt-trace writes them. */
struct run {
	struct mt_event slots[MAX_SLOTS];
	unsigned n;
};

static void add(struct run *r, const struct mt_event *e)
{
	r->slots[r->n++] = *e;
}

static void add_payload(struct run *r, const void *p, size_t len)
{
	size_t slots = (len + MT_DATA_PER_RECORD - 1) / MT_DATA_PER_RECORD;

	memset(&r->slots[r->n], 0, slots * sizeof(r->slots[0]));
	memcpy(&r->slots[r->n], p, len);
	r->n += slots;
}

static const uint8_t build_id[20] = {0xde, 0xad, 0xbe, 0xef, 1,	 2, 3,
				     4,	   5,	 6,    7,    8,	 9, 10,
				     11,   12,	 13,   14,   15, 16};
static const char path[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
/* 9 frames: two payload slots */
static const uint64_t frames[9] = {
    MT_FRAME(1, 0x29d90), MT_FRAME(1, 0x1234), MT_FRAME(0, 0x7ffff7fc1000),
    MT_FRAME(1, 0x5),	  MT_FRAME(1, 0x6),    MT_FRAME(1, 0x7),
    MT_FRAME(1, 0x8),	  MT_FRAME(1, 0x9),    MT_FRAME(65535, 0xffffffffffff)};

static void code_file(struct run *r)
{
	char payload[sizeof(build_id) + sizeof(path)];
	struct mt_event e = {.timestamp = 10,
			     .pid = 7,
			     .tid = 7,
			     .kind = MT_EV_CODE_FILE,
			     .flags = sizeof(build_id),
			     .aux = sizeof(payload) - 1,
			     .addr = 1,
			     .old_addr = 8 << 20 | 1,
			     .old_size = 1234};

	memcpy(payload, build_id, sizeof(build_id));
	memcpy(payload + sizeof(build_id), path, sizeof(path) - 1);
	add(r, &e);
	add_payload(r, payload, e.aux);
}

static void stack(struct run *r, uint64_t id, unsigned n, bool truncated)
{
	struct mt_event e = {.timestamp = 11,
			     .pid = 7,
			     .tid = 8,
			     .kind = MT_EV_STACK,
			     .flags = truncated ? MT_STACK_TRUNCATED : 0,
			     .aux = n * 8,
			     .addr = id,
			     .size = n};

	add(r, &e);
	add_payload(r, frames, n * 8);
}

static void stacked_malloc(struct run *r, uint64_t id, uint32_t tid)
{
	struct mt_event ref = {.timestamp = 12,
			       .pid = 7,
			       .tid = tid,
			       .kind = MT_EV_STACK_REF,
			       .addr = id};
	struct mt_event m = {.timestamp = 12,
			     .pid = 7,
			     .tid = 8,
			     .kind = MT_EV_MALLOC,
			     .addr = 0x5000,
			     .size = 4321};

	add(r, &ref);
	add(r, &m);
}

static void good_run(struct run *r)
{
	struct mt_event map = {.timestamp = 13,
			       .pid = 7,
			       .tid = 7,
			       .kind = MT_EV_CODE_MAP,
			       .addr = 0x7ffff7dd0000,
			       .size = 0x1000,
			       .old_addr = 0x26000,
			       .old_size = 1};
	struct mt_event fr = {.timestamp = 14,
			      .pid = 7,
			      .tid = 8,
			      .kind = MT_EV_FREE,
			      .addr = 0x5000};

	r->n = 0;
	code_file(r);
	stack(r, 1, 9, false);
	stacked_malloc(r, 1, 8);
	stack(r, 2, 3, true);
	stacked_malloc(r, 2, 8);
	stacked_malloc(r, 1, 8);
	add(r, &map);
	add(r, &fr);
}

/* The run as a raw stream in a memfd, rewound. */
static int raw_fd(const struct run *r)
{
	struct mt_meta m = {.page_size = 4096,
			    .clock_id = 1,
			    .root_pid = 7,
			    .flags = MT_HDR_ALLOCATORS | MT_HDR_STACKS,
			    .host = host,
			    .argc = 1,
			    .argv = args,
			    .exit_kind = MT_EXIT_CODE,
			    .events = r->n,
			    .batches = 1};
	int fd = memfd_create("raw", 0);

	if (fd < 0 || mt_raw_write_header(fd, &m) ||
	    mt_raw_write_batch(fd, 0, 0, r->slots, r->n) ||
	    mt_raw_write_trailer(fd, &m))
		abort();
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static struct mt_input *open_fd(int fd, char *err, size_t errlen)
{
	return mt_input_fopen(fdopen(fd, "r"), "t", err, errlen);
}

/* What a reader returns for good_run, in any format. */
static void check_records(struct mt_input *in)
{
	struct mt_record rec;

	CHECK(mt_input_meta(in)->flags & MT_HDR_STACKS);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_CODE_FILE);
	CHECK_INT(rec.ev.addr, 1);
	CHECK_INT(rec.ev.pid, 7);
	CHECK_INT(rec.ev.timestamp, 10);
	CHECK_INT(rec.ev.flags, sizeof(build_id)); /* its length */
	CHECK(rec.build_id && !memcmp(rec.build_id, build_id, 20));
	CHECK_INT(rec.str_len, sizeof(path) - 1);
	CHECK_STR(rec.str, path);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_STACK);
	CHECK_INT(rec.ev.addr, 1);
	CHECK_INT(rec.ev.tid, 8);
	CHECK_INT(rec.ev.timestamp, 11);
	CHECK_INT(rec.ev.size, 9); /* frames */
	CHECK_INT(rec.ev.flags & MT_STACK_TRUNCATED, 0);
	CHECK(rec.frames && !memcmp(rec.frames, frames, sizeof(frames)));
	CHECK_INT(rec.stack, 0);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_MALLOC);
	CHECK_INT(rec.ev.size, 4321);
	CHECK_INT(rec.stack, 1);
	CHECK(rec.frames == NULL);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_STACK);
	CHECK_INT(rec.ev.addr, 2);
	CHECK_INT(rec.ev.size, 3);
	CHECK_INT(rec.ev.flags & MT_STACK_TRUNCATED, MT_STACK_TRUNCATED);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.stack, 2);
	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.stack, 1);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_CODE_MAP);
	CHECK_INT(rec.ev.addr, 0x7ffff7dd0000);
	CHECK_INT(rec.ev.size, 0x1000);
	CHECK_INT(rec.ev.old_addr, 0x26000);
	CHECK_INT(rec.ev.old_size, 1);
	CHECK_INT(rec.stack, 0);

	CHECK_INT(mt_input_next(in, &rec), 1);
	CHECK_INT(rec.ev.kind, MT_EV_FREE);
	CHECK_INT(rec.stack, 0);
	CHECK_INT(mt_input_next(in, &rec), 0);
}

static void test_raw_round_trip(void)
{
	struct run r;
	char err[256];
	struct mt_input *in;

	good_run(&r);
	in = open_fd(raw_fd(&r), err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	check_records(in);
	CHECK_STR(mt_input_error(in), "");
	mt_input_close(in);
}

/* The raw stream through the artifact writer, read back. */
static void test_artifact_round_trip(enum mt_artifact_style style)
{
	struct run r;
	char err[256];
	struct mt_input *raw, *art;
	struct mt_artifact *a;
	struct mt_record rec;
	int out = memfd_create("art", 0);

	good_run(&r);
	raw = open_fd(raw_fd(&r), err, sizeof(err));
	a = mt_artifact_new(out, style);
	CHECK(raw && a);
	if (!raw || !a)
		return;
	CHECK_INT(mt_artifact_header(a, mt_input_meta(raw)), 0);
	while (mt_input_next(raw, &rec) > 0)
		CHECK_INT(mt_artifact_record(a, &rec), 0);
	CHECK_INT(mt_artifact_trailer(a, mt_input_meta(raw), true, NULL), 0);
	CHECK_INT(mt_artifact_close(a), 0);
	mt_input_close(raw);
	lseek(out, 0, SEEK_SET);
	art = open_fd(out, err, sizeof(err));
	CHECK(art != NULL);
	if (!art) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	check_records(art);
	CHECK_STR(mt_input_error(art), "");
	mt_input_close(art);
}

/* The error reading run r as a raw stream. */
static void expect_error(struct run *r, const char *want)
{
	char err[256];
	struct mt_input *in = open_fd(raw_fd(r), err, sizeof(err));
	struct mt_record rec;
	int ret;

	CHECK(in != NULL);
	if (!in)
		return;
	while ((ret = mt_input_next(in, &rec)) > 0)
		;
	CHECK_INT(ret, -1);
	CHECK_STR(mt_input_error(in), want);
	mt_input_close(in);
}

static void test_raw_errors(void)
{
	struct run r;

	/* a reference to a stack not described yet */
	r.n = 0;
	stacked_malloc(&r, 1, 8);
	expect_error(&r, "t: byte 112: batch 0: record 0: StackRef to stack 1, "
			 "not described before");
	/* ids count from 1, in order */
	r.n = 0;
	stack(&r, 2, 3, false);
	expect_error(&r, "t: byte 112: batch 0: record 0: Stack id 2 "
			 "(expected 1)");
	/* 8 bytes a frame */
	r.n = 0;
	stack(&r, 1, 3, false);
	r.slots[0].aux = 20;
	expect_error(&r, "t: byte 112: batch 0: record 0: Stack of 3 frames "
			 "with a payload of 20 bytes (8 a frame)");
	/* a reference before something that takes no stack */
	r.n = 0;
	stack(&r, 1, 3, false);
	stacked_malloc(&r, 1, 8);
	r.slots[r.n - 1].kind = MT_EV_EXIT;
	expect_error(&r, "t: byte 224: batch 0: record 2: StackRef not "
			 "followed by an allocation or address-space event of "
			 "thread 8");
	/* ... or of another thread */
	r.n = 0;
	stack(&r, 1, 3, false);
	stacked_malloc(&r, 1, 9);
	expect_error(&r, "t: byte 224: batch 0: record 2: StackRef not "
			 "followed by an allocation or address-space event of "
			 "thread 9");
	/* ... or at the end of its batch */
	r.n = 0;
	stack(&r, 1, 3, false);
	stacked_malloc(&r, 1, 8);
	r.n--;
	expect_error(&r, "t: byte 224: batch 0: record 2: StackRef ends its "
			 "batch");
	/* a build-id longer than the payload */
	r.n = 0;
	code_file(&r);
	r.slots[0].flags = r.slots[0].aux + 1;
	expect_error(&r, "t: byte 112: batch 0: record 0: CodeFile 1 with a "
			 "build-id of 56 bytes in a payload of 55");
}

int main(void)
{
	test_raw_round_trip();
	test_artifact_round_trip(MT_ARTIFACT_MSGPACK);
	test_artifact_round_trip(MT_ARTIFACT_JSONL);
	test_raw_errors();
	return test_summary("test_stacks_format");
}
