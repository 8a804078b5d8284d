/* SPDX-License-Identifier: MIT */
/*
 * fuzz_report - libFuzzer entry: any bytes through what mt-report does
 * with them: an event stream is reconstructed (with and without a
 * --section) and reported as text, JSON facts, SVG and HTML; timelines
 * JSON is reported as is.  Nothing may crash, hang, leak or read out of
 * bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mt_flame.h"
#include "mt_html.h"
#include "mt_reconstruct.h"
#include "mt_report.h"
#include "mt_svg.h"
#include "mt_top_sites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void report_all(json_t *doc, FILE *sink)
{
	struct mt_gates g = {.has_peak_heap = true,
			     .has_peak_rss = true,
			     .has_not_freed = true,
			     .strict = true};
	struct mt_view view = {.top = 3, .leaks = 3};
	struct mt_growth growth;
	char reason[256];
	json_t *facts = mt_report_facts(doc, &view);
	json_t *results = json_array();

	mt_growth_none(&growth);
	mt_growth_parse("5%,peak_rss=10", &growth, reason, sizeof(reason));
	mt_report_text(sink, doc, &view);
	mt_svg_write(sink, doc, &(struct mt_svg_opts){.procs = 3});
	mt_report_gates(doc, &g, reason, sizeof(reason), results);
	mt_report_compare(sink, doc, doc, &growth, false, 0, reason,
			  sizeof(reason));
	mt_report_compare(sink, doc, doc, &growth, true, JSON_COMPACT, reason,
			  sizeof(reason));
	/* the allocation sites of both spaces: tables, growth, flame graphs */
	for (int sp = 0; sp < MT_SITE_SPACES; sp++) {
		struct mt_sites_view sv = {.space = (enum mt_site_space)sp,
					   .sort = MT_SITE_LEAKED,
					   .top = 3,
					   .stack_depth = 2};
		json_t *top = mt_top_sites_json(doc, &sv);
		json_t *grown = mt_sites_growth(doc, doc, &sv);

		mt_top_sites_text(sink, doc, &sv);
		mt_sites_growth_text(sink, grown, &sv);
		mt_flame_folded(sink, doc, sv.space, MT_SITE_PEAK);
		mt_flame_svg(sink, doc, sv.space, MT_SITE_COUNT);
		json_decref(top);
		json_decref(grown);
	}
	/* the HTML page: the facts, series and flame trees as its data */
	mt_html_write(sink, doc, &view,
		      &(struct mt_sites_view){.sort = MT_SITE_PEAK, .top = 3});
	json_decref(results);
	json_decref(facts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	char err[1024];

	if (!sink)
		sink = fopen("/dev/null", "w");
	if (size == 0)
		return 0;
	if (data[0] == '{') {
		json_error_t jerr;
		json_t *doc = json_loadb((const char *)data, size, 0, &jerr);

		if (doc)
			report_all(doc, sink);
		json_decref(doc);
	}
	for (int pass = 0; pass < 2; pass++) {
		FILE *f = fmemopen((void *)data, size, "r");
		struct mt_recon_opts opts;
		struct mt_input *in;
		json_t *doc;

		if (!f)
			return 0;
		in = mt_input_fopen(f, "fuzz", err, sizeof(err));
		if (!in)
			return 0;
		mt_recon_opts_default(&opts);
		opts.max_points = 8;
		opts.proc_points = 4;
		opts.series_procs = 2;
		opts.section = pass ? "s" : NULL;
		doc = mt_recon_input(in, &opts, NULL);
		mt_input_close(in);
		if (doc)
			report_all(doc, sink);
		json_decref(doc);
	}
	return 0;
}
