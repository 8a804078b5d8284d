// SPDX-License-Identifier: MIT
/*
 * html.c - mt-report --html: one page, nothing fetched (see mt_html.h).
 * The page is a skeleton, the run's data as JSON, and the script that
 * draws the data into the skeleton when the page is opened.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mt_flame.h"
#include "mt_html.h"
#include "mt_svg.h"
#include "mt_version.h"

/* html_assets.S */
extern const char mt_html_js[], mt_html_js_end[];
extern const char mt_html_css[], mt_html_css_end[];

/* A series' peak and points, as the timelines have them (null when the
 * run has no such series). */
static json_t *series(json_t *doc, const char *path)
{
	json_t *s = mt_json_path(doc, path);

	if (!json_is_object(s))
		return json_null();
	return json_pack("{s:O, s:O, s:O, s:O, s:O}", "peak",
			 json_object_get(s, "peak"), "peak_t_ns",
			 json_object_get(s, "peak_t_ns"), "final",
			 json_object_get(s, "final"), "bucket_ns",
			 json_object_get(s, "bucket_ns"), "points",
			 json_object_get(s, "points"));
}

/* The heaviest processes' own heap and RSS lines, when the timelines
 * kept them (mt-reconstruct keeps points for the heaviest only). */
static json_t *process_series(json_t *doc)
{
	json_t *procs[8], *out = json_array();
	const char *names[8];
	size_t n = mt_report_heaviest(doc, 8, procs, names);

	for (size_t i = 0; i < n; i++) {
		json_t *heap = mt_json_path(procs[i], "heap.points");
		json_t *rss = mt_json_path(procs[i], "rss.total.points");

		if (!json_array_size(heap) && !json_array_size(rss))
			continue;
		json_array_append_new(
		    out, json_pack("{s:O, s:s, s:o, s:o}", "pid",
				   json_object_get(procs[i], "pid"), "name",
				   names[i], "heap", series(procs[i], "heap"),
				   "rss", series(procs[i], "rss.total")));
	}
	return out;
}

static json_t *page_data(json_t *doc, const struct mt_view *view,
			 const struct mt_sites_view *sites)
{
	json_t *facts = mt_report_facts(doc, view);
	json_t *flame = json_object(), *words = json_object();

	for (int sp = 0; sp < MT_SITE_SPACES; sp++) {
		struct mt_sites_view v = *sites;
		json_t *tree, *w = json_array();

		v.space = (enum mt_site_space)sp;
		json_object_set_new(facts, mt_site_space_section(v.space),
				    mt_top_sites_json(doc, &v));
		tree = mt_top_sites_present(doc)
			   ? mt_flame_tree_json(doc, v.space)
			   : NULL;
		json_object_set_new(flame, mt_site_space_name(v.space),
				    tree ? tree : json_null());
		for (int m = 0; m < MT_SITE_METRICS; m++)
			json_array_append_new(
			    w, json_string(mt_site_metric_words(
				   v.space, (enum mt_site_metric)m)));
		json_object_set_new(words, mt_site_space_name(v.space), w);
	}
	return json_pack(
	    "{s:s, s:o, s:{s:o, s:o, s:o, s:o, s:o}, s:o, s:o, s:o}", "version",
	    mt_version(), "facts", facts, "series", "heap",
	    series(doc, "tree.heap"), "mapped", series(doc, "tree.mapped"),
	    "rss", series(doc, "tree.rss.total"), "rss_anon",
	    series(doc, "tree.rss.anon"), "physical",
	    series(doc, "tree.physical.total"), "process_series",
	    process_series(doc), "flame", flame, "metric_words", words);
}

/* JSON inside <script>: the text may hold "</script>" or "<!--", and
 * '<' appears in JSON only inside strings, where \u003c reads the same */
static void script_json(FILE *out, const char *s)
{
	for (; *s; s++)
		if (*s == '<')
			fputs("\\u003c", out);
		else
			fputc(*s, out);
}

int mt_html_write(FILE *out, json_t *doc, const struct mt_view *view,
		  const struct mt_sites_view *sites)
{
	json_t *data = page_data(doc, view, sites);
	char *text =
	    data ? json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(12))
		 : NULL;
	char cmd[4096];

	json_decref(data);
	if (!text) {
		errno = ENOMEM;
		return -1;
	}
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
	      "<meta charset=\"utf-8\">\n"
	      "<meta name=\"generator\" content=\"mt-report ",
	      out);
	mt_svg_text(out, mt_version(), SIZE_MAX);
	fputs("\">\n<title>mt: ", out);
	mt_svg_text(out, mt_report_command(doc, cmd, sizeof(cmd)), SIZE_MAX);
	fputs("</title>\n<style>\n", out);
	fwrite(mt_html_css, 1, (size_t)(mt_html_css_end - mt_html_css), out);
	fputs("</style>\n</head>\n<body>\n"
	      "<noscript><p>This page draws its report with a script: "
	      "allow scripts, or run mt-report without --html.</p></noscript>\n"
	      "<main id=\"mt\"></main>\n"
	      "<script type=\"application/json\" id=\"mt-data\">",
	      out);
	script_json(out, text);
	free(text);
	fputs("</script>\n<script>\n", out);
	fwrite(mt_html_js, 1, (size_t)(mt_html_js_end - mt_html_js), out);
	fputs("</script>\n</body>\n</html>\n", out);
	return ferror(out) ? -1 : 0;
}
