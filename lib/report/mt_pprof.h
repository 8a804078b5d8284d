/* SPDX-License-Identifier: MIT */
/*
 * mt_pprof.h - a run's heap sites (the "sites" section of a timelines
 * document, mt_sites.h) as a heap profile in pprof's format: a gzipped
 * perftools.profiles.Profile (lib/report/profile.proto, google/pprof's
 * schema), which go tool pprof, speedscope, Grafana Pyroscope and Parca
 * read.  Go's heap sample types, one sample per site:
 *
 *   alloc_objects/count  allocation calls (realloc is one)
 *   alloc_space/bytes    bytes allocated
 *   inuse_objects/count  blocks live at the tree's heap peak (or at exit)
 *   inuse_space/bytes    bytes live then
 *
 * Each frame is a function with its source file and line; the frames a
 * return address inlines are one location's lines, innermost first.
 */
#ifndef MT_PPROF_H
#define MT_PPROF_H

#include <jansson.h>
#include <stdio.h>

/* What "inuse" means: live at the tree's heap peak, or still live when
 * each process ended (not freed). */
enum mt_pprof_inuse { MT_PPROF_INUSE_PEAK = 0, MT_PPROF_INUSE_EXIT };

/* "peak", "exit"; and back (-1 if none). */
const char *mt_pprof_inuse_name(enum mt_pprof_inuse inuse);
int mt_pprof_inuse_parse(const char *name, enum mt_pprof_inuse *inuse);

/* doc: a timelines document with a heap sites section
 * (mt_top_sites_present).  0, or -1 when memory ran out or writing failed
 * (errno). */
int mt_pprof_write(FILE *out, json_t *doc, enum mt_pprof_inuse inuse);

#endif /* MT_PPROF_H */
