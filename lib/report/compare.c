// SPDX-License-Identifier: MIT
/*
 * compare.c - mt-report's CI verdicts: the gates on one run (--max-*,
 * --strict) and the comparison of two runs (--compare, --max-growth).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_report.h"
#include "report_int.h"

/* ------------------------------------------------------------------ */
/* Gates                                                                */

bool mt_gates_any(const struct mt_gates *g)
{
	return g->has_peak_heap || g->has_total_allocated ||
	       g->has_allocations || g->has_not_freed || g->has_peak_rss ||
	       g->strict;
}

/* unknown: why the value cannot be checked (NULL when it can) */
static int gate(json_t *doc, const char *name, const char *path, bool is_size,
		uint64_t limit, const char *unknown, char *reason, size_t len,
		json_t *results, int failed)
{
	uint64_t v = mt_json_u64(doc, path, 0);
	bool ok = !unknown && v <= limit;
	char a[32], b[32];

	if (results)
		json_array_append_new(
		    results, json_pack("{s:s, s:I, s:I, s:b}", "gate", name,
				       "limit", (json_int_t)limit, "value",
				       (json_int_t)v, "ok", ok));
	if (ok || failed)
		return failed || !ok;
	if (unknown)
		snprintf(reason, len, "%s: %s", name, unknown);
	else if (is_size)
		snprintf(reason, len, "%s: %s exceeds the limit of %s", name,
			 mt_fmt_bytes(a, sizeof(a), v),
			 mt_fmt_bytes(b, sizeof(b), limit));
	else
		snprintf(reason, len, "%s: %s exceeds the limit of %s", name,
			 mt_fmt_count(a, sizeof(a), v),
			 mt_fmt_count(b, sizeof(b), limit));
	return 1;
}

int mt_report_gates(json_t *doc, const struct mt_gates *g, char *reason,
		    size_t len, json_t *results)
{
	const char *heap = mt_report_allocators_tracked(doc)
			       ? NULL
			       : "allocators were not tracked";
	int failed = 0;

	if (g->strict) {
		uint64_t lost = mt_json_u64(doc, "lost_events", 0);
		bool ok = lost == 0 && mt_report_is_complete(doc);

		if (results)
			json_array_append_new(
			    results,
			    json_pack("{s:s, s:I, s:b, s:b}", "gate", "strict",
				      "lost_events", (json_int_t)lost,
				      "complete", mt_report_is_complete(doc),
				      "ok", ok));
		if (lost) {
			snprintf(reason, len, "strict: %llu event%s lost",
				 (unsigned long long)lost,
				 lost == 1 ? " was" : "s were");
			failed = 1;
		} else if (!ok) {
			snprintf(reason, len, "strict: incomplete trace");
			failed = 1;
		}
	}
	if (g->has_peak_heap)
		failed =
		    gate(doc, "max-peak-heap", "tree.heap.peak", true,
			 g->max_peak_heap, heap, reason, len, results, failed);
	if (g->has_total_allocated)
		failed = gate(doc, "max-total-allocated",
			      "tree.totals.allocated_bytes", true,
			      g->max_total_allocated, heap, reason, len,
			      results, failed);
	if (g->has_allocations)
		failed = gate(doc, "max-allocations", "tree.totals.allocations",
			      false, g->max_allocations, heap, reason, len,
			      results, failed);
	if (g->has_not_freed)
		failed =
		    gate(doc, "max-not-freed", "tree." NOT_FREED_BYTES, true,
			 g->max_not_freed, heap, reason, len, results, failed);
	if (g->has_peak_rss)
		failed = gate(doc, "max-peak-rss", "tree.rss.total.peak", true,
			      g->max_peak_rss,
			      json_is_object(mt_json_path(doc, "tree.rss"))
				  ? NULL
				  : "RSS was not recorded",
			      reason, len, results, failed);
	return failed;
}

/* ------------------------------------------------------------------ */
/* Compare                                                              */

/* In enum mt_metric's order; key: the name in --json and --max-growth. */
static const struct metric {
	const char *name, *key, *path;
	bool is_size, heap;
} metrics[MT_METRICS] = {
    {"peak heap", "peak_heap", "tree.heap.peak", true, true},
    {"total allocated", "total_allocated", "tree.totals.allocated_bytes", true,
     true},
    {"allocations", "allocations", "tree.totals.allocations", false, true},
    {"not freed", "not_freed", "tree." NOT_FREED_BYTES, true, true},
    {"peak mapped", "peak_mapped", "tree.mapped.peak", true, false},
    {"peak rss", "peak_rss", "tree.rss.total.peak", true, false},
    {"peak physical", "peak_physical", "tree.physical.total.peak", true, false},
};

static double change_pct(json_t *base, json_t *head, const struct metric *m);

int mt_report_growth_failed(json_t *base, json_t *head,
			    const struct mt_growth *limits)
{
	for (size_t i = 0; i < MT_METRICS; i++) {
		double pct = change_pct(base, head, &metrics[i]);

		if (!isnan(pct) && limits->max_pct[i] >= 0 &&
		    pct > limits->max_pct[i])
			return (int)i;
	}
	return -1;
}

int mt_report_gate_failed(json_t *doc, const struct mt_gates *g)
{
	const struct {
		bool on;
		uint64_t limit;
		enum mt_metric m;
	} gates[] = {
	    {g->has_peak_heap, g->max_peak_heap, MT_PEAK_HEAP},
	    {g->has_total_allocated, g->max_total_allocated,
	     MT_TOTAL_ALLOCATED},
	    {g->has_allocations, g->max_allocations, MT_ALLOCATIONS},
	    {g->has_not_freed, g->max_not_freed, MT_NOT_FREED},
	    {g->has_peak_rss, g->max_peak_rss, MT_PEAK_RSS},
	};

	for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++)
		if (gates[i].on && mt_json_u64(doc, metrics[gates[i].m].path,
					       0) > gates[i].limit)
			return (int)gates[i].m;
	return -1;
}

bool mt_metric_sites(enum mt_metric m, enum mt_site_space *space,
		     enum mt_site_metric *by)
{
	static const struct {
		enum mt_site_space space;
		enum mt_site_metric by;
	} sites[] = {
	    [MT_PEAK_HEAP] = {MT_SITES_HEAP, MT_SITE_PEAK},
	    [MT_TOTAL_ALLOCATED] = {MT_SITES_HEAP, MT_SITE_ALLOCATED},
	    [MT_ALLOCATIONS] = {MT_SITES_HEAP, MT_SITE_COUNT},
	    [MT_NOT_FREED] = {MT_SITES_HEAP, MT_SITE_LEAKED},
	    [MT_PEAK_MAPPED] = {MT_SITES_MAPPED, MT_SITE_PEAK},
	};

	if (m >= sizeof(sites) / sizeof(sites[0]))
		return false; /* RSS, physical: no site holds pages */
	*space = sites[m].space;
	*by = sites[m].by;
	return true;
}

void mt_growth_none(struct mt_growth *g)
{
	for (size_t i = 0; i < MT_METRICS; i++)
		g->max_pct[i] = -1;
}

bool mt_growth_any(const struct mt_growth *g)
{
	for (size_t i = 0; i < MT_METRICS; i++)
		if (g->max_pct[i] >= 0)
			return true;
	return false;
}

/* one item of --max-growth: "5%" or "peak_rss=10%" */
static int growth_item(const char *item, struct mt_growth *g, char *err,
		       size_t len)
{
	const char *eq = strchr(item, '=');
	double pct;

	if (mt_parse_percent(eq ? eq + 1 : item, &pct) < 0) {
		snprintf(err, len, "not a percentage (e.g. 5%%): %s",
			 eq ? eq + 1 : item);
		return -1;
	}
	if (!eq) {
		for (size_t i = 0; i < MT_METRICS; i++)
			g->max_pct[i] = pct;
		return 0;
	}
	for (size_t i = 0; i < MT_METRICS; i++) {
		if (strlen(metrics[i].key) == (size_t)(eq - item) &&
		    !memcmp(item, metrics[i].key, (size_t)(eq - item))) {
			g->max_pct[i] = pct;
			return 0;
		}
	}
	/* the gate's old name, as --max-leaked still is */
	if (eq - item == 6 && !memcmp(item, "leaked", 6)) {
		g->max_pct[MT_NOT_FREED] = pct;
		return 0;
	}
	snprintf(err, len,
		 "unknown metric \"%.*s\" (peak_heap, total_allocated, "
		 "allocations, not_freed, peak_mapped, peak_rss, "
		 "peak_physical)",
		 (int)(eq - item), item);
	return -1;
}

int mt_growth_parse(const char *spec, struct mt_growth *g, char *err,
		    size_t len)
{
	char *copy = strdup(spec), *save = NULL, *item;
	int rc = 0;

	if (!copy) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	if (!*spec) {
		snprintf(err, len, "empty (e.g. 5%% or peak_rss=10%%)");
		rc = -1;
	}
	for (item = strtok_r(copy, ",", &save); item && !rc;
	     item = strtok_r(NULL, ",", &save))
		rc = growth_item(item, g, err, len);
	free(copy);
	return rc;
}

static void fmt_metric(char *buf, size_t len, const struct metric *m,
		       json_t *doc)
{
	json_t *v = mt_json_path(doc, m->path);

	if ((m->heap && !mt_report_allocators_tracked(doc)) ||
	    !json_is_integer(v))
		snprintf(buf, len, "-");
	else if (m->is_size)
		mt_fmt_bytes(buf, len, (uint64_t)json_integer_value(v));
	else
		mt_fmt_count(buf, len, (uint64_t)json_integer_value(v));
}

/* "+12.5%", "-3.0%", "+0.0%" (never "-0.0%": a change that small is shown
 * with the digits it has, "-0.0012%"), "new", "-" (unknown) */
static void fmt_change(char *buf, size_t len, double pct)
{
	if (isnan(pct))
		snprintf(buf, len, "-");
	else if (isinf(pct))
		snprintf(buf, len, "new");
	else if (pct == 0)
		snprintf(buf, len, "+0.0%%");
	else if (fabs(pct) < 0.05)
		snprintf(buf, len, "%+.2g%%", pct);
	else
		snprintf(buf, len, "%+.1f%%", pct);
}

static double change_pct(json_t *base, json_t *head, const struct metric *m)
{
	bool known = !m->heap || (mt_report_allocators_tracked(base) &&
				  mt_report_allocators_tracked(head));
	json_t *bv = mt_json_path(base, m->path),
	       *hv = mt_json_path(head, m->path);
	double b, h;

	if (!known || !json_is_number(bv) || !json_is_number(hv))
		return NAN;
	b = (double)mt_json_u64(base, m->path, 0);
	h = (double)mt_json_u64(head, m->path, 0);
	return b > 0 ? (h - b) / b * 100.0 : h > 0 ? INFINITY : 0;
}

static json_t *compare_row(json_t *base, json_t *head, const struct metric *m,
			   double pct, double limit, bool grew)
{
	bool known = !isnan(pct);
	json_t *r = json_pack(
	    "{s:s, s:o, s:o}", "metric", m->key, "base",
	    known ? json_deep_copy(mt_json_path(base, m->path)) : json_null(),
	    "head",
	    known ? json_deep_copy(mt_json_path(head, m->path)) : json_null());

	json_object_set_new(
	    r, "change_pct",
	    !known || isinf(pct) ? json_null() : json_real(pct == 0 ? 0 : pct));
	json_object_set_new(r, "max_growth_pct",
			    limit >= 0 ? json_real(limit) : json_null());
	json_object_set_new(r, "ok", json_boolean(!grew));
	return r;
}

int mt_report_compare(FILE *out, json_t *base, json_t *head,
		      const struct mt_growth *limits, bool as_json,
		      size_t json_flags, char *reason, size_t len)
{
	json_t *rows = json_array();
	int failed = 0;

	if (!as_json) {
		mt_report_print_warnings(out, base, "base");
		mt_report_print_warnings(out, head, "head");
		fprintf(out, "%-18s %12s %12s %9s\n", "metric", "base", "head",
			"change");
	}
	for (size_t i = 0; i < MT_METRICS; i++) {
		const struct metric *m = &metrics[i];
		double pct = change_pct(base, head, m);
		double limit = limits ? limits->max_pct[i] : -1;
		bool grew = !isnan(pct) && limit >= 0 && pct > limit;
		char bs[32], hs[32], cs[32];

		fmt_change(cs, sizeof(cs), pct);
		if (grew && !failed) {
			snprintf(reason, len, "%s grew by %s (limit %.4g%%)",
				 m->name, cs, limit);
			failed = 1;
		}
		if (as_json) {
			json_array_append_new(
			    rows, compare_row(base, head, m, pct, limit, grew));
			continue;
		}
		fmt_metric(bs, sizeof(bs), m, base);
		fmt_metric(hs, sizeof(hs), m, head);
		fprintf(out, "%-18s %12s %12s %9s%s\n", m->name, bs, hs, cs,
			grew ? "  FAIL" : "");
	}
	if (as_json) {
		json_t *o = json_pack(
		    "{s:b, s:b, s:O, s:O, s:o, s:b}", "base_complete",
		    mt_report_is_complete(base), "head_complete",
		    mt_report_is_complete(head), "base_lost_events",
		    json_object_get(base, "lost_events") ?: json_null(),
		    "head_lost_events",
		    json_object_get(head, "lost_events") ?: json_null(),
		    "metrics", rows, "ok", !failed);

		json_object_set_new(o, "reason",
				    failed ? json_string(reason) : json_null());
		json_dumpf(o, out, json_flags);
		fputc('\n', out);
		json_decref(o);
	} else {
		json_decref(rows);
	}
	return failed;
}
