/* SPDX-License-Identifier: MIT */
/*
 * mt_report.h - what mt-report says about a run: the human summary, the
 * JSON facts for scripts, CI gates and the comparison of two runs.  Every
 * function works on a timelines document (mt_reconstruct.h); mt_report_load
 * makes one from any stage's output.
 */
#ifndef MT_REPORT_H
#define MT_REPORT_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mt_reconstruct.h"
#include "mt_sites.h"

/*
 * Load FILE ("-" or NULL: stdin): mt-reconstruct's timelines JSON as is,
 * or a raw stream / artifact / JSON Lines / memtrack artifact reconstructed
 * in-process.  Returns NULL when the input is unusable, with the reason in
 * err ("NAME: byte N: what").  A truncated stream is usable: the document
 * says "complete": false.
 */
json_t *mt_report_load(const char *path, const struct mt_recon_opts *opts,
		       char *err, size_t errlen);

/* How much of a run a report lists; MT_ALL: everything there is. */
#define MT_ALL UINT_MAX

struct mt_view {
	unsigned top;	/* processes, heaviest first */
	unsigned leaks; /* blocks not freed, largest first */
};

/* The human summary. */
void mt_report_text(FILE *out, json_t *doc, const struct mt_view *view);

/* The same facts for scripts (new reference). */
json_t *mt_report_facts(json_t *doc, const struct mt_view *view);

/*
 * The n heaviest processes (the table's order) into procs, with the names
 * the table gives them (valid while doc is).  Returns how many.
 */
size_t mt_report_heaviest(json_t *doc, size_t n, json_t **procs,
			  const char **names);

/* Why doc does not cover the whole run (truncated input), or NULL. */
const char *mt_report_incomplete(json_t *doc);

/* Thresholds; a gate is on when its has_ flag is set. */
struct mt_gates {
	bool has_peak_heap, has_total_allocated, has_allocations, has_not_freed,
	    has_peak_rss;
	uint64_t max_peak_heap, max_total_allocated, max_allocations,
	    max_not_freed, max_peak_rss;
	bool strict; /* any lost event, or an incomplete trace, fails */
};

bool mt_gates_any(const struct mt_gates *g);

/*
 * Check doc against the gates: 0 = all pass, 1 = one failed, with a
 * one-line reason in reason.  results (may be NULL) receives one object
 * per gate for --json.
 */
int mt_report_gates(json_t *doc, const struct mt_gates *g, char *reason,
		    size_t len, json_t *results);

/* The metrics --compare shows and --max-growth limits, in table order. */
enum mt_metric {
	MT_PEAK_HEAP,
	MT_TOTAL_ALLOCATED,
	MT_ALLOCATIONS,
	MT_NOT_FREED,
	MT_PEAK_MAPPED,
	MT_PEAK_RSS,
	MT_PEAK_PHYSICAL,
	MT_METRICS
};

/* Growth limits in percent per metric; < 0: none. */
struct mt_growth {
	double max_pct[MT_METRICS];
};

void mt_growth_none(struct mt_growth *g);
bool mt_growth_any(const struct mt_growth *g);

/*
 * --max-growth SPEC: comma-separated items, each PCT (every metric) or
 * METRIC=PCT (peak_heap=2%,peak_rss=10%; names as in --json); later items
 * win.  0, or -1 with what was wrong in err.
 */
int mt_growth_parse(const char *spec, struct mt_growth *g, char *err,
		    size_t len);

/*
 * Compare two runs: write a table (or, with as_json, a JSON object dumped
 * with json_flags) to out.  Returns 1 and a reason when a metric grew by
 * more than its limit; else 0.
 */
int mt_report_compare(FILE *out, json_t *base, json_t *head,
		      const struct mt_growth *limits, bool as_json,
		      size_t json_flags, char *reason, size_t len);

/* The first metric that grew by more than its limit (an enum mt_metric),
 * or -1: what mt_report_compare's verdict failed on. */
int mt_report_growth_failed(json_t *base, json_t *head,
			    const struct mt_growth *limits);

/* The first gate doc fails on a value (an enum mt_metric), or -1 (none,
 * or only --strict). */
int mt_report_gate_failed(json_t *doc, const struct mt_gates *g);

/* The allocation sites that make up metric m: their space and the site
 * metric (total_allocated: the bytes each site allocated).  false for
 * RSS and physical memory, which no site holds. */
bool mt_metric_sites(enum mt_metric m, enum mt_site_space *space,
		     enum mt_site_metric *by);

/* The command line, shell-quoted so that it can be pasted.  Into buf. */
const char *mt_report_command(json_t *doc, char *buf, size_t len);

/* doc's value at a dotted path ("tree.heap.peak"), or NULL. */
json_t *mt_json_path(json_t *doc, const char *path);

/* The same as an unsigned integer, def when absent or not a number. */
uint64_t mt_json_u64(json_t *doc, const char *path, uint64_t def);

#endif /* MT_REPORT_H */
