// SPDX-License-Identifier: MIT
/*
 * test_recon_sites.c - allocation sites inside the reconstruction: values
 * known by construction (two stacks, a realloc, a fork, an exit), and on
 * random traces of several processes the sites add up to the tree's own
 * figures, computed apart: the bytes live at the peak to the heap peak,
 * the bytes and calls allocated to the totals, the bytes leaked to the
 * tree's "not_freed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_reconstruct.h"
#include "formats_test.h"

static struct mt_recon *rc;
static uint64_t now;

static void start(void)
{
	struct mt_meta meta = {.page_size = 4096,
			       .start_monotonic_ns = 1000000,
			       .flags = MT_HDR_ALLOCATORS};
	struct mt_recon_opts opts;

	mt_recon_opts_default(&opts);
	rc = mt_recon_new(&opts, &meta, MT_FMT_ARTIFACT);
	now = 1000000;
}

static void stack(uint64_t id, uint64_t frame)
{
	uint64_t frames[1] = {MT_FRAME(0, frame)};
	struct mt_record rec = {
	    .ev = {.kind = MT_EV_STACK, .addr = id, .size = 1},
	    .frames = frames};

	mt_recon_event(rc, &rec);
}

static void ev(unsigned kind, uint32_t pid, uint64_t addr, uint64_t size,
	       uint64_t old_addr, uint64_t stack_id)
{
	struct mt_record rec = {.ev = {.timestamp = now += 10,
				       .pid = pid,
				       .tid = pid,
				       .kind = (uint16_t)kind,
				       .addr = addr,
				       .size = size,
				       .old_addr = old_addr},
				.stack = stack_id};

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

static long long site_value(json_t *doc, uint64_t id, const char *key)
{
	json_t *site;
	size_t i;

	json_array_foreach(
	    json_object_get(json_object_get(doc, "sites"), "sites"), i, site)
	{
		if ((uint64_t)json_integer_value(
			json_object_get(site, "stack")) == id)
			return json_integer_value(json_object_get(site, key));
	}
	return -1;
}

static long long sum_of(json_t *doc, const char *key)
{
	json_t *site;
	size_t i;
	long long sum = 0;

	json_array_foreach(
	    json_object_get(json_object_get(doc, "sites"), "sites"), i, site)
	{
		sum += json_integer_value(json_object_get(site, key));
	}
	return sum;
}

static long long tree(json_t *doc, const char *a, const char *b)
{
	return json_integer_value(json_object_get(
	    json_object_get(json_object_get(doc, "tree"), a), b));
}

static void known(void)
{
	json_t *doc;

	/* no Stack record: no sites section */
	start();
	ev(MT_EV_MALLOC, 100, 0x1000, 100, 0, 0);
	doc = finish();
	CHECK(json_object_get(doc, "sites") == NULL);
	json_decref(doc);

	start();
	ev(MT_EV_MALLOC, 100, 0x9000, 7, 0, 0); /* before any stack */
	stack(1, 0x1111);
	stack(2, 0x2222);
	ev(MT_EV_MALLOC, 100, 0x1000, 100, 0, 1);
	ev(MT_EV_MALLOC, 100, 0x2000, 200, 0, 2);
	/* a realloc's block belongs to the realloc's stack */
	ev(MT_EV_REALLOC, 100, 0x3000, 300, 0x2000, 1);
	ev(MT_EV_FREE, 100, 0x9000, 0, 0, 0); /* 7 + 100 + 300 = peak 407 */
	ev(MT_EV_FREE, 100, 0x1000, 0, 0, 0);
	ev(MT_EV_FORK, 101, 0, 0, 100, 0);
	ev(MT_EV_MALLOC, 101, 0x5000, 50, 0, 2);
	ev(MT_EV_FREE, 101, 0x3000, 0, 0, 0); /* inherited: not the tree's */
	ev(MT_EV_EXIT, 101, 0, 0, 0, 0);      /* leaks 50 of site 2 */
	doc = finish();			      /* 0x3000 leaks at the end */
	CHECK_INT(tree(doc, "heap", "peak"), 407);
	CHECK_INT(site_value(doc, 0, "peak_bytes"), 7);
	CHECK_INT(site_value(doc, 1, "peak_bytes"), 400);
	CHECK_INT(site_value(doc, 2, "peak_bytes"), 0);
	CHECK_INT(site_value(doc, 1, "allocated_bytes"), 400);
	CHECK_INT(site_value(doc, 1, "allocations"), 2);
	CHECK_INT(site_value(doc, 2, "allocated_bytes"), 250);
	CHECK_INT(site_value(doc, 2, "not_freed_bytes"), 50);
	CHECK_INT(site_value(doc, 1, "not_freed_bytes"), 300);
	CHECK_INT(site_value(doc, 0, "allocated_bytes"), 0); /* before */
	json_decref(doc);
}

/* Random traces: the sites add up to the tree's figures. */
static void sums(unsigned seed)
{
	enum { NBLOCKS = 64 };
	json_t *doc;

	srand(seed);
	start();
	for (uint64_t s = 1; s <= 20; s++)
		stack(s, s);
	ev(MT_EV_FORK, 101, 0, 0, 100, 0);
	for (int i = 0; i < 5000; i++) {
		int proc = rand() % 2, slot = rand() % NBLOCKS;
		uint32_t pid = 100 + (uint32_t)proc;
		uint64_t addr = 0x100000 + (uint64_t)slot * 0x1000 +
				(uint64_t)proc * 0x10000000;
		uint64_t size = 1 + (uint64_t)(rand() % 4000);
		uint64_t st = (uint64_t)(rand() % 21);
		int what = rand() % 10;

		if (what < 5) { /* may reuse a live address: a lost free */
			ev(MT_EV_MALLOC, pid, addr, size, 0, st);
		} else if (what < 8) {
			ev(MT_EV_FREE, pid, addr, 0, 0, 0);
		} else {
			uint64_t to = addr ^ 0x800;

			ev(MT_EV_REALLOC, pid, to, size, addr, st);
		}
	}
	ev(MT_EV_EXIT, 101, 0, 0, 0, 0);
	doc = finish();
	CHECK_INT(sum_of(doc, "peak_bytes"), tree(doc, "heap", "peak"));
	CHECK_INT(sum_of(doc, "allocated_bytes"),
		  tree(doc, "totals", "allocated_bytes"));
	CHECK_INT(sum_of(doc, "allocations"),
		  tree(doc, "totals", "allocations"));
	CHECK(tree(doc, "not_freed", "bytes") > 0);
	CHECK_INT(sum_of(doc, "not_freed_bytes"),
		  tree(doc, "not_freed", "bytes"));
	CHECK_INT(json_integer_value(json_object_get(
		      json_object_get(doc, "sites"), "heap_peak")),
		  tree(doc, "heap", "peak"));
	json_decref(doc);
}

int main(void)
{
	known();
	for (unsigned seed = 1; seed <= 10; seed++)
		sums(seed);
	return test_summary("test_recon_sites");
}
