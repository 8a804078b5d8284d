/* SPDX-License-Identifier: MIT */
/*
 * mt_html.h - one self-contained HTML page of a run (mt-report --html):
 * the summary, the timeline (hover for values, drag to zoom on a time
 * range), the flame graph (click to zoom, search), the top sites and the
 * processes.  Nothing is fetched: the script and the style are inline
 * (lib/report/html_page.js, html_page.css, built in by html_assets.S),
 * the run's data is one JSON object in the page made from the same
 * functions as --json (mt_report_facts, mt_top_sites_json) and the flame
 * graph's tree (mt_flame_tree_json).
 */
#ifndef MT_HTML_H
#define MT_HTML_H

#include <jansson.h>
#include <stdio.h>

#include "mt_report.h"
#include "mt_top_sites.h"

/* doc: a timelines document; view, sites: what --json would list.
 * 0, or -1 when writing failed (errno). */
int mt_html_write(FILE *out, json_t *doc, const struct mt_view *view,
		  const struct mt_sites_view *sites);

#endif /* MT_HTML_H */
