/* SPDX-License-Identifier: MIT */
/*
 * mt_dhat.h - a run's heap sites (the "sites" section of a timelines
 * document, mt_sites.h) as DHAT's JSON (dhatFileVersion 2, heap mode), as
 * valgrind --tool=dhat and dhat-rs write it and valgrind's dh_view.html
 * and the Firefox Profiler read it.  One program point ("pp") per site:
 *
 *   tb, tbk   bytes and blocks allocated (realloc's new block is one)
 *   tl        its blocks' lifetimes summed (to the free, or to the end
 *             of the process for a block not freed)
 *   mb, mbk   the most bytes the site held at once, and its blocks then
 *   gb, gbk   held at the tree's heap peak (DHAT's t-gmax)
 *   eb, ebk   still held when its process ended (DHAT's t-end)
 *   fs        its frames, innermost first, as indices into "ftbl"
 *
 * Times are in microseconds (dhat-rs's unit): "te" is the trace's
 * length, "tg" when the heap peaked.  mt does not see loads and stores,
 * so there are no access counts ("bkacc": false).
 */
#ifndef MT_DHAT_H
#define MT_DHAT_H

#include <jansson.h>
#include <stdio.h>

/* doc: a timelines document with a heap sites section
 * (mt_top_sites_present).  0, or -1 when memory ran out or writing failed
 * (errno). */
int mt_dhat_write(FILE *out, json_t *doc);

#endif /* MT_DHAT_H */
