// SPDX-License-Identifier: MIT
/*
 * test_sites.c - allocation sites: totals, leaks and the live bytes at the
 * heap peak on a sequence known by construction, and on random sequences
 * against a reference that copies every site's counters at each new
 * maximum (what the lazy epochs in sites.c avoid doing).
 *
 *   test_sites              run the tests (exit 0 = pass)
 *   test_sites --bench N    time N random heap changes over 1000 sites
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mt_sites.h"
#include "formats_test.h"

static void stack(struct mt_sites *s, uint64_t id, unsigned nframes,
		  bool truncated)
{
	uint64_t frames[8];
	struct mt_record rec = {
	    .ev = {.kind = MT_EV_STACK,
		   .addr = id,
		   .size = nframes,
		   .flags = truncated ? MT_STACK_TRUNCATED : 0},
	    .frames = frames};

	for (unsigned i = 0; i < nframes; i++)
		frames[i] = MT_FRAME(0, 0x1000 * id + i);
	CHECK_INT(mt_sites_describe(s, &rec), 0);
}

static json_t *site_by_stack(json_t *doc, uint64_t id)
{
	size_t i;
	json_t *site;

	json_array_foreach(json_object_get(doc, "sites"), i, site)
	{
		if ((uint64_t)json_integer_value(
			json_object_get(site, "stack")) == id)
			return site;
	}
	return NULL;
}

static long long metric(json_t *doc, uint64_t id, const char *key)
{
	json_t *site = site_by_stack(doc, id);

	return site ? json_integer_value(json_object_get(site, key)) : -1;
}

/* Known by construction: site 1 holds 100 B at the peak (300 B), site 2
 * 200 B; site 2 later allocates more but the heap never gets back up. */
static void known_sequence(void)
{
	struct mt_sites *s = mt_sites_new();
	json_t *doc;

	stack(s, 1, 3, false);
	stack(s, 2, 2, true);
	CHECK(mt_sites_any(s));
	mt_sites_alloc(s, MT_SITES_HEAP, 1, 100, true);
	mt_sites_alloc(s, MT_SITES_HEAP, 2, 200, true);
	mt_sites_release(s, MT_SITES_HEAP, 2, 200); /* leaves the peak: 300 */
	mt_sites_alloc(s, MT_SITES_HEAP, 2, 150, true);
	mt_sites_alloc(s, MT_SITES_HEAP, 2, 40, true); /* 290: below the peak */
	mt_sites_alloc(s, MT_SITES_HEAP, 3, 10,
		       false); /* outside the section */
	mt_sites_leak(s, MT_SITES_HEAP, 2, 150);
	mt_sites_leak(s, MT_SITES_HEAP, 3, 10);
	mt_sites_release(s, MT_SITES_HEAP, 1, 100);
	CHECK_INT(mt_sites_heap_peak(s, MT_SITES_HEAP), 300);
	CHECK_INT(mt_sites_heap(s, MT_SITES_HEAP), 40);

	doc = mt_sites_json(s, MT_SITES_HEAP, NULL, 0);
	CHECK_INT(json_integer_value(json_object_get(doc, "count")), 3);
	CHECK_INT(json_integer_value(json_object_get(doc, "heap_peak")), 300);
	CHECK_INT(metric(doc, 1, "peak_bytes"), 100);
	CHECK_INT(metric(doc, 2, "peak_bytes"), 200);
	CHECK_INT(metric(doc, 3, "peak_bytes"), 0);
	CHECK_INT(metric(doc, 1, "allocated_bytes"), 100);
	CHECK_INT(metric(doc, 2, "allocated_bytes"), 390);
	CHECK_INT(metric(doc, 3, "allocated_bytes"), 0);
	CHECK_INT(metric(doc, 2, "allocations"), 3);
	CHECK_INT(metric(doc, 3, "allocations"), 0);
	CHECK_INT(metric(doc, 2, "not_freed_bytes"), 150);
	CHECK_INT(metric(doc, 2, "not_freed_blocks"), 1);
	CHECK_INT(metric(doc, 3, "not_freed_bytes"), 10);
	/* heaviest at the peak first */
	CHECK_INT(
	    json_integer_value(json_object_get(
		json_array_get(json_object_get(doc, "sites"), 0), "stack")),
	    2);
	CHECK(
	    json_is_true(json_object_get(site_by_stack(doc, 2), "truncated")));
	CHECK_INT(
	    json_array_size(json_object_get(site_by_stack(doc, 1), "frames")),
	    3);
	/* file 0: the address itself, never a name */
	CHECK_STR(json_string_value(json_object_get(
		      json_array_get(
			  json_object_get(site_by_stack(doc, 1), "frames"), 1),
		      "function")),
		  "0x1001");
	json_decref(doc);

	/* only the heaviest 1 by each metric: 1 (peak), 2 (the rest)... */
	doc = mt_sites_json(s, MT_SITES_HEAP, NULL, 1);
	CHECK_INT(json_array_size(json_object_get(doc, "sites")), 1);
	CHECK_INT(json_integer_value(json_object_get(doc, "omitted")), 2);
	json_decref(doc);
	mt_sites_free(s);

	/* a trace that ends at its peak: what is live then */
	s = mt_sites_new();
	mt_sites_alloc(s, MT_SITES_HEAP, 1, 10, true);
	mt_sites_release(s, MT_SITES_HEAP, 1, 10);
	mt_sites_alloc(s, MT_SITES_HEAP, 2, 30, true);
	doc = mt_sites_json(s, MT_SITES_HEAP, NULL, 0);
	CHECK_INT(metric(doc, 1, "peak_bytes"), 0);
	CHECK_INT(metric(doc, 2, "peak_bytes"), 30);
	json_decref(doc);
	mt_sites_free(s);

	enum mt_site_metric m;

	CHECK_INT(mt_site_metric_parse("not-freed", &m), 0);
	CHECK_INT(m, MT_SITE_LEAKED);
	CHECK_STR(mt_site_metric_name(MT_SITE_LEAKED), "not-freed");
	m = MT_SITE_PEAK; /* the old name still reads */
	CHECK_INT(mt_site_metric_parse("leaked", &m), 0);
	CHECK_INT(m, MT_SITE_LEAKED);
	CHECK_INT(mt_site_metric_parse("bytes", &m), -1);
	CHECK_STR(mt_site_metric_key(MT_SITE_COUNT), "allocations");
}

/* The heap and the address space are counted apart: each has its own
 * peak (the heap's blocks come from mmap too), and one Stack record names
 * the frames of both. */
static void two_spaces(void)
{
	struct mt_sites *s = mt_sites_new();
	enum mt_site_space sp;
	json_t *heap, *mapped;

	stack(s, 1, 2, false);
	stack(s, 2, 1, false);
	mt_sites_alloc(s, MT_SITES_HEAP, 1, 100, true);
	mt_sites_alloc(s, MT_SITES_MAPPED, 2, 8192, true);
	mt_sites_release(s, MT_SITES_HEAP, 1, 100);
	mt_sites_alloc(s, MT_SITES_HEAP, 1, 50, true);
	mt_sites_release(s, MT_SITES_MAPPED, 2, 4096);
	mt_sites_alloc(s, MT_SITES_MAPPED, 1, 4096, true);
	mt_sites_alloc(s, MT_SITES_MAPPED, 1, 4096, true); /* the peak: 12 K */
	mt_sites_leak(s, MT_SITES_MAPPED, 2, 4096);
	CHECK_INT(mt_sites_heap_peak(s, MT_SITES_HEAP), 100);
	CHECK_INT(mt_sites_heap(s, MT_SITES_HEAP), 50);
	CHECK_INT(mt_sites_heap_peak(s, MT_SITES_MAPPED), 12288);
	CHECK_INT(mt_sites_heap(s, MT_SITES_MAPPED), 8192);

	heap = mt_sites_json(s, MT_SITES_HEAP, NULL, 0);
	mapped = mt_sites_json(s, MT_SITES_MAPPED, NULL, 0);
	CHECK_INT(json_integer_value(json_object_get(heap, "count")), 1);
	CHECK_INT(json_integer_value(json_object_get(heap, "heap_peak")), 100);
	CHECK_INT(metric(heap, 1, "peak_bytes"), 100);
	CHECK_INT(metric(heap, 1, "allocations"), 2);
	CHECK_INT(json_integer_value(json_object_get(mapped, "count")), 2);
	CHECK_INT(json_integer_value(json_object_get(mapped, "mapped_peak")),
		  12288);
	CHECK(!json_object_get(mapped, "heap_peak"));
	CHECK_INT(metric(mapped, 1, "peak_bytes"), 8192);
	CHECK_INT(metric(mapped, 1, "allocations"), 2);
	CHECK_INT(metric(mapped, 2, "peak_bytes"), 4096);
	CHECK_INT(metric(mapped, 2, "allocated_bytes"), 8192);
	CHECK_INT(metric(mapped, 2, "not_freed_bytes"), 4096);
	CHECK_INT(json_array_size(
		      json_object_get(site_by_stack(mapped, 1), "frames")),
		  2);
	CHECK_INT(json_array_size(
		      json_object_get(site_by_stack(mapped, 2), "frames")),
		  1);
	json_decref(heap);
	json_decref(mapped);
	mt_sites_free(s);

	CHECK_INT(mt_site_space_parse("mapped", &sp), 0);
	CHECK_INT(sp, MT_SITES_MAPPED);
	CHECK_INT(mt_site_space_parse("mmap", &sp), -1);
	CHECK_STR(mt_site_space_section(MT_SITES_MAPPED), "mapped_sites");
	CHECK_STR(mt_site_metric_words(MT_SITES_MAPPED, MT_SITE_LEAKED),
		  "bytes not unmapped");
	CHECK_STR(mt_site_metric_words(MT_SITES_HEAP, MT_SITE_LEAKED),
		  "bytes not freed");
}

#define NSITES 50

/* Random heap changes; the reference copies every site at each maximum. */
static void random_sequences(unsigned seed)
{
	uint64_t live[NSITES] = {0}, at_peak[NSITES] = {0}, heap = 0, peak = 0;
	struct mt_sites *s = mt_sites_new();
	json_t *doc;
	int bad = 0;

	srand(seed);
	for (int i = 0; i < 20000; i++) {
		unsigned site = (unsigned)rand() % NSITES;
		uint64_t size = (uint64_t)(rand() % 1000);

		if (rand() % 100 < 52 || !live[site]) {
			mt_sites_alloc(s, MT_SITES_HEAP, site, size, true);
			live[site] += size;
			heap += size;
		} else {
			size = size % (live[site] + 1);
			if (rand() % 10)
				mt_sites_release(s, MT_SITES_HEAP, site, size);
			else
				mt_sites_leak(s, MT_SITES_HEAP, site, size);
			live[site] -= size;
			heap -= size;
		}
		if (heap > peak) {
			peak = heap;
			memcpy(at_peak, live, sizeof(live));
		}
	}
	CHECK_INT(mt_sites_heap(s, MT_SITES_HEAP), heap);
	CHECK_INT(mt_sites_heap_peak(s, MT_SITES_HEAP), peak);
	doc = mt_sites_json(s, MT_SITES_HEAP, NULL, 0);
	for (unsigned i = 0; i < NSITES; i++) {
		long long got = metric(doc, i, "peak_bytes");

		if (got != (long long)at_peak[i] &&
		    !(got == -1 && at_peak[i] == 0))
			bad++;
	}
	CHECK_INT(bad, 0);
	json_decref(doc);
	mt_sites_free(s);
}

static int bench(long n)
{
	struct mt_sites *s = mt_sites_new();
	struct timespec t0, t1;
	uint64_t x = 88172645463325252ull;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (x % 100 < 52)
			mt_sites_alloc(s, MT_SITES_HEAP, x % 1000, 64, true);
		else
			mt_sites_release(s, MT_SITES_HEAP, x % 1000, 64);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%ld heap changes in %.3f s (%.1f ns each)\n", n,
	       (double)(t1.tv_sec - t0.tv_sec) +
		   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
		(double)(t1.tv_nsec - t0.tv_nsec)) /
		   (double)n);
	mt_sites_free(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--bench"))
		return bench(atol(argv[2]));
	known_sequence();
	two_spaces();
	for (unsigned seed = 1; seed <= 20; seed++)
		random_sequences(seed);
	return test_summary("test_sites");
}
