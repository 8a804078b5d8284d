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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mt_reconstruct.h"

/*
 * Load FILE ("-" or NULL: stdin): mt-reconstruct's timelines JSON as is,
 * or a raw stream / artifact / JSON Lines / memtrack artifact reconstructed
 * in-process.  Returns NULL when the input is unusable, with the reason in
 * err ("NAME: byte N: what").  A truncated stream is usable: the document
 * says "complete": false.
 */
json_t *mt_report_load(const char *path, const struct mt_recon_opts *opts,
		       char *err, size_t errlen);

/* The human summary: the top processes, heaviest first (top 0 = all). */
void mt_report_text(FILE *out, json_t *doc, unsigned top);

/* The same facts for scripts (new reference). */
json_t *mt_report_facts(json_t *doc, unsigned top);

/* Thresholds; a gate is on when its has_ flag is set. */
struct mt_gates {
	bool has_peak_heap, has_total_allocated, has_allocations, has_leaked,
	    has_peak_rss;
	uint64_t max_peak_heap, max_total_allocated, max_allocations,
	    max_leaked, max_peak_rss;
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

/*
 * Compare two runs: write a table (or, with as_json, a JSON object) to
 * out.  With max_growth >= 0, returns 1 and a reason when a metric grew by
 * more than max_growth percent; else 0.
 */
int mt_report_compare(FILE *out, json_t *base, json_t *head, double max_growth,
		      bool as_json, char *reason, size_t len);

/* A short name for the run, e.g. the command line.  Into buf. */
const char *mt_report_command(json_t *doc, char *buf, size_t len);

/* doc's value at a dotted path ("tree.heap.peak"), or NULL. */
json_t *mt_json_path(json_t *doc, const char *path);

/* The same as an unsigned integer, def when absent or not a number. */
uint64_t mt_json_u64(json_t *doc, const char *path, uint64_t def);

#endif /* MT_REPORT_H */
