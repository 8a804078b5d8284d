// SPDX-License-Identifier: MIT
/*
 * test_input.c - MessagePack artifacts written byte by byte, in the
 * encodings mt-encode uses and in every other one a writer may choose
 * (wider integers, str8 keys, other key orders, duplicate and unknown
 * keys), read back through lib/format/mt_input.h from a file (mapped) and from
 * a stream (read in blocks): the records must hold exactly the values
 * written, whichever decoder path took them, and bad maps must be named.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mt_input.h"
#include "mt_raw.h"
#include "formats_test.h"

/* ---- a byte writer --------------------------------------------------- */

static unsigned char buf[1 << 20];
static size_t len;

static void byte(unsigned v)
{
	buf[len++] = (unsigned char)v;
}

static void be(uint64_t v, unsigned width)
{
	for (unsigned i = width; i-- > 0;)
		byte((unsigned)(v >> (8 * i)) & 0xff);
}

static void map(unsigned n)
{
	byte(0x80 | n);
}

static void str(const char *s)
{
	byte(0xa0 | (unsigned)strlen(s));
	memcpy(buf + len, s, strlen(s));
	len += strlen(s);
}

/* the same str as str8, a longer header than needed */
static void str8(const char *s)
{
	byte(0xd9);
	byte((unsigned)strlen(s));
	memcpy(buf + len, s, strlen(s));
	len += strlen(s);
}

/* an unsigned integer: fixint (width 0) or uint 8, 16, 32, 64 */
static void uint_w(uint64_t v, unsigned width)
{
	if (width == 0) {
		byte((unsigned)v);
		return;
	}
	byte(width == 1 ? 0xcc : width == 2 ? 0xcd : width == 4 ? 0xce : 0xcf);
	be(v, width);
}

/* the smallest encoding, as mt-encode writes */
static void uint_min(uint64_t v)
{
	uint_w(v, v < 128 ? 0 : v < 256 ? 1 : v < 65536 ? 2 : v >> 32 ? 8 : 4);
}

static void kv(const char *k, uint64_t v)
{
	str(k);
	uint_min(v);
}

static void header(void)
{
	map(5);
	str("type");
	str("Header");
	str("format");
	str("mt");
	kv("version", 1);
	kv("start_monotonic", 1000);
	str("allocators_tracked");
	byte(0xc3);
}

static void trailer(uint64_t events, uint64_t lost)
{
	map(4);
	str("type");
	str("Trailer");
	str("complete");
	byte(0xc3);
	kv("events", events);
	kv("lost_events", lost);
}

/* ---- reading --------------------------------------------------------- */

#define MAX_RECORDS 64

struct got {
	struct mt_record rec[MAX_RECORDS];
	char str[MAX_RECORDS][32];
	int n, ret;
	char err[512];
};

/* Every record of buf, from a file (mapped) or from a stream. */
static void read_all(bool from_file, struct got *g)
{
	char path[] = "/tmp/test_input.XXXXXX", err[512];
	struct mt_input *in;
	FILE *f;
	int fd;

	memset(g, 0, sizeof(*g));
	if (from_file) {
		fd = mkstemp(path);
		CHECK(fd >= 0 && write(fd, buf, len) == (ssize_t)len);
		close(fd);
		in = mt_input_open(path, err, sizeof(err));
		unlink(path);
	} else {
		f = fmemopen(buf, len, "r");
		in = f ? mt_input_fopen(f, "stream", err, sizeof(err)) : NULL;
	}
	if (!in) {
		snprintf(g->err, sizeof(g->err), "%s", err);
		g->ret = -2;
		return;
	}
	while (g->n < MAX_RECORDS &&
	       (g->ret = mt_input_next(in, &g->rec[g->n])) > 0) {
		if (g->rec[g->n].str)
			snprintf(g->str[g->n], sizeof(g->str[0]), "%s",
				 g->rec[g->n].str);
		g->n++;
	}
	snprintf(g->err, sizeof(g->err), "%s", mt_input_error(in));
	mt_input_close(in);
}

/* Both ways, the same records. */
static void read_both(struct got *g)
{
	static struct got other;

	read_all(true, g);
	read_all(false, &other);
	CHECK_INT(g->n, other.n);
	CHECK_INT(g->ret, other.ret);
	CHECK(!strcmp(g->err, other.err) ||
	      (strstr(g->err, "byte") && strstr(other.err, "byte")));
	for (int i = 0; i < g->n && i < other.n; i++)
		CHECK(!memcmp(&g->rec[i].ev, &other.rec[i].ev,
			      sizeof(g->rec[i].ev)) &&
		      !strcmp(g->str[i], other.str[i]));
}

/* ---- the tests ------------------------------------------------------- */

/* One Malloc in each integer width, and the widths mixed. */
static void test_widths(void)
{
	static const uint64_t addr[] = {0x7f, 0xff, 0xffff, 0xffffffff,
					0x123456789abcdef0ull};
	static struct got g;

	len = 0;
	header();
	for (unsigned w = 0; w < 5; w++) {
		unsigned width = w ? 1u << (w - 1) : 0;

		map(6);
		str("type");
		str("Malloc");
		str("pid");
		uint_w(42, width);
		str("tid");
		uint_w(43, width);
		str("timestamp");
		uint_w(addr[w], w == 4 ? 8 : width);
		str("addr");
		uint_w(addr[w], w == 4 ? 8 : width);
		str("size");
		uint_w(w, 8); /* a small value written wide */
	}
	trailer(5, 0);
	read_both(&g);
	CHECK_INT(g.ret, 0);
	CHECK_INT(g.n, 5);
	for (int i = 0; i < g.n; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_MALLOC);
		CHECK_INT(g.rec[i].ev.pid, 42);
		CHECK_INT(g.rec[i].ev.tid, 43);
		CHECK_INT(g.rec[i].ev.timestamp, addr[i]);
		CHECK_INT(g.rec[i].ev.addr, addr[i]);
		CHECK_INT(g.rec[i].ev.size, (uint64_t)i);
		CHECK_INT(g.rec[i].ev.old_addr, 0);
		CHECK(g.rec[i].str == NULL);
	}
}

/* The same Free in other shapes: type last, str8 keys, signed integers,
 * an unknown key with an array, a duplicate key (the last one counts). */
static void test_shapes(void)
{
	static struct got g;

	len = 0;
	header();
	/* 0: as mt-encode writes it */
	map(5);
	str("type");
	str("Free");
	kv("pid", 7);
	kv("tid", 8);
	kv("timestamp", 5000);
	kv("addr", 0x1000);
	/* 1: type last */
	map(5);
	kv("pid", 7);
	kv("tid", 8);
	kv("timestamp", 5000);
	kv("addr", 0x1000);
	str("type");
	str("Free");
	/* 2: str8 keys and type value */
	map(5);
	str8("type");
	str8("Free");
	str8("pid");
	uint_min(7);
	str8("tid");
	uint_min(8);
	str8("timestamp");
	uint_min(5000);
	str8("addr");
	uint_min(0x1000);
	/* 3: signed integers (int8, int16) that are >= 0 */
	map(5);
	str("type");
	str("Free");
	str("pid");
	byte(0xd0), byte(7);
	str("tid");
	byte(0xd0), byte(8);
	str("timestamp");
	byte(0xd1), be(5000, 2);
	str("addr");
	byte(0xd1), be(0x1000, 2);
	/* 4: an unknown key holding an array */
	map(6);
	str("type");
	str("Free");
	str("pid");
	uint_min(7);
	str("spare"); /* ("stack" was unknown once; it is an id now) */
	byte(0x92), uint_min(1), uint_min(2);
	kv("tid", 8);
	kv("timestamp", 5000);
	kv("addr", 0x1000);
	/* 5: addr twice: the last one counts */
	map(6);
	str("type");
	str("Free");
	kv("pid", 7);
	kv("tid", 8);
	kv("timestamp", 5000);
	kv("addr", 0x2000);
	kv("addr", 0x1000);
	trailer(6, 0);
	read_both(&g);
	CHECK_INT(g.ret, 0);
	CHECK_INT(g.n, 6);
	for (int i = 0; i < g.n; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_FREE);
		CHECK_INT(g.rec[i].ev.pid, 7);
		CHECK_INT(g.rec[i].ev.tid, 8);
		CHECK_INT(g.rec[i].ev.timestamp, 5000);
		CHECK_INT(g.rec[i].ev.addr, 0x1000);
		CHECK_INT(g.rec[i].ev.size, 0);
	}
}

/* The keys of one kind on another kind's map: each kind reads its own. */
static void test_kind_keys(void)
{
	static struct got g;

	len = 0;
	header();
	map(8); /* Mmap: prot into flags, flags into aux */
	str("type");
	str("Mmap");
	kv("pid", 1), kv("timestamp", 10), kv("addr", 0x10000);
	kv("size", 8192), kv("prot", 3), kv("flags", 0x22);
	kv("alignment", 64); /* not an Mmap key */
	map(6);		     /* AlignedAlloc: alignment into old_size */
	str("type");
	str("AlignedAlloc");
	kv("pid", 1), kv("timestamp", 11), kv("addr", 0x20000);
	kv("size", 100), kv("alignment", 64);
	map(4); /* Fork: ppid into old_addr */
	str("type");
	str("Fork");
	kv("pid", 2), kv("timestamp", 12), kv("ppid", 1);
	map(5); /* Rss: the member by name */
	str("type");
	str("Rss");
	kv("pid", 2), kv("timestamp", 13), kv("size", 4096);
	str("member");
	str("anon");
	map(5); /* Rss: the member by number */
	str("type");
	str("Rss");
	kv("pid", 2), kv("timestamp", 14), kv("size", 8192);
	kv("member", 3);
	map(4); /* Lost: count into size */
	str("type");
	str("Lost");
	kv("pid", 0), kv("timestamp", 15), kv("count", 9);
	map(4); /* Exec: the path */
	str("type");
	str("Exec");
	kv("pid", 2), kv("timestamp", 16);
	str("path");
	str("/bin/true");
	trailer(7, 9);
	read_both(&g);
	CHECK_INT(g.ret, 0);
	CHECK_INT(g.n, 7);
	CHECK_INT(g.rec[0].ev.kind, MT_EV_MMAP);
	CHECK_INT(g.rec[0].ev.flags, 3);
	CHECK_INT(g.rec[0].ev.aux, 0x22);
	CHECK_INT(g.rec[0].ev.old_size, 0);
	CHECK_INT(g.rec[1].ev.kind, MT_EV_ALIGNED_ALLOC);
	CHECK_INT(g.rec[1].ev.old_size, 64);
	CHECK_INT(g.rec[2].ev.kind, MT_EV_FORK);
	CHECK_INT(g.rec[2].ev.old_addr, 1);
	CHECK_INT(g.rec[3].ev.aux, 1); /* file, anon, swap, shmem */
	CHECK_INT(g.rec[3].ev.size, 4096);
	CHECK_INT(g.rec[4].ev.aux, 3);
	CHECK_INT(g.rec[5].ev.kind, MT_EV_LOST);
	CHECK_INT(g.rec[5].ev.size, 9);
	CHECK_INT(g.rec[6].ev.kind, MT_EV_EXEC);
	CHECK(!strcmp(g.str[6], "/bin/true"));
}

/* Bad maps are named with their byte offset, and a cut stream is never
 * complete: at the end of a file and of a stream alike. */
static void test_errors(void)
{
	static struct got g;
	size_t bad;

	len = 0;
	header();
	bad = len;
	map(3);
	str("type");
	str("Malloc");
	kv("pid", 1ull << 32);
	kv("timestamp", 1);
	read_both(&g);
	CHECK_INT(g.n, 0);
	CHECK_INT(g.ret, -1);
	CHECK(strstr(g.err, "\"pid\"") && strstr(g.err, "out of range"));
	CHECK_INT(strtoull(strstr(g.err, "byte ") + 5, NULL, 10), bad);

	len = 0;
	header();
	bad = len;
	map(2);
	str("type");
	str("Malloc");
	kv("timestamp", 1);
	read_both(&g);
	CHECK_INT(g.ret, -1);
	CHECK(strstr(g.err, "missing \"pid\""));
	CHECK_INT(strtoull(strstr(g.err, "byte ") + 5, NULL, 10), bad);

	len = 0;
	header();
	map(3);
	str("type");
	str("Free");
	kv("pid", 1);
	kv("timestamp", 1);
	bad = len;
	map(3);
	str("type");
	str("Free");
	kv("pid", 1);
	len -= 1; /* the last map cut short */
	read_both(&g);
	CHECK_INT(g.n, 1);
	CHECK_INT(g.ret, -1);
	CHECK(strstr(g.err, "truncated"));
	CHECK_INT(strtoull(strstr(g.err, "byte ") + 5, NULL, 10), bad);

	len = 0;
	header();
	map(3);
	str("type");
	str("Free");
	kv("pid", 1);
	kv("timestamp", 1);
	read_both(&g); /* no trailer */
	CHECK_INT(g.n, 1);
	CHECK_INT(g.ret, -1);
	CHECK(strstr(g.err, "no trailer"));
}

/* Many maps, so that both readers cross their buffer and window edges;
 * kinds alternate so that every guess of the fast path is wrong now and
 * then. */
static void test_many(void)
{
	static const char *const kinds[] = {"Malloc", "Free", "Calloc", "Brk"};
	struct mt_record rec;
	struct mt_input *in;
	char path[] = "/tmp/test_input.XXXXXX", err[512];
	static unsigned char big[4 << 20];
	size_t n = 0, total = 0;
	int fd, ret;

	for (int pass = 0; pass < 2; pass++) {
		len = 0;
		header();
		memcpy(big, buf, len);
		n = len;
		for (uint64_t i = 0; n + 128 < sizeof(big); i++) {
			len = 0;
			map(i % 7 == 0 ? 6 : 5);
			str("type");
			str(kinds[i % 4]);
			kv("pid", i % 100 + 1);
			kv("timestamp", i * 1000);
			if (i % 7 == 0)
				kv("size", i * 3);
			kv("addr", i * 16);
			kv("tid", i);
			memcpy(big + n, buf, len);
			n += len;
			total = i + 1;
		}
		len = 0;
		trailer(total, 0);
		memcpy(big + n, buf, len);
		n += len;
		if (pass == 0) {
			fd = mkstemp(path);
			CHECK(fd >= 0 && write(fd, big, n) == (ssize_t)n);
			close(fd);
			in = mt_input_open(path, err, sizeof(err));
			unlink(path);
		} else {
			FILE *f = fmemopen(big, n, "r");

			in = mt_input_fopen(f, "stream", err, sizeof(err));
		}
		CHECK(in != NULL);
		if (!in)
			return;
		uint64_t i = 0;

		while ((ret = mt_input_next(in, &rec)) > 0) {
			if (rec.ev.timestamp != i * 1000 ||
			    rec.ev.addr != i * 16 || rec.ev.tid != i ||
			    rec.ev.pid != i % 100 + 1 ||
			    rec.ev.size != (i % 7 == 0 ? i * 3 : 0) ||
			    strcmp(mt_kind_name(rec.ev.kind), kinds[i % 4])) {
				CHECK(!"record as written");
				break;
			}
			i++;
		}
		CHECK_INT(ret, 0);
		CHECK_INT(i, total);
		mt_input_close(in);
	}
}

/*
 * A mapped file cut shorter while it is read (SIGBUS on the pages past its
 * new end): exit 2 with a message naming the file and the byte, not a
 * crash.  Run in a child, whose exit status and stderr are checked.
 */
static void test_shrink(void)
{
	static unsigned char big[1 << 20];
	char path[] = "/tmp/test_input.XXXXXX",
	     errpath[] = "/tmp/test_input_err.XXXXXX", err[512], msg[512] = "";
	struct mt_record rec;
	struct mt_input *in;
	size_t n;
	int fd, errfd, status = 0;
	pid_t pid;

	len = 0;
	header();
	memcpy(big, buf, len);
	n = len;
	for (uint64_t i = 0; n + 64 < sizeof(big); i++) {
		len = 0;
		map(5);
		str("type");
		str("Malloc");
		kv("pid", 1);
		kv("timestamp", i);
		kv("addr", i * 16);
		kv("tid", 1);
		memcpy(big + n, buf, len);
		n += len;
	}
	fd = mkstemp(path);
	errfd = mkstemp(errpath);
	CHECK(fd >= 0 && errfd >= 0 && write(fd, big, n) == (ssize_t)n);
	in = mt_input_open(path, err, sizeof(err));
	CHECK(in != NULL);
	if (!in)
		return;
	CHECK(mt_input_next(in, &rec) > 0);
	/* another process cuts the file: everything past 4 KiB is gone */
	CHECK(ftruncate(fd, 4096) == 0);
	pid = fork();
	if (pid == 0) {
		dup2(errfd, STDERR_FILENO);
		while (mt_input_next(in, &rec) > 0)
			;
		_exit(0); /* not reached: the pages past 4 KiB raise SIGBUS */
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	CHECK(pread(errfd, msg, sizeof(msg) - 1, 0) > 0);
	CHECK(strstr(msg, path) != NULL);
	CHECK(strstr(msg, ": byte 4096: the file was cut shorter while "
			  "being read") != NULL);
	if (!strstr(msg, "cut shorter"))
		fprintf(stderr, "test_shrink: stderr was: %s\n", msg);
	mt_input_close(in);
	close(fd);
	close(errfd);
	unlink(path);
	unlink(errpath);
}

/* A Malloc as mt-encode writes it, pid, tid and timestamp in the widths
 * given (-1: the smallest), size as size_width says. */
static void malloc_map(uint64_t pid, int pid_width, uint64_t ts, int ts_width,
		       uint64_t size, int size_width)
{
	map(6);
	str("type");
	str("Malloc");
	str("pid");
	pid_width < 0 ? uint_min(pid) : uint_w(pid, pid_width);
	str("tid");
	pid_width < 0 ? uint_min(pid + 1) : uint_w(pid + 1, pid_width);
	str("timestamp");
	ts_width < 0 ? uint_min(ts) : uint_w(ts, ts_width);
	kv("addr", ts * 16);
	str("size");
	size_width < 0 ? uint_min(size) : uint_w(size, size_width);
}

/* A map of a kind whose head ends at timestamp: pid, tid, timestamp, then
 * its own key and value. */
static void short_map(const char *kind, uint64_t pid, const char *key,
		      uint64_t value)
{
	map(5);
	str("type");
	str(kind);
	kv("pid", pid);
	kv("tid", pid);
	kv("timestamp", 9000);
	kv(key, value);
}

/* Markers of long names: the maps before them are more than FAST_SLACK
 * (8 KiB) from the end of the file, where the fast path reads mapped
 * files too. */
static void long_markers(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		map(5);
		str("type");
		str("Marker");
		kv("pid", 1);
		kv("tid", 1);
		kv("timestamp", 9000);
		str("name");
		byte(0xda);
		be(3000, 2);
		memset(buf + len, 'm', 3000);
		len += 3000;
	}
}

/*
 * Maps of a kind whose heads (type, pid, tid, timestamp, addr) keep their
 * shape, or change the width of a value, or whose tails differ after a
 * head seen before; kinds whose head ends at timestamp (Rss, Fork, Exit):
 * each reads as written, whichever decoder path took it.
 */
static void test_head_shapes(void)
{
	static const struct {
		uint64_t pid, ts, size;
		int pid_width, ts_width, size_width;
	} mallocs[] = {
	    {5, 0x100000000ull, 300, 0, 8, 2},	   /* learnt */
	    {7, 0x100000001ull, 301, 0, 8, 2},	   /* as learnt */
	    {9, 0x100000002ull, 3, 0, 8, 0},	   /* size a fixint */
	    {300, 0x100000003ull, 70000, 2, 8, 4}, /* wider pid */
	    {301, 0x100000004ull, 7, 2, 8, 1},	   /* as learnt, size 8 bits */
	    {70000, 0x100000005ull, 0, 4, 8, 0},   /* pid 32 bits */
	    {0x123, 0x100000006ull, 1, 8, 8, 0},   /* pid written 64 bits */
	    {0x124, 0x100000007ull, 2, 8, 8, 0},   /* again */
	    {11, 0x42, 3, 0, 0, 0},		   /* timestamp a fixint */
	    {12, 0x43, 4, 0, 0, 0},		   /* as learnt */
	    {13, 0x44, 5, 0, 8, 8},		   /* timestamp wide */
	};
	static const char *const members[] = {"anon", "shmem", "anon", "file"};
	static const char *const paths[] = {
	    "/bin/sh", "", "/usr/lib/a/path/of/forty/bytes/to/run/it"};
	static struct got g;
	int n = sizeof(mallocs) / sizeof(*mallocs), i;

	len = 0;
	header();
	for (i = 0; i < n; i++)
		malloc_map(mallocs[i].pid, mallocs[i].pid_width, mallocs[i].ts,
			   mallocs[i].ts_width, mallocs[i].size,
			   mallocs[i].size_width);
	/* the first Malloc again, then its head with no size, with old_size
	 * in the place of size, with old_size and size, and with size and
	 * old_size */
	malloc_map(5, 0, 0x100000000ull, 8, 300, 2);
	for (unsigned tail = 0; tail < 4; tail++) {
		map(tail < 3 ? 5 + tail : 7);
		str("type");
		str("Malloc");
		kv("pid", 5);
		kv("tid", 6);
		kv("timestamp", 0x100000000ull);
		kv("addr", 0x1000000000ull);
		if (tail == 3)
			kv("size", 300);
		if (tail > 0)
			kv("old_size", 4);
		if (tail == 2)
			kv("size", 300);
	}
	for (int m = 0; m < 4; m++) { /* member names of two lengths */
		map(6);
		str("type");
		str("Rss");
		kv("pid", 20);
		kv("tid", 20);
		kv("timestamp", 9000 + m);
		str("member");
		str(members[m]);
		kv("size", 4096 * m);
	}
	short_map("Fork", 30, "ppid", 20);
	short_map("Fork", 31, "ppid", 30);
	short_map("Exit", 30, "exit_code", 3);
	short_map("Exit", 31, "exit_code", 300);   /* the low 8 bits count */
	short_map("Exit", 32, "signal", 9 | 0x80); /* the low 7 bits */
	short_map("Exit", 33, "status", 0x100000102ull); /* the low 32 */
	for (int e = 0; e < 3; e++) { /* fixstr, empty, str8 */
		map(5);
		str("type");
		str("Exec");
		kv("pid", 40);
		kv("tid", 40);
		kv("timestamp", 9000);
		str("path");
		if (e < 2)
			str(paths[e]);
		else
			str8(paths[e]);
	}
	long_markers(3);
	trailer(n + 5 + 4 + 6 + 3 + 3, 0);
	read_both(&g);
	CHECK_INT(g.ret, 0);
	CHECK_INT(g.n, n + 5 + 4 + 6 + 3 + 3);
	for (i = 0; i < n; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_MALLOC);
		CHECK_INT(g.rec[i].ev.pid, mallocs[i].pid);
		CHECK_INT(g.rec[i].ev.tid, mallocs[i].pid + 1);
		CHECK_INT(g.rec[i].ev.timestamp, mallocs[i].ts);
		CHECK_INT(g.rec[i].ev.addr, mallocs[i].ts * 16);
		CHECK_INT(g.rec[i].ev.size, mallocs[i].size);
		CHECK_INT(g.rec[i].ev.old_size, 0);
	}
	for (i = n; i < n + 5; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_MALLOC);
		CHECK_INT(g.rec[i].ev.pid, 5);
		CHECK_INT(g.rec[i].ev.addr, 0x1000000000ull);
		CHECK_INT(g.rec[i].ev.size, i == n || i >= n + 3 ? 300 : 0);
		CHECK_INT(g.rec[i].ev.old_size, i >= n + 2 ? 4 : 0);
	}
	for (i = n + 5; i < n + 9; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_RSS);
		CHECK_INT(g.rec[i].ev.timestamp, 9000 + i - n - 5);
		CHECK_INT(g.rec[i].ev.addr, 0);
		CHECK_INT(g.rec[i].ev.size, 4096 * (i - n - 5));
	}
	CHECK_INT(g.rec[n + 5].ev.aux, 1); /* anon */
	CHECK_INT(g.rec[n + 6].ev.aux, 3); /* shmem */
	CHECK_INT(g.rec[n + 7].ev.aux, 1);
	CHECK_INT(g.rec[n + 8].ev.aux, 0); /* file */
	CHECK_INT(g.rec[n + 9].ev.kind, MT_EV_FORK);
	CHECK_INT(g.rec[n + 9].ev.old_addr, 20);
	CHECK_INT(g.rec[n + 10].ev.pid, 31);
	CHECK_INT(g.rec[n + 10].ev.old_addr, 30);
	CHECK_INT(g.rec[n + 10].ev.addr, 0);
	for (i = n + 11; i < n + 15; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_EXIT);
		CHECK_INT(g.rec[i].ev.pid, 30 + i - n - 11);
		CHECK_INT(g.rec[i].ev.addr, 0);
	}
	CHECK_INT(g.rec[n + 11].ev.aux, 3 << 8);
	CHECK_INT(g.rec[n + 12].ev.aux, (300 & 0xff) << 8);
	CHECK_INT(g.rec[n + 13].ev.aux, 9);
	CHECK_INT(g.rec[n + 14].ev.aux, 0x102);
	for (i = n + 15; i < n + 18; i++) {
		CHECK_INT(g.rec[i].ev.kind, MT_EV_EXEC);
		CHECK_INT(g.rec[i].ev.pid, 40);
		CHECK_INT(g.rec[i].ev.aux, g.rec[i].str_len);
		CHECK(g.rec[i].str != NULL);
	}
	CHECK_STR(g.str[n + 15], "/bin/sh");
	CHECK_INT(g.rec[n + 15].ev.aux, 7);
	CHECK_STR(g.str[n + 16], "");
	CHECK_INT(g.rec[n + 16].ev.aux, 0);
	/* 40 bytes, of which the 31 that g.str holds */
	CHECK_STR(g.str[n + 17], "/usr/lib/a/path/of/forty/bytes/");
	CHECK_INT(g.rec[n + 17].ev.aux, 40);
	CHECK_INT(g.rec[n + 18].ev.kind, MT_EV_MARKER);
	CHECK_INT(g.rec[n + 18].ev.aux, 3000);
}

/* ---- the raw stream's header ----------------------------------------- */

/*
 * A raw stream header with one field set to value (width bytes at off),
 * written by the library's writer and then changed: opening it must fail
 * with an error naming want_field at its byte want_at, or (want_field NULL)
 * succeed with page_size read as written.
 */
static void raw_header_case(size_t off, uint64_t value, size_t width,
			    const char *want_field, size_t want_at)
{
	static char *args[] = {"prog", "-x"};
	struct mt_meta meta = {.page_size = 4096,
			       .clock_id = 1,
			       .root_pid = 7,
			       .start_monotonic_ns = 1000,
			       .host = "box",
			       .argc = 2,
			       .argv = args};
	char path[] = "/tmp/test_input_raw.XXXXXX", err[512] = "", at[32];
	int fd = mkstemp(path);
	struct mt_input *in;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_INT(mt_raw_write_header(fd, &meta), 0);
	CHECK_INT(pwrite(fd, &value, width, off), (ssize_t)width);
	close(fd);
	in = mt_input_open(path, err, sizeof(err));
	unlink(path);
	if (!want_field) {
		CHECK(in != NULL);
		if (in)
			CHECK_INT(mt_input_meta(in)->page_size, value);
		mt_input_close(in);
		return;
	}
	CHECK(in == NULL);
	mt_input_close(in);
	snprintf(at, sizeof(at), ": byte %zu: stream header: ", want_at);
	if (!strstr(err, at) || !strstr(err, want_field))
		fprintf(stderr, "raw header: %s = %" PRIu64 ": got \"%s\"\n",
			want_field, value, err);
	CHECK(strstr(err, at) != NULL);
	CHECK(strstr(err, want_field) != NULL);
}

#define RAW_AT(field)	 offsetof(struct mt_raw_header, field)
#define RAW_WIDTH(field) sizeof(((struct mt_raw_header *)0)->field)
#define RAW_BAD(field, value)                                                  \
	raw_header_case(RAW_AT(field), value, RAW_WIDTH(field), #field,        \
			RAW_AT(field))

/* Every header field later arithmetic trusts is checked, with an error
 * naming it and its byte; the page sizes a machine may have pass. */
static void test_raw_header(void)
{
	static const uint64_t bad_pages[] = {
	    0, 1, 3, 2048, 4095, 4097, 12288, 1ull << 31, 0xffffffffull};
	static const uint64_t good_pages[] = {4096, 16384, 65536, 2 << 20,
					      1 << 30};

	for (size_t i = 0; i < sizeof(bad_pages) / sizeof(*bad_pages); i++)
		RAW_BAD(page_size, bad_pages[i]);
	for (size_t i = 0; i < sizeof(good_pages) / sizeof(*good_pages); i++)
		raw_header_case(RAW_AT(page_size), good_pages[i],
				RAW_WIDTH(page_size), NULL, 0);
	RAW_BAD(version, 0);
	RAW_BAD(version, MT_RAW_VERSION + 1);
	RAW_BAD(header_size, 8);	 /* less than the header itself */
	RAW_BAD(header_size, 64u << 20); /* more than any header */
	RAW_BAD(event_size, 0);
	RAW_BAD(event_size, MT_EVENT_SIZE - 1);
	RAW_BAD(event_size, 0xffffffffull);
	RAW_BAD(clock_id, 3); /* CLOCK_THREAD_CPUTIME_ID: no event clock */
	RAW_BAD(clock_id, 0xffffffffull);
	RAW_BAD(argc, 0xffffffffull);
	/* strings_size past header_size: named as header_size, which must
	 * hold the strings */
	raw_header_case(RAW_AT(strings_size), 1u << 20, RAW_WIDTH(strings_size),
			"header_size", RAW_AT(header_size));
}

int main(void)
{
	test_shrink();
	test_widths();
	test_shapes();
	test_kind_keys();
	test_errors();
	test_many();
	test_head_shapes();
	test_raw_header();
	return test_summary("test_input");
}
