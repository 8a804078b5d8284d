/* SPDX-License-Identifier: MIT */
/*
 * mt_sites.h - allocation sites: the heap aggregated by call stack.  For
 * each distinct stack: the bytes it held live at the moment of the traced
 * tree's heap peak, the bytes and calls it allocated, and what was still
 * live when its process ended (leaks grouped by site).
 *
 * The reconstruction (mt_reconstruct.h) tells it every change of the
 * tree's heap with the stack of the block concerned; sites keep one
 * counter set per stack and find the live bytes at the peak without ever
 * copying them all: when the heap first falls from a new maximum, a new
 * epoch starts, and each site saves its live bytes the first time it
 * changes in an epoch.  O(1) per event whatever the number of sites.
 *
 * The JSON written (mt_sites_json) is the "sites" section of the
 * timelines document (man/mt-format.5), symbolized with mt_symbolize.h.
 */
#ifndef MT_SITES_H
#define MT_SITES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mt_input.h"
#include "mt_symbolize.h"

enum mt_site_metric {
	MT_SITE_PEAK = 0,  /* bytes live at the tree's heap peak */
	MT_SITE_ALLOCATED, /* bytes allocated */
	MT_SITE_COUNT,	   /* allocation calls */
	MT_SITE_LEAKED,	   /* bytes still live when the process ended */
	MT_SITE_METRICS
};

/* "peak", "allocated", "count", "not-freed" (also read as "leaked", its
 * old name); and back (-1 if none). */
/* what a metric counts, in words for headings ("bytes allocated") */
const char *mt_site_metric_words(enum mt_site_metric m);
const char *mt_site_metric_name(enum mt_site_metric m);
int mt_site_metric_parse(const char *name, enum mt_site_metric *m);

/* The key of each metric in a site's JSON object ("peak_bytes", ...). */
const char *mt_site_metric_key(enum mt_site_metric m);

struct mt_sites;

struct mt_sites *mt_sites_new(void);
void mt_sites_free(struct mt_sites *s);

/* A Stack or CodeFile record: kept for later (other kinds are ignored).
 * 0, or -1 on out-of-memory. */
int mt_sites_describe(struct mt_sites *s, const struct mt_record *rec);

/*
 * The tree's heap changed by a block of size bytes allocated with stack
 * (0: none recorded).  counted: the allocation counts in the totals (in
 * the --section, see mt_recon_opts).  A free, or the loss of a block to a
 * reused address; and a block still live when its process ended (exit or
 * exec: a leak of its site).
 */
void mt_sites_alloc(struct mt_sites *s, uint64_t stack, uint64_t size,
		    bool counted);
void mt_sites_release(struct mt_sites *s, uint64_t stack, uint64_t size);
void mt_sites_leak(struct mt_sites *s, uint64_t stack, uint64_t size);

/* Whether any Stack record or stack id was seen. */
bool mt_sites_any(const struct mt_sites *s);

/* The tree's heap as the sites saw it, and its peak (for checks). */
uint64_t mt_sites_heap(const struct mt_sites *s);
uint64_t mt_sites_heap_peak(const struct mt_sites *s);

/*
 * The "sites" section (new reference): the sites with anything to show,
 * heaviest at the peak first; with max_sites > 0, only the heaviest
 * max_sites by each metric (their union) are written, "omitted" counts the
 * rest.  Every frame symbolized with opts (NULL: defaults).  NULL on
 * out-of-memory.
 */
json_t *mt_sites_json(struct mt_sites *s, const struct mt_sym_opts *opts,
		      unsigned max_sites);

#endif /* MT_SITES_H */
