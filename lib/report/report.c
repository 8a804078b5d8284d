// SPDX-License-Identifier: MIT
/*
 * report.c - mt-report's summary and facts, read from a timelines
 * document so that every input reports the same way (gates and the
 * comparison of two runs: compare.c).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_report.h"
#include "report_int.h"

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

/* o's "leaks", as earlier versions of mt-reconstruct called it, renamed
 * "not_freed" */
static void rename_leaks(json_t *o)
{
	json_t *leaks = json_object_get(o, "leaks");

	if (leaks && !json_object_get(o, "not_freed")) {
		json_object_set(o, "not_freed", leaks);
		json_object_del(o, "leaks");
	}
}

static void upgrade_timelines(json_t *doc)
{
	json_t *p;
	size_t i;

	rename_leaks(json_object_get(doc, "tree"));
	json_array_foreach(json_object_get(doc, "processes"), i, p)
	    rename_leaks(p);
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
	upgrade_timelines(doc);
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

/* The bytes of timelines the reader found, for jansson: decompressed
 * when they are zstd frames; the first error of the reader kept. */
struct timelines_text {
	struct mt_input *in;
	bool failed;
};

static ssize_t timelines_text_read(void *cookie, char *buf, size_t size)
{
	struct timelines_text *t = cookie;
	ssize_t n = mt_input_read_text(t->in, buf, size);

	t->failed |= n < 0;
	return n;
}

/*
 * Timelines the reader told from an event stream: compressed ones, and
 * plain ones whose "format" is not the first key (re-sorted by some JSON
 * tool), read through it from file or pipe.
 */
static json_t *load_timelines_input(struct mt_input *in, const char *name,
				    char *err, size_t errlen)
{
	struct timelines_text t = {.in = in};
	FILE *text = fopencookie(
	    &t, "rb", (cookie_io_functions_t){.read = timelines_text_read});
	json_t *doc;

	if (!text) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return NULL;
	}
	doc = load_timelines(text, name, err, errlen);
	fclose(text);
	if (!doc && t.failed) /* the input's own error says where */
		snprintf(err, errlen, "%s", mt_input_error(in));
	return doc;
}

/* An event stream, or timelines the head did not show, from s. */
static json_t *load_stream(FILE *s, const char *name,
			   const struct mt_recon_opts *opts, char *err,
			   size_t errlen)
{
	struct mt_input *in = mt_input_fopen(s, name, err, errlen);
	json_t *doc;

	if (!in)
		return NULL;
	if (mt_input_format(in) == MT_FMT_TIMELINES) {
		doc = load_timelines_input(in, name, err, errlen);
		mt_input_close(in);
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
		return load_stream(f, name, opts, err, errlen);
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
	return load_stream(s, name, opts, err, errlen);
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

/* All processes of the run, also when the document lists only some. */
static size_t process_count(json_t *doc)
{
	size_t listed = json_array_size(json_object_get(doc, "processes"));

	return mt_json_u64(doc, "processes_count", listed);
}

bool mt_report_allocators_tracked(json_t *doc)
{
	return !json_is_false(json_object_get(doc, "allocators_tracked"));
}

bool mt_report_is_complete(json_t *doc)
{
	return json_is_true(mt_json_path(doc, "input.complete"));
}

const char *mt_report_incomplete(json_t *doc)
{
	const char *why = json_string_value(mt_json_path(doc, "input.error"));

	if (mt_report_is_complete(doc))
		return NULL;
	return why ? why : "the stream ended without its trailer";
}

/* What a POSIX shell reads as one word without quotes. */
static bool shell_plain(const char *a)
{
	if (!*a)
		return false;
	for (; *a; a++)
		if (!strchr(
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789_@%+=:,./-",
			*a) ||
		    (unsigned char)*a >= 0x80)
			return false;
	return true;
}

/* a in single quotes, each ' as '\'' */
static size_t shell_quote(char *buf, size_t len, size_t o, const char *a)
{
	if (shell_plain(a))
		return o + (size_t)snprintf(buf + o, len - o, "%s", a);
	o += (size_t)snprintf(buf + o, len - o, "'");
	for (; *a && o < len; a++)
		o +=
		    (size_t)snprintf(buf + o, len - o, "%s",
				     *a == '\'' ? "'\\''" : (char[]){*a, '\0'});
	return o < len ? o + (size_t)snprintf(buf + o, len - o, "'") : o;
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

		if (!a || o + 1 >= len)
			continue;
		if (i)
			buf[o++] = ' ';
		buf[o] = '\0';
		o = shell_quote(buf, len, o, a);
	}
	return buf;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

/* pid -> process object, for walking up to parents (new reference) */
static json_t *index_processes(json_t *doc)
{
	json_t *by_pid = json_object(), *p;
	size_t i;

	json_array_foreach(json_object_get(doc, "processes"), i, p)
	{
		char key[24];

		snprintf(key, sizeof(key), "%llu",
			 (unsigned long long)mt_json_u64(p, "pid", 0));
		json_object_set(by_pid, key, p);
	}
	return by_pid;
}

static json_t *parent_of(json_t *by_pid, json_t *p)
{
	char key[24];

	if (!json_is_integer(json_object_get(p, "ppid")))
		return NULL;
	snprintf(key, sizeof(key), "%llu",
		 (unsigned long long)mt_json_u64(p, "ppid", 0));
	return json_object_get(by_pid, key);
}

/*
 * The program a process last ran: its "program" when the timelines give
 * one (mt-reconstruct knows every process), else its last exec; without one,
 * what its parent ran (a fork without exec runs its parent's program), up to
 * the root process, which ran the command.  "?" when the chain leaves the
 * document.
 */
static const char *proc_program_name(json_t *doc, json_t *by_pid, json_t *p)
{
	/* a chain of parents is a few links; the bound stops a cycle in a
	 * crafted document */
	for (int depth = 0; p && depth < 64; depth++) {
		const char *name =
		    json_string_value(json_object_get(p, "program"));
		json_t *execs = json_object_get(p, "execs");
		size_t n = json_array_size(execs);

		if (name)
			return base_name(name);
		if (n)
			name = json_string_value(json_object_get(
			    json_array_get(execs, n - 1), "path"));
		else if (json_equal(json_object_get(p, "pid"),
				    json_object_get(doc, "root_pid")))
			name = json_string_value(
			    json_array_get(json_object_get(doc, "command"), 0));
		if (name || n)
			return name ? base_name(name) : "?";
		p = parent_of(by_pid, p);
	}
	return "?";
}

/*
 * How a process is named: its command line (mt-reconstruct's
 * "command_line", quoted and with no control character), the first word's
 * directories left out when it has them and no quote ("git gc --auto",
 * not "/usr/bin/git gc --auto"); else, for timelines without it (mt 0.4
 * and earlier), the program's name.
 */
static const char *proc_name(json_t *doc, json_t *by_pid, json_t *p)
{
	const char *line =
	    json_string_value(json_object_get(p, "command_line"));
	size_t first;

	if (!line || !*line)
		return proc_program_name(doc, by_pid, p);
	first = strcspn(line, " ");
	if (!memchr(line, '\'', first) && !memchr(line, '$', first))
		for (size_t i = first; i > 0; i--)
			if (line[i - 1] == '/' && i < first)
				return line + i;
	return line;
}

/*
 * What was not freed: every block still allocated when its process
 * exited or exec'd, or the trace ended, reachable or not (man mt-report).
 */

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

size_t mt_report_heaviest(json_t *doc, size_t n, json_t **procs,
			  const char **names)
{
	json_t *by_pid = index_processes(doc);
	size_t nrows, k = 0;
	struct row *rows = sorted_processes(doc, &nrows);

	for (; rows && k < nrows && k < n; k++) {
		procs[k] = rows[k].src;
		names[k] = proc_name(doc, by_pid, rows[k].src);
	}
	free(rows);
	json_decref(by_pid);
	return k;
}

static const char *size_or_dash(char *buf, size_t len, json_t *o,
				const char *path, bool tracked)
{
	json_t *v = mt_json_path(o, path);

	if (!tracked || !json_is_number(v))
		return "-";
	/* an average is a real: rounded, not cut */
	if (json_is_real(v) && json_real_value(v) < 0x1p63)
		return mt_fmt_bytes(buf, len,
				    (uint64_t)llround(json_real_value(v)));
	return mt_fmt_bytes(buf, len, mt_json_u64(o, path, 0));
}

static const char *count_or_dash(char *buf, size_t len, json_t *o,
				 const char *path, bool tracked)
{
	json_t *v = mt_json_path(o, path);

	if (!tracked || !json_is_integer(v))
		return "-";
	return mt_fmt_count(buf, len, (uint64_t)json_integer_value(v));
}

/* label cut to width characters (not bytes: program names may be UTF-8),
 * with an ellipsis when cut, and padded to it */
static const char *fit(char *buf, size_t len, const char *label, int width)
{
	size_t o = 0;
	int chars = 0;
	const char *s = label;

	for (; *s && chars < width; chars++) {
		size_t n = 1;

		while ((s[n] & 0xc0) == 0x80) /* continuation bytes */
			n++;
		if (o + n + 4 > len)
			break;
		memcpy(buf + o, s, n);
		o += n;
		s += n;
	}
	if (*s && chars > 0) { /* the last character makes room for "…" */
		while (o > 0 && (buf[o - 1] & 0xc0) == 0x80)
			o--;
		o--;
		memcpy(buf + o, "\xe2\x80\xa6", 3);
		o += 3;
	}
	while (chars++ < width && o + 2 <= len)
		buf[o++] = ' ';
	buf[o] = '\0';
	return buf;
}

/* The label column: wide enough for the longest program name shown (a
 * name is cut only past LABEL_MAX), never narrower than the header. */
#define LABEL_MIN 22
#define LABEL_MAX 64

static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* rss: the peak RSS column; tracer: and the tracer's resident bytes
 * (tracer_rss: the recorder's pages, not in peak rss) */
static void print_row(FILE *out, const char *label, int width, json_t *o,
		      bool tracked, bool rss, bool tracer)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], k[32];
	char l[LABEL_MAX * 4 + 1];

	fprintf(
	    out, "%s %10s %11s %11s %11s %9s %10s %11s%*s%*s\n",
	    fit(l, sizeof(l), label, width),
	    size_or_dash(a, sizeof(a), o, "heap.peak", tracked),
	    size_or_dash(b, sizeof(b), o, "totals.allocated_bytes", tracked),
	    count_or_dash(c, sizeof(c), o, "totals.allocations", tracked),
	    count_or_dash(d, sizeof(d), o, "totals.frees", tracked),
	    size_or_dash(e, sizeof(e), o, "totals.average_size", tracked),
	    size_or_dash(f, sizeof(f), o, NOT_FREED_BYTES, tracked),
	    size_or_dash(g, sizeof(g), o, "mapped.peak", true), rss ? 10 : 0,
	    rss ? size_or_dash(h, sizeof(h), o, "rss.total.peak", true) : "",
	    tracer ? 11 : 0,
	    tracer ? size_or_dash(k, sizeof(k), o, "tracer_rss", true) : "");
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
				 mt_fmt_bytes(lo, sizeof(lo), from));
		else /* [from, to + 1): 2 MiB - 1 would print as 2.00 MiB */
			snprintf(range, sizeof(range), "[%s, %s)",
				 mt_fmt_bytes(lo, sizeof(lo), from),
				 mt_fmt_bytes(hi, sizeof(hi),
					      to == UINT64_MAX ? to : to + 1));
		fprintf(out, "  %-24s %13s %11s  %.*s\n", range,
			mt_fmt_count(c, sizeof(c), count),
			mt_fmt_bytes(b, sizeof(b), mt_json_u64(h, "bytes", 0)),
			bar, "##############################");
	}
}

/* What the table's allocs and frees count, so that they add up:
 * allocs - frees - released by realloc = blocks not freed (timelines
 * without realloc_frees, of mt 0.4 and earlier: the words alone). */
static void print_counts_note(FILE *out, json_t *tree)
{
	json_t *v = mt_json_path(tree, "totals.realloc_frees");
	uint64_t n = mt_json_u64(tree, "totals.realloc_frees", 0);
	char a[32];

	fputs("\n(allocs: calls that returned a block, realloc's included; "
	      "frees: free() of a block\n",
	      out);
	if (json_is_integer(v))
		fprintf(out,
			" allocated in the trace; besides them realloc "
			"released %s block%s)\n",
			mt_fmt_count(a, sizeof(a), n), mt_plural(n));
	else
		fputs(" allocated in the trace, not those realloc "
		      "released)\n",
		      out);
}

/* "temporary   4 of 11 allocations (36.4%) freed before their
 * thread's next allocation" (timelines of mt 0.4 and earlier have no
 * count: nothing said) */
static void print_temporary(FILE *out, json_t *doc, bool tracked)
{
	json_t *v = mt_json_path(doc, "tree.totals.temporary");
	uint64_t n = mt_json_u64(doc, "tree.totals.temporary", 0);
	uint64_t all = mt_json_u64(doc, "tree.totals.allocations", 0);
	char a[32], b[32];

	if (!tracked || !json_is_integer(v))
		return;
	fprintf(out,
		"temporary   %s of %s allocation%s (%.1f%%) freed before "
		"their thread's next allocation\n",
		mt_fmt_count(a, sizeof(a), n), mt_fmt_count(b, sizeof(b), all),
		mt_plural(all), all ? 100.0 * (double)n / (double)all : 0.0);
}

/* How long the blocks freed lived, from the first bucket with any to
 * the last, then the blocks never freed. */
static void print_lifetimes(FILE *out, json_t *doc)
{
	json_t *life = mt_json_path(doc, "tree.lifetimes"), *h;
	size_t first = SIZE_MAX, last = 0, i;
	uint64_t most = 0;

	json_array_foreach(life, i, h)
	{
		uint64_t c = mt_json_u64(h, "count", 0);

		if (!c)
			continue;
		first = first < i ? first : i;
		last = i;
		most = c > most ? c : most;
	}
	if (first == SIZE_MAX)
		return;
	fprintf(out, "\nlifetimes of the blocks freed (allocation to free "
		     "or realloc)\n");
	fprintf(out, "  %-24s %13s %11s\n", "lifetime", "count", "bytes");
	for (i = first; i <= last; i++) {
		char range[64], lo[24], hi[24], c[32], b[32];
		uint64_t count;

		h = json_array_get(life, i);
		count = mt_json_u64(h, "count", 0);
		mt_fmt_duration(lo, sizeof(lo), mt_json_u64(h, "from_ns", 0));
		if (!json_is_integer(json_object_get(h, "to_ns")))
			snprintf(range, sizeof(range), "%s or more", lo);
		else if (!mt_json_u64(h, "from_ns", 0))
			snprintf(range, sizeof(range), "under %s",
				 mt_fmt_duration(hi, sizeof(hi),
						 mt_json_u64(h, "to_ns", 0)));
		else
			snprintf(range, sizeof(range), "[%s, %s)", lo,
				 mt_fmt_duration(hi, sizeof(hi),
						 mt_json_u64(h, "to_ns", 0)));
		fprintf(out, "  %-24s %13s %11s  %.*s\n", range,
			mt_fmt_count(c, sizeof(c), count),
			mt_fmt_bytes(b, sizeof(b), mt_json_u64(h, "bytes", 0)),
			(int)((count * 30 + most - 1) / most),
			"##############################");
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

static void print_not_freed(FILE *out, json_t *doc, unsigned most)
{
	json_t *blocks = mt_json_path(doc, NOT_FREED_LIST);
	size_t i;
	json_t *b;

	if (!json_array_size(blocks) || !most)
		return;
	fprintf(out, "\nlargest blocks not freed (still allocated at exit, "
		     "exec or the end of the trace)\n");
	fprintf(out, "  %8s %11s %18s %12s %s\n", "pid", "size", "address",
		"allocated", "at");
	json_array_foreach(blocks, i, b)
	{
		char s[32], t[32];

		if (i >= most)
			break;
		fprintf(out, "  %8llu %11s %#18llx %12s %s\n",
			(unsigned long long)mt_json_u64(b, "pid", 0),
			mt_fmt_bytes(s, sizeof(s), mt_json_u64(b, "size", 0)),
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
	fprintf(out, fmt, mt_fmt_bytes(v, sizeof(v), mt_json_u64(s, "peak", 0)),
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

/*
 * What makes every figure below uncertain, first: a truncated input, lost
 * events.  run names the run when there are two (--compare), else NULL.
 */
void mt_report_print_warnings(FILE *out, json_t *doc, const char *run)
{
	const char *why = mt_report_incomplete(doc);
	uint64_t lost = mt_json_u64(doc, "lost_events", 0);
	char n[32];

	if (why)
		fprintf(out,
			"incomplete trace%s%s: %s\n(figures %scover only what "
			"was recorded)\n",
			run ? " in " : "", run ? run : "", why,
			run ? "of this run " : "below ");
	if (lost)
		fprintf(out,
			"lost events%s%s: %s (a ring buffer was full: the "
			"figures miss them; --strict fails on any)\n",
			run ? " in " : "", run ? run : "",
			mt_fmt_count(n, sizeof(n), lost));
	if ((why || lost) && !run)
		fputc('\n', out);
}

void mt_report_text(FILE *out, json_t *doc, const struct mt_view *view)
{
	json_t *by_pid = index_processes(doc);
	int width = LABEL_MIN;
	bool tracked = mt_report_allocators_tracked(doc);
	bool rss = json_is_object(mt_json_path(doc, "tree.rss"));
	bool tracer_rss = rss && mt_json_u64(doc, "tree.tracer_rss", 0);
	const char *recording =
	    json_string_value(json_object_get(doc, "allocator_recording"));
	char buf[4096], n1[32], n2[32];
	size_t nrows;
	struct row *rows;

	mt_report_print_warnings(out, doc, NULL);
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
	else if (recording && strcmp(recording, "recorder") == 0)
		fprintf(out, "allocators  recorded in-process where the "
			     "recorder loaded, by probes elsewhere\n");
	else if (recording)
		fprintf(out, "allocators  recorded by probes (mt-trace "
			     "--no-fast)\n");
	if (tracked && mt_json_u64(doc, "tree.totals.unknown_frees", 0))
		fprintf(out,
			"unknown     %s free%s of addresses never allocated "
			"in the trace\n",
			mt_fmt_count(
			    n1, sizeof(n1),
			    mt_json_u64(doc, "tree.totals.unknown_frees", 0)),
			mt_plural(
			    mt_json_u64(doc, "tree.totals.unknown_frees", 0)));
	if (mt_json_u64(doc, "tree.tracer_mapped", 0) || tracer_rss)
		fprintf(out,
			"tracer      %s mapped, %s resident by mt-trace's "
			"recorder, not counted as the program's\n",
			mt_fmt_bytes(n1, sizeof(n1),
				     mt_json_u64(doc, "tree.tracer_mapped", 0)),
			mt_fmt_bytes(n2, sizeof(n2),
				     mt_json_u64(doc, "tree.tracer_rss", 0)));
	if (tracked)
		fprintf(out, "peak heap   %s at %s\n",
			mt_fmt_bytes(n1, sizeof(n1),
				     mt_json_u64(doc, "tree.heap.peak", 0)),
			mt_fmt_duration(
			    n2, sizeof(n2),
			    mt_json_u64(doc, "tree.heap.peak_t_ns", 0)));

	print_temporary(out, doc, tracked);
	print_peak(out, doc, "peak RSS    %s at %s", "tree.rss.total");
	print_peak(out, doc, "  anon      %s at %s", "tree.rss.anon");
	print_peak(out, doc, "peak phys   %s at %s", "tree.physical.total");

	rows = sorted_processes(doc, &nrows);
	for (size_t i = 0; rows && i < nrows && i < view->top; i++) {
		size_t w = 8 + utf8_chars(proc_name(doc, by_pid, rows[i].src));

		if (w > (size_t)width)
			width = w < LABEL_MAX ? (int)w : LABEL_MAX;
	}
	fprintf(out, "\n%-*s %10s %11s %11s %11s %9s %10s %11s%*s%*s\n", width,
		"", "peak heap", "allocated", "allocs", "frees", "avg size",
		"not freed", "peak mapped", rss ? 10 : 0, rss ? "peak rss" : "",
		tracer_rss ? 11 : 0, tracer_rss ? "tracer rss" : "");
	print_row(out, "tree", width, json_object_get(doc, "tree"), tracked,
		  rss, tracer_rss);
	for (size_t i = 0; rows && i < nrows && i < view->top; i++) {
		char label[LABEL_MAX * 4 + 1];

		snprintf(label, sizeof(label), "%7llu %s",
			 (unsigned long long)mt_json_u64(rows[i].src, "pid", 0),
			 proc_name(doc, by_pid, rows[i].src));
		print_row(out, label, width, rows[i].src, tracked, rss,
			  tracer_rss);
	}
	nrows = process_count(doc);
	if (nrows > view->top)
		fprintf(out, "(%zu more process%s: --top all lists all)\n",
			nrows - view->top, nrows - view->top == 1 ? "" : "es");
	if (tracked)
		print_counts_note(out, json_object_get(doc, "tree"));
	free(rows);
	json_decref(by_pid);
	if (tracked) {
		print_histogram(out, doc);
		print_lifetimes(out, doc);
		print_top_sizes(out, doc);
		print_not_freed(out, doc, view->leaks);
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
	    {"realloc_frees", "totals.realloc_frees", true},
	    {"average_size", "totals.average_size", true},
	    {"unknown_frees", "totals.unknown_frees", true},
	    {"temporary_allocations", "totals.temporary", true},
	    {"not_freed", NOT_FREED_BYTES, true},
	    {"not_freed_blocks", NOT_FREED_BLOCKS, true},
	    {"peak_mapped", "mapped.peak", false},
	    {"peak_mapped_t_ns", "mapped.peak_t_ns", false},
	    {"tracer_mapped", "tracer_mapped", false},
	    {"tracer_rss", "tracer_rss", false},
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

/* to[key] = a copy of from[key] (null when from has none), for each key */
static void copy_keys(json_t *to, const json_t *from, const char *const *keys,
		      size_t n)
{
	for (size_t k = 0; k < n; k++)
		json_object_set_new(
		    to, keys[k],
		    json_deep_copy(json_object_get(from, keys[k])));
}

/* The largest blocks not freed, at most most of them (new reference). */
static json_t *not_freed_list(json_t *doc, unsigned most)
{
	json_t *blocks = mt_json_path(doc, NOT_FREED_LIST);
	json_t *list = json_array(), *b;
	size_t i;

	json_array_foreach(blocks, i, b)
	{
		if (i >= most)
			break;
		json_array_append(list, b);
	}
	return list;
}

json_t *mt_report_facts(json_t *doc, const struct mt_view *view)
{
	bool tracked = mt_report_allocators_tracked(doc);
	json_t *f = json_object(), *procs = json_array();
	json_t *by_pid = index_processes(doc);
	char buf[4096];
	size_t n;
	struct row *rows = sorted_processes(doc, &n);

	/* first what makes every figure uncertain */
	json_object_set_new(f, "complete",
			    json_boolean(mt_report_is_complete(doc)));
	json_object_set_new(f, "incomplete_reason",
			    json_deep_copy(mt_json_path(doc, "input.error")));
	json_object_set_new(
	    f, "lost_events",
	    json_deep_copy(json_object_get(doc, "lost_events")));
	json_object_set_new(f, "command",
			    json_deep_copy(json_object_get(doc, "command")));
	json_object_set_new(
	    f, "command_line",
	    json_string(mt_report_command(doc, buf, sizeof(buf))));
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
	json_object_set_new(f, "allocators_tracked", json_boolean(tracked));
	if (json_object_get(doc, "allocator_recording"))
		json_object_set_new(f, "allocator_recording",
				    json_deep_copy(json_object_get(
					doc, "allocator_recording")));
	json_object_set_new(f, "tree",
			    row_facts(json_object_get(doc, "tree"), tracked));
	for (size_t i = 0; rows && i < n && i < view->top; i++) {
		json_t *r = row_facts(rows[i].src, tracked);

		static const char *const ids[] = {"pid", "ppid"};
		/* the whole command line, and its arguments (null: not in
		 * the trace) */
		static const char *const run[] = {"command_line", "argv",
						  "argv_cut", "exit"};

		copy_keys(r, rows[i].src, ids, sizeof(ids) / sizeof(ids[0]));
		json_object_set_new(
		    r, "name",
		    json_string(proc_program_name(doc, by_pid, rows[i].src)));
		copy_keys(r, rows[i].src, run, sizeof(run) / sizeof(run[0]));
		json_array_append_new(procs, r);
	}
	free(rows);
	json_decref(by_pid);
	json_object_set_new(f, "top_processes", procs);
	json_object_set_new(
	    f, "histogram",
	    tracked ? json_deep_copy(mt_json_path(doc, "tree.histogram"))
		    : json_null());
	json_object_set_new(
	    f, "top_sizes",
	    tracked ? json_deep_copy(mt_json_path(doc, "tree.top_sizes.sizes"))
		    : json_null());
	json_object_set_new(
	    f, "lifetimes",
	    tracked ? json_deep_copy(mt_json_path(doc, "tree.lifetimes"))
		    : json_null());
	json_object_set_new(f, "largest_not_freed",
			    tracked ? not_freed_list(doc, view->leaks)
				    : json_null());
	return f;
}
