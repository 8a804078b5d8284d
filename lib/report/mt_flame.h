/* SPDX-License-Identifier: MIT */
/*
 * mt_flame.h - the allocation sites of a run (the "sites" section of a
 * timelines document, mt_sites.h) as a flame graph: each frame as wide as
 * what the stacks through it hold (bytes live at the heap peak, allocated,
 * calls, or leaked), callers above their callees (an icicle: the widest
 * frames stay at the top of a tall picture).  Two shapes:
 *
 *   folded  the text flamegraph.pl, inferno and speedscope read: one line
 *           per stack, frames root first separated by ';', then a space
 *           and the value;
 *   SVG     self-contained (no script, no external font or style), each
 *           frame's name and value in its <title> (shown on hover).
 */
#ifndef MT_FLAME_H
#define MT_FLAME_H

#include <jansson.h>
#include <stdio.h>

#include "mt_sites.h"

/*
 * A long C++ name as a flame graph's frame shows it: template arguments
 * and parameters elided ("std::vector<...>::_M_realloc_insert<...>(...)"),
 * operators and "(anonymous namespace)" kept; the full name stays the
 * frame's name (its tooltip, folded stacks, --json).  Into buf.
 */
char *mt_flame_short_name(const char *name, char *buf, size_t len);

/* The frame above a stack the tracer cut short: "[truncated in FILE]",
 * the code file of its outermost recorded frame, or "[truncated]"; the
 * one name of that frame in every output.  Into buf. */
const char *mt_flame_truncated_name(json_t *site, char *buf, size_t len);

/* doc: a timelines document; space: its heap or its address-space sites.
 * 0, or -1 when writing failed (errno). */
int mt_flame_folded(FILE *out, json_t *doc, enum mt_site_space space,
		    enum mt_site_metric m);
int mt_flame_svg(FILE *out, json_t *doc, enum mt_site_space space,
		 enum mt_site_metric m);

/*
 * The same tree for a script (mt-report --html): {"n": name, "v": [bytes
 * at the peak, bytes allocated, calls, bytes not freed] (mt_site_metric's
 * order), "c": [children, by name]}, the root named "all".  A frame with
 * nothing by a metric is still listed (its value 0).  NULL on
 * out-of-memory.
 */
json_t *mt_flame_tree_json(json_t *doc, enum mt_site_space space);

#endif /* MT_FLAME_H */
