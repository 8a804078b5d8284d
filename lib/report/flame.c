// SPDX-License-Identifier: MIT
/*
 * flame.c - allocation sites as folded stacks and as a flame graph SVG
 * (see mt_flame.h).  Both read the "sites" section of a timelines
 * document, so they work the same on mt-reconstruct's output as on an
 * artifact reconstructed in-process.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mt_flame.h"
#include "mt_human.h"
#include "mt_svg.h"

/* ------------------------------------------------------------------ */
/* The stacks, root first                                               */

/* A frame's name as one folded field: ';' separates frames and a line
 * ends the record, so neither may appear inside one. */
static void folded_name(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == ';'			 ? ':'
		      : *s == '\n' || *s == '\r' ? ' '
						 : *s,
		      out);
}

static const char *frame_name(json_t *frame)
{
	const char *name =
	    json_string_value(json_object_get(frame, "function"));

	return name && *name ? name : "?";
}

/*
 * The frame above a truncated stack: the unwinder stopped before its
 * root, in the code file of the outermost frame it recorded ("[truncated
 * in libpython3.11.so.1.0]").  Kept in the site's object, so that every
 * output borrows the one name.
 */
const char *mt_flame_truncated_name(json_t *site, char *buf, size_t len)
{
	json_t *frames = json_object_get(site, "frames");
	json_t *outer = json_array_get(frames, json_array_size(frames) - 1);
	const char *obj = json_string_value(json_object_get(outer, "object"));

	if (obj && strrchr(obj, '/'))
		obj = strrchr(obj, '/') + 1;
	if (obj && *obj)
		snprintf(buf, len, "[truncated in %s]", obj);
	else
		snprintf(buf, len, "[truncated]");
	return buf;
}

static const char *truncated_name(json_t *site)
{
	const char *name = json_string_value(json_object_get(site, "_trunc"));
	char buf[512];

	if (name)
		return name;
	json_object_set_new(
	    site, "_trunc",
	    json_string(mt_flame_truncated_name(site, buf, sizeof(buf))));
	name = json_string_value(json_object_get(site, "_trunc"));
	return name ? name : "[truncated]";
}

static json_t *sites_of(json_t *doc, enum mt_site_space space)
{
	return json_object_get(
	    json_object_get(doc, mt_site_space_section(space)), "sites");
}

/* the names truncated_name kept, gone once they are written: the
 * document is the report's, --json writes its sites as they were */
static void forget_truncated_names(json_t *doc, enum mt_site_space space)
{
	size_t i;
	json_t *site;

	json_array_foreach(sites_of(doc, space), i, site)
	    json_object_del(site, "_trunc");
}

static uint64_t site_value(json_t *site, enum mt_site_metric m)
{
	json_int_t v =
	    json_integer_value(json_object_get(site, mt_site_metric_key(m)));

	return v > 0 ? (uint64_t)v : 0;
}

int mt_flame_folded(FILE *out, json_t *doc, enum mt_site_space space,
		    enum mt_site_metric m)
{
	size_t i;
	json_t *site;

	json_array_foreach(sites_of(doc, space), i, site)
	{
		json_t *frames = json_object_get(site, "frames");
		uint64_t v = site_value(site, m);
		size_t n = json_array_size(frames);

		if (!v)
			continue;
		if (json_is_true(json_object_get(site, "truncated"))) {
			folded_name(out, truncated_name(site));
			fputc(';', out);
		}
		if (n == 0)
			fputs("[no stack]", out);
		for (size_t k = n; k-- > 0;) {
			folded_name(out, frame_name(json_array_get(frames, k)));
			if (k)
				fputc(';', out);
		}
		fprintf(out, " %" PRIu64 "\n", v);
	}
	forget_truncated_names(doc, space);
	return ferror(out) ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Short names                                                          */

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_';
}

/* the end of the bracketed text that starts at s (s[0] is its opener),
 * or the end of s when it is not closed */
static const char *closing(const char *s, char open, char close)
{
	int depth = 0;

	for (; *s; s++) {
		depth += *s == open;
		depth -= *s == close;
		if (!depth)
			return s;
	}
	return s - 1;
}

char *mt_flame_short_name(const char *name, char *buf, size_t len)
{
	size_t o = 0;

#define PUT(c)                                                                 \
	do {                                                                   \
		if (o + 1 < len)                                               \
			buf[o++] = (c);                                        \
	} while (0)
	for (const char *s = name; *s; s++) {
		/* operator<, operator(), operator<<=: the operator's own
		 * characters are its name, not brackets */
		if (!strncmp(s, "operator", 8) &&
		    (s == name || !ident_char(s[-1])) && !ident_char(s[8])) {
			for (int k = 0; k < 8; k++)
				PUT(s[k]);
			s += 8;
			if (*s == '(' && s[1] == ')')
				PUT(*s++);
			while (*s && strchr("<>=!+-*/%^&|~[]),", *s))
				PUT(*s++);
			s--;
		} else if (*s == '<' || *s == '(') {
			char close = *s == '<' ? '>' : ')';

			if (!strncmp(s, "(anonymous namespace)", 21)) {
				for (int k = 0; k < 21; k++)
					PUT(s[k]);
				s += 20;
				continue;
			}
			PUT(*s);
			if (s[1] != close) {
				PUT('.');
				PUT('.');
				PUT('.');
			}
			s = closing(s, *s, close);
			PUT(close);
		} else {
			PUT(*s);
		}
	}
#undef PUT
	buf[len ? (o < len ? o : len - 1) : 0] = '\0';
	return buf;
}

/* ------------------------------------------------------------------ */
/* The tree of frames                                                   */

struct node {
	const char *name;		 /* borrowed from the document */
	uint64_t value[MT_SITE_METRICS]; /* by every metric at once */
	struct node *child; /* first child; siblings in name order */
	struct node *next;
};

static struct node *child_named(struct node *parent, const char *name)
{
	struct node **at = &parent->child, *n;
	int c = 1;

	while (*at && (c = strcmp((*at)->name, name)) < 0)
		at = &(*at)->next;
	if (*at && c == 0)
		return *at;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->name = name;
	n->next = *at;
	*at = n;
	return n;
}

static void add_values(struct node *n, const uint64_t v[MT_SITE_METRICS])
{
	for (int m = 0; m < MT_SITE_METRICS; m++)
		n->value[m] += v[m];
}

static void tree_free(struct node *n)
{
	while (n) {
		struct node *next = n->next;

		tree_free(n->child);
		free(n);
		n = next;
	}
}

/* root's children: every site's stack, root first, weighted by every
 * metric (a site with nothing in any is left out) */
static int tree_build(struct node *root, json_t *doc, enum mt_site_space space)
{
	size_t i;
	json_t *site;

	json_array_foreach(sites_of(doc, space), i, site)
	{
		json_t *frames = json_object_get(site, "frames");
		uint64_t v[MT_SITE_METRICS], any = 0;
		size_t n = json_array_size(frames);
		struct node *at = root;

		for (int m = 0; m < MT_SITE_METRICS; m++)
			any |= v[m] = site_value(site, (enum mt_site_metric)m);
		if (!any)
			continue;
		add_values(root, v);
		if (json_is_true(json_object_get(site, "truncated")) &&
		    !(at = child_named(at, truncated_name(site))))
			return -1;
		if (n == 0 && !(at = child_named(at, "[no stack]")))
			return -1;
		if (at != root)
			add_values(at, v);
		for (size_t k = n; k-- > 0;) {
			at = child_named(at,
					 frame_name(json_array_get(frames, k)));
			if (!at)
				return -1;
			add_values(at, v);
		}
	}
	return 0;
}

/* the rows of frames with a value by m */
static unsigned tree_depth(const struct node *n, enum mt_site_metric m)
{
	unsigned d = 0;

	for (const struct node *c = n->child; c; c = c->next) {
		unsigned dc = c->value[m] ? tree_depth(c, m) : 0;

		d = dc > d ? dc : d;
	}
	return d + 1;
}

/* ------------------------------------------------------------------ */
/* SVG                                                                  */

#define W	  1200.0
#define PAD	  10.0
#define ROW	  17.0
#define TITLE_H	  48.0
#define CHAR_W	  6.6 /* at font-size 11, a little wide for safety */
#define MIN_WIDTH 0.3 /* narrower frames (and what they hold) are not drawn */

struct canvas {
	FILE *out;
	enum mt_site_metric metric;
	uint64_t total;
	double scale; /* px per unit */
	double height;
};

static void value_text(char *buf, size_t len, enum mt_site_metric m, uint64_t v)
{
	char n[64];

	if (m == MT_SITE_COUNT)
		snprintf(buf, len, "%s call%s", mt_fmt_count(n, sizeof(n), v),
			 mt_plural(v));
	else
		mt_fmt_bytes(buf, len, (double)v);
}

/* A warm colour from the name, so a function keeps its colour. */
static void colour(const char *name, unsigned rgb[3])
{
	uint32_t h = 2166136261u;

	for (const char *s = name; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	rgb[0] = 205 + h % 50;
	rgb[1] = 80 + (h >> 8) % 150;
	rgb[2] = (h >> 16) % 55;
}

static void draw(struct canvas *c, const struct node *n, double x,
		 unsigned depth)
{
	double w = (double)n->value[c->metric] * c->scale;
	double y = TITLE_H + PAD + depth * ROW; /* the root on top */
	char value[64];
	unsigned rgb[3];

	if (w < MIN_WIDTH)
		return;
	value_text(value, sizeof(value), c->metric, n->value[c->metric]);
	colour(n->name, rgb);
	fputs("<g><title>", c->out);
	mt_svg_text(c->out, n->name, SIZE_MAX);
	fprintf(c->out, " (%s, %.2f%%)</title>", value,
		c->total
		    ? 100.0 * (double)n->value[c->metric] / (double)c->total
		    : 0);
	fprintf(c->out,
		"<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
		"fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
		x, y, w, ROW - 1, rgb[0], rgb[1], rgb[2]);
	if (w > 3 * CHAR_W) {
		size_t fit = (size_t)((w - 6) / CHAR_W);
		char shown[512];
		size_t len =
		    strlen(mt_flame_short_name(n->name, shown, sizeof(shown)));

		fprintf(c->out, "<text x=\"%.2f\" y=\"%.1f\">", x + 3,
			y + ROW - 5);
		mt_svg_text(c->out, shown, len <= fit ? len : fit - 2);
		fputs(len <= fit ? "" : "..", c->out);
		fputs("</text>", c->out);
	}
	fputs("</g>\n", c->out);
	for (const struct node *k = n->child; k; k = k->next) {
		draw(c, k, x, depth + 1);
		x += (double)k->value[c->metric] * c->scale;
	}
}

static const char *metric_title(enum mt_site_space space, enum mt_site_metric m)
{
	if (m == MT_SITE_LEAKED)
		return space == MT_SITES_MAPPED
			   ? "bytes not unmapped (mapped when their process "
			     "ended)"
			   : "bytes not freed (live when their process ended)";
	return mt_site_metric_words(space, m);
}

int mt_flame_svg(FILE *out, json_t *doc, enum mt_site_space space,
		 enum mt_site_metric m)
{
	struct node root = {.name = "all"};
	struct canvas c = {.out = out, .metric = m};
	char value[64];

	if (tree_build(&root, doc, space) < 0) {
		tree_free(root.child);
		errno = ENOMEM;
		return -1;
	}
	c.total = root.value[m];
	c.scale = c.total ? (W - 2 * PAD) / (double)c.total : 0;
	c.height = TITLE_H + tree_depth(&root, m) * ROW + 2 * PAD;
	value_text(value, sizeof(value), m, c.total);
	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"monospace\" font-size=\"11\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#fdfdf6\"/>\n"
		"<text x=\"%.0f\" y=\"24\" font-size=\"16\" "
		"text-anchor=\"middle\">%s sites: %s</text>\n"
		"<text x=\"%.0f\" y=\"40\" text-anchor=\"middle\" "
		"fill=\"#555\">total %s; callers above callees; hover a "
		"frame for its value</text>\n",
		W, c.height, W, c.height, W / 2,
		space == MT_SITES_MAPPED ? "Address-space" : "Allocation",
		metric_title(space, m), W / 2, value);
	if (c.total)
		draw(&c, &root, PAD, 0);
	else
		fprintf(out,
			"<text x=\"%.0f\" y=\"%.0f\" "
			"text-anchor=\"middle\">no %s "
			"site with a value</text>\n",
			W / 2, TITLE_H + PAD + ROW,
			space == MT_SITES_MAPPED ? "address-space"
						 : "allocation");
	fputs("</svg>\n", out);
	tree_free(root.child);
	forget_truncated_names(doc, space);
	return ferror(out) ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* JSON, for the HTML page's script                                     */

/* {"n": name, "v": [values by metric], "c": [children]}; children in name
 * order, "c" left out of leaves */
static json_t *node_json(const struct node *n)
{
	json_t *o = json_object(), *v = json_array(), *c = json_array();

	for (int m = 0; m < MT_SITE_METRICS; m++)
		json_array_append_new(v, json_integer((json_int_t)n->value[m]));
	char shown[512];

	json_object_set_new(o, "n", json_string(n->name));
	if (strcmp(mt_flame_short_name(n->name, shown, sizeof(shown)), n->name))
		json_object_set_new(o, "s", json_string(shown));
	json_object_set_new(o, "v", v);
	for (const struct node *k = n->child; k; k = k->next)
		json_array_append_new(c, node_json(k));
	if (json_array_size(c))
		json_object_set_new(o, "c", c);
	else
		json_decref(c);
	return o;
}

json_t *mt_flame_tree_json(json_t *doc, enum mt_site_space space)
{
	struct node root = {.name = "all"};
	json_t *o = NULL;

	if (tree_build(&root, doc, space) == 0)
		o = node_json(&root);
	tree_free(root.child);
	forget_truncated_names(doc, space);
	return o;
}
