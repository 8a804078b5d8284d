// SPDX-License-Identifier: MIT
/*
 * report.c - mt-report's summary, facts, gates and comparison, all read
 * from a timelines document so that every input reports the same way.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_report.h"

/* ------------------------------------------------------------------ */
/* Loading                                                              */

/* A stream that first replays bytes already read, then continues from the
 * underlying file: lets us look at the start of a pipe and still hand the
 * whole stream to whichever reader it needs. */
struct replay {
	FILE *f;
	char *head;
	size_t len, pos;
};

static ssize_t replay_read(void *cookie, char *buf, size_t n)
{
	struct replay *r = cookie;

	if (r->pos < r->len) {
		size_t k = r->len - r->pos < n ? r->len - r->pos : n;

		memcpy(buf, r->head + r->pos, k);
		r->pos += k;
		return (ssize_t)k;
	}
	size_t k = fread(buf, 1, n, r->f);

	return k == 0 && ferror(r->f) ? -1 : (ssize_t)k;
}

static int replay_close(void *cookie)
{
	struct replay *r = cookie;
	int rc = r->f == stdin ? 0 : fclose(r->f);

	free(r->head);
	free(r);
	return rc;
}

static bool format_key_first(const char *s, size_t n);

/* mt-reconstruct writes "format" first: {"format":"mt-timelines", ...;
 * a JSON tool may have moved it (jq -S).  The pair cannot occur inside a
 * JSON string (its quotes would be escaped), nor in JSON Lines, whose
 * only "format" is the header's "mt". */
static bool looks_like_timelines(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n &&
	       (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i >= n || s[i] != '{')
		return false;
	if (memmem(s, n, "\"format\":\"mt-timelines\"", 23) ||
	    memmem(s, n, "\"format\": \"mt-timelines\"", 24))
		return true;
	return format_key_first(s, n);
}

static bool format_key_first(const char *s, size_t n)
{
	static const char key[] = "\"format\"", val[] = "\"mt-timelines\"";
	size_t i = 0;

#define SKIP_WS                                                                \
	while (i < n &&                                                        \
	       (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))  \
	i++
	SKIP_WS;
	if (i >= n || s[i++] != '{')
		return false;
	SKIP_WS;
	if (n - i < sizeof(key) - 1 || memcmp(s + i, key, sizeof(key) - 1))
		return false;
	i += sizeof(key) - 1;
	SKIP_WS;
	if (i >= n || s[i++] != ':')
		return false;
	SKIP_WS;
#undef SKIP_WS
	return n - i >= sizeof(val) - 1 && !memcmp(s + i, val, sizeof(val) - 1);
}

static json_t *load_timelines(FILE *f, const char *name, char *err,
			      size_t errlen)
{
	json_error_t jerr;
	json_t *doc = json_loadf(f, JSON_DISABLE_EOF_CHECK, &jerr);
	json_t *version;

	if (!doc) {
		snprintf(err, errlen, "%s: byte %d: timelines JSON: %s", name,
			 jerr.position, jerr.text);
		return NULL;
	}
	version = json_object_get(doc, "version");
	if (!json_is_integer(version) ||
	    json_integer_value(version) != MT_TIMELINES_VERSION ||
	    !json_is_object(json_object_get(doc, "tree"))) {
		snprintf(err, errlen,
			 "%s: byte 0: timelines JSON: not version %d of "
			 "mt-timelines",
			 name, MT_TIMELINES_VERSION);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* With --section: the document must be of that section, and the section
 * must have happened. */
static json_t *check_section(json_t *doc, const struct mt_recon_opts *opts,
			     const char *name, char *err, size_t errlen)
{
	json_t *sec = json_object_get(doc, "section");
	const char *want = opts ? opts->section : NULL;
	const char *got = json_string_value(json_object_get(sec, "name"));

	if (!doc || !want)
		return doc;
	if (!got || strcmp(got, want)) {
		snprintf(err, errlen,
			 "%s: timelines not made for --section %s (run "
			 "mt-reconstruct --section %s, or report the trace)",
			 name, want, want);
		json_decref(doc);
		return NULL;
	}
	if (!json_array_size(json_object_get(sec, "intervals"))) {
		snprintf(err, errlen, "%s: --section %s: no marker \"%s\"",
			 name, want, want);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* An event stream (or timelines not starting with "format") from s. */
static json_t *load_stream(FILE *s, const char *path, const char *name,
			   const struct mt_recon_opts *opts, char *err,
			   size_t errlen)
{
	struct mt_input *in = mt_input_fopen(s, name, err, errlen);
	json_t *doc;

	if (!in)
		return NULL;
	if (mt_input_format(in) == MT_FMT_TIMELINES) {
		/* timelines whose "format" is not the first key (re-sorted
		 * by some JSON tool): a file can be read again from the
		 * start, a pipe cannot */
		FILE *again = name == path ? fopen(path, "rb") : NULL;

		mt_input_close(in);
		if (!again) {
			snprintf(err, errlen,
				 "%s: byte 0: timelines JSON must start with "
				 "\"format\" when read from a pipe",
				 name);
			return NULL;
		}
		doc = load_timelines(again, name, err, errlen);
		fclose(again);
		return check_section(doc, opts, name, err, errlen);
	}
	doc = mt_recon_input(in, opts, NULL);
	mt_input_close(in);
	if (!doc)
		snprintf(err, errlen, "%s: out of memory", name);
	return check_section(doc, opts, name, err, errlen);
}

json_t *mt_report_load(const char *path, const struct mt_recon_opts *opts,
		       char *err, size_t errlen)
{
	const char *name = !path || !strcmp(path, "-") ? "<stdin>" : path;
	FILE *f = name == path ? fopen(path, "rb") : stdin;
	struct replay *r;
	off_t start;
	FILE *s;
	json_t *doc;

	if (!f) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->head = malloc(4096))) {
		free(r);
		snprintf(err, errlen, "%s: out of memory", name);
		return NULL;
	}
	r->f = f;
	start = ftello(f);
	r->len = fread(r->head, 1, 4096, f);
	/* An event stream that can be read again from where it started is
	 * handed to the reader as is (which maps a regular file whole): the
	 * replay of the head, a copy more, is for pipes. */
	if (!looks_like_timelines(r->head, r->len) && start >= 0 &&
	    fseeko(f, start, SEEK_SET) == 0) {
		free(r->head);
		free(r);
		return load_stream(f, path, name, opts, err, errlen);
	}
	s = fopencookie(r, "rb",
			(cookie_io_functions_t){.read = replay_read,
						.close = replay_close});
	if (!s) {
		replay_close(r);
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return NULL;
	}
	if (looks_like_timelines(r->head, r->len)) {
		doc = load_timelines(s, name, err, errlen);
		fclose(s);
		return check_section(doc, opts, name, err, errlen);
	}
	return load_stream(s, path, name, opts, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Accessors                                                            */

json_t *mt_json_path(json_t *doc, const char *path)
{
	char key[64];

	while (doc && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		doc = json_object_get(doc, key);
		path += n + (path[n] == '.');
	}
	return doc;
}

uint64_t mt_json_u64(json_t *doc, const char *path, uint64_t def)
{
	json_t *v = mt_json_path(doc, path);

	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	if (json_is_real(v)) {
		double d = json_real_value(v);

		/* a cast out of range is undefined: clamp */
		return d <= 0 ? 0 : d >= 0x1p64 ? UINT64_MAX : (uint64_t)d;
	}
	return def;
}

static double json_num(json_t *doc, const char *path)
{
	json_t *v = mt_json_path(doc, path);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* All processes of the run, also when the document lists only some. */
static size_t process_count(json_t *doc)
{
	size_t listed = json_array_size(json_object_get(doc, "processes"));

	return mt_json_u64(doc, "processes_count", listed);
}

static bool allocators_tracked(json_t *doc)
{
	return !json_is_false(json_object_get(doc, "allocators_tracked"));
}

static bool is_complete(json_t *doc)
{
	return json_is_true(mt_json_path(doc, "input.complete"));
}

const char *mt_report_command(json_t *doc, char *buf, size_t len)
{
	json_t *cmd = json_object_get(doc, "command");
	size_t o = 0, i;
	json_t *arg;

	buf[0] = '\0';
	json_array_foreach(cmd, i, arg)
	{
		const char *a = json_string_value(arg);

		if (a && o < len)
			o += (size_t)snprintf(buf + o, len - o, "%s%s",
					      i ? " " : "", a);
	}
	return buf;
}

/* The program a process last ran: its last exec, or for the root process
 * the command. */
static const char *proc_name(json_t *doc, json_t *p)
{
	json_t *execs = json_object_get(p, "execs");
	const char *path = NULL, *slash;

	if (json_array_size(execs))
		path = json_string_value(json_object_get(
		    json_array_get(execs, json_array_size(execs) - 1), "path"));
	if (!path && json_equal(json_object_get(p, "pid"),
				json_object_get(doc, "root_pid")))
		path = json_string_value(
		    json_array_get(json_object_get(doc, "command"), 0));
	if (!path)
		return "?";
	slash = strrchr(path, '/');
	return slash && slash[1] ? slash + 1 : path;
}

/* ------------------------------------------------------------------ */
/* Rows of the table                                                    */

struct row {
	json_t *src; /* tree or process object */
	double weight;
};

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->weight < y->weight ? 1 : x->weight > y->weight ? -1 : 0;
}

/* Processes, heaviest first: by peak heap, then by peak mapped. */
static struct row *sorted_processes(json_t *doc, size_t *n)
{
	json_t *procs = json_object_get(doc, "processes");
	struct row *rows = calloc(json_array_size(procs) + 1, sizeof(*rows));
	size_t i;
	json_t *p;

	*n = 0;
	if (!rows)
		return NULL;
	json_array_foreach(procs, i, p)
	{
		rows[*n].src = p;
		/* heap first; RSS, then mapped, break ties (and order runs
		 * that did not track allocators) */
		rows[*n].weight =
		    (double)mt_json_u64(p, "heap.peak", 0) * 1e6 +
		    (double)mt_json_u64(p, "rss.total.peak", 0) +
		    (double)mt_json_u64(p, "mapped.peak", 0) * 1e-6;
		(*n)++;
	}
	qsort(rows, *n, sizeof(*rows), row_cmp);
	return rows;
}

static const char *size_or_dash(char *buf, size_t len, json_t *o,
				const char *path, bool tracked)
{
	json_t *v = mt_json_path(o, path);

	if (!tracked || !json_is_number(v))
		return "-";
	return mt_fmt_bytes(buf, len, json_number_value(v));
}

static const char *count_or_dash(char *buf, size_t len, json_t *o,
				 const char *path, bool tracked)
{
	json_t *v = mt_json_path(o, path);

	if (!tracked || !json_is_integer(v))
		return "-";
	return mt_fmt_count(buf, len, (uint64_t)json_integer_value(v));
}

/* label cut to width characters (not bytes: program names may be UTF-8)
 * and padded to it */
static const char *fit(char *buf, size_t len, const char *label, int width)
{
	size_t o = 0;
	int chars = 0;

	for (const char *s = label; *s && chars < width; chars++) {
		size_t n = 1;

		while ((s[n] & 0xc0) == 0x80) /* continuation bytes */
			n++;
		if (o + n + 1 > len)
			break;
		memcpy(buf + o, s, n);
		o += n;
		s += n;
	}
	while (chars++ < width && o + 2 <= len)
		buf[o++] = ' ';
	buf[o] = '\0';
	return buf;
}

static void print_row(FILE *out, const char *label, json_t *o, bool tracked,
		      bool rss)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], l[128];

	fprintf(
	    out, "%s %10s %11s %11s %11s %9s %10s %11s%*s\n",
	    fit(l, sizeof(l), label, 22),
	    size_or_dash(a, sizeof(a), o, "heap.peak", tracked),
	    size_or_dash(b, sizeof(b), o, "totals.allocated_bytes", tracked),
	    count_or_dash(c, sizeof(c), o, "totals.allocations", tracked),
	    count_or_dash(d, sizeof(d), o, "totals.frees", tracked),
	    size_or_dash(e, sizeof(e), o, "totals.average_size", tracked),
	    size_or_dash(f, sizeof(f), o, "leaks.bytes", tracked),
	    size_or_dash(g, sizeof(g), o, "mapped.peak", true), rss ? 10 : 0,
	    rss ? size_or_dash(h, sizeof(h), o, "rss.total.peak", true) : "");
}

static void print_exit(FILE *out, json_t *ex)
{
	json_t *code = json_object_get(ex, "code");
	json_t *sig = json_object_get(ex, "signal");

	if (json_is_integer(code))
		fprintf(out, "%lld\n", (long long)json_integer_value(code));
	else if (json_is_integer(sig))
		fprintf(out, "killed by signal %lld\n",
			(long long)json_integer_value(sig));
	else
		fprintf(out, "unknown\n");
}

static void print_histogram(FILE *out, json_t *doc)
{
	json_t *hist = mt_json_path(doc, "tree.histogram");
	uint64_t most = 0;
	size_t i;
	json_t *h;

	if (!json_array_size(hist))
		return;
	json_array_foreach(hist, i, h)
	{
		uint64_t c = mt_json_u64(h, "count", 0);

		if (c > most)
			most = c;
	}
	fprintf(out, "\nallocation sizes (power-of-two buckets)\n");
	fprintf(out, "  %-24s %13s %11s\n", "size", "count", "bytes");
	json_array_foreach(hist, i, h)
	{
		char range[64], lo[24], hi[24], c[32], b[32];
		uint64_t from = mt_json_u64(h, "from", 0);
		uint64_t to = mt_json_u64(h, "to", 0);
		uint64_t count = mt_json_u64(h, "count", 0);
		int bar = most ? (int)((count * 30 + most - 1) / most) : 0;

		if (from == to)
			snprintf(range, sizeof(range), "%s",
				 mt_fmt_bytes(lo, sizeof(lo), (double)from));
		else /* [from, to + 1): 2 MiB - 1 would print as 2.00 MiB */
			snprintf(range, sizeof(range), "[%s, %s)",
				 mt_fmt_bytes(lo, sizeof(lo), (double)from),
				 mt_fmt_bytes(hi, sizeof(hi), (double)to + 1));
		fprintf(out, "  %-24s %13s %11s  %.*s\n", range,
			mt_fmt_count(c, sizeof(c), count),
			mt_fmt_bytes(b, sizeof(b),
				     (double)mt_json_u64(h, "bytes", 0)),
			bar, "##############################");
	}
}

static void print_top_sizes(FILE *out, json_t *doc)
{
	json_t *sizes = mt_json_path(doc, "tree.top_sizes.sizes");
	size_t i;
	json_t *s;

	if (!json_array_size(sizes))
		return;
	fprintf(out, "\nmost frequent sizes\n  %12s %13s\n", "size", "count");
	json_array_foreach(sizes, i, s)
	{
		char c[32], n[32];

		fprintf(out, "  %12s %13s\n",
			mt_fmt_count(n, sizeof(n), mt_json_u64(s, "size", 0)),
			mt_fmt_count(c, sizeof(c), mt_json_u64(s, "count", 0)));
	}
	if (mt_json_u64(doc, "tree.top_sizes.untracked_allocations", 0))
		fprintf(out,
			"  (more than %llu distinct sizes: the rest were not "
			"counted)\n",
			(unsigned long long)mt_json_u64(
			    doc, "tree.top_sizes.distinct_max", 0));
}

static void print_leaks(FILE *out, json_t *doc, unsigned top)
{
	json_t *blocks = mt_json_path(doc, "tree.leaks.blocks");
	size_t i;
	json_t *b;

	if (!json_array_size(blocks))
		return;
	fprintf(out, "\nlargest blocks still live at exit, exec or end\n");
	fprintf(out, "  %8s %11s %18s %12s %s\n", "pid", "size", "address",
		"allocated", "at");
	json_array_foreach(blocks, i, b)
	{
		char s[32], t[32];

		if (top && i >= top)
			break;
		fprintf(out, "  %8llu %11s %#18llx %12s %s\n",
			(unsigned long long)mt_json_u64(b, "pid", 0),
			mt_fmt_bytes(s, sizeof(s),
				     (double)mt_json_u64(b, "size", 0)),
			(unsigned long long)mt_json_u64(b, "addr", 0),
			mt_fmt_duration(t, sizeof(t),
					mt_json_u64(b, "first_seen_ns", 0)),
			json_string_value(json_object_get(b, "at")));
	}
}

/* "peak RSS    1.00 MiB at 3 ms" when the series exists */
static void print_peak(FILE *out, json_t *doc, const char *fmt,
		       const char *path)
{
	json_t *s = mt_json_path(doc, path);
	char v[32], t[32];

	if (!json_is_object(s))
		return;
	fprintf(out, fmt,
		mt_fmt_bytes(v, sizeof(v), (double)mt_json_u64(s, "peak", 0)),
		mt_fmt_duration(t, sizeof(t), mt_json_u64(s, "peak_t_ns", 0)));
	fputc('\n', out);
}

/* "section     bench: 2 intervals, 1.50 ms (figures below count only
 * inside it)" */
static void print_section(FILE *out, json_t *doc)
{
	json_t *sec = json_object_get(doc, "section");
	size_t n = json_array_size(json_object_get(sec, "intervals"));
	char d[32];

	if (!json_is_object(sec))
		return;
	fprintf(
	    out,
	    "section     %s: %zu interval%s, %s (figures below count only "
	    "inside it)\n",
	    json_string_value(json_object_get(sec, "name")), n,
	    n == 1 ? "" : "s",
	    mt_fmt_duration(d, sizeof(d), mt_json_u64(sec, "duration_ns", 0)));
}

/* "markers     bench x2, bench-end x2": the names --section can use */
static void print_markers(FILE *out, json_t *doc)
{
	json_t *markers = json_object_get(doc, "markers"), *m;
	json_t *seen = json_object();
	const char *name;
	json_t *count;
	size_t i, shown = 0;

	json_array_foreach(markers, i, m)
	{
		name = json_string_value(json_object_get(m, "name"));
		if (!name || !json_is_object(seen))
			continue;
		count = json_object_get(seen, name);
		json_object_set_new(
		    seen, name, json_integer(json_integer_value(count) + 1));
	}
	json_object_foreach(seen, name, count)
	{
		if (shown == 8) {
			fprintf(out, ", ...");
			break;
		}
		fprintf(out, "%s%s x%lld", shown++ ? ", " : "markers     ",
			name, (long long)json_integer_value(count));
	}
	if (shown)
		fputc('\n', out);
	json_decref(seen);
}

void mt_report_text(FILE *out, json_t *doc, unsigned top)
{
	bool tracked = allocators_tracked(doc);
	bool rss = json_is_object(mt_json_path(doc, "tree.rss"));
	char buf[4096], n1[32], n2[32];
	size_t nrows;
	struct row *rows;

	if (!is_complete(doc)) {
		const char *why =
		    json_string_value(mt_json_path(doc, "input.error"));

		fprintf(out, "incomplete trace: %s\n",
			why ? why : "the stream ended without its trailer");
		fprintf(out,
			"(figures below cover only what was recorded)\n\n");
	}
	fprintf(out, "command     %s\n",
		mt_report_command(doc, buf, sizeof(buf)));
	fprintf(out, "exit        ");
	print_exit(out, json_object_get(doc, "exit"));
	fprintf(out, "duration    %s\n",
		mt_fmt_duration(buf, sizeof(buf),
				mt_json_u64(doc, "duration_ns", 0)));
	print_section(out, doc);
	print_markers(out, doc);
	fprintf(out, "processes   %s\n",
		mt_fmt_count(n1, sizeof(n1), process_count(doc)));
	fprintf(
	    out, "events      %s (lost %s)\n",
	    mt_fmt_count(n1, sizeof(n1), mt_json_u64(doc, "events", 0)),
	    mt_fmt_count(n2, sizeof(n2), mt_json_u64(doc, "lost_events", 0)));
	if (!tracked)
		fprintf(out, "allocators  not tracked: heap figures are not "
			     "available for this run\n");
	if (tracked && mt_json_u64(doc, "tree.totals.unknown_frees", 0))
		fprintf(out,
			"unknown     %s frees of addresses never allocated "
			"in the trace\n",
			mt_fmt_count(
			    n1, sizeof(n1),
			    mt_json_u64(doc, "tree.totals.unknown_frees", 0)));
	if (tracked)
		fprintf(
		    out, "peak heap   %s at %s\n",
		    mt_fmt_bytes(n1, sizeof(n1),
				 (double)mt_json_u64(doc, "tree.heap.peak", 0)),
		    mt_fmt_duration(
			n2, sizeof(n2),
			mt_json_u64(doc, "tree.heap.peak_t_ns", 0)));

	print_peak(out, doc, "peak RSS    %s at %s", "tree.rss.total");
	print_peak(out, doc, "  anon      %s at %s", "tree.rss.anon");
	print_peak(out, doc, "peak phys   %s at %s", "tree.physical.total");

	fprintf(out, "\n%-22s %10s %11s %11s %11s %9s %10s %11s%*s\n", "",
		"peak heap", "allocated", "allocs", "frees", "avg size",
		"leaked", "peak mapped", rss ? 10 : 0, rss ? "peak rss" : "");
	print_row(out, "tree", json_object_get(doc, "tree"), tracked, rss);
	rows = sorted_processes(doc, &nrows);
	for (size_t i = 0; rows && i < nrows && (!top || i < top); i++) {
		char label[64];

		snprintf(label, sizeof(label), "%7llu %s",
			 (unsigned long long)mt_json_u64(rows[i].src, "pid", 0),
			 proc_name(doc, rows[i].src));
		print_row(out, label, rows[i].src, tracked, rss);
	}
	nrows = process_count(doc);
	if (top && nrows > top)
		fprintf(out, "(%zu more processes: --top 0 lists all)\n",
			nrows - top);
	free(rows);
	if (tracked) {
		print_histogram(out, doc);
		print_top_sizes(out, doc);
		print_leaks(out, doc, 10);
	}
}

/* ------------------------------------------------------------------ */
/* Facts for scripts                                                    */

static json_t *row_facts(json_t *o, bool tracked)
{
	json_t *f = json_object();
	static const struct {
		const char *key, *path;
		bool heap;
	} fields[] = {
	    {"peak_heap", "heap.peak", true},
	    {"peak_heap_t_ns", "heap.peak_t_ns", true},
	    {"total_allocated", "totals.allocated_bytes", true},
	    {"allocations", "totals.allocations", true},
	    {"frees", "totals.frees", true},
	    {"reallocs", "totals.reallocs", true},
	    {"average_size", "totals.average_size", true},
	    {"unknown_frees", "totals.unknown_frees", true},
	    {"leaked", "leaks.bytes", true},
	    {"leaked_blocks", "leaks.count", true},
	    {"peak_mapped", "mapped.peak", false},
	    {"peak_mapped_t_ns", "mapped.peak_t_ns", false},
	    {"peak_rss", "rss.total.peak", false},
	    {"peak_rss_t_ns", "rss.total.peak_t_ns", false},
	    {"peak_rss_anon", "rss.anon.peak", false},
	    {"peak_physical", "physical.total.peak", false},
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *v = mt_json_path(o, fields[i].path);

		json_object_set_new(f, fields[i].key,
				    (fields[i].heap && !tracked) || !v
					? json_null()
					: json_deep_copy(v));
	}
	return f;
}

json_t *mt_report_facts(json_t *doc, unsigned top)
{
	bool tracked = allocators_tracked(doc);
	json_t *f = json_object(), *procs = json_array();
	char buf[4096];
	size_t n;
	struct row *rows = sorted_processes(doc, &n);

	json_object_set_new(f, "command",
			    json_deep_copy(json_object_get(doc, "command")));
	json_object_set_new(
	    f, "command_line",
	    json_string(mt_report_command(doc, buf, sizeof(buf))));
	json_object_set_new(f, "complete", json_boolean(is_complete(doc)));
	json_object_set_new(f, "incomplete_reason",
			    json_deep_copy(mt_json_path(doc, "input.error")));
	json_object_set_new(f, "input_format",
			    json_deep_copy(mt_json_path(doc, "input.format")));
	json_object_set_new(f, "exit",
			    json_deep_copy(json_object_get(doc, "exit")));
	json_object_set_new(
	    f, "duration_ns",
	    json_deep_copy(json_object_get(doc, "duration_ns")));
	json_object_set_new(f, "section",
			    json_deep_copy(json_object_get(doc, "section")));
	json_object_set_new(f, "processes",
			    json_integer((json_int_t)process_count(doc)));
	json_object_set_new(f, "events",
			    json_deep_copy(json_object_get(doc, "events")));
	json_object_set_new(
	    f, "lost_events",
	    json_deep_copy(json_object_get(doc, "lost_events")));
	json_object_set_new(f, "allocators_tracked", json_boolean(tracked));
	json_object_set_new(f, "tree",
			    row_facts(json_object_get(doc, "tree"), tracked));
	for (size_t i = 0; rows && i < n && (!top || i < top); i++) {
		json_t *r = row_facts(rows[i].src, tracked);

		json_object_set_new(
		    r, "pid",
		    json_deep_copy(json_object_get(rows[i].src, "pid")));
		json_object_set_new(
		    r, "ppid",
		    json_deep_copy(json_object_get(rows[i].src, "ppid")));
		json_object_set_new(r, "name",
				    json_string(proc_name(doc, rows[i].src)));
		json_object_set_new(
		    r, "exit",
		    json_deep_copy(json_object_get(rows[i].src, "exit")));
		json_array_append_new(procs, r);
	}
	free(rows);
	json_object_set_new(f, "top_processes", procs);
	json_object_set_new(
	    f, "histogram",
	    tracked ? json_deep_copy(mt_json_path(doc, "tree.histogram"))
		    : json_null());
	json_object_set_new(
	    f, "top_sizes",
	    tracked ? json_deep_copy(mt_json_path(doc, "tree.top_sizes.sizes"))
		    : json_null());
	return f;
}

/* ------------------------------------------------------------------ */
/* Gates                                                                */

bool mt_gates_any(const struct mt_gates *g)
{
	return g->has_peak_heap || g->has_total_allocated ||
	       g->has_allocations || g->has_leaked || g->has_peak_rss ||
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
			 mt_fmt_bytes(a, sizeof(a), (double)v),
			 mt_fmt_bytes(b, sizeof(b), (double)limit));
	else
		snprintf(reason, len, "%s: %s exceeds the limit of %s", name,
			 mt_fmt_count(a, sizeof(a), v),
			 mt_fmt_count(b, sizeof(b), limit));
	return 1;
}

int mt_report_gates(json_t *doc, const struct mt_gates *g, char *reason,
		    size_t len, json_t *results)
{
	const char *heap =
	    allocators_tracked(doc) ? NULL : "allocators were not tracked";
	int failed = 0;

	if (g->strict) {
		uint64_t lost = mt_json_u64(doc, "lost_events", 0);
		bool ok = lost == 0 && is_complete(doc);

		if (results)
			json_array_append_new(
			    results,
			    json_pack("{s:s, s:I, s:b, s:b}", "gate", "strict",
				      "lost_events", (json_int_t)lost,
				      "complete", is_complete(doc), "ok", ok));
		if (lost) {
			snprintf(reason, len, "strict: %llu events were lost",
				 (unsigned long long)lost);
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
	if (g->has_leaked)
		failed =
		    gate(doc, "max-leaked", "tree.leaks.bytes", true,
			 g->max_leaked, heap, reason, len, results, failed);
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

static const struct metric {
	const char *name, *path;
	bool is_size, heap;
} metrics[] = {
    {"peak heap", "tree.heap.peak", true, true},
    {"total allocated", "tree.totals.allocated_bytes", true, true},
    {"allocations", "tree.totals.allocations", false, true},
    {"leaked", "tree.leaks.bytes", true, true},
    {"peak mapped", "tree.mapped.peak", true, false},
    {"peak rss", "tree.rss.total.peak", true, false},
    {"peak physical", "tree.physical.total.peak", true, false},
};

static void fmt_metric(char *buf, size_t len, const struct metric *m,
		       json_t *doc)
{
	json_t *v = mt_json_path(doc, m->path);

	if ((m->heap && !allocators_tracked(doc)) || !json_is_integer(v))
		snprintf(buf, len, "-");
	else if (m->is_size)
		mt_fmt_bytes(buf, len, (double)json_integer_value(v));
	else
		mt_fmt_count(buf, len, (uint64_t)json_integer_value(v));
}

int mt_report_compare(FILE *out, json_t *base, json_t *head, double max_growth,
		      bool as_json, char *reason, size_t len)
{
	json_t *rows = json_array();
	int failed = 0;

	if (!as_json) {
		if (!is_complete(base))
			fprintf(out, "incomplete trace: base\n");
		if (!is_complete(head))
			fprintf(out, "incomplete trace: head\n");
		fprintf(out, "%-18s %12s %12s %9s\n", "metric", "base", "head",
			"change");
	}
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		const struct metric *m = &metrics[i];
		bool known = !m->heap || (allocators_tracked(base) &&
					  allocators_tracked(head));
		double b = json_num(base, m->path), h = json_num(head, m->path);
		double pct = NAN;
		char bs[32], hs[32], cs[32];

		if (known && !isnan(b) && !isnan(h))
			pct = b > 0   ? (h - b) / b * 100.0
			      : h > 0 ? INFINITY
				      : 0;
		if (isnan(pct))
			snprintf(cs, sizeof(cs), "-");
		else if (isinf(pct))
			snprintf(cs, sizeof(cs), "new");
		else
			snprintf(cs, sizeof(cs), "%+.1f%%", pct);
		bool grew = !isnan(pct) && max_growth >= 0 && pct > max_growth;

		if (grew && !failed) {
			snprintf(reason, len, "%s grew by %s (limit %.4g%%)",
				 m->name, cs, max_growth);
			failed = 1;
		}
		fmt_metric(bs, sizeof(bs), m, base);
		fmt_metric(hs, sizeof(hs), m, head);
		if (!as_json) {
			fprintf(out, "%-18s %12s %12s %9s%s\n", m->name, bs, hs,
				cs, grew ? "  FAIL" : "");
			continue;
		}
		json_t *r =
		    json_pack("{s:s, s:o, s:o}", "metric", m->name, "base",
			      known && !isnan(b)
				  ? json_deep_copy(mt_json_path(base, m->path))
				  : json_null(),
			      "head",
			      known && !isnan(h)
				  ? json_deep_copy(mt_json_path(head, m->path))
				  : json_null());
		json_object_set_new(r, "change_pct",
				    isnan(pct) || isinf(pct) ? json_null()
							     : json_real(pct));
		json_object_set_new(r, "ok", json_boolean(!grew));
		json_array_append_new(rows, r);
	}
	if (as_json) {
		json_t *o = json_pack("{s:o, s:b, s:b, s:b}", "metrics", rows,
				      "base_complete", is_complete(base),
				      "head_complete", is_complete(head), "ok",
				      !failed);

		json_object_set_new(o, "reason",
				    failed ? json_string(reason) : json_null());
		json_dumpf(o, out, JSON_INDENT(2));
		fputc('\n', out);
		json_decref(o);
	} else {
		json_decref(rows);
	}
	return failed;
}
