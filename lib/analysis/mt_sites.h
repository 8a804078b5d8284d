/* SPDX-License-Identifier: MIT */
/*
 * mt_sites.h - allocation sites: memory aggregated by call stack, in two
 * spaces counted apart (the heap's blocks come from mmap and brk too, so
 * one sum would count them twice):
 *
 *   heap    the malloc family's blocks;
 *   mapped  the address space: ranges mapped by mmap, mremap and brk
 *           growth (the tree's "mapped" timeline), released by munmap,
 *           mremap and brk shrinking, whichever stack mapped them.
 *
 * For each distinct stack and space: the bytes it held at the moment of
 * the traced tree's peak in that space, the bytes and calls it allocated,
 * and what was still held when its process ended (leaks grouped by site).
 *
 * The reconstruction (mt_reconstruct.h) tells it every change of the
 * tree's heap or mapped bytes with the stack of the block or range
 * concerned; sites keep one counter set per stack and space and find the
 * bytes at the peak without ever copying them all: when a space first
 * falls from a new maximum, a new epoch starts, and each site saves its
 * bytes the first time they change in an epoch.  O(1) per event whatever
 * the number of sites.
 *
 * The JSON written (mt_sites_json) is the "sites" (heap) and
 * "mapped_sites" sections of the timelines document (man/mt-format.5),
 * symbolized with mt_symbolize.h.
 */
#ifndef MT_SITES_H
#define MT_SITES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mt_input.h"
#include "mt_symbolize.h"

enum mt_site_space {
	MT_SITES_HEAP = 0, /* malloc family */
	MT_SITES_MAPPED,   /* mmap, mremap, brk */
	MT_SITE_SPACES
};

enum mt_site_metric {
	MT_SITE_PEAK = 0,  /* bytes live at the tree's heap peak */
	MT_SITE_ALLOCATED, /* bytes allocated */
	MT_SITE_COUNT,	   /* allocation calls */
	MT_SITE_LEAKED,	   /* bytes still live when the process ended */
	MT_SITE_METRICS
};

/* What a metric counts in a space, in words for headings ("bytes
 * allocated", "bytes mapped"). */
const char *mt_site_metric_words(enum mt_site_space space,
				 enum mt_site_metric m);
/* "peak", "allocated", "count", "not-freed" (also read as "leaked", its
 * old name); and back (-1 if none). */
const char *mt_site_metric_name(enum mt_site_metric m);
int mt_site_metric_parse(const char *name, enum mt_site_metric *m);

/* The key of each metric in a site's JSON object ("peak_bytes", ...). */
const char *mt_site_metric_key(enum mt_site_metric m);

/* "heap", "mapped"; and back (-1 if none). */
const char *mt_site_space_name(enum mt_site_space space);
int mt_site_space_parse(const char *name, enum mt_site_space *space);

/* The timelines document's section of a space: "sites", "mapped_sites";
 * and the key of the tree's peak in it: "heap_peak", "mapped_peak". */
const char *mt_site_space_section(enum mt_site_space space);
const char *mt_site_space_peak_key(enum mt_site_space space);

struct mt_sites;

struct mt_sites *mt_sites_new(void);
void mt_sites_free(struct mt_sites *s);

/* A Stack or CodeFile record: kept for later (other kinds are ignored).
 * 0, or -1 on out-of-memory. */
int mt_sites_describe(struct mt_sites *s, const struct mt_record *rec);

/*
 * The tree's memory in space changed by a block (or range) of size bytes
 * allocated with stack (0: none recorded).  counted: the allocation
 * counts in the totals (in the --section, see mt_recon_opts).  A free,
 * unmapping, or the loss of a block to a reused address; and a block or
 * range still held when its process ended (exit or exec: a leak of its
 * site).
 */
void mt_sites_alloc(struct mt_sites *s, enum mt_site_space space,
		    uint64_t stack, uint64_t size, bool counted);
void mt_sites_release(struct mt_sites *s, enum mt_site_space space,
		      uint64_t stack, uint64_t size);
void mt_sites_leak(struct mt_sites *s, enum mt_site_space space, uint64_t stack,
		   uint64_t size);

/* A heap block of stack ended its life (freed, or its process ended)
 * ns nanoseconds after it was allocated: summed by site (DHAT's total
 * lifetime, mt-report --dhat).  Blocks whose free was lost add nothing. */
void mt_sites_lifetime(struct mt_sites *s, uint64_t stack, uint64_t ns);

/* A heap block of stack was temporary: freed (or reallocated) before its
 * thread's next allocation (recon_temp.c). */
void mt_sites_temporary(struct mt_sites *s, uint64_t stack);

/* Whether any Stack record or stack id was seen. */
bool mt_sites_any(const struct mt_sites *s);

/* The tree's bytes in space as the sites saw them, and their peak (for
 * checks). */
uint64_t mt_sites_heap(const struct mt_sites *s, enum mt_site_space space);
uint64_t mt_sites_heap_peak(const struct mt_sites *s, enum mt_site_space space);

/*
 * A space's section (new reference): the sites with anything to show,
 * heaviest at the peak first; with max_sites > 0, only the heaviest
 * max_sites by each metric (their union) are written, "omitted" counts the
 * rest.  Every frame symbolized with opts (NULL: defaults; the first
 * call's opts serve every later call, each frame is symbolized once).
 * NULL on out-of-memory.
 */
json_t *mt_sites_json(struct mt_sites *s, enum mt_site_space space,
		      const struct mt_sym_opts *opts, unsigned max_sites);

#endif /* MT_SITES_H */
