// SPDX-License-Identifier: MIT
/*
 * svg.c - one self-contained SVG (no scripts, no external fonts or
 * styles) of the tree's memory over time.  Series are step lines drawn
 * from the bucketed points: each bucket at its maximum, so a peak drawn
 * is a peak that happened; the exact peak is marked with its value.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "mt_human.h"
#include "mt_report.h"
#include "mt_svg.h"

#define W      1000
#define H      600
#define LEFT   90
#define RIGHT  30
#define TOP    60
#define BOTTOM 70
#define PW     (W - LEFT - RIGHT)
#define PH     (H - TOP - BOTTOM)

struct plot {
	FILE *out;
	double t_min, t_max; /* ns: the time axis' ends */
	double v_max;	     /* bytes */
};

static double px(const struct plot *p, double t)
{
	double span = p->t_max - p->t_min;

	return LEFT + (span > 0 ? (t - p->t_min) / span * PW : 0);
}

static double py(const struct plot *p, double v)
{
	return TOP + PH - (p->v_max > 0 ? v / p->v_max * PH : 0);
}

static void xml_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '&':
			fputs("&amp;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, out);
		}
	}
}

/* A "nice" step (1, 2 or 5 times a power of ten of unit) giving about
 * want ticks over span. */
static double nice_step(double span, double unit, int want)
{
	double raw = span / unit / want;
	double mag = pow(10, floor(log10(raw > 0 ? raw : 1)));
	double f = raw / mag;
	double step = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;

	return step * mag * unit;
}

static void y_axis(struct plot *p)
{
	static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double unit = 1;
	int u = 0;

	while (u < 4 && p->v_max >= 1024 * unit * 2) {
		unit *= 1024;
		u++;
	}
	double step = nice_step(p->v_max, unit, 6);

	if (step < 1)
		step = 1;
	p->v_max = ceil(p->v_max / step) * step;
	fprintf(p->out, "<g font-size=\"12\" fill=\"#333\" "
			"text-anchor=\"end\">\n");
	for (double v = 0; v <= p->v_max + step / 2; v += step) {
		fprintf(p->out,
			"<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"#ddd\"/>\n",
			LEFT, LEFT + PW, py(p, v), py(p, v));
		fprintf(p->out, "<text x=\"%d\" y=\"%.1f\">%g %s</text>\n",
			LEFT - 8, py(p, v) + 4, v / unit, names[u]);
	}
	fprintf(p->out, "</g>\n");
	fprintf(p->out,
		"<text x=\"20\" y=\"%d\" font-size=\"13\" fill=\"#333\" "
		"transform=\"rotate(-90 20 %d)\" text-anchor=\"middle\">"
		"memory (%s)</text>\n",
		TOP + PH / 2, TOP + PH / 2, names[u]);
}

static void x_axis(struct plot *p)
{
	static const struct {
		double ns;
		const char *name;
	} units[] = {{1, "ns"}, {1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
	int u = 0;

	while (u < 3 && p->t_max >= units[u + 1].ns * 2)
		u++;
	double unit = units[u].ns;
	double step = nice_step(p->t_max - p->t_min, unit, 8);

	if (step < 1)
		step = 1;
	/* no rounding up: the plot ends where the trace ended */
	fprintf(p->out, "<g font-size=\"12\" fill=\"#333\" "
			"text-anchor=\"middle\">\n");
	/* counted, not accumulated: at large times t += step may not move t
	 * at all (fuzzing found the endless loop), and a tick count bound
	 * keeps a degenerate range from printing millions of ticks */
	double first = ceil(p->t_min / step);
	double ticks = floor(p->t_max * (1 + 1e-9) / step) - first + 1;

	if (!(ticks >= 0))
		ticks = 0;
	if (ticks > 50)
		ticks = 50;
	for (int i = 0; i < (int)ticks; i++) {
		double t = (first + i) * step;

		fprintf(p->out,
			"<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
			"stroke=\"#999\"/>\n",
			px(p, t), px(p, t), TOP + PH, TOP + PH + 5);
		fprintf(p->out, "<text x=\"%.1f\" y=\"%d\">%g</text>\n",
			px(p, t), TOP + PH + 20, t / unit);
	}
	fprintf(p->out, "</g>\n");
	fprintf(p->out,
		"<text x=\"%d\" y=\"%d\" font-size=\"13\" fill=\"#333\" "
		"text-anchor=\"middle\">time since start (%s)</text>\n",
		LEFT + PW / 2, TOP + PH + 45, units[u].name);
}

/* Step line through the buckets: rise to the bucket's maximum at its
 * start, hold it to the bucket's end, then settle at its last value. */
static void draw_series(struct plot *p, json_t *s, const char *color,
			double end_t)
{
	json_t *pts = json_object_get(s, "points");
	double width = (double)mt_json_u64(s, "bucket_ns", 1);
	double last = 0;
	size_t i, n = json_array_size(pts);
	json_t *pt;

	if (!n)
		return;
	fprintf(p->out,
		"<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
		"stroke-linejoin=\"round\" d=\"M%.1f %.1f",
		color, px(p, p->t_min), py(p, 0));
	json_array_foreach(pts, i, pt)
	{
		double t = (double)json_integer_value(json_array_get(pt, 0));
		double mx = (double)json_integer_value(json_array_get(pt, 1));
		double ls = (double)json_integer_value(json_array_get(pt, 2));
		json_t *next = json_array_get(pts, i + 1);
		double t_end = t + width;

		if (next && json_integer_value(json_array_get(next, 0)) < t_end)
			t_end =
			    (double)json_integer_value(json_array_get(next, 0));
		if (t_end > end_t)
			t_end = end_t > t ? end_t : t;
		fprintf(p->out, " H%.1f V%.1f H%.1f V%.1f", px(p, t), py(p, mx),
			px(p, t_end), py(p, ls));
		last = ls;
	}
	(void)last;
	fprintf(p->out, " H%.1f\"/>\n", px(p, end_t));
}

static double series_start(json_t *s)
{
	json_t *first = json_array_get(json_object_get(s, "points"), 0);

	return first ? (double)json_integer_value(json_array_get(first, 0))
		     : INFINITY;
}

static double series_end(json_t *s)
{
	json_t *pts = json_object_get(s, "points");
	json_t *lastp = json_array_get(pts, json_array_size(pts) - 1);

	if (!lastp)
		return 0;
	return (double)json_integer_value(json_array_get(lastp, 0)) +
	       (double)mt_json_u64(s, "bucket_ns", 1);
}

static void mark_peak(struct plot *p, json_t *s, const char *what,
		      const char *color)
{
	char v[32], t[32], label[128];
	json_t *peak_t = json_object_get(s, "peak_t_ns");
	double peak = (double)mt_json_u64(s, "peak", 0);
	double x, y;

	if (!json_is_integer(peak_t) || peak <= 0)
		return;
	x = px(p, (double)json_integer_value(peak_t));
	y = py(p, peak);
	snprintf(label, sizeof(label), "peak %s %s at %s", what,
		 mt_fmt_bytes(v, sizeof(v), (uint64_t)peak),
		 mt_fmt_duration(t, sizeof(t),
				 (uint64_t)json_integer_value(peak_t)));
	fprintf(p->out,
		"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" "
		"stroke=\"%s\" stroke-width=\"2\"/>\n",
		x, y, color);
	fprintf(p->out,
		"<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"%s\" "
		"text-anchor=\"%s\">%s</text>\n",
		x > LEFT + PW / 2 ? x - 8 : x + 8,
		y < TOP + 14 ? y + 16 : y - 8, color,
		x > LEFT + PW / 2 ? "end" : "start", label);
}

/* The --section intervals, shaded: the only time the figures count. */
static void draw_sections(struct plot *p, json_t *doc)
{
	json_t *iv = mt_json_path(doc, "section.intervals"), *x;
	size_t i;

	json_array_foreach(iv, i, x)
	{
		double a =
		    px(p, (double)json_integer_value(json_array_get(x, 0)));
		double b =
		    px(p, (double)json_integer_value(json_array_get(x, 1)));

		if (a < LEFT)
			a = LEFT;
		if (b < a)
			continue;
		fprintf(p->out,
			"<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
			"height=\"%d\" fill=\"#fff3cc\"/>\n",
			a, TOP, b - a > 1 ? b - a : 1, PH);
	}
}

/* Markers as dashed lines with their names; a few dozen at most, or the
 * plot turns grey. */
static void draw_markers(struct plot *p, json_t *doc)
{
	json_t *markers = json_object_get(doc, "markers"), *m;
	size_t i;

	json_array_foreach(markers, i, m)
	{
		const char *name =
		    json_string_value(json_object_get(m, "name"));
		double x = px(p, (double)mt_json_u64(m, "t_ns", 0));

		if (i >= 40 || !name)
			break;
		if (x < LEFT)
			continue; /* before the axis starts */
		fprintf(p->out,
			"<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
			"stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n"
			"<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
			"fill=\"#555\" transform=\"rotate(-90 %.1f %d)\" "
			"text-anchor=\"end\">",
			x, x, TOP, TOP + PH, x - 3, TOP + 4, x - 3, TOP + 4);
		xml_text(p->out, name);
		fprintf(p->out, "</text>\n");
	}
}

/* What makes the picture uncertain, top right, one line each. */
static void warnings(FILE *out, json_t *doc, bool heap_shown)
{
	uint64_t lost = mt_json_u64(doc, "lost_events", 0);
	char n[32];
	int y = 20;

	if (!json_is_true(mt_json_path(doc, "input.complete"))) {
		fprintf(out,
			"<text x=\"%d\" y=\"%d\" font-size=\"13\" "
			"fill=\"#c00\" text-anchor=\"end\">incomplete "
			"trace</text>\n",
			W - RIGHT, y);
		y += 15;
	}
	if (lost) {
		fprintf(out,
			"<text x=\"%d\" y=\"%d\" font-size=\"13\" "
			"fill=\"#c00\" text-anchor=\"end\">%s events "
			"lost</text>\n",
			W - RIGHT, y, mt_fmt_count(n, sizeof(n), lost));
		y += 15;
	}
	if (!heap_shown)
		fprintf(out,
			"<text x=\"%d\" y=\"%d\" font-size=\"12\" "
			"fill=\"#c00\" text-anchor=\"end\">allocators "
			"not tracked: no heap line</text>\n",
			W - RIGHT, y);
}

int mt_svg_write(FILE *out, json_t *doc)
{
	static const struct {
		const char *path, *name, *color;
	} series[] = {
	    {"tree.heap", "heap", "#d62728"},
	    {"tree.mapped", "mapped", "#1f77b4"},
	    {"tree.rss.total", "RSS", "#2ca02c"},
	    {"tree.physical.total", "physical", "#9467bd"},
	};
	struct plot p = {.out = out};
	char cmd[512], buf[64];
	bool heap_shown =
	    !json_is_false(json_object_get(doc, "allocators_tracked"));
	bool shown[4] = {0};
	int legend_x = LEFT;

	p.t_max = (double)mt_json_u64(doc, "duration_ns", 0);
	p.t_min = INFINITY;
	for (size_t i = 0; i < 4; i++) {
		json_t *s = mt_json_path(doc, series[i].path);

		if (!json_is_object(s) || (i == 0 && !heap_shown))
			continue;
		shown[i] = true;
		if ((double)mt_json_u64(s, "peak", 0) > p.v_max)
			p.v_max = (double)mt_json_u64(s, "peak", 0);
		if (series_end(s) > p.t_max)
			p.t_max = series_end(s);
		if (series_start(s) < p.t_min)
			p.t_min = series_start(s);
	}
	double end_t = p.t_max;

	/* a long quiet start (the tracer starting up, a section late in the
	 * run): begin the axis where something happens */
	if (!(p.t_min > p.t_max / 10) || p.t_min >= p.t_max)
		p.t_min = 0;

	if (p.v_max <= 0)
		p.v_max = 1024;
	if (p.t_max <= 0)
		p.t_max = 1000;

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\">\n",
		W, H, W, H);
	fprintf(out, "<title>mt: ");
	xml_text(out, mt_report_command(doc, cmd, sizeof(cmd)));
	fprintf(out,
		"</title>\n<rect width=\"%d\" height=\"%d\" "
		"fill=\"white\"/>\n",
		W, H);
	fprintf(out,
		"<text x=\"%d\" y=\"28\" font-size=\"16\" "
		"fill=\"#111\">",
		LEFT);
	xml_text(out, cmd);
	fprintf(out, "</text>\n");
	warnings(out, doc, heap_shown);
	y_axis(&p);
	x_axis(&p);
	draw_sections(&p, doc);
	draw_markers(&p, doc);
	fprintf(out,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
		"fill=\"none\" stroke=\"#333\"/>\n",
		LEFT, TOP, PW, PH);
	for (size_t i = 4; i-- > 0;)
		if (shown[i])
			draw_series(&p, mt_json_path(doc, series[i].path),
				    series[i].color, end_t);
	for (size_t i = 0; i < 4; i++) {
		json_t *s = mt_json_path(doc, series[i].path);

		if (!shown[i])
			continue;
		mark_peak(&p, s, series[i].name, series[i].color);
		fprintf(
		    out,
		    "<rect x=\"%d\" y=\"40\" width=\"14\" height=\"4\" "
		    "fill=\"%s\"/><text x=\"%d\" y=\"46\" font-size=\"12\" "
		    "fill=\"#333\">%s (peak %s)</text>\n",
		    legend_x, series[i].color, legend_x + 18, series[i].name,
		    mt_fmt_bytes(buf, sizeof(buf), mt_json_u64(s, "peak", 0)));
		legend_x += 190;
	}
	fprintf(out, "</svg>\n");
	return ferror(out) ? (errno = errno ? errno : EIO, -1) : 0;
}
