// SPDX-License-Identifier: MIT
/*
 * top_sites.c - the heaviest allocation sites of a run and the sites that
 * grew most between two runs (see mt_top_sites.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_top_sites.h"

static json_t *section_of(json_t *doc, enum mt_site_space space)
{
	return json_object_get(doc, mt_site_space_section(space));
}

static json_t *site_list(json_t *doc, enum mt_site_space space)
{
	return json_object_get(section_of(doc, space), "sites");
}

bool mt_top_sites_present(json_t *doc)
{
	return json_is_array(site_list(doc, MT_SITES_HEAP));
}

static uint64_t value_of(json_t *site, enum mt_site_metric m)
{
	json_int_t v =
	    json_integer_value(json_object_get(site, mt_site_metric_key(m)));

	return v > 0 ? (uint64_t)v : 0;
}

static uint64_t value_of_key(json_t *site, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(site, key));

	return v > 0 ? (uint64_t)v : 0;
}

static void value_text(char *buf, size_t len, enum mt_site_metric m, uint64_t v)
{
	if (m == MT_SITE_COUNT)
		mt_fmt_count(buf, len, v);
	else
		mt_fmt_bytes(buf, len, (double)v);
}

/* qsort context (C11 has no qsort_r) */
static enum mt_site_metric sort_metric;

static int heavier_first(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	enum mt_site_metric order[] = {sort_metric, MT_SITE_PEAK,
				       MT_SITE_ALLOCATED, MT_SITE_COUNT};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		uint64_t vx = value_of(x, order[i]), vy = value_of(y, order[i]);

		if (vx != vy)
			return vx > vy ? -1 : 1;
	}
	return 0;
}

/* The sites by m, heaviest first; *n of them (borrowed references in a
 * malloc'ed array). */
static json_t **sorted_sites(json_t *doc, enum mt_site_space space,
			     enum mt_site_metric m, size_t *n)
{
	json_t *list = site_list(doc, space), *site, **v;
	size_t i;

	*n = 0;
	v = malloc((json_array_size(list) + 1) * sizeof(*v));
	if (!v)
		return NULL;
	json_array_foreach(list, i, site)
	{
		v[(*n)++] = site;
	}
	sort_metric = m;
	qsort(v, *n, sizeof(*v), heavier_first);
	return v;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

static void print_frame(FILE *out, json_t *frame)
{
	const char *fn = json_string_value(json_object_get(frame, "function"));
	const char *file = json_string_value(json_object_get(frame, "file"));
	json_int_t line = json_integer_value(json_object_get(frame, "line"));

	fprintf(out, "        %s", fn ? fn : "?");
	/* a Python frame's name has its file and line */
	if (file && line && !json_is_true(json_object_get(frame, "python")))
		fprintf(out, "  %s:%lld", base_name(file), (long long)line);
	if (json_is_true(json_object_get(frame, "inlined")))
		fputs(" (inlined)", out);
	fputc('\n', out);
}

static void print_site(FILE *out, size_t rank, json_t *site,
		       const struct mt_sites_view *v)
{
	json_t *frames = json_object_get(site, "frames");
	size_t n = json_array_size(frames);
	size_t shown =
	    v->stack_depth && v->stack_depth < n ? v->stack_depth : n;
	char peak[32], allocated[32], calls[32], leaked[32];
	bool mapped = v->space == MT_SITES_MAPPED;

	fprintf(
	    out, "  #%-3zu %s at peak, %s %s in %s call%s, %s not %s\n", rank,
	    mt_fmt_bytes(peak, sizeof(peak), value_of(site, 0)),
	    mt_fmt_bytes(allocated, sizeof(allocated),
			 (double)value_of(site, MT_SITE_ALLOCATED)),
	    mapped ? "mapped" : "allocated",
	    mt_fmt_count(calls, sizeof(calls), value_of(site, MT_SITE_COUNT)),
	    mt_plural(value_of(site, MT_SITE_COUNT)),
	    mt_fmt_bytes(leaked, sizeof(leaked),
			 (double)value_of(site, MT_SITE_LEAKED)),
	    mapped ? "unmapped" : "freed");
	if (!mapped && value_of_key(site, "temporary"))
		fprintf(out,
			"        %s of the calls temporary (freed before "
			"their thread's next allocation)\n",
			mt_fmt_count(calls, sizeof(calls),
				     value_of_key(site, "temporary")));
	if (n == 0)
		fputs("        (no stack recorded)\n", out);
	for (size_t k = 0; k < shown; k++)
		print_frame(out, json_array_get(frames, k));
	if (shown < n)
		fprintf(out, "        ... %zu more frame%s (--stack-depth)\n",
			n - shown, n - shown == 1 ? "" : "s");
	else if (json_is_true(json_object_get(site, "truncated")))
		fputs("        ... (stack truncated when traced)\n", out);
}

void mt_top_sites_text(FILE *out, json_t *doc, const struct mt_sites_view *v)
{
	size_t n;
	json_t **sites;
	uint64_t count = (uint64_t)json_integer_value(
	    json_object_get(section_of(doc, v->space), "count"));
	char total[32];
	bool mapped = v->space == MT_SITES_MAPPED;

	if (!json_is_array(site_list(doc, v->space)) || (mapped && !count) ||
	    !(sites = sorted_sites(doc, v->space, v->sort, &n)))
		return;
	fprintf(out, "\ntop %s sites by %s (%s distinct stack%s)\n",
		mapped ? "address-space (mmap, mremap, brk)" : "allocation",
		mt_site_metric_words(v->space, v->sort),
		mt_fmt_count(total, sizeof(total), count), mt_plural(count));
	if (n == 0)
		fputs("  (none)\n", out);
	for (size_t i = 0; i < n && i < v->top; i++)
		print_site(out, i + 1, sites[i], v);
	/* the document may hold fewer sites than there were stacks */
	if (count > n)
		n = (size_t)count;
	if (n > v->top)
		fprintf(out, "  (%zu more site%s: --top all lists all)\n",
			n - v->top, mt_plural(n - v->top));
	free(sites);
}

json_t *mt_top_sites_json(json_t *doc, const struct mt_sites_view *v)
{
	const char *peak_key = mt_site_space_peak_key(v->space);
	json_t *sec = section_of(doc, v->space), *top, **sites;
	size_t n;

	if (!json_is_array(site_list(doc, v->space)) ||
	    !(sites = sorted_sites(doc, v->space, v->sort, &n)))
		return json_null();
	top = json_array();
	for (size_t i = 0; i < n && i < v->top; i++)
		json_array_append(top, sites[i]);
	free(sites);
	return json_pack("{s:s, s:O, s:O, s:o}", "sort",
			 mt_site_metric_name(v->sort), "count",
			 json_object_get(sec, "count"), peak_key,
			 json_object_get(sec, peak_key), "top", top);
}

/* ------------------------------------------------------------------ */
/* Growth between two runs                                              */

/* A site's identity across runs: its function names, innermost first,
 * and whether it was truncated (addresses move between builds). */
static char *site_key(json_t *site)
{
	json_t *frames = json_object_get(site, "frames"), *f;
	char *buf = NULL;
	size_t len = 0, i;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	json_array_foreach(frames, i, f)
	{
		const char *fn =
		    json_string_value(json_object_get(f, "function"));

		fprintf(m, "%s\n", fn ? fn : "?");
	}
	if (json_is_true(json_object_get(site, "truncated")))
		fputs("[truncated]\n", m);
	fclose(m);
	return buf;
}

/* key -> summed value, for one run */
static json_t *values_by_key(json_t *doc, enum mt_site_space space,
			     enum mt_site_metric m)
{
	json_t *byk = json_object(), *site;
	size_t i;

	json_array_foreach(site_list(doc, space), i, site)
	{
		char *key = site_key(site);
		json_t *have;

		if (!key)
			continue;
		have = json_object_get(byk, key);
		json_object_set_new(
		    byk, key,
		    json_integer(json_integer_value(have) +
				 (json_int_t)value_of(site, m)));
		free(key);
	}
	return byk;
}

static json_t *names_of(const char *key)
{
	json_t *a = json_array();

	for (const char *at = key; *at;) {
		size_t n = strcspn(at, "\n");

		json_array_append_new(a, json_stringn(at, n));
		at += n + (at[n] == '\n');
	}
	return a;
}

static int grew_most_first(const void *a, const void *b)
{
	json_int_t x = json_integer_value(
		       json_object_get(*(json_t *const *)a, "growth")),
		   y = json_integer_value(
		       json_object_get(*(json_t *const *)b, "growth"));

	return x > y ? -1 : x < y ? 1 : 0;
}

json_t *mt_sites_growth(json_t *base, json_t *head,
			const struct mt_sites_view *v)
{
	json_t *b, *h, *value, *out, **rows;
	const char *key;
	size_t n = 0;

	if (!json_is_array(site_list(base, v->space)) ||
	    !json_is_array(site_list(head, v->space)))
		return json_null();
	b = values_by_key(base, v->space, v->sort);
	h = values_by_key(head, v->space, v->sort);
	rows = malloc((json_object_size(h) + 1) * sizeof(*rows));
	json_object_foreach(h, key, value)
	{
		json_int_t hv = json_integer_value(value);
		json_int_t bv = json_integer_value(json_object_get(b, key));

		if (rows && hv > bv)
			rows[n++] = json_pack("{s:o, s:I, s:I, s:I}", "frames",
					      names_of(key), "base", bv, "head",
					      hv, "growth", hv - bv);
	}
	if (rows)
		qsort(rows, n, sizeof(*rows), grew_most_first);
	out = json_array();
	for (size_t i = 0; i < n; i++) {
		if (i < v->top)
			json_array_append(out, rows[i]);
		json_decref(rows[i]);
	}
	free(rows);
	json_decref(b);
	json_decref(h);
	return out;
}

void mt_sites_growth_text(FILE *out, json_t *growth,
			  const struct mt_sites_view *v)
{
	json_t *row, *frames;
	size_t i;

	if (!json_is_array(growth))
		return;
	fprintf(out, "\n%s sites that grew most, by %s\n",
		v->space == MT_SITES_MAPPED ? "address-space" : "allocation",
		mt_site_metric_words(v->space, v->sort));
	if (!json_array_size(growth))
		fputs("  (none grew)\n", out);
	json_array_foreach(growth, i, row)
	{
		char bs[32], hs[32], gs[32];
		size_t nf, shown;

		value_text(
		    bs, sizeof(bs), v->sort,
		    (uint64_t)json_integer_value(json_object_get(row, "base")));
		value_text(
		    hs, sizeof(hs), v->sort,
		    (uint64_t)json_integer_value(json_object_get(row, "head")));
		value_text(gs, sizeof(gs), v->sort,
			   (uint64_t)json_integer_value(
			       json_object_get(row, "growth")));
		fprintf(out, "  #%-3zu +%s (%s -> %s)\n", i + 1, gs, bs, hs);
		frames = json_object_get(row, "frames");
		nf = json_array_size(frames);
		shown =
		    v->stack_depth && v->stack_depth < nf ? v->stack_depth : nf;
		for (size_t k = 0; k < shown; k++)
			fprintf(out, "        %s\n",
				json_string_value(json_array_get(frames, k)));
		if (shown < nf)
			fprintf(out, "        ... %zu more frames\n",
				nf - shown);
	}
}
