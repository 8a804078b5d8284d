/* SPDX-License-Identifier: MIT */
/*
 * mt_top_sites.h - mt-report's allocation sites: the heaviest sites of a
 * run with their stacks (text and JSON), and the sites whose contribution
 * grew most between two runs.  Input: the "sites" (heap) or "mapped_sites"
 * section of a timelines document (mt_sites.h); a run traced without
 * stacks has none, and every function here then writes nothing (or JSON
 * null).
 */
#ifndef MT_TOP_SITES_H
#define MT_TOP_SITES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "mt_sites.h"

struct mt_sites_view {
	enum mt_site_space space; /* whose sites */
	enum mt_site_metric sort; /* heaviest first by this */
	unsigned top;		  /* sites shown (MT_ALL: all) */
	unsigned stack_depth;	  /* frames shown per site in text, 0: all */
};

/* Whether doc has a sites section (the run was traced with stacks). */
bool mt_top_sites_present(json_t *doc);

/* "top allocation sites" (heap) or "top address-space sites" (mapped):
 * each with its values and innermost frames.  The address space's are
 * written only when it has any. */
void mt_top_sites_text(FILE *out, json_t *doc, const struct mt_sites_view *v);

/* The same for --json, every frame (new reference; null without sites). */
json_t *mt_top_sites_json(json_t *doc, const struct mt_sites_view *v);

/*
 * The sites whose value (v->sort) grew most from base to head, matched by
 * their stacks' function names: an array (new reference) of objects
 * {"frames": [names, innermost first], "base", "head", "growth"}, largest
 * growth first, at most v->top; null when either run has no sites.
 */
json_t *mt_sites_growth(json_t *base, json_t *head,
			const struct mt_sites_view *v);

/* That array as text under a heading. */
void mt_sites_growth_text(FILE *out, json_t *growth,
			  const struct mt_sites_view *v);

#endif /* MT_TOP_SITES_H */
