// SPDX-License-Identifier: MIT
/*
 * svg.c - one self-contained SVG (no scripts, no external fonts or
 * styles) of the tree's memory over time, and of its heaviest processes.
 * Series are step lines drawn from the bucketed points: each bucket at
 * its maximum, so a peak drawn is a peak that happened; the exact peak is
 * marked with its value, its label placed where no line and no other
 * label is.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_report.h"
#include "mt_svg.h"

#define W     1000
#define LEFT  90
#define RIGHT 30
#define TOP   60
#define PW    (W - LEFT - RIGHT)
#define PH    470
/* below the plot: tick labels, the axis title, then the legend's rows */
#define LEGEND_Y   (TOP + PH + 72)
#define LEGEND_ROW 20
#define LEGEND_COL 300

/* sans-serif at 12 px: no glyph is wider on average; a label box made
 * with it is never too small */
#define CHAR_W 7.0

/* A text's box, to keep labels off the lines and off each other. */
struct box {
	double x0, y0, x1, y1;
};

/* A line drawn: what a label must not cross. */
struct drawn {
	json_t *series;
};

#define MAX_DRAWN (4 + MT_SVG_MAX_PROCS)
/* markers drawn: a few dozen at most, or the plot turns grey */
#define MAX_MARKERS 40
#define MAX_LABELS  (4 + 1 + MAX_MARKERS)

struct plot {
	FILE *out;
	double t_min, t_max; /* ns: the time axis' ends */
	double v_max;	     /* bytes */
	struct drawn lines[MAX_DRAWN];
	size_t nlines;
	struct box labels[MAX_LABELS];
	size_t nlabels;
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

/* XML text (element content or an attribute value): at most max bytes of s,
 * markup characters escaped, control characters other than tab left out */
void mt_svg_text(FILE *out, const char *s, size_t max)
{
	for (size_t i = 0; s[i] && i < max; i++) {
		switch (s[i]) {
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
			if ((unsigned char)s[i] >= 0x20 || s[i] == '\t')
				fputc(s[i], out);
		}
	}
}

static void xml_text(FILE *out, const char *s)
{
	mt_svg_text(out, s, SIZE_MAX);
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
	/* a plot that starts late (the tracer starting up, a section)
	 * starts at a round number, its first tick's; no rounding up at
	 * the end: the plot ends where the trace ended */
	p->t_min = floor(p->t_min / step) * step;
	fprintf(p->out, "<g font-size=\"12\" fill=\"#333\" "
			"text-anchor=\"middle\">\n");
	/* counted, not accumulated: at large times t += step may not move t
	 * at all (fuzzing found the endless loop), and a tick count bound
	 * keeps a degenerate range from printing millions of ticks */
	double first = ceil(p->t_min / step);
	double ticks = floor(p->t_max * (1 + 1e-9) / step) - first + 1;

	/* the axis' own start gets a tick and its value when no regular
	 * tick falls on it (a plot that starts late, at a section) */
	bool start_tick = fabs(first * step - p->t_min) > step * 1e-6;

	if (!(ticks >= 0))
		ticks = 0;
	if (ticks > 50)
		ticks = 50;
	if (start_tick) {
		fprintf(p->out,
			"<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" "
			"stroke=\"#999\"/>\n",
			LEFT, LEFT, TOP + PH, TOP + PH + 5);
		fprintf(p->out, "<text x=\"%d\" y=\"%d\">%.4g</text>\n", LEFT,
			TOP + PH + 20, p->t_min / unit);
	}
	for (int i = 0; i < (int)ticks; i++) {
		double t = (first + i) * step;

		/* a tick whose label would run into the start's */
		if (start_tick && px(p, t) - LEFT < 40)
			continue;
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
static void draw_series(struct plot *p, json_t *s, const char *what,
			const char *color, double stroke_width, double end_t)
{
	json_t *pts = json_object_get(s, "points");
	double width = (double)mt_json_u64(s, "bucket_ns", 1);
	size_t i, n = json_array_size(pts);
	uint64_t peak = mt_json_u64(s, "peak", 0);
	char v[32], t[32];
	json_t *pt;

	if (!n)
		return;
	if (p->nlines < MAX_DRAWN)
		p->lines[p->nlines++].series = s;
	fprintf(p->out,
		"<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
		"stroke-linejoin=\"round\" d=\"M%.1f %.1f",
		color, stroke_width, px(p, p->t_min), py(p, 0));
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
	}
	fprintf(p->out, " H%.1f\">", px(p, end_t));
	fputs("<title>", p->out);
	xml_text(p->out, what);
	fprintf(p->out, ": peak %s", mt_fmt_bytes(v, sizeof(v), peak));
	if (json_is_integer(json_object_get(s, "peak_t_ns")))
		fprintf(p->out, " at %s",
			mt_fmt_duration(t, sizeof(t),
					mt_json_u64(s, "peak_t_ns", 0)));
	fprintf(p->out, ", at the end %s</title></path>\n",
		mt_fmt_bytes(v, sizeof(v), mt_json_u64(s, "final", 0)));
}

/* Whether the step line of s passes through the box (pixels): the values
 * it takes between the box's left and right edges, rises included. */
static bool line_crosses(const struct plot *p, json_t *s, const struct box *b)
{
	json_t *pts = json_object_get(s, "points"), *pt;
	double width = (double)mt_json_u64(s, "bucket_ns", 1);
	double level = 0, prev_x = -INFINITY; /* held from prev_x on */
	double lo = INFINITY, hi = -INFINITY;
	size_t i;

#define TAKES(v) (lo = fmin(lo, (v)), hi = fmax(hi, (v)))
	json_array_foreach(pts, i, pt)
	{
		double t = (double)json_integer_value(json_array_get(pt, 0));
		double mx = (double)json_integer_value(json_array_get(pt, 1));
		double ls = (double)json_integer_value(json_array_get(pt, 2));
		json_t *next = json_array_get(pts, i + 1);
		double t_end = t + width, x0 = px(p, t), x1;

		if (next && json_integer_value(json_array_get(next, 0)) < t_end)
			t_end =
			    (double)json_integer_value(json_array_get(next, 0));
		x1 = px(p, t_end);
		if (prev_x <= b->x1 && x0 >= b->x0)
			TAKES(level); /* held up to this bucket */
		if (x0 > b->x1)
			break;
		if (x1 >= b->x0) { /* the rise, the bucket, the fall */
			TAKES(level);
			TAKES(mx);
			TAKES(ls);
		}
		level = ls;
		prev_x = x1;
	}
	if (prev_x <= b->x1) /* held to the end of the plot */
		TAKES(level);
#undef TAKES
	if (!(hi >= lo))
		return false;
	/* pixels grow downwards: the top of the values is py(hi) */
	return py(p, hi) <= b->y1 && py(p, lo) >= b->y0;
}

static bool boxes_meet(const struct box *a, const struct box *b)
{
	return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

static bool in_plot(const struct box *b)
{
	return b->x0 >= LEFT + 2 && b->x1 <= LEFT + PW - 2 &&
	       b->y0 >= TOP + 2 && b->y1 <= TOP + PH - 2;
}

/* How many lines and labels the box meets: 0 is a free place. */
static size_t box_clashes(const struct plot *p, const struct box *b)
{
	size_t n = 0;

	for (size_t i = 0; i < p->nlabels; i++)
		n += boxes_meet(&p->labels[i], b);
	for (size_t i = 0; i < p->nlines; i++)
		n += line_crosses(p, p->lines[i].series, b);
	return n;
}

static void remember_label(struct plot *p, const struct box *b)
{
	if (p->nlabels < MAX_LABELS)
		p->labels[p->nlabels++] = *b;
}

/*
 * A box for a label of width w next to the point (x, y): above or below
 * it, to its right or left, further away step by step; the first that
 * stays in the plot and meets no line and no label, else the one that
 * meets the fewest.  *right: the label is right of the point.
 */
static struct box place_label(const struct plot *p, double x, double y,
			      double w, bool *right)
{
	static const double dys[] = {-8,  20, -24,  36,	 -40,  52,  -56, 68,
				     -72, 84, -100, 116, -140, 156, -200};
	static const double dxs[] = {8, 48, 96};
	struct box best = {0}, b;
	size_t best_clashes = SIZE_MAX;

	for (size_t j = 0; j < sizeof(dxs) / sizeof(dxs[0]); j++) {
		for (size_t i = 0; i < sizeof(dys) / sizeof(dys[0]); i++) {
			for (int side = 0; side < 2; side++) {
				/* the side with more room first */
				bool r = (side == 0) == (x < LEFT + PW / 2);
				size_t clashes;

				b.x0 = r ? x + dxs[j] : x - dxs[j] - w;
				b.x1 = b.x0 + w;
				b.y0 = y + dys[i] - 12;
				b.y1 = y + dys[i] + 3;
				if (!in_plot(&b))
					continue;
				clashes = box_clashes(p, &b);
				if (clashes < best_clashes) {
					best = b;
					best_clashes = clashes;
					*right = r;
				}
				if (!clashes)
					return b;
			}
		}
	}
	if (best_clashes != SIZE_MAX)
		return best;
	/* wider than the plot: above the point, from the axis */
	*right = true;
	return (struct box){LEFT + 2, y - 20, LEFT + 2 + w, y - 5};
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

/* A text's width in the plot's pixels at font size 12 (UTF-8: count the
 * characters, not the bytes). */
static double text_width(const char *s)
{
	size_t chars = 0;

	for (; *s; s++)
		chars += ((unsigned char)*s & 0xc0) != 0x80;
	return (double)chars * CHAR_W;
}

/* A text with a white halo: readable over a grid line or a band. */
#define HALO "stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\""

static void mark_peak(struct plot *p, json_t *s, const char *what,
		      const char *color)
{
	char v[32], t[32], label[160];
	json_t *peak_t = json_object_get(s, "peak_t_ns");
	uint64_t peak = mt_json_u64(s, "peak", 0);
	double x, y;
	struct box b;
	bool right = true;

	if (!json_is_integer(peak_t) || peak == 0)
		return;
	x = px(p, (double)json_integer_value(peak_t));
	y = py(p, (double)peak);
	snprintf(label, sizeof(label), "peak %s %s at %s", what,
		 mt_fmt_bytes(v, sizeof(v), peak),
		 mt_fmt_duration(t, sizeof(t),
				 (uint64_t)json_integer_value(peak_t)));
	b = place_label(p, x, y, text_width(label), &right);
	remember_label(p, &b);
	fprintf(p->out,
		"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" "
		"stroke=\"%s\" stroke-width=\"2\"/>\n",
		x, y, color);
	/* a label moved away from its point is tied to it */
	if (b.y1 < y - 12 || b.y0 > y + 12 || b.x0 > x + 10 || b.x1 < x - 10)
		fprintf(p->out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"%s\" stroke-width=\"0.8\"/>\n",
			x, y + (b.y0 > y ? 5 : -5), right ? b.x0 : b.x1,
			b.y0 > y ? b.y0 + 2 : b.y1 - 2, color);
	fprintf(p->out,
		"<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"%s\" "
		"%s>",
		b.x0, b.y1 - 3, color, HALO);
	xml_text(p->out, label);
	fprintf(p->out, "</text>\n");
}

/* The --section intervals, shaded: the only time the figures count; the
 * first band says which section it is. */
static void draw_sections(struct plot *p, json_t *doc)
{
	json_t *iv = mt_json_path(doc, "section.intervals"), *x;
	const char *name = json_string_value(mt_json_path(doc, "section.name"));
	size_t i, n = json_array_size(iv);
	bool named = false;

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
		if (named || !name)
			continue;
		char label[160];
		struct box box;

		snprintf(label, sizeof(label), "section %.100s", name);
		if (n > 1)
			snprintf(label + strlen(label),
				 sizeof(label) - strlen(label),
				 " (%zu intervals)", n);
		/* right of a marker's name drawn inside at the axis */
		double x0 = a + (a - LEFT < 14 ? 18 : 4);

		box =
		    (struct box){x0, TOP + 4, x0 + text_width(label), TOP + 19};
		if (box.x1 > LEFT + PW - 2) /* no room right of it */
			box = (struct box){LEFT + PW - 4 - text_width(label),
					   TOP + 4, LEFT + PW - 4, TOP + 19};
		remember_label(p, &box);
		fprintf(p->out,
			"<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
			"fill=\"#8a6d00\" %s>",
			box.x0, box.y1 - 3, HALO);
		xml_text(p->out, label);
		fprintf(p->out, "</text>\n");
		named = true;
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

		if (i >= MAX_MARKERS || !name)
			break;
		if (x < LEFT)
			continue; /* before the axis starts */
		/* the name left of its line, or right of it at the axis,
		 * where the left is the axis' labels */
		double tx = x - LEFT < 14 ? x + 12 : x - 3;
		struct box name_box = {tx - 11, TOP + 4, tx + 1,
				       TOP + 4 + text_width(name) * 11 / 12};

		remember_label(p, &name_box);

		fprintf(p->out,
			"<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
			"stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n"
			"<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
			"fill=\"#555\" transform=\"rotate(-90 %.1f %d)\" "
			"text-anchor=\"end\">",
			x, x, TOP, TOP + PH, tx, TOP + 4, tx, TOP + 4);
		xml_text(p->out, name);
		fprintf(p->out, "</text>\n");
	}
}

/* What makes the picture uncertain, in red under the title. */
static void warnings(FILE *out, json_t *doc, bool heap_shown)
{
	uint64_t lost = mt_json_u64(doc, "lost_events", 0);
	char text[3][64];
	size_t n = 0;
	double x = LEFT;

	if (!json_is_true(mt_json_path(doc, "input.complete")))
		snprintf(text[n++], sizeof(text[0]), "incomplete trace");
	if (lost) {
		char c[32];

		snprintf(text[n++], sizeof(text[0]), "%s event%s lost",
			 mt_fmt_count(c, sizeof(c), lost), mt_plural(lost));
	}
	if (!heap_shown)
		snprintf(text[n++], sizeof(text[0]),
			 "allocators not tracked: no heap line");
	for (size_t i = 0; i < n; i++) {
		fprintf(out,
			"<text x=\"%.1f\" y=\"48\" font-size=\"13\" "
			"fill=\"#c00\">%s</text>\n",
			x, text[i]);
		x += text_width(text[i]) * 13 / 12 + 24;
	}
}

/* The tree's series, back to front. */
static const struct tree_series {
	const char *path, *name, *color;
} tree_series[] = {
    {"tree.heap", "heap", "#d62728"},
    {"tree.mapped", "mapped", "#1f77b4"},
    {"tree.rss.total", "RSS", "#2ca02c"},
    {"tree.physical.total", "physical", "#9467bd"},
};
#define NTREE  (sizeof(tree_series) / sizeof(tree_series[0]))
#define MAPPED 1 /* tree_series' mapped memory */
/* mapped memory more than this many times the heap's and RSS's peaks
 * is not drawn */
#define SQUASH 4.0
/* hover columns over the plot, each with the values in its time span */
#define HOVER_COLS 100

/* The most each column of the plot holds of series s: the level held
 * into it and every bucket's maximum within it. */
static void series_columns(const struct plot *p, json_t *s, double *col)
{
	json_t *pts = json_object_get(s, "points"), *pt;
	double span = p->t_max - p->t_min, level = 0;
	int c = 0;
	size_t i;

	for (int k = 0; k < HOVER_COLS; k++)
		col[k] = 0;
	json_array_foreach(pts, i, pt)
	{
		double t = (double)json_integer_value(json_array_get(pt, 0));
		double mx = (double)json_integer_value(json_array_get(pt, 1));
		double ct =
		    span > 0 ? floor((t - p->t_min) / span * HOVER_COLS) : 0;

		if (ct >= HOVER_COLS)
			break;
		for (; c < ct; c++)
			col[c] = fmax(col[c], level);
		if (ct >= 0)
			col[c] = fmax(col[c], fmax(level, mx));
		level = (double)json_integer_value(json_array_get(pt, 2));
	}
	for (; c < HOVER_COLS; c++)
		col[c] = fmax(col[c], level);
}

/* Values on hover, with no script: transparent columns over the plot,
 * each titled with its time span and the most each tree series held in
 * it ("1.20 s - 1.30 s: heap 12.9 MiB, mapped 296 MiB, RSS 18.0 MiB"). */
static void hover_columns(struct plot *p, json_t *doc, const bool *shown)
{
	double col[NTREE][HOVER_COLS];
	double span = p->t_max - p->t_min;
	char a[32], b[32], v[32];

	for (size_t i = 0; i < NTREE; i++)
		if (shown[i])
			series_columns(
			    p, mt_json_path(doc, tree_series[i].path), col[i]);
	fprintf(p->out, "<g fill=\"transparent\">\n");
	for (int k = 0; k < HOVER_COLS; k++) {
		double t0 = p->t_min + span * k / HOVER_COLS;
		double t1 = p->t_min + span * (k + 1) / HOVER_COLS;
		const char *sep = ": ";

		fprintf(p->out,
			"<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
			"height=\"%d\"><title>%s - %s",
			px(p, t0), TOP, px(p, t1) - px(p, t0), PH,
			mt_fmt_duration(a, sizeof(a), (uint64_t)t0),
			mt_fmt_duration(b, sizeof(b), (uint64_t)t1));
		for (size_t i = 0; i < NTREE; i++) {
			if (!shown[i])
				continue;
			fprintf(
			    p->out, "%s%s %s", sep, tree_series[i].name,
			    mt_fmt_bytes(v, sizeof(v), (uint64_t)col[i][k]));
			sep = ", ";
		}
		fputs("</title></rect>\n", p->out);
	}
	fputs("</g>\n", p->out);
}

/* The heaviest processes' lines: thin, in colours of their own. */
static const char *const proc_colors[MT_SVG_MAX_PROCS] = {
    "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f", "#393b79", "#637939",
};

struct proc_line {
	json_t *series;
	char label[96];
};

/* What a process's line shows: its heap when allocators were tracked,
 * else its RSS, else its mapped memory. */
static size_t proc_lines(json_t *doc, const struct mt_svg_opts *opts,
			 bool heap_shown, struct proc_line *lines)
{
	json_t *procs[MT_SVG_MAX_PROCS];
	const char *names[MT_SVG_MAX_PROCS];
	size_t want = opts ? opts->procs : 0, n, k = 0;

	if (want > MT_SVG_MAX_PROCS)
		want = MT_SVG_MAX_PROCS;
	/* one process: its line is the tree's */
	if (mt_json_u64(doc, "processes_count",
			json_array_size(json_object_get(doc, "processes"))) < 2)
		return 0;
	n = mt_report_heaviest(doc, want, procs, names);
	for (size_t i = 0; i < n; i++) {
		const char *what = heap_shown ? "heap" : "RSS";
		size_t cut;
		json_t *s =
		    mt_json_path(procs[i], heap_shown ? "heap" : "rss.total");
		char v[32];

		if (!heap_shown && !json_is_object(s)) {
			s = json_object_get(procs[i], "mapped");
			what = "mapped";
		}
		if (!json_array_size(json_object_get(s, "points")))
			continue; /* no series kept for it */
		lines[k].series = s;
		/* the name's first 40 bytes, whole UTF-8 characters */
		cut = strnlen(names[i], 41);
		if (cut > 40)
			for (cut = 40;
			     cut > 0 && (names[i][cut] & 0xc0) == 0x80;)
				cut--;
		snprintf(lines[k].label, sizeof(lines[k].label),
			 "%llu %.*s: %s (peak %s)",
			 (unsigned long long)mt_json_u64(procs[i], "pid", 0),
			 (int)cut, names[i], what,
			 mt_fmt_bytes(v, sizeof(v), mt_json_u64(s, "peak", 0)));
		k++;
	}
	return k;
}

static void legend_entry(FILE *out, size_t i, const char *color,
			 double stroke_width, const char *label)
{
	double x = LEFT + (double)(i % 3) * LEGEND_COL;
	double y = LEGEND_Y + (double)(i / 3) * LEGEND_ROW;

	fprintf(out,
		"<rect x=\"%.0f\" y=\"%.1f\" width=\"16\" height=\"%.1f\" "
		"fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
		"fill=\"#333\">",
		x, y - 4 - stroke_width / 2, stroke_width * 2, color, x + 22,
		y);
	xml_text(out, label);
	fprintf(out, "</text>\n");
}

/* The command as the title, cut (at a character) to fit the width. */
static void title(FILE *out, json_t *doc)
{
	char cmd[4096];
	size_t max = 110, len;

	mt_report_command(doc, cmd, sizeof(cmd));
	fprintf(out, "<title>mt: ");
	xml_text(out, cmd);
	fprintf(out, "</title>\n");
	len = strlen(cmd);
	if (len > max) {
		while (max && ((unsigned char)cmd[max] & 0xc0) == 0x80)
			max--;
		strcpy(cmd + max, "...");
	}
	fprintf(out, "<text x=\"%d\" y=\"26\" font-size=\"16\" fill=\"#111\">",
		LEFT);
	xml_text(out, cmd);
	fprintf(out, "</text>\n");
}

int mt_svg_write(FILE *out, json_t *doc, const struct mt_svg_opts *opts)
{
	struct plot p = {.out = out};
	struct proc_line procs[MT_SVG_MAX_PROCS];
	char buf[64], label[128];
	bool heap_shown =
	    !json_is_false(json_object_get(doc, "allocators_tracked"));
	bool shown[NTREE] = {0}, mapped_off = false;
	size_t nprocs = proc_lines(doc, opts, heap_shown, procs);
	size_t entries = 0;

	p.t_max = (double)mt_json_u64(doc, "duration_ns", 0);
	p.t_min = INFINITY;
	for (size_t i = 0; i < NTREE; i++) {
		json_t *s = mt_json_path(doc, tree_series[i].path);

		if (!json_is_object(s) || (i == 0 && !heap_shown))
			continue;
		shown[i] = true;
		entries++;
		if (i != MAPPED && (double)mt_json_u64(s, "peak", 0) > p.v_max)
			p.v_max = (double)mt_json_u64(s, "peak", 0);
		if (series_end(s) > p.t_max)
			p.t_max = series_end(s);
		if (series_start(s) < p.t_min)
			p.t_min = series_start(s);
	}
	double end_t = p.t_max;
	double mapped_peak = (double)mt_json_u64(doc, "tree.mapped.peak", 0);

	/* mapped memory many times the rest would flatten the heap and the
	 * RSS to the bottom (296 MiB mapped, 12.9 MiB of heap): it is not
	 * drawn then, its legend says so; else it shares the axis */
	double times = p.v_max > 0 ? mapped_peak / p.v_max : 0;

	if (shown[MAPPED] && p.v_max > 0 && times > SQUASH)
		mapped_off = true;
	else if (shown[MAPPED] && mapped_peak > p.v_max)
		p.v_max = mapped_peak;

	/* a long quiet start (the tracer starting up, a section late in the
	 * run): begin the axis where something happens */
	if (!(p.t_min > p.t_max / 10) || p.t_min >= p.t_max)
		p.t_min = 0;

	if (p.v_max <= 0)
		p.v_max = 1024;
	if (p.t_max <= 0)
		p.t_max = 1000;

	int height = LEGEND_Y + (int)((entries + nprocs + 2) / 3) * LEGEND_ROW;

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\">\n",
		W, height, W, height);
	fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W,
		height);
	title(out, doc);
	warnings(out, doc, heap_shown);
	y_axis(&p);
	x_axis(&p);
	draw_sections(&p, doc);
	draw_markers(&p, doc);
	fprintf(out,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
		"fill=\"none\" stroke=\"#333\"/>\n",
		LEFT, TOP, PW, PH);
	for (size_t i = NTREE; i-- > 0;)
		if (shown[i] && !(i == MAPPED && mapped_off))
			draw_series(&p, mt_json_path(doc, tree_series[i].path),
				    tree_series[i].name, tree_series[i].color,
				    1.5, end_t);
	/* thin, over the tree's: a process alone for a while draws the
	 * tree's line too, which then shows on both sides of its own */
	for (size_t i = nprocs; i-- > 0;)
		draw_series(&p, procs[i].series, procs[i].label, proc_colors[i],
			    1, end_t);
	hover_columns(&p, doc, shown);
	entries = 0;
	for (size_t i = 0; i < NTREE; i++) {
		json_t *s = mt_json_path(doc, tree_series[i].path);

		if (!shown[i])
			continue;
		if (i == MAPPED && mapped_off) {
			snprintf(label, sizeof(label),
				 "mapped, tree (peak %s: %.0f times the rest, "
				 "not drawn)",
				 mt_fmt_bytes(buf, sizeof(buf),
					      mt_json_u64(s, "peak", 0)),
				 times);
			legend_entry(out, entries++, "#c8d8e8", 1.5, label);
			continue;
		}
		mark_peak(&p, s, tree_series[i].name, tree_series[i].color);
		snprintf(
		    label, sizeof(label), "%s, tree (peak %s)",
		    tree_series[i].name,
		    mt_fmt_bytes(buf, sizeof(buf), mt_json_u64(s, "peak", 0)));
		legend_entry(out, entries++, tree_series[i].color, 1.5, label);
	}
	for (size_t i = 0; i < nprocs; i++)
		legend_entry(out, entries++, proc_colors[i], 1, procs[i].label);
	fprintf(out, "</svg>\n");
	return ferror(out) ? (errno = errno ? errno : EIO, -1) : 0;
}
