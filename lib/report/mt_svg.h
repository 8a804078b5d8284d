/* SPDX-License-Identifier: MIT */
/*
 * mt_svg.h - a self-contained SVG plot of a run: the tree's heap, mapped
 * memory (and RSS, physical when present) over time, axes with units, the
 * peak marked, and the heaviest processes' own lines.  Input is a timelines
 * document (mt_reconstruct.h).
 */
#ifndef MT_SVG_H
#define MT_SVG_H

#include <jansson.h>
#include <stdio.h>

struct mt_svg_opts {
	/* the heaviest processes drawn as lines of their own, besides the
	 * tree's total (at most MT_SVG_MAX_PROCS; 0: none) */
	unsigned procs;
};

#define MT_SVG_MAX_PROCS 8

/* XML text: at most max bytes of s (SIZE_MAX: all), <>&" escaped, control
 * characters other than tab left out; the flame graph writes with it too */
void mt_svg_text(FILE *out, const char *s, size_t max);

/* Returns 0, or -1 when writing failed (errno set).  opts may be NULL. */
int mt_svg_write(FILE *out, json_t *doc, const struct mt_svg_opts *opts);

#endif /* MT_SVG_H */
