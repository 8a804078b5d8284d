/* SPDX-License-Identifier: MIT */
/*
 * mt_reconstruct.h - rebuild heap and mapped-memory timelines, totals and
 * leaks from an event stream, per process and for the whole traced tree,
 * and write them as mt-reconstruct's timelines JSON (man/mt-format.5,
 * section TIMELINES).
 *
 * Memory stays proportional to what is live (allocations, mappings,
 * processes) plus a bounded number of timeline points, never to the length
 * of the trace (except with MT_RES_EXACT, which keeps every point).
 */
#ifndef MT_RECONSTRUCT_H
#define MT_RECONSTRUCT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mt_input.h"
#include "mt_symbolize.h"

#define MT_TIMELINES_FORMAT  "mt-timelines"
#define MT_TIMELINES_VERSION 1

enum mt_resolution_mode {
	MT_RES_ADAPTIVE = 0, /* at most max_points buckets, width doubles */
	MT_RES_FIXED,	     /* buckets of resolution_ns */
	MT_RES_EXACT,	     /* one point per distinct timestamp */
};

struct mt_recon_opts {
	enum mt_resolution_mode mode;
	uint64_t resolution_ns;	 /* MT_RES_FIXED */
	unsigned max_points;	 /* MT_RES_ADAPTIVE: buckets, tree series */
	unsigned proc_points;	 /* MT_RES_ADAPTIVE: per-process series */
	unsigned max_leaks;	 /* leaked blocks listed for the tree */
	unsigned max_proc_leaks; /* leaked blocks listed per process */
	unsigned top_sizes;	 /* most frequent sizes listed */
	unsigned series_procs;	 /* processes whose series are written:
				    the heaviest N (UINT_MAX: all) */
	const char *section;	 /* count only between markers NAME (or
				    NAME-start) and NAME-end; NULL: all */
	unsigned doc_procs;	 /* mt_recon_finish: only the heaviest N
				    processes in "processes" (0: all);
				    "processes_count" still counts all */
	/* allocation sites (runs traced with stacks, mt_sites.h) */
	unsigned max_sites;	    /* the heaviest N by each metric (0: all) */
	struct mt_sym_opts symbols; /* where their frames are symbolized */
	/* mt_recon_read calls progress every MT_RECON_PROGRESS_EVERY
	 * records read (NULL: never), for a progress line */
	void (*progress)(void *arg, const struct mt_input *in,
			 uint64_t records);
	void *progress_arg;
};

#define MT_RECON_PROGRESS_EVERY (1u << 16)

/* Defaults: adaptive, 2000 points for the tree and 128 per process, 20
 * leaks for the tree and 5 per process, 10 sizes, series of the 20
 * heaviest processes. */
void mt_recon_opts_default(struct mt_recon_opts *opts);

struct mt_recon;

/* meta: the stream's header (copied); fmt: what it was read from. */
struct mt_recon *mt_recon_new(const struct mt_recon_opts *opts,
			      const struct mt_meta *meta, enum mt_format fmt);

/* Apply one event.  Never fails: odd events are counted, not fatal. */
void mt_recon_event(struct mt_recon *r, const struct mt_record *rec);

/*
 * Apply every record of in, reading two ahead so that what they will touch
 * is fetched while the ones before are applied.  Returns what the last
 * mt_input_next() did: 0 at a clean end, -1 on a truncated or corrupt
 * stream (mt_input_error()).
 */
int mt_recon_read(struct mt_recon *r, struct mt_input *in);

/*
 * End of input: meta holds the trailer fields (if any); error is NULL for a
 * clean end, else why the stream stopped (the output says "complete":
 * false).  Returns the timelines document (new reference).
 */
json_t *mt_recon_finish(struct mt_recon *r, const struct mt_meta *meta,
			const char *error);

/*
 * The same document written to out (jansson dump flags) one process at a
 * time, so that a trace with many processes never sits in memory as one
 * JSON tree.  Ends with a newline.  0, or -1 on a write error.
 */
int mt_recon_write(struct mt_recon *r, const struct mt_meta *meta,
		   const char *error, FILE *out, size_t flags);

/* With opts.section: whether the section's opening marker was seen. */
bool mt_recon_section_seen(const struct mt_recon *r);

void mt_recon_free(struct mt_recon *r);

/*
 * Read every record of in and reconstruct.  Returns the document, or NULL
 * on out-of-memory.  A truncated or corrupt stream still yields a document
 * (marked incomplete); *complete tells which.
 */
json_t *mt_recon_input(struct mt_input *in, const struct mt_recon_opts *opts,
		       bool *complete);

#endif /* MT_RECONSTRUCT_H */
