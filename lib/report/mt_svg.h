/* SPDX-License-Identifier: MIT */
/*
 * mt_svg.h - a self-contained SVG plot of a run: the tree's heap, mapped
 * memory (and RSS, physical when present) over time, axes with units, the
 * peak marked.  Input is a timelines document (mt_reconstruct.h).
 */
#ifndef MT_SVG_H
#define MT_SVG_H

#include <jansson.h>
#include <stdio.h>

/* Returns 0, or -1 when writing failed (errno set). */
int mt_svg_write(FILE *out, json_t *doc);

#endif /* MT_SVG_H */
