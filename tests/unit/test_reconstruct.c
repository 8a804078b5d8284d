// SPDX-License-Identifier: MIT
/*
 * test_reconstruct.c - the reconstruction rules on event sequences whose
 * results are known by construction, plus randomized checks of the block
 * hash and the interval set against simple reference models.
 *
 *   test_reconstruct            run the tests (exit 0 = pass)
 *   test_reconstruct --bench N  time N synthetic events through the core
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>
#include <unistd.h>

#include "mt_artifact.h"
#include "mt_human.h"
#include "mt_reconstruct.h"
#include "formats_test.h"

#define MiB (1ull << 20)

static struct mt_recon *rc;
static uint64_t now;

static void start(const struct mt_recon_opts *opts)
{
	struct mt_meta meta = {.page_size = 4096,
			       .start_monotonic_ns = 1000000,
			       .flags = MT_HDR_ALLOCATORS};

	rc = mt_recon_new(opts, &meta, MT_FMT_ARTIFACT);
	now = 1000000;
}

static void ev(unsigned kind, uint32_t pid, uint64_t addr, uint64_t size,
	       uint64_t old_addr, uint64_t old_size)
{
	struct mt_record rec = {.ev = {.timestamp = now += 10,
				       .pid = pid,
				       .tid = pid,
				       .kind = (uint16_t)kind,
				       .addr = addr,
				       .size = size,
				       .old_addr = old_addr,
				       .old_size = old_size}};

	mt_recon_event(rc, &rec);
}

static void ev_str(unsigned kind, uint32_t pid, uint32_t aux, const char *s)
{
	struct mt_record rec = {.ev = {.timestamp = now += 10,
				       .pid = pid,
				       .tid = pid,
				       .kind = (uint16_t)kind,
				       .aux = aux},
				.str = s,
				.str_len = s ? (uint32_t)strlen(s) : 0};

	mt_recon_event(rc, &rec);
}

static json_t *finish(void)
{
	struct mt_meta meta = {.has_trailer = true,
			       .exit_kind = MT_EXIT_CODE,
			       .end_monotonic_ns = now + 10};
	json_t *doc = mt_recon_finish(rc, &meta, NULL);

	mt_recon_free(rc);
	rc = NULL;
	return doc;
}

/* doc.tree.<a>.<b> or doc.processes[i].<a>.<b> as an integer */
static long long get(json_t *doc, int proc, const char *a, const char *b)
{
	json_t *o = proc < 0 ? json_object_get(doc, "tree")
			     : json_array_get(json_object_get(doc, "processes"),
					      (size_t)proc);
	o = json_object_get(o, a);
	if (b)
		o = json_object_get(o, b);
	return json_is_integer(o) ? json_integer_value(o) : -1;
}

static void test_peak_and_leaks(void)
{
	uint64_t a[10];

	start(NULL);
	for (int i = 0; i < 10; i++) {
		a[i] = 0x10000 + (uint64_t)i * 0x200000;
		ev(MT_EV_MALLOC, 100, a[i], MiB, 0, 0);
	}
	for (int i = 0; i < 5; i++)
		ev(MT_EV_FREE, 100, a[i], 0, 0, 0);
	ev(MT_EV_MALLOC, 100, 0x9000000, 2 * MiB, 0, 0);
	ev_str(MT_EV_EXIT, 100, 0, NULL);
	json_t *doc = finish();

	CHECK_INT(get(doc, -1, "heap", "peak"), 10 * MiB);
	CHECK_INT(get(doc, -1, "heap", "peak_t_ns"), 100);
	CHECK_INT(get(doc, -1, "heap", "final"), 0);
	CHECK_INT(get(doc, 0, "heap", "peak"), 10 * MiB);
	CHECK_INT(get(doc, -1, "totals", "allocated_bytes"), 12 * MiB);
	CHECK_INT(get(doc, -1, "totals", "allocations"), 11);
	CHECK_INT(get(doc, -1, "totals", "frees"), 5);
	CHECK_INT(get(doc, -1, "not_freed", "bytes"), 7 * MiB);
	CHECK_INT(get(doc, -1, "not_freed", "count"), 6);
	json_t *blocks = json_object_get(
	    json_object_get(json_object_get(doc, "tree"), "not_freed"),
	    "blocks");
	CHECK_INT(json_integer_value(
		      json_object_get(json_array_get(blocks, 0), "size")),
		  2 * MiB);
	CHECK(!strcmp(
	    json_string_value(json_object_get(json_array_get(blocks, 0), "at")),
	    "exit"));
	CHECK_INT(json_integer_value(json_object_get(
		      json_object_get(
			  json_array_get(json_object_get(doc, "processes"), 0),
			  "exit"),
		      "code")),
		  0);
	json_decref(doc);
}

/* Leaks of one size seen at one instant (events of two CPUs can share a
 * timestamp): which are listed follows from the blocks, not from the
 * order a hash table gives them in: the lowest addresses, in order. */
static void test_leak_ties(void)
{
	static const uint64_t addrs[] = {0x7000, 0x3000, 0x9000, 0x1000,
					 0x5000, 0x8000, 0x2000, 0x6000};
	struct mt_recon_opts o;

	mt_recon_opts_default(&o);
	o.max_proc_leaks = 3;
	for (int order = 0; order < 2; order++) {
		start(&o);
		now += 10;
		for (int i = 0; i < 8; i++) {
			struct mt_record rec = {
			    .ev = {.timestamp = now,
				   .pid = 100,
				   .tid = 100,
				   .kind = MT_EV_MALLOC,
				   .addr = addrs[order ? 7 - i : i],
				   .size = 64}};

			mt_recon_event(rc, &rec);
		}
		json_t *doc = finish();
		json_t *p =
		    json_array_get(json_object_get(doc, "processes"), 0);
		json_t *b =
		    json_object_get(json_object_get(p, "not_freed"), "blocks");

		CHECK_INT(json_array_size(b), 3);
		for (size_t i = 0; i < 3; i++)
			CHECK_INT(json_integer_value(json_object_get(
				      json_array_get(b, i), "addr")),
				  0x1000 * (i + 1));
		json_decref(doc);
	}
}

/* The most frequent sizes, small ones (a dense array) and big ones (a
 * hash table) alike; once 32768 distinct sizes are counted, the sizes
 * first seen after are counted only as untracked. */
static void test_size_counts(void)
{
	struct mt_recon_opts o;
	uint64_t addr = 0x100000;

	mt_recon_opts_default(&o);
	o.top_sizes = 5;
	start(&o);
	for (int i = 0; i < 6; i++)
		ev(MT_EV_MALLOC, 100, addr += 16, 100, 0, 0);
	for (int i = 0; i < 5; i++)
		ev(MT_EV_MALLOC, 100, addr += 16, 5000, 0, 0);
	for (int i = 0; i < 4; i++)
		ev(MT_EV_MALLOC, 100, addr += 16, 7, 0, 0);
	for (uint64_t size = 1; size <= 40000; size++)
		ev(MT_EV_MALLOC, 100, addr += 16, size, 0, 0);
	json_t *doc = finish();
	json_t *top =
	    json_object_get(json_object_get(doc, "tree"), "top_sizes");
	json_t *sizes = json_object_get(top, "sizes");
	static const long long want[5][2] = {
	    {100, 7}, {5000, 6}, {7, 5}, {1, 1}, {2, 1}};

	CHECK_INT(json_array_size(sizes), 5);
	for (size_t i = 0; i < 5; i++) {
		json_t *e = json_array_get(sizes, i);

		CHECK_INT(json_integer_value(json_object_get(e, "size")),
			  want[i][0]);
		CHECK_INT(json_integer_value(json_object_get(e, "count")),
			  want[i][1]);
	}
	CHECK_INT(json_integer_value(json_object_get(top, "distinct_tracked")),
		  32768);
	CHECK_INT(json_integer_value(json_object_get(top, "distinct_max")),
		  32768);
	/* 1..40000 brings 39997 new sizes (7, 100 and 5000 were counted);
	 * 32765 fit, each of the other 7232 once untracked */
	CHECK_INT(
	    json_integer_value(json_object_get(top, "untracked_allocations")),
	    7232);
	json_decref(doc);
}

/* A pid used again after its process exited is a new process: the old
 * one's blocks and peaks stay with the old one. */
static void test_pid_reuse(void)
{
	start(NULL);
	ev(MT_EV_FORK, 100, 0, 0, 1, 0);
	ev(MT_EV_MALLOC, 100, 0xa000, 64, 0, 0);
	ev_str(MT_EV_EXIT, 100, 0, NULL);
	ev(MT_EV_FORK, 100, 0, 0, 7, 0); /* the same pid, another parent */
	ev(MT_EV_MALLOC, 100, 0xb000, 32, 0, 0);
	ev(MT_EV_FREE, 100, 0xa000, 0, 0, 0); /* the old process's block */
	json_t *doc = finish();

	CHECK_INT(json_array_size(json_object_get(doc, "processes")), 2);
	CHECK_INT(get(doc, 0, "pid", NULL), 100);
	CHECK_INT(get(doc, 1, "pid", NULL), 100);
	CHECK_INT(get(doc, 0, "ppid", NULL), 1);
	CHECK_INT(get(doc, 1, "ppid", NULL), 7);
	CHECK_INT(get(doc, 0, "heap", "peak"), 64);
	CHECK_INT(get(doc, 1, "heap", "peak"), 32);
	CHECK_INT(get(doc, 0, "not_freed", "bytes"), 64); /* at its exit */
	CHECK_INT(get(doc, 1, "not_freed", "bytes"), 32); /* live at the end */
	CHECK_INT(get(doc, 1, "totals", "unknown_frees"), 1);
	CHECK_INT(get(doc, -1, "not_freed", "bytes"), 96);
	json_decref(doc);
}

static void test_fork(void)
{
	start(NULL);
	ev(MT_EV_MALLOC, 100, 0xa000, 100, 0, 0);
	ev(MT_EV_MALLOC, 100, 0xb000, 50, 0, 0);
	ev(MT_EV_FORK, 200, 0, 0, 100, 0);
	/* the child frees an inherited block: no error, no change to the
	 * tree (it is counted in the parent) */
	ev(MT_EV_FREE, 200, 0xa000, 0, 0, 0);
	ev(MT_EV_MALLOC, 200, 0xc000, 30, 0, 0);
	ev(MT_EV_FREE, 100, 0xa000, 0, 0, 0);
	/* the child still holds 0xb000 (inherited): exit drops it silently */
	ev_str(MT_EV_EXIT, 200, 1 << 8, NULL);
	json_t *doc = finish();

	CHECK_INT(get(doc, -1, "totals", "unknown_frees"), 0);
	CHECK_INT(get(doc, -1, "heap", "peak"), 180);
	CHECK_INT(get(doc, 1, "heap", "peak"), 30);
	CHECK_INT(get(doc, 1, "ppid", NULL), 100);
	CHECK_INT(get(doc, 1, "not_freed", "bytes"), 30);
	CHECK_INT(get(doc, 1, "not_freed", "count"), 1);
	/* the parent never exited: 0xb000 is live at the end */
	CHECK_INT(get(doc, 0, "not_freed", "bytes"), 50);
	CHECK_INT(get(doc, 0, "heap", "final"), 0);
	CHECK_INT(get(doc, -1, "not_freed", "bytes"), 80);
	json_t *ex = json_object_get(
	    json_array_get(json_object_get(doc, "processes"), 1), "exit");
	CHECK_INT(json_integer_value(json_object_get(ex, "code")), 1);
	json_decref(doc);
}

static void test_exec_and_unknown_free(void)
{
	start(NULL);
	ev_str(MT_EV_EXEC, 100, 0, "a\xc3(b\xe9\xc3\xa9");
	ev(MT_EV_MALLOC, 100, 0xa000, 64, 0, 0);
	ev(MT_EV_FREE, 100, 0xdead0, 0, 0, 0);
	ev(MT_EV_FREE, 100, 0, 0, 0, 0); /* free(NULL): nothing */
	ev_str(MT_EV_EXEC, 100, 0, "/bin/true");
	/* after exec the old address space is gone */
	ev(MT_EV_FREE, 100, 0xa000, 0, 0, 0);
	ev(MT_EV_MALLOC, 100, 0xa000, 8, 0, 0);
	json_t *doc = finish();

	CHECK_INT(get(doc, 0, "totals", "unknown_frees"), 2);
	CHECK_INT(get(doc, 0, "totals", "frees"), 0);
	CHECK_INT(get(doc, -1, "heap", "peak"), 64);
	CHECK_INT(get(doc, 0, "not_freed", "count"), 2);
	CHECK_INT(get(doc, 0, "not_freed", "bytes"), 72);
	json_t *p = json_array_get(json_object_get(doc, "processes"), 0);
	json_t *execs = json_object_get(p, "execs");
	const char *path;

	CHECK_INT(json_array_size(execs), 2);
	path = json_string_value(
	    json_object_get(json_array_get(execs, 1), "path"));
	CHECK(path && !strcmp(path, "/bin/true"));
	/* a path is any bytes: those not UTF-8 become U+FFFD, kept */
	path = json_string_value(
	    json_object_get(json_array_get(execs, 0), "path"));
	CHECK(path && !strcmp(path, "a\xef\xbf\xbd(b\xef\xbf\xbd\xc3\xa9"));
	json_t *b = json_object_get(json_object_get(p, "not_freed"), "blocks");
	CHECK(!strcmp(
	    json_string_value(json_object_get(json_array_get(b, 0), "at")),
	    "exec"));
	CHECK(!strcmp(
	    json_string_value(json_object_get(json_array_get(b, 1), "at")),
	    "end"));
	json_decref(doc);
}

static void test_realloc(void)
{
	start(NULL);
	ev(MT_EV_REALLOC, 100, 0xa000, 100, 0, 0); /* realloc(NULL, 100) */
	ev(MT_EV_REALLOC, 100, 0xb000, 300, 0xa000, 0);
	ev(MT_EV_REALLOC, 100, 0xb000, 200, 0xb000, 0); /* in place */
	ev(MT_EV_REALLOC, 100, 0xc000, 10, 0xf000, 0);	/* unknown old */
	ev(MT_EV_REALLOC, 100, 0, 0, 0xc000, 0);	/* realloc(p, 0) */
	json_t *doc = finish();

	CHECK_INT(get(doc, -1, "heap", "peak"), 300);
	CHECK_INT(get(doc, -1, "totals", "reallocs"), 5);
	CHECK_INT(get(doc, -1, "totals", "allocations"), 4);
	CHECK_INT(get(doc, -1, "totals", "allocated_bytes"), 610);
	CHECK_INT(get(doc, -1, "totals", "unknown_reallocs"), 1);
	CHECK_INT(get(doc, -1, "not_freed", "bytes"), 200);
	json_decref(doc);
}

static void test_resolution_keeps_peak(void)
{
	struct mt_recon_opts o;

	mt_recon_opts_default(&o);
	o.max_points = 16;
	start(&o);
	/* a saw tooth with one spike in the middle */
	for (int i = 0; i < 5000; i++) {
		ev(MT_EV_MALLOC, 100, 0xa000, i == 2500 ? 12345 : 100, 0, 0);
		ev(MT_EV_FREE, 100, 0xa000, 0, 0, 0);
	}
	json_t *doc = finish();
	json_t *heap = json_object_get(json_object_get(doc, "tree"), "heap");
	json_t *pts = json_object_get(heap, "points");
	long long maxv = 0;

	CHECK(json_array_size(pts) <= 16);
	CHECK(json_array_size(pts) >= 4);
	for (size_t i = 0; i < json_array_size(pts); i++) {
		long long v = json_integer_value(
		    json_array_get(json_array_get(pts, i), 1));
		if (v > maxv)
			maxv = v;
	}
	CHECK_INT(maxv, 12345);
	CHECK_INT(get(doc, -1, "heap", "peak"), 12345);
	CHECK_INT(get(doc, -1, "heap", "peak_t_ns"), 2500 * 20 + 10);
	json_decref(doc);

	/* fixed 1 us buckets: 10 events of 10 ns each per bucket */
	mt_recon_opts_default(&o);
	o.mode = MT_RES_FIXED;
	o.resolution_ns = 1000;
	start(&o);
	for (int i = 0; i < 500; i++) {
		ev(MT_EV_MALLOC, 100, 0xa000, i == 321 ? 999 : 10, 0, 0);
		ev(MT_EV_FREE, 100, 0xa000, 0, 0, 0);
	}
	doc = finish();
	heap = json_object_get(json_object_get(doc, "tree"), "heap");
	pts = json_object_get(heap, "points");
	/* 10 buckets of events, and the end of the trace (heap 0) */
	CHECK_INT(json_array_size(pts), 11);
	CHECK_INT(json_integer_value(json_object_get(heap, "bucket_ns")), 1000);
	/* the spike at t = 321 * 20 + 10 ns lands in bucket 6 */
	CHECK_INT(json_integer_value(json_array_get(json_array_get(pts, 6), 1)),
		  999);
	CHECK_INT(json_integer_value(json_array_get(json_array_get(pts, 6), 0)),
		  6000);
	CHECK_INT(json_integer_value(json_array_get(json_array_get(pts, 5), 1)),
		  10);
	json_decref(doc);

	/* exact: a point per event */
	mt_recon_opts_default(&o);
	o.mode = MT_RES_EXACT;
	start(&o);
	for (int i = 0; i < 3000; i++)
		ev(MT_EV_MALLOC, 100, 0x1000 + (uint64_t)i * 16, 1, 0, 0);
	doc = finish();
	heap = json_object_get(json_object_get(doc, "tree"), "heap");
	CHECK_INT(json_array_size(json_object_get(heap, "points")), 3000 + 1);
	json_decref(doc);
}

static void test_mapped(void)
{
	const uint64_t P = 4096;

	start(NULL);
	ev(MT_EV_MMAP, 100, 0x100000, 3 * P, 0, 0);
	ev(MT_EV_MUNMAP, 100, 0x100000 + P, P, 0, 0); /* a hole */
	ev(MT_EV_MMAP, 100, 0x100000, 10, 0, 0);      /* MAP_FIXED over */
	ev(MT_EV_MMAP, 100, 0x200000, 8 * P, 0, 0);
	ev(MT_EV_MREMAP, 100, 0x300000, 16 * P, 0x200000, 8 * P); /* moves */
	ev(MT_EV_BRK, 100, 0x500000, 0, 0, 0); /* first: just the break */
	ev(MT_EV_BRK, 100, 0x500000 + 4 * P, 0, 0, 0); /* grows 4 pages */
	ev(MT_EV_BRK, 100, 0x500000 + P, 0, 0x500000 + 4 * P, 0); /* -3 */
	ev(MT_EV_MUNMAP, 100, 0, 0x1000000, 0, 0); /* everything */
	json_t *doc = finish();

	/* peak: 2 + 16 + 4 pages */
	CHECK_INT(get(doc, -1, "mapped", "peak"), 22 * P);
	CHECK_INT(get(doc, 0, "mapped", "final"), 0);
	json_t *pts = json_object_get(
	    json_object_get(json_object_get(doc, "tree"), "mapped"), "points");
	/* MAP_FIXED over a mapped page changes nothing: no point */
	long long want[] = {3, 2, 10, 18, 22, 19, 0};
	CHECK_INT(json_array_size(pts), 7);
	for (size_t i = 0; i < 7 && i < json_array_size(pts); i++)
		CHECK_INT(json_integer_value(
			      json_array_get(json_array_get(pts, i), 2)),
			  want[i] * (long long)P);
	json_decref(doc);
}

static void test_lost(void)
{
	start(NULL);
	ev(MT_EV_LOST, 0, 0, 7, 0, 0);
	ev(MT_EV_MALLOC, 100, 0xa000, 1, 0, 0);
	json_t *doc = mt_recon_finish(rc, NULL, "x: byte 9: truncated");

	mt_recon_free(rc);
	CHECK_INT(json_integer_value(json_object_get(doc, "lost_events")), 7);
	CHECK(json_is_false(
	    json_object_get(json_object_get(doc, "input"), "complete")));
	json_decref(doc);
}

/* Random allocations and frees against a reference array: the hash with
 * backward-shift deletion must never lose or invent a block. */
static void test_random_heap(void)
{
	enum { N = 4096 };
	static uint64_t size_of[N];
	uint64_t live = 0, peak = 0;
	unsigned seed = 12345;

	start(NULL);
	for (int i = 0; i < 200000; i++) {
		unsigned k = (unsigned)rand_r(&seed) % N;
		uint64_t addr = 0x10000000 + (uint64_t)k * 64;

		if (size_of[k]) {
			ev(MT_EV_FREE, 100, addr, 0, 0, 0);
			live -= size_of[k];
			size_of[k] = 0;
		} else {
			size_of[k] = 1 + (uint64_t)rand_r(&seed) % 1000;
			ev(MT_EV_MALLOC, 100, addr, size_of[k], 0, 0);
			live += size_of[k];
			if (live > peak)
				peak = live;
		}
	}
	json_t *doc = finish();

	CHECK_INT(get(doc, -1, "heap", "peak"), peak);
	CHECK_INT(get(doc, -1, "not_freed", "bytes"), live);
	CHECK_INT(get(doc, -1, "totals", "unknown_frees"), 0);
	json_decref(doc);
}

/* Random maps and unmaps against a page bitmap. */
static void test_random_ranges(void)
{
	enum { PAGES = 512 };
	static unsigned char mapped[PAGES];
	unsigned seed = 777;
	uint64_t peak = 0;

	start(NULL);
	for (int i = 0; i < 20000; i++) {
		unsigned a = (unsigned)rand_r(&seed) % PAGES;
		unsigned n = 1 + (unsigned)rand_r(&seed) % 40;
		bool map = rand_r(&seed) % 2;

		if (a + n > PAGES)
			n = PAGES - a;
		ev(map ? MT_EV_MMAP : MT_EV_MUNMAP, 100,
		   0x40000000 + (uint64_t)a * 4096, (uint64_t)n * 4096, 0, 0);
		memset(mapped + a, map, n);
		uint64_t count = 0;
		for (unsigned p = 0; p < PAGES; p++)
			count += mapped[p];
		if (count > peak)
			peak = count;
	}
	uint64_t count = 0;
	for (unsigned p = 0; p < PAGES; p++)
		count += mapped[p];
	json_t *doc = finish();
	json_t *pts = json_object_get(
	    json_object_get(json_object_get(doc, "tree"), "mapped"), "points");
	(void)pts;
	CHECK_INT(get(doc, -1, "mapped", "peak"), peak * 4096);
	/* final is 0 after the end; the value before it is in the series */
	json_t *heapless = json_object_get(
	    json_object_get(json_object_get(doc, "tree"), "mapped"), "points");
	size_t n = json_array_size(heapless);
	CHECK(n >= 1);
	json_decref(doc);
	(void)count;
}

/* Max of a series' points, and whether any point looks wrapped below
 * zero (a huge unsigned value). */
static long long points_max(json_t *series, bool *wrapped)
{
	json_t *pts = json_object_get(series, "points");
	long long m = 0;

	for (size_t i = 0; i < json_array_size(pts); i++)
		for (size_t k = 1; k <= 2; k++) {
			long long v = json_integer_value(
			    json_array_get(json_array_get(pts, i), k));

			if (v < 0 || v > (1ll << 50))
				*wrapped = true;
			if (v > m)
				m = v;
		}
	return m;
}

/* Any sequence of events, however odd (frees of strangers, exits of
 * unknown pids, unmaps of nothing, forks of oneself), must keep every
 * figure sane: nothing below zero, everything back to zero at the end,
 * each peak the maximum of its points. */
static void test_random_anything(void)
{
	static const unsigned kinds[] = {
	    MT_EV_MALLOC, MT_EV_MALLOC,	 MT_EV_FREE,	MT_EV_FREE,
	    MT_EV_CALLOC, MT_EV_REALLOC, MT_EV_REALLOC, MT_EV_ALIGNED_ALLOC,
	    MT_EV_MMAP,	  MT_EV_MUNMAP,	 MT_EV_MREMAP,	MT_EV_BRK,
	    MT_EV_FORK,	  MT_EV_EXEC,	 MT_EV_EXIT,	MT_EV_RSS,
	    MT_EV_PSS,	  MT_EV_MARKER,	 MT_EV_LOST,	MT_EV_DATA,
	};
	struct mt_recon_opts o;
	unsigned seed = 4242;

	for (int round = 0; round < 4; round++) {
		mt_recon_opts_default(&o);
		o.max_points = 8 + round * 50;
		o.proc_points = 4 + round;
		o.series_procs = round == 3 ? UINT_MAX : (unsigned)round;
		o.section = round == 2 ? "s" : NULL;
		start(&o);
		for (int i = 0; i < 100000; i++) {
			unsigned k = kinds[rand_r(&seed) % 20];
			uint32_t pid = (uint32_t)(rand_r(&seed) % 6);
			uint64_t a = 0x10000 * (uint64_t)(rand_r(&seed) % 64);
			uint64_t b = 0x10000 * (uint64_t)(rand_r(&seed) % 64);
			uint64_t n = (uint64_t)(rand_r(&seed) % 300000);

			if (k == MT_EV_MARKER)
				ev_str(k, pid, 0,
				       rand_r(&seed) % 2 ? "s" : "s-end");
			else if (k == MT_EV_EXEC)
				ev_str(k, pid, 0, "/x");
			else if (k == MT_EV_EXIT)
				ev_str(k, pid, (uint32_t)rand_r(&seed), NULL);
			else if (k == MT_EV_FORK)
				ev(k, pid, 0, 0, (uint64_t)(rand_r(&seed) % 6),
				   0);
			else if (k == MT_EV_RSS)
				ev_str(k, pid, (uint32_t)rand_r(&seed) % 5,
				       NULL);
			else
				ev(k, pid, rand_r(&seed) % 8 ? a : 0, n, b,
				   n / 2);
		}
		json_t *doc = finish();
		json_t *tree = json_object_get(doc, "tree");
		bool wrapped = false;

		CHECK_INT(get(doc, -1, "heap", "final"), 0);
		CHECK_INT(get(doc, -1, "mapped", "final"), 0);
		CHECK(points_max(json_object_get(tree, "heap"), &wrapped) ==
		      get(doc, -1, "heap", "peak"));
		CHECK(points_max(json_object_get(tree, "mapped"), &wrapped) ==
		      get(doc, -1, "mapped", "peak"));
		json_t *rss = json_object_get(tree, "rss");
		if (json_is_object(rss)) {
			json_t *total = json_object_get(rss, "total");

			CHECK(
			    points_max(total, &wrapped) ==
			    json_integer_value(json_object_get(total, "peak")));
			CHECK_INT(
			    json_integer_value(json_object_get(total, "final")),
			    0);
		}
		json_t *procs = json_object_get(doc, "processes");
		for (size_t i = 0; i < json_array_size(procs); i++) {
			json_t *p = json_array_get(procs, i);

			points_max(json_object_get(p, "heap"), &wrapped);
			points_max(json_object_get(p, "mapped"), &wrapped);
			CHECK(json_integer_value(json_object_get(
				  json_object_get(p, "heap"), "final")) == 0);
		}
		CHECK(!wrapped);
		char *text = json_dumps(doc, 0);

		CHECK(text != NULL);
		free(text);
		json_decref(doc);
	}
}

/* Random events of many processes: forks, execs with names jansson must
 * escape, exits, RSS and PSS, heap and mappings. */
static void feed_random(unsigned seed)
{
	static const char *const paths[] = {
	    "/usr/bin/cc",	  "a \"quoted\" \\ name",
	    "tab\there\nnewline", "\xc3\xa9t\xc3\xa9",
	    "\x01control",	  "",
	    "bad \xff byte",	  "\xed\xa0\x80 surrogate",
	    "cut \xe2\x82"};
	static const unsigned kinds[] = {
	    MT_EV_MALLOC,  MT_EV_MALLOC, MT_EV_FREE,   MT_EV_CALLOC,
	    MT_EV_REALLOC, MT_EV_MMAP,	 MT_EV_MUNMAP, MT_EV_FORK,
	    MT_EV_EXEC,	   MT_EV_EXIT,	 MT_EV_RSS,    MT_EV_PSS,
	};

	for (int i = 0; i < 20000; i++) {
		unsigned k = kinds[rand_r(&seed) % 12];
		uint32_t pid = 1 + (uint32_t)(rand_r(&seed) % 40);
		uint64_t a = 0x1000 * (uint64_t)(rand_r(&seed) % 4096);
		uint64_t n = (uint64_t)(rand_r(&seed) % 100000);

		if (k == MT_EV_EXEC)
			ev_str(k, pid, 0, paths[rand_r(&seed) % 9]);
		else if (k == MT_EV_EXIT)
			ev_str(k, pid, (uint32_t)rand_r(&seed) % 512, NULL);
		else if (k == MT_EV_FORK)
			ev(k, 1 + (uint32_t)(rand_r(&seed) % 40), 0, 0, pid, 0);
		else if (k == MT_EV_RSS)
			ev_str(k, pid, (uint32_t)rand_r(&seed) % 4, NULL);
		else
			ev(k, pid, a, n, a / 2, n / 3);
	}
	/* average sizes whose text takes each of jansson's rules: ".0"
	 * added (0, 3), a plain fraction, an exponent with "+" dropped */
	static const uint64_t sizes[][2] = {
	    {0, 0}, {3, 3}, {1, 2}, {1ull << 62, 1ull << 62}, {1, 1000000}};

	for (uint32_t i = 0; i < 5; i++) {
		ev(MT_EV_MALLOC, 901 + i, 0x10, sizes[i][0], 0, 0);
		ev(MT_EV_MALLOC, 901 + i, 0x20, sizes[i][1], 0, 0);
	}
}

/* What mt_recon_write must write, from jansson's own dump of the finished
 * document: the head without "processes", reopened, then each process
 * dumped on its own. */
static char *expected_write(json_t *doc, size_t flags)
{
	json_t *procs = json_incref(json_object_get(doc, "processes"));
	char *head, *text = NULL;
	size_t len = 0, cut;
	FILE *f = open_memstream(&text, &len);

	json_object_del(doc, "processes");
	head = json_dumps(doc, flags);
	for (cut = strlen(head); cut > 0 && head[cut - 1] != '}'; cut--)
		;
	fwrite(head, 1, cut - 1, f);
	fputs(",\"processes\":[", f);
	for (size_t i = 0; i < json_array_size(procs); i++) {
		char *p = json_dumps(json_array_get(procs, i), flags);

		fprintf(f, "%s%s", i ? "," : "", p);
		free(p);
	}
	fputs("]}\n", f);
	fclose(f);
	free(head);
	json_decref(procs);
	return text;
}

/* mt_recon_write streams the processes as text without jansson: it must
 * still write exactly what jansson writes, in every layout. */
static void test_write_is_jansson(void)
{
	static const size_t layouts[] = {
	    JSON_COMPACT | JSON_REAL_PRECISION(12),
	    JSON_INDENT(1) | JSON_REAL_PRECISION(12),
	    JSON_INDENT(3),
	    0,
	    JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH,
	};
	struct mt_meta meta = {.has_trailer = true,
			       .exit_kind = MT_EXIT_CODE,
			       .end_monotonic_ns = 1};
	struct mt_recon_opts o;

	mt_recon_opts_default(&o);
	o.series_procs = 7; /* some processes with points, some without */
	o.proc_points = 16;
	for (size_t i = 0; i < sizeof(layouts) / sizeof(*layouts); i++) {
		char *text = NULL, *want;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		json_t *doc;

		start(&o);
		feed_random(77);
		CHECK_INT(mt_recon_write(rc, &meta, NULL, f, layouts[i]), 0);
		fclose(f);
		mt_recon_free(rc);
		start(&o);
		feed_random(77);
		doc = mt_recon_finish(rc, &meta, NULL);
		mt_recon_free(rc);
		rc = NULL;
		CHECK_INT(
		    json_array_size(json_object_get(doc, "processes")) > 30, 1);
		want = expected_write(doc, layouts[i]);
		CHECK(strcmp(text, want) == 0);
		free(want);
		free(text);
		json_decref(doc);
	}
}

static void test_human(void)
{
	uint64_t v;
	double pct;
	char buf[64];

	CHECK(mt_parse_size("10MiB", &v) == 0 && v == 10 * MiB);
	CHECK(mt_parse_size("5M", &v) == 0 && v == 5 * MiB);
	CHECK(mt_parse_size("1.5G", &v) == 0 && v == 3 * (1ull << 29));
	CHECK(mt_parse_size("1KB", &v) == 0 && v == 1000);
	CHECK(mt_parse_size("123", &v) == 0 && v == 123);
	CHECK(mt_parse_size("12Q", &v) < 0);
	CHECK(mt_parse_size("-1", &v) < 0);
	CHECK(mt_parse_size("", &v) < 0);
	CHECK(mt_parse_duration("1ms", &v) == 0 && v == 1000000);
	CHECK(mt_parse_duration("2.5us", &v) == 0 && v == 2500);
	CHECK(mt_parse_duration("0", &v) == 0 && v == 0);
	CHECK(mt_parse_duration("5", &v) < 0);
	CHECK(mt_parse_percent("5%", &pct) == 0 && pct == 5);
	CHECK(mt_parse_percent("2.5", &pct) == 0 && pct == 2.5);
	CHECK(mt_parse_percent("x", &pct) < 0);
	CHECK(!strcmp(mt_fmt_count(buf, sizeof(buf), 1234567), "1,234,567"));
	CHECK(!strcmp(mt_fmt_count(buf, sizeof(buf), 999), "999"));
	CHECK(!strcmp(mt_fmt_count(buf, sizeof(buf), 1000), "1,000"));
	CHECK(!strcmp(mt_fmt_bytes(buf, sizeof(buf), 512), "512 B"));
	CHECK(!strcmp(mt_fmt_bytes(buf, sizeof(buf), 10 * MiB), "10.0 MiB"));
	CHECK(!strcmp(mt_fmt_bytes(buf, sizeof(buf), 1536), "1.50 KiB"));
	CHECK(!strcmp(mt_fmt_duration(buf, sizeof(buf), 1500000), "1.5 ms"));
}

/* A synthetic stream shaped like a busy program: mostly malloc/free pairs
 * with a working set of 64 Ki live blocks, some reallocs and mmaps. */
static int bench(uint64_t n)
{
	struct mt_record *recs = calloc(1 << 20, sizeof(*recs));
	uint64_t live[1 << 16] = {0};
	unsigned seed = 1;
	struct timespec a, b;
	uint64_t done = 0, ts = 1;

	if (!recs)
		return 1;
	start(NULL);
	/* generate in chunks so memory stays small; time only the core */
	double secs = 0;
	while (done < n) {
		size_t m = n - done < (1 << 20) ? n - done : (1 << 20);

		for (size_t i = 0; i < m; i++) {
			struct mt_event *e = &recs[i].ev;
			unsigned k = (unsigned)rand_r(&seed) & 0xffff;

			memset(e, 0, sizeof(*e));
			e->timestamp = ts += 50;
			e->pid = 1000;
			e->tid = 1000 + (k & 3);
			if (i % 64 == 31 || i % 64 == 63) {
				/* a large block: mmap, unmapped 32 later */
				e->kind =
				    i % 64 == 31 ? MT_EV_MMAP : MT_EV_MUNMAP;
				e->addr = 0x7f0000000000ull + ((i / 64) << 20);
				e->size = 1 << 20;
			} else if (live[k]) {
				e->kind = MT_EV_FREE;
				e->addr = live[k];
				live[k] = 0;
			} else {
				e->kind = MT_EV_MALLOC;
				e->addr = live[k] =
				    0x100000000ull + ((uint64_t)k << 8) + 16;
				e->size = 16 + (k & 255);
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (size_t i = 0; i < m; i++)
			mt_recon_event(rc, &recs[i]);
		clock_gettime(CLOCK_MONOTONIC, &b);
		secs += (double)(b.tv_sec - a.tv_sec) +
			(double)(b.tv_nsec - a.tv_nsec) / 1e9;
		done += m;
	}
	json_t *doc = finish();
	printf("%llu events in %.3f s: %.1f M events/s (peak heap %lld)\n",
	       (unsigned long long)n, secs, (double)n / secs / 1e6,
	       get(doc, -1, "heap", "peak"));
	json_decref(doc);
	free(recs);
	return 0;
}

/* Random events of many processes, exec paths and markers among them,
 * written as an artifact of n events (cut short after cut bytes if cut). */
static void write_artifact(const char *path, unsigned seed, int n, off_t cut)
{
	static const char *const paths[] = {"/usr/bin/cc", "a \"q\" name", "",
					    "/bin/sh"};
	static const unsigned kinds[] = {
	    MT_EV_MALLOC,  MT_EV_MALLOC, MT_EV_FREE,   MT_EV_CALLOC,
	    MT_EV_REALLOC, MT_EV_MMAP,	 MT_EV_FORK,   MT_EV_EXEC,
	    MT_EV_EXIT,	   MT_EV_RSS,	 MT_EV_MARKER,
	};
	struct mt_meta meta = {.page_size = 4096,
			       .start_monotonic_ns = 1000,
			       .flags = MT_HDR_ALLOCATORS};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	struct mt_artifact *a = fd >= 0 ? mt_artifact_new(fd, 0) : NULL;

	CHECK(a != NULL);
	if (!a)
		return;
	CHECK_INT(mt_artifact_header(a, &meta), 0);
	for (int i = 0; i < n; i++) {
		unsigned k = kinds[rand_r(&seed) % 11];
		const char *str = k == MT_EV_EXEC     ? paths[rand_r(&seed) % 4]
				  : k == MT_EV_MARKER ? paths[rand_r(&seed) % 4]
						      : NULL;
		struct mt_record rec = {
		    .ev = {.timestamp = 2000 + 10 * (uint64_t)i,
			   .pid = 1 + (uint32_t)(rand_r(&seed) % 30),
			   .kind = (uint16_t)k,
			   .aux =
			       k == MT_EV_RSS ? (uint32_t)rand_r(&seed) % 4 : 0,
			   .addr = 0x1000 * (uint64_t)(rand_r(&seed) % 512),
			   /* an Exec's size is the bytes of arguments
			    * after its path (mt_exec_args): none here */
			   .size = k == MT_EV_EXEC
				       ? 0
				       : (uint64_t)(rand_r(&seed) % 5000),
			   .old_addr =
			       k == MT_EV_FORK ? 1 + rand_r(&seed) % 30 : 0},
		    .str = str,
		    .str_len = str ? (uint32_t)strlen(str) : 0};

		rec.ev.tid = rec.ev.pid;
		CHECK_INT(mt_artifact_record(a, &rec), 0);
	}
	CHECK_INT(mt_artifact_trailer(a, &meta, true, NULL), 0);
	CHECK_INT(mt_artifact_close(a), 0);
	if (cut)
		CHECK_INT(truncate(path, cut), 0);
}

/* The document of path, read record by record (read_ahead false) or by
 * mt_recon_read; *ret: what the last read returned. */
static char *doc_of(const char *path, bool read_ahead, int *ret)
{
	char err[512], *text;
	struct mt_input *in = mt_input_open(path, err, sizeof(err));
	struct mt_record rec;
	json_t *doc;

	CHECK(in != NULL);
	if (!in)
		return NULL;
	rc = mt_recon_new(NULL, mt_input_meta(in), mt_input_format(in));
	if (read_ahead) {
		*ret = mt_recon_read(rc, in);
	} else {
		while ((*ret = mt_input_next(in, &rec)) > 0)
			mt_recon_event(rc, &rec);
	}
	doc = mt_recon_finish(rc, mt_input_meta(in),
			      *ret < 0 ? mt_input_error(in) : NULL);
	mt_recon_free(rc);
	rc = NULL;
	mt_input_close(in);
	text = json_dumps(doc, JSON_SORT_KEYS);
	json_decref(doc);
	return text;
}

/* mt_recon_read holds records read ahead: the same document as applying
 * each as it is read, exec paths and marker names included (they are
 * valid only until the next read), whole and cut short. */
static void test_read_ahead(void)
{
	char path[] = "/tmp/test_reconstruct.XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	for (int round = 0; round < 4; round++) {
		char *one, *ahead;
		int ret_one = 9, ret_ahead = 9;

		write_artifact(path, 7 + round, 3000 + round,
			       round >= 2 ? 20000 + 5001 * round : 0);
		one = doc_of(path, false, &ret_one);
		ahead = doc_of(path, true, &ret_ahead);
		CHECK(one && ahead && !strcmp(one, ahead));
		CHECK(one && strstr(one, "a \\\"q\\\" name"));
		CHECK_INT(ret_one, round >= 2 ? -1 : 0);
		CHECK_INT(ret_ahead, ret_one);
		free(one);
		free(ahead);
	}
	unlink(path);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--bench"))
		return bench(strtoull(argv[2], NULL, 10));
	test_human();
	test_peak_and_leaks();
	test_fork();
	test_exec_and_unknown_free();
	test_realloc();
	test_resolution_keeps_peak();
	test_mapped();
	test_lost();
	test_random_heap();
	test_random_ranges();
	test_random_anything();
	test_write_is_jansson();
	test_leak_ties();
	test_size_counts();
	test_pid_reuse();
	test_read_ahead();
	return test_summary("test_reconstruct");
}
