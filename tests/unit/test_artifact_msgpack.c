/* SPDX-License-Identifier: MIT */
/*
 * test_artifact_msgpack - the artifact writer encodes MessagePack itself
 * (lib/format/artifact.c, for speed); msgpack-c is the outside truth.  Each map
 * is packed again here by msgpack-c's packer, from man/mt-format.5's key
 * lists, and the two byte streams must be equal: at every size boundary of
 * ints, str, bin and arrays, for every kind, header and trailer, across
 * buffer flushes and for maps bigger than the writer's buffer.  The bytes
 * must also unpack (msgpack_unpack_next) into exactly the maps written.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msgpack.h>

#include "formats_test.h"
#include "mt_allocators.h"
#include "mt_artifact.h"
#include "mt_input.h"

/* ---- the writer's bytes ----------------------------------------------- */

struct run {
	int fd;
	struct mt_artifact *a;
	msgpack_sbuffer want; /* msgpack-c's bytes for the same maps */
	msgpack_packer pk;
	size_t maps;
};

static void run_start(struct run *r)
{
	r->fd = memfd_create("artifact", 0);
	if (r->fd < 0)
		abort();
	r->a = mt_artifact_new(r->fd, MT_ARTIFACT_MSGPACK);
	if (!r->a)
		abort();
	msgpack_sbuffer_init(&r->want);
	msgpack_packer_init(&r->pk, &r->want, msgpack_sbuffer_write);
	r->maps = 0;
}

/* Every map unpacks, and there are as many as were written. */
static void check_unpacks(const char *p, size_t len, size_t maps)
{
	msgpack_unpacked obj;
	size_t off = 0, got = 0;

	msgpack_unpacked_init(&obj);
	while (msgpack_unpack_next(&obj, p, len, &off) ==
	       MSGPACK_UNPACK_SUCCESS) {
		CHECK_INT(obj.data.type, MSGPACK_OBJECT_MAP);
		got++;
	}
	CHECK_INT(off, len);
	CHECK_INT(got, maps);
	msgpack_unpacked_destroy(&obj);
}

/* Closes the writer and compares its bytes with msgpack-c's. */
static void run_check(struct run *r, const char *what)
{
	off_t len;
	char *got;
	size_t diff = 0;

	CHECK_INT(mt_artifact_close(r->a), 0);
	len = lseek(r->fd, 0, SEEK_END);
	got = malloc(len + 1);
	if (!got || pread(r->fd, got, len, 0) != len)
		abort();
	close(r->fd);
	while (diff < (size_t)len && diff < r->want.size &&
	       got[diff] == r->want.data[diff])
		diff++;
	if ((size_t)len != r->want.size || diff != (size_t)len)
		fprintf(stderr, "%s: %zu bytes, msgpack-c %zu, first at %zu\n",
			what, (size_t)len, r->want.size, diff);
	CHECK_INT(len, r->want.size);
	CHECK_INT(diff, r->want.size);
	check_unpacks(got, len, r->maps);
	free(got);
	msgpack_sbuffer_destroy(&r->want);
}

/* ---- the same maps through msgpack-c ---------------------------------- */

static void pk_key(msgpack_packer *pk, const char *k)
{
	msgpack_pack_str(pk, strlen(k));
	msgpack_pack_str_body(pk, k, strlen(k));
}

static void pk_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
	pk_key(pk, k);
	msgpack_pack_uint64(pk, v);
}

static void pk_bool(msgpack_packer *pk, const char *k, bool v)
{
	pk_key(pk, k);
	if (v)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

/* text: UTF-8, a str; otherwise bin (the test knows which it made) */
static void pk_bytes(msgpack_packer *pk, const char *s, size_t len, bool text)
{
	if (text) {
		msgpack_pack_str(pk, len);
		msgpack_pack_str_body(pk, s, len);
	} else {
		msgpack_pack_bin(pk, len);
		msgpack_pack_bin_body(pk, s, len);
	}
}

static void pk_text(msgpack_packer *pk, const char *k, const char *v)
{
	pk_key(pk, k);
	pk_bytes(pk, v, strlen(v), true);
}

/* man/mt-format.5's types, not lib/format/kinds.c's table */
static const char *const type_of[] = {
    [MT_EV_MALLOC] = "Malloc",
    [MT_EV_FREE] = "Free",
    [MT_EV_CALLOC] = "Calloc",
    [MT_EV_REALLOC] = "Realloc",
    [MT_EV_ALIGNED_ALLOC] = "AlignedAlloc",
    [MT_EV_MMAP] = "Mmap",
    [MT_EV_MUNMAP] = "Munmap",
    [MT_EV_MREMAP] = "Mremap",
    [MT_EV_BRK] = "Brk",
    [MT_EV_FORK] = "Fork",
    [MT_EV_EXEC] = "Exec",
    [MT_EV_EXIT] = "Exit",
    [MT_EV_RSS] = "Rss",
    [MT_EV_PSS] = "Pss",
    [MT_EV_MARKER] = "Marker",
    [MT_EV_ENABLE] = "Enable",
    [MT_EV_DISABLE] = "Disable",
    [MT_EV_LOST] = "Lost",
    [MT_EV_ALLOCATOR] = "Allocator",
};

static const char *const family_of[] = {
    [MT_ALLOC_LIBC] = "libc",	      [MT_ALLOC_CXX] = "libstdc++",
    [MT_ALLOC_JEMALLOC] = "jemalloc", [MT_ALLOC_MIMALLOC] = "mimalloc",
    [MT_ALLOC_TCMALLOC] = "tcmalloc",
};

static const char *const rss_member_of[] = {"file", "anon", "swap", "shmem"};

/* How many keys each type adds to type, pid, tid and timestamp. */
static int kind_keys(const struct mt_event *ev)
{
	switch (ev->kind) {
	case MT_EV_EXEC: /* path; argv when it has arguments, argv_bytes
			  * when they were cut (man/mt-format.5) */
		return 1 + (ev->size != 0) +
		       (ev->size && (ev->flags & MT_EXEC_ARGS_CUT));
	case MT_EV_FREE:
	case MT_EV_FORK:
	case MT_EV_MARKER:
	case MT_EV_EXIT:
	case MT_EV_LOST:
		return 1;
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_MUNMAP:
	case MT_EV_ALLOCATOR:
		return 2;
	case MT_EV_RSS:
		return 2 + !!(ev->flags & MT_RSS_TRACER);
	case MT_EV_REALLOC:
	case MT_EV_ALIGNED_ALLOC:
	case MT_EV_BRK:
		return 3;
	case MT_EV_MMAP:
	case MT_EV_MREMAP:
	case MT_EV_PSS:
		return 4;
	default:
		return 0;
	}
}

/* "argv": the n bytes at args split at each NUL (the last one ends them) */
static void pk_args(msgpack_packer *pk, const char *args, size_t n, bool text)
{
	size_t count = 0;

	for (size_t i = 0; i < n; i++)
		count += args[i] == '\0' || i == n - 1;
	pk_key(pk, "argv");
	msgpack_pack_array(pk, count);
	for (size_t i = 0, start = 0; i < n; i++)
		if (args[i] == '\0' || i == n - 1) {
			size_t end = args[i] == '\0' ? i : n;

			pk_bytes(pk, args + start, end - start, text);
			start = i + 1;
		}
}

static void pk_exit(msgpack_packer *pk, uint32_t status)
{
	if (WIFEXITED(status))
		pk_u64(pk, "exit_code", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		pk_u64(pk, "signal", WTERMSIG(status));
	else
		pk_u64(pk, "status", status);
}

static void pk_kind_keys(msgpack_packer *pk, const struct mt_record *r,
			 bool text)
{
	const struct mt_event *ev = &r->ev;

	switch (ev->kind) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_MUNMAP:
		pk_u64(pk, "addr", ev->addr);
		pk_u64(pk, "size", ev->size);
		break;
	case MT_EV_FREE:
		pk_u64(pk, "addr", ev->addr);
		break;
	case MT_EV_REALLOC:
		pk_u64(pk, "addr", ev->addr);
		pk_u64(pk, "size", ev->size);
		pk_u64(pk, "old_addr", ev->old_addr);
		break;
	case MT_EV_ALIGNED_ALLOC:
		pk_u64(pk, "addr", ev->addr);
		pk_u64(pk, "size", ev->size);
		pk_u64(pk, "alignment", ev->old_size);
		break;
	case MT_EV_MMAP:
		pk_u64(pk, "addr", ev->addr);
		pk_u64(pk, "size", ev->size);
		pk_u64(pk, "prot", ev->flags);
		pk_u64(pk, "flags", ev->aux);
		break;
	case MT_EV_MREMAP:
		pk_u64(pk, "addr", ev->addr);
		pk_u64(pk, "size", ev->size);
		pk_u64(pk, "old_addr", ev->old_addr);
		pk_u64(pk, "old_size", ev->old_size);
		break;
	case MT_EV_BRK: /* the tests' breaks only grow */
		pk_u64(pk, "addr", ev->addr);
		pk_u64(pk, "old_addr", ev->old_addr);
		pk_u64(pk, "size", ev->addr - ev->old_addr);
		break;
	case MT_EV_FORK:
		pk_u64(pk, "ppid", ev->old_addr);
		break;
	case MT_EV_EXEC:
		pk_key(pk, "path");
		pk_bytes(pk, r->str, r->str_len, text);
		if (ev->size) /* the NUL-ended arguments after the path's NUL */
			pk_args(pk, r->str + r->str_len + 1, ev->size, text);
		if (ev->size && (ev->flags & MT_EXEC_ARGS_CUT))
			pk_u64(pk, "argv_bytes", ev->old_size);
		break;
	case MT_EV_MARKER:
		pk_key(pk, "name");
		pk_bytes(pk, r->str, r->str_len, text);
		break;
	case MT_EV_ALLOCATOR:
		pk_text(pk, "kind", family_of[ev->flags]);
		pk_key(pk, "path");
		pk_bytes(pk, r->str, r->str_len, text);
		break;
	case MT_EV_EXIT:
		pk_exit(pk, ev->aux);
		break;
	case MT_EV_RSS:
		if (ev->aux < 4)
			pk_text(pk, "member", rss_member_of[ev->aux]);
		else
			pk_u64(pk, "member", ev->aux);
		pk_u64(pk, "size", ev->size);
		if (ev->flags & MT_RSS_TRACER)
			pk_bool(pk, "tracer", true);
		break;
	case MT_EV_PSS:
		pk_u64(pk, "pss", ev->size);
		pk_u64(pk, "pss_anon", ev->addr);
		pk_u64(pk, "pss_file", ev->old_addr);
		pk_u64(pk, "pss_shmem", ev->old_size);
		break;
	case MT_EV_LOST:
		pk_u64(pk, "count", ev->size);
		break;
	}
}

/* The record through the writer, and through msgpack-c.  text: its string
 * (if any) is UTF-8. */
static void both(struct run *r, const struct mt_record *rec, bool text)
{
	const struct mt_event *ev = &rec->ev;

	CHECK_INT(mt_artifact_record(r->a, rec), 0);
	msgpack_pack_map(&r->pk, 4 + kind_keys(ev));
	pk_text(&r->pk, "type", type_of[ev->kind]);
	pk_u64(&r->pk, "pid", ev->pid);
	pk_u64(&r->pk, "tid", ev->tid);
	pk_u64(&r->pk, "timestamp", ev->timestamp);
	pk_kind_keys(&r->pk, rec, text);
	r->maps++;
}

static struct mt_record event(unsigned kind)
{
	return (struct mt_record){.ev = {.kind = kind,
					 .pid = 4242,
					 .tid = 4243,
					 .timestamp = 1000000000000ull}};
}

/* ---- the cases -------------------------------------------------------- */

/* Each side of every boundary of MessagePack's uint forms. */
static const uint64_t edges[] = {
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xffff,
    0x10000,
    0xffffffff,
    0x100000000,
    0x7fffffffffffffff,
    0x8000000000000000,
    UINT64_MAX,
};
#define NEDGES (sizeof(edges) / sizeof(edges[0]))

static void test_ints(void)
{
	struct run r;

	run_start(&r);
	for (size_t i = 0; i < NEDGES; i++) {
		struct mt_record rec = event(MT_EV_MREMAP);

		rec.ev.pid = edges[i];
		rec.ev.tid = edges[NEDGES - 1 - i];
		rec.ev.timestamp = edges[i];
		rec.ev.addr = edges[i];
		rec.ev.size = edges[NEDGES - 1 - i];
		rec.ev.old_addr = edges[(i + 3) % NEDGES];
		rec.ev.old_size = edges[(i + 7) % NEDGES];
		both(&r, &rec, true);
	}
	run_check(&r, "ints");
}

static void test_every_kind(void)
{
	static const uint32_t exits[] = {3 << 8, 0, 9, 0x137f};
	struct mt_record rec;
	struct run r;

	run_start(&r);
	for (unsigned kind = MT_EV_MALLOC; kind <= MT_EV_ALLOCATOR; kind++) {
		if (!type_of[kind])
			continue;
		rec = event(kind);
		rec.ev.addr = 0x7f0000001000 + kind;
		rec.ev.old_addr = 0x7f0000000000;
		rec.ev.size = 4096 * kind;
		rec.ev.old_size = 64;
		rec.ev.flags = 3;
		rec.ev.aux = 0x22;
		rec.str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
		rec.str_len = strlen(rec.str);
		if (kind == MT_EV_RSS)
			rec.ev.aux = 1;
		if (kind == MT_EV_ALLOCATOR)
			rec.ev.flags = MT_ALLOC_JEMALLOC;
		if (kind == MT_EV_EXEC) /* no arguments: test_exec_args */
			rec.ev.size = rec.ev.old_size = rec.ev.flags = 0;
		both(&r, &rec, true);
	}
	for (unsigned i = 0; i < sizeof(exits) / sizeof(exits[0]); i++) {
		rec = event(MT_EV_EXIT);
		rec.ev.aux = exits[i];
		both(&r, &rec, true);
	}
	for (unsigned member = 0; member <= 4; member++) {
		rec = event(MT_EV_RSS);
		rec.ev.aux = member;
		rec.ev.size = 1 << 20;
		both(&r, &rec, true);
		rec.ev.flags = MT_RSS_TRACER; /* the tracer's pages */
		both(&r, &rec, true);
	}
	for (unsigned family = MT_ALLOC_LIBC; family <= MT_ALLOC_TCMALLOC;
	     family++) {
		rec = event(MT_EV_ALLOCATOR);
		rec.ev.flags = family;
		rec.str = "";
		both(&r, &rec, true);
	}
	run_check(&r, "every kind");
}

/* fixstr, str8, str16, str32 and bin8, bin16, bin32, on each side of each
 * boundary; the biggest maps are bigger than the writer's buffer. */
static void test_strings(void)
{
	static const size_t lens[] = {0,     1,	    31,	   32,	   255,	   256,
				      65535, 65536, 65537, 300000, 1 << 21};
	size_t most = 1 << 21;
	char *text = malloc(most), *bytes = malloc(most);
	struct run r;

	if (!text || !bytes)
		abort();
	memset(text, 'x', most);
	memset(bytes, 0xff, most); /* never UTF-8 */
	run_start(&r);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct mt_record rec = event(MT_EV_MARKER);

		rec.str = text;
		rec.str_len = lens[i];
		both(&r, &rec, true);
		if (!lens[i])
			continue;
		rec = event(MT_EV_EXEC);
		rec.str = bytes;
		rec.str_len = lens[i];
		both(&r, &rec, false);
		both(&r, &(struct mt_record){.ev = {.kind = MT_EV_FREE}}, true);
	}
	run_check(&r, "strings");
	free(text);
	free(bytes);
}

/* An Exec's arguments (mt_exec_args: after the path's NUL, each ending in a
 * NUL): as text and as bytes, an empty one, cut (argv_bytes), and more than
 * the writer's buffer. */
static void test_exec_args(void)
{
	static const char text[] = "/bin/sh\0sh\0-c\0a b\0\0";
	size_t most = 1 << 21;
	char *bytes = malloc(most + 16);
	struct run r;
	struct mt_record rec;

	if (!bytes)
		abort();
	run_start(&r);
	rec = event(MT_EV_EXEC);
	rec.str = text;
	rec.str_len = 7;
	rec.ev.size = sizeof(text) - 1 - 8;
	rec.ev.old_size = rec.ev.size;
	rec.ev.aux = sizeof(text) - 1;
	both(&r, &rec, true);
	rec.ev.old_size = 5000; /* longer, not cut: no argv_bytes */
	both(&r, &rec, true);
	rec.ev.flags = MT_EXEC_ARGS_CUT;
	both(&r, &rec, true);
	rec.ev.flags = 0;
	/* bytes that are not UTF-8: the path and 3 arguments, then one long */
	memset(bytes, 0xff, most + 16);
	bytes[4] = bytes[6] = bytes[8] = bytes[10] = bytes[most + 15] = '\0';
	rec.str = bytes;
	rec.str_len = 4;
	rec.ev.size = most + 16 - 5;
	rec.ev.old_size = rec.ev.size;
	both(&r, &rec, false);
	run_check(&r, "exec arguments");
	free(bytes);
}

/* Enough small maps to fill the writer's buffer many times over, so that
 * maps straddle each flush. */
static void test_flushes(void)
{
	struct run r;

	run_start(&r);
	for (unsigned i = 0; i < 200000; i++) {
		struct mt_record rec = event(i % 3 ? MT_EV_MALLOC : MT_EV_FREE);

		rec.ev.addr = 0x5555000000 + 16 * (uint64_t)i;
		rec.ev.size = i % 300;
		rec.ev.timestamp += i;
		both(&r, &rec, true);
	}
	run_check(&r, "flushes");
}

static void pk_header(msgpack_packer *pk, const struct mt_meta *m,
		      bool args_text)
{
	msgpack_pack_map(pk, 14 + !!(m->flags & MT_HDR_STACKS) +
				 !!(m->flags & MT_HDR_ALLOCATORS));
	pk_text(pk, "type", "Header");
	pk_text(pk, "format", "mt");
	pk_u64(pk, "version", 1);
	pk_key(pk, "command");
	msgpack_pack_array(pk, m->argc);
	for (int i = 0; i < m->argc; i++)
		pk_bytes(pk, m->argv[i], strlen(m->argv[i]), args_text);
	pk_text(pk, "host", m->host ? m->host : "");
	pk_text(pk, "clock", "CLOCK_MONOTONIC");
	pk_u64(pk, "page_size", m->page_size);
	pk_u64(pk, "root_pid", m->root_pid);
	pk_u64(pk, "start_time", m->start_realtime_ns);
	pk_u64(pk, "start_monotonic", m->start_monotonic_ns);
	pk_bool(pk, "allocators_tracked", m->flags & MT_HDR_ALLOCATORS);
	pk_bool(pk, "syscalls_tracked", m->flags & MT_HDR_SYSCALLS);
	pk_bool(pk, "rss_tracked", m->flags & MT_HDR_RSS);
	pk_bool(pk, "physical_tracked", m->flags & MT_HDR_PHYSICAL);
	if (m->flags & MT_HDR_STACKS)
		pk_bool(pk, "stacks_tracked", true);
	if (m->flags & MT_HDR_ALLOCATORS)
		pk_bool(pk, "allocators_recorder", m->flags & MT_HDR_RECORDER);
}

/* Command lines of 0, 15, 16, 65535 and 65536 arguments (fixarray,
 * array16, array32), and arguments that are not UTF-8. */
static void test_headers(void)
{
	static const int argcs[] = {0, 1, 15, 16, 65535, 65536};
	static char bad[] = "\xc3\x28";
	char **argv = malloc(65536 * sizeof(*argv));
	struct mt_meta m = {
	    .page_size = 4096,
	    .clock_id = 1,
	    .root_pid = 77777,
	    .start_monotonic_ns = 5,
	    .start_realtime_ns = 1700000000000000000ull,
	    .argv = argv,
	};
	struct run r;

	if (!argv)
		abort();
	for (size_t i = 0; i < sizeof(argcs) / sizeof(argcs[0]); i++) {
		for (int k = 0; k < argcs[i]; k++)
			argv[k] = k % 2 ? "--option=value" : "";
		m.argc = argcs[i];
		m.flags = i;
		m.host = i % 2 ? "host.example" : NULL;
		run_start(&r);
		CHECK_INT(mt_artifact_header(r.a, &m), 0);
		pk_header(&r.pk, &m, true);
		r.maps++;
		run_check(&r, "header");
	}
	argv[0] = bad;
	argv[1] = bad;
	m.argc = 2;
	run_start(&r);
	CHECK_INT(mt_artifact_header(r.a, &m), 0);
	pk_header(&r.pk, &m, false);
	r.maps++;
	run_check(&r, "header, not UTF-8");
	free(argv);
}

static void test_trailers(void)
{
	struct mt_meta m = {
	    .exit_kind = MT_EXIT_CODE,
	    .exit_value = 255,
	    .end_monotonic_ns = 0x100000000,
	    .batches = 70000,
	};
	struct mt_record lost = event(MT_EV_LOST);
	struct run r;

	lost.ev.size = 300;
	for (uint32_t kind = 0; kind <= MT_EXIT_SIGNAL; kind++) {
		m.exit_kind = kind;
		run_start(&r);
		both(&r, &lost, true);
		CHECK_INT(mt_artifact_trailer(r.a, &m, true, NULL), 0);
		msgpack_pack_map(&r.pk, kind == 0 ? 6 : 7);
		pk_text(&r.pk, "type", "Trailer");
		pk_bool(&r.pk, "complete", true);
		if (kind == MT_EXIT_CODE)
			pk_u64(&r.pk, "exit_code", 255);
		if (kind == MT_EXIT_SIGNAL)
			pk_u64(&r.pk, "signal", 255);
		pk_u64(&r.pk, "end_monotonic", 0x100000000);
		pk_u64(&r.pk, "events", 1);
		pk_u64(&r.pk, "lost_events", 300);
		pk_u64(&r.pk, "batches", 70000);
		r.maps++;
		run_check(&r, "trailer");
	}
	run_start(&r);
	CHECK_INT(mt_artifact_trailer(r.a, &m, false, NULL), 0);
	CHECK_INT(mt_artifact_trailer(r.a, &m, false, "byte 4096: bad magic"),
		  0);
	for (int i = 0; i < 2; i++) {
		msgpack_pack_map(&r.pk, 5);
		pk_text(&r.pk, "type", "Trailer");
		pk_bool(&r.pk, "complete", false);
		pk_u64(&r.pk, "events", 0);
		pk_u64(&r.pk, "lost_events", 0);
		pk_text(&r.pk, "error",
			i ? "byte 4096: bad magic" : "incomplete");
		r.maps++;
	}
	run_check(&r, "incomplete trailers");
}

/* A write error is returned, and nothing is written after it. */
static void test_write_error(void)
{
	struct mt_record rec = event(MT_EV_MALLOC);
	struct mt_artifact *a;
	int fds[2];
	int ret = 0;

	if (pipe(fds))
		abort();
	close(fds[0]);
	signal(SIGPIPE, SIG_IGN);
	a = mt_artifact_new(fds[1], MT_ARTIFACT_MSGPACK);
	for (int i = 0; i < 100000 && !ret; i++)
		ret = mt_artifact_record(a, &rec);
	CHECK_INT(ret, -EPIPE);
	CHECK_INT(mt_artifact_record(a, &rec), -EPIPE);
	CHECK_INT(mt_artifact_close(a), -EPIPE);
	close(fds[1]);
}

int main(void)
{
	test_ints();
	test_every_kind();
	test_strings();
	test_exec_args();
	test_flushes();
	test_headers();
	test_trailers();
	test_write_error();
	return test_summary("test_artifact_msgpack");
}
