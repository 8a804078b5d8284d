// SPDX-License-Identifier: MIT
/*
 * mt-report - any stage's output in, a summary for people, JSON for
 * scripts, an SVG, or a CI verdict out (man mt-report).
 */
#include <err.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_cli.h"
#include "mt_flame.h"
#include "mt_dhat.h"
#include "mt_html.h"
#include "mt_human.h"
#include "mt_pprof.h"
#include "mt_report.h"
#include "mt_svg.h"
#include "mt_top_sites.h"
#include "mt_version.h"

/* --leaks all, reconstructing in-process: at most this many blocks are
 * kept (56 bytes each) */
#define MAX_LEAKS_KEPT 100000

enum json_style { JSON_AUTO, JSON_PRETTY, JSON_ONE_LINE };

struct env {
	bool json;
	enum json_style json_style;
	const char *output; /* NULL: stdout */
	struct mt_view view;
	const char *svg;
	const char *html; /* --html FILE */
	const char *compare_base;
	bool allow_incomplete;
	struct mt_growth growth;
	struct mt_gates gates;
	struct mt_recon_opts recon;
	/* allocation sites */
	struct mt_sites_view sites;
	bool sites_chosen; /* --sort or --space given */
	const char *flamegraph;
	enum mt_site_metric flame_of;
	bool folded;
	const char *pprof; /* --pprof FILE */
	enum mt_pprof_inuse pprof_inuse;
	const char *dhat;	    /* --dhat FILE */
	const char *debug_dirs[64]; /* --debug-dir, in recon.symbols */
};

static const char usage_text[] =
    "usage: mt-report [options] [gates] [FILE]\n"
    "       mt-report --compare BASE HEAD [--max-growth SPEC] [options] "
    "[gates]\n"
    "\n"
    "Reads any stage's output (raw stream, artifact, JSON Lines, memtrack\n"
    "artifact, timelines JSON) from FILE or standard input and prints a\n"
    "summary, JSON, an SVG plot, or a CI verdict.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE        write the report to FILE, not stdout\n"
    "      --json               the same facts as JSON\n"
    "      --pretty, --compact  indent the JSON, or one line (default: "
    "indented\n"
    "                           on a terminal, one line otherwise)\n"
    "      --top N|all          processes listed, heaviest first "
    "(default 10)\n"
    "      --leaks N|all        blocks not freed listed, largest first "
    "(default 10)\n"
    "      --svg FILE           also plot memory over time into FILE "
    "(- : stdout)\n"
    "      --html FILE          also one self-contained page into FILE: "
    "summary,\n"
    "                           timeline, flame graph, sites, processes\n"
    "      --resolution DURATION  bucket width when reconstructing "
    "(e.g. 1ms)\n"
    "      --section NAME       count only between markers NAME and "
    "NAME-end\n"
    "      --allow-incomplete   a truncated input, or lost events "
    "under a gate,\n"
    "                           are not an error (exit 0)\n"
    "      --compare BASE HEAD  compare two runs, metric by metric\n"
    "      --max-growth SPEC    with --compare, fail on growth above "
    "SPEC:\n"
    "                           5% (every metric) or "
    "peak_heap=2%,peak_rss=10%\n"
    "\n"
    "allocation sites (runs traced with call stacks):\n"
    "      --sort METRIC        rank sites by peak (default), allocated, "
    "count, not-freed\n"
    "      --stack-depth N      frames shown per site (default 6, 0: "
    "all)\n"
    "      --flamegraph FILE    also draw a flame graph SVG into FILE "
    "(- : stdout)\n"
    "      --flamegraph-of METRIC  what it weighs (default peak; also "
    "--folded)\n"
    "      --folded             folded stacks (flamegraph.pl, inferno, "
    "speedscope)\n"
    "      --pprof FILE         also a heap profile in pprof's format into "
    "FILE\n"
    "                           (go tool pprof, speedscope, Pyroscope, Parca)\n"
    "      --pprof-inuse WHEN   its inuse values: live at the heap peak "
    "(peak,\n"
    "                           default) or not freed at exit (exit)\n"
    "      --dhat FILE          also DHAT's JSON into FILE (dh_view.html, "
    "Firefox\n"
    "                           Profiler)\n"
    "      --space SPACE        what --flamegraph, --folded and --compare "
    "weigh:\n"
    "                           heap (default) or mapped (mmap, mremap, "
    "brk)\n"
    "      --debug-dir DIR      separate debug files also under DIR "
    "(repeatable)\n"
    "      --sysroot DIR        the traced files under DIR (another "
    "machine's trace)\n"
    "      --python-only        in stacks with Python frames, leave out "
    "the native\n"
    "                           frames between them\n"
    "  -h, --help               this help\n"
    "  -V, --version            the version\n"
    "\n"
    "gates (exit 1 when one fails):\n"
    "      --max-peak-heap SIZE        --max-total-allocated SIZE\n"
    "      --max-allocations N         --max-not-freed SIZE (was "
    "--max-leaked)\n"
    "      --max-peak-rss SIZE         --strict (no lost events, "
    "complete)\n"
    "\n"
    "SIZE: 10MiB, 512K, 1.5GB; exit status: 0 ok, 1 a gate failed, 2 "
    "unusable\n"
    "or incomplete input, usage or output error.  man mt-report for "
    "more.\n";

static void usage(FILE *to, int status)
{
	fputs(usage_text, to);
	exit(status);
}

/* A usage error: what was wrong, then where to read more. */
__attribute__((format(printf, 1, 2), noreturn)) static void
usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
	mt_try_help(MT_EXIT_UNUSABLE);
}

static uint64_t size_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (mt_parse_size(v, &n) < 0)
		usage_error("%s: not a size (e.g. 10MiB, 5M): %s", opt, v);
	return n;
}

static uint64_t count_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (mt_parse_count(v, &n) < 0)
		usage_error("%s: not a count: %s", opt, v);
	return n;
}

/* N or "all": how many of something to list */
static unsigned list_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (!strcmp(v, "all"))
		return MT_ALL;
	if (mt_parse_count(v, &n) < 0)
		usage_error("%s: not a count or \"all\": %s", opt, v);
	return n >= MT_ALL ? MT_ALL : (unsigned)n;
}

enum {
	O_TOP = 256,
	O_LEAKS,
	O_SVG,
	O_RES,
	O_PEAK,
	O_TOTAL,
	O_ALLOCS,
	O_NOT_FREED,
	O_STRICT,
	O_COMPARE,
	O_GROWTH,
	O_JSON,
	O_PRETTY,
	O_COMPACT,
	O_RSS,
	O_SECTION,
	O_ALLOW_INCOMPLETE,
	O_VERSION,
	O_SORT,
	O_STACK_DEPTH,
	O_FLAMEGRAPH,
	O_FLAMEGRAPH_OF,
	O_FOLDED,
	O_SPACE,
	O_DEBUG_DIR,
	O_SYSROOT,
	O_PPROF,
	O_PPROF_INUSE,
	O_DHAT,
	O_HTML,
	O_PYTHON_ONLY,
};

static const struct option longopts[] = {
    {"output", required_argument, NULL, 'o'},
    {"json", no_argument, NULL, O_JSON},
    {"pretty", no_argument, NULL, O_PRETTY},
    {"compact", no_argument, NULL, O_COMPACT},
    {"top", required_argument, NULL, O_TOP},
    {"leaks", required_argument, NULL, O_LEAKS},
    {"svg", required_argument, NULL, O_SVG},
    {"html", required_argument, NULL, O_HTML},
    {"resolution", required_argument, NULL, O_RES},
    {"section", required_argument, NULL, O_SECTION},
    {"allow-incomplete", no_argument, NULL, O_ALLOW_INCOMPLETE},
    {"max-peak-heap", required_argument, NULL, O_PEAK},
    {"max-total-allocated", required_argument, NULL, O_TOTAL},
    {"max-allocations", required_argument, NULL, O_ALLOCS},
    {"max-not-freed", required_argument, NULL, O_NOT_FREED},
    /* its name until 0.4: "leaked" read as valgrind's "definitely lost" */
    {"max-leaked", required_argument, NULL, O_NOT_FREED},
    {"max-peak-rss", required_argument, NULL, O_RSS},
    {"strict", no_argument, NULL, O_STRICT},
    {"compare", required_argument, NULL, O_COMPARE},
    {"max-growth", required_argument, NULL, O_GROWTH},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {"sort", required_argument, NULL, O_SORT},
    {"stack-depth", required_argument, NULL, O_STACK_DEPTH},
    {"flamegraph", required_argument, NULL, O_FLAMEGRAPH},
    {"flamegraph-of", required_argument, NULL, O_FLAMEGRAPH_OF},
    {"folded", no_argument, NULL, O_FOLDED},
    {"space", required_argument, NULL, O_SPACE},
    {"debug-dir", required_argument, NULL, O_DEBUG_DIR},
    {"sysroot", required_argument, NULL, O_SYSROOT},
    {"pprof", required_argument, NULL, O_PPROF},
    {"pprof-inuse", required_argument, NULL, O_PPROF_INUSE},
    {"dhat", required_argument, NULL, O_DHAT},
    {"python-only", no_argument, NULL, O_PYTHON_ONLY},
    {NULL, 0, NULL, 0},
};

static void gate_option(struct mt_gates *g, int c, const char *v)
{
	switch (c) {
	case O_PEAK:
		g->has_peak_heap = true;
		g->max_peak_heap = size_arg("--max-peak-heap", v);
		break;
	case O_TOTAL:
		g->has_total_allocated = true;
		g->max_total_allocated = size_arg("--max-total-allocated", v);
		break;
	case O_ALLOCS:
		g->has_allocations = true;
		g->max_allocations = count_arg("--max-allocations", v);
		break;
	case O_NOT_FREED:
		g->has_not_freed = true;
		g->max_not_freed = size_arg("--max-not-freed", v);
		break;
	case O_RSS:
		g->has_peak_rss = true;
		g->max_peak_rss = size_arg("--max-peak-rss", v);
		break;
	case O_STRICT:
		g->strict = true;
		break;
	}
}

static enum mt_site_metric metric_arg(const char *opt, const char *v)
{
	enum mt_site_metric m;

	if (mt_site_metric_parse(v, &m) < 0)
		usage_error(
		    "%s: not one of peak, allocated, count, not-freed: %s", opt,
		    v);
	return m;
}

/* The allocation-site options (O_SORT to O_DHAT). */
static void sites_option(struct env *env, int c, const char *v)
{
	struct mt_sym_opts *sym = &env->recon.symbols;
	const size_t max_dirs =
	    sizeof(env->debug_dirs) / sizeof(env->debug_dirs[0]);

	switch (c) {
	case O_SORT:
		env->sites.sort = metric_arg("--sort", v);
		env->sites_chosen = true;
		break;
	case O_STACK_DEPTH:
		env->sites.stack_depth =
		    (unsigned)count_arg("--stack-depth", v);
		break;
	case O_FLAMEGRAPH:
		env->flamegraph = v;
		break;
	case O_FLAMEGRAPH_OF:
		env->flame_of = metric_arg("--flamegraph-of", v);
		break;
	case O_FOLDED:
		env->folded = true;
		break;
	case O_SPACE:
		if (mt_site_space_parse(v, &env->sites.space) < 0)
			usage_error("--space: not one of heap, mapped: %s", v);
		env->sites_chosen = true;
		break;
	case O_DEBUG_DIR:
		if (sym->ndebug_dirs == max_dirs)
			usage_error("--debug-dir: at most %zu", max_dirs);
		env->debug_dirs[sym->ndebug_dirs++] = v;
		sym->debug_dirs = env->debug_dirs;
		break;
	case O_SYSROOT:
		sym->sysroot = v;
		break;
	case O_PYTHON_ONLY:
		sym->python_only = true;
		break;
	case O_PPROF:
		env->pprof = v;
		break;
	case O_PPROF_INUSE:
		if (mt_pprof_inuse_parse(v, &env->pprof_inuse) < 0)
			usage_error("--pprof-inuse: not one of peak, exit: %s",
				    v);
		break;
	case O_DHAT:
		env->dhat = v;
		break;
	}
}

static void option(struct env *env, int c, const char *v)
{
	char why[256];

	switch (c) {
	case 'o':
		env->output = v;
		break;
	case O_JSON:
		env->json = true;
		break;
	case O_PRETTY:
		env->json_style = JSON_PRETTY;
		break;
	case O_COMPACT:
		env->json_style = JSON_ONE_LINE;
		break;
	case O_TOP:
		env->view.top = list_arg("--top", v);
		break;
	case O_LEAKS:
		env->view.leaks = list_arg("--leaks", v);
		break;
	case O_SVG:
		env->svg = v;
		break;
	case O_HTML:
		env->html = v;
		break;
	case O_RES:
		if (mt_parse_duration(v, &env->recon.resolution_ns) < 0)
			usage_error("--resolution: not a duration (e.g. 1ms, "
				    "0): %s",
				    v);
		env->recon.mode =
		    env->recon.resolution_ns ? MT_RES_FIXED : MT_RES_EXACT;
		break;
	case O_SECTION:
		env->recon.section = v;
		break;
	case O_ALLOW_INCOMPLETE:
		env->allow_incomplete = true;
		break;
	case O_COMPARE:
		env->compare_base = v;
		break;
	case O_GROWTH:
		if (mt_growth_parse(v, &env->growth, why, sizeof(why)) < 0)
			usage_error("--max-growth: %s", why);
		break;
	case 'V':
	case O_VERSION:
		mt_print_version(stdout, "mt-report");
		mt_output_close(stdout, "<stdout>");
		exit(0);
	case 'h':
		usage(stdout, 0);
		break;
	case '?': /* getopt said what */
		mt_try_help(MT_EXIT_UNUSABLE);
	case O_SORT:
	case O_STACK_DEPTH:
	case O_FLAMEGRAPH:
	case O_FLAMEGRAPH_OF:
	case O_FOLDED:
	case O_SPACE:
	case O_DEBUG_DIR:
	case O_SYSROOT:
	case O_PPROF:
	case O_PPROF_INUSE:
	case O_DHAT:
		sites_option(env, c, v);
		break;
	default:
		gate_option(&env->gates, c, v);
	}
}

static void parse_args(struct env *env, int argc, char **argv)
{
	int c;

	while ((c = getopt_long(argc, argv, "ho:V", longopts, NULL)) != -1)
		option(env, c, optarg);
	if (env->compare_base) {
		if (argc - optind == 0)
			usage_error("--compare BASE HEAD: HEAD is missing (the "
				    "run to compare with %s)",
				    env->compare_base);
		if (argc - optind > 1)
			usage_error("--compare BASE HEAD: one HEAD, not %d "
				    "files (%s, %s%s)",
				    argc - optind, argv[optind],
				    argv[optind + 1],
				    argc - optind > 2 ? ", ..." : "");
		if (env->svg || env->html || env->flamegraph || env->folded ||
		    env->pprof || env->dhat)
			usage_error("--svg, --html, --flamegraph, --folded, "
				    "--pprof, --dhat: one run at a time, not "
				    "with --compare");
	} else {
		if (mt_growth_any(&env->growth))
			usage_error("--max-growth needs --compare BASE HEAD");
		if (argc - optind > 1)
			usage_error("one FILE at a time, not %d (%s, %s%s); "
				    "--compare BASE HEAD compares two runs",
				    argc - optind, argv[optind],
				    argv[optind + 1],
				    argc - optind > 2 ? ", ..." : "");
	}
}

static size_t json_flags(const struct env *env, FILE *out)
{
	bool pretty = env->json_style == JSON_PRETTY ||
		      (env->json_style == JSON_AUTO && isatty(fileno(out)));

	return (pretty ? JSON_INDENT(2) : JSON_COMPACT) |
	       JSON_REAL_PRECISION(12);
}

/* A verdict is asked for: a gate, or --max-growth. */
static bool verdict_asked(const struct env *env)
{
	return mt_gates_any(&env->gates) || mt_growth_any(&env->growth);
}

/*
 * Incomplete input is exit 2 unless --allow-incomplete; the reason goes
 * to stderr whatever the output (a CI log shows stderr).  Lost events
 * make a trace incomplete too when a verdict is asked for: the figures a
 * gate checks miss them (a lost free raises the heap, a lost malloc
 * lowers it), so a gate passing on them would pass on a guess.
 */
static int check_complete(const struct env *env, json_t *doc, const char *path)
{
	const char *why = mt_report_incomplete(doc);
	const char *accept =
	    env->allow_incomplete ? "" : " (--allow-incomplete accepts it)";
	uint64_t lost = mt_json_u64(doc, "lost_events", 0);

	if (why)
		warnx("incomplete trace: %s%s", why, accept);
	else if (lost && verdict_asked(env))
		warnx("incomplete trace: %s: %llu event%s lost, the "
		      "figures the gates check miss them%s",
		      strcmp(path, "-") ? path : "<stdin>",
		      (unsigned long long)lost, lost == 1 ? " was" : "s were",
		      accept);
	else
		return 0;
	return env->allow_incomplete ? 0 : MT_EXIT_UNUSABLE;
}

static void on_progress(void *arg, const struct mt_input *in, uint64_t records)
{
	mt_progress_update(arg, records, mt_input_offset(in));
}

static json_t *load(const struct env *env, const char *path)
{
	struct mt_recon_opts recon = env->recon;
	struct mt_progress progress;
	char errbuf[1024];
	json_t *doc;

	mt_stdin_note(path);
	mt_progress_init(&progress, "mt-report");
	recon.progress = on_progress;
	recon.progress_arg = &progress;
	doc = mt_report_load(path, &recon, errbuf, sizeof(errbuf));
	mt_progress_end(&progress);
	if (!doc)
		errx(MT_EXIT_UNUSABLE, "%s", errbuf);
	return doc;
}

static void write_svg(const char *path, json_t *doc, const struct mt_view *view)
{
	/* the heaviest processes --top lists, as lines of their own */
	struct mt_svg_opts opts = {.procs = view->top < MT_SVG_MAX_PROCS
						? view->top
						: MT_SVG_MAX_PROCS};

	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		err(MT_EXIT_UNUSABLE, "%s", path);
	if (mt_svg_write(f, doc, &opts) < 0)
		mt_output_failed(f, path);
	if (f != stdout)
		mt_output_close(f, path);
}

/* --html FILE: the page lists what --json would */
static void write_html(const struct env *env, json_t *doc)
{
	const char *path = env->html;
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		err(MT_EXIT_UNUSABLE, "%s", path);
	if (mt_html_write(f, doc, &env->view, &env->sites) < 0)
		mt_output_failed(f, f == stdout ? "<stdout>" : path);
	if (f != stdout)
		mt_output_close(f, path);
}

/* --flamegraph FILE: a run traced without stacks has nothing to draw */
static void write_flamegraph(const struct env *env, json_t *doc)
{
	const char *path = env->flamegraph;
	FILE *f;

	if (!mt_top_sites_present(doc))
		errx(MT_EXIT_UNUSABLE,
		     "--flamegraph: no call stacks in this run (trace it "
		     "with mt-trace --stacks)");
	f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	if (!f)
		err(MT_EXIT_UNUSABLE, "%s", path);
	if (mt_flame_svg(f, doc, env->sites.space, env->flame_of) < 0)
		mt_output_failed(f, path);
	if (f != stdout)
		mt_output_close(f, path);
}

/* --pprof FILE, --dhat FILE: a profile of the heap's sites.  A run
 * traced without stacks is refused, as by --flamegraph: a profile whose
 * only frame is "[no stack]" would open in every viewer and show nothing,
 * and a script saving it would not learn that stacks were missing. */
static void write_profile(const char *opt, const char *path, json_t *doc,
			  int (*write)(FILE *, json_t *, const void *),
			  const void *arg)
{
	FILE *f;

	if (!mt_top_sites_present(doc))
		errx(MT_EXIT_UNUSABLE,
		     "%s: no call stacks in this run (trace it with mt-trace "
		     "--stacks)",
		     opt);
	f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	if (!f)
		err(MT_EXIT_UNUSABLE, "%s", path);
	if (write(f, doc, arg) < 0)
		mt_output_failed(f, strcmp(path, "-") ? path : "<stdout>");
	if (f != stdout)
		mt_output_close(f, path);
}

static int pprof_writer(FILE *f, json_t *doc, const void *arg)
{
	return mt_pprof_write(f, doc, *(const enum mt_pprof_inuse *)arg);
}

static int dhat_writer(FILE *f, json_t *doc, const void *arg)
{
	(void)arg;
	return mt_dhat_write(f, doc);
}

/* a file option's argument is "-": its output takes standard output */
static bool to_stdout(const char *path)
{
	return path && !strcmp(path, "-");
}

/* The sites a comparison lists: by the metric whose limit failed (a
 * --max-growth limit, else a gate on HEAD), as the sites make it up (a
 * failed total_allocated: the bytes each site allocated), unless --sort
 * or --space chose; else by --sort in --space. */
static struct mt_sites_view growth_view(const struct env *env, json_t *base,
					json_t *head)
{
	struct mt_sites_view v = env->sites;
	int m = mt_report_growth_failed(base, head, &env->growth);

	if (m < 0)
		m = mt_report_gate_failed(head, &env->gates);
	if (m >= 0 && !env->sites_chosen)
		mt_metric_sites((enum mt_metric)m, &v.space, &v.sort);
	return v;
}

/* The comparison with the sites that grew most: as text after the
 * table, or in the JSON object as "sites_grown" (by "sites_grown_by"). */
static int compare_with_sites(const struct env *env, FILE *out, json_t *base,
			      json_t *head, char *reason, size_t len)
{
	struct mt_sites_view v = growth_view(env, base, head);
	json_t *grown = mt_sites_growth(base, head, &v), *o;
	char *text = NULL;
	size_t text_len = 0;
	FILE *mem = env->json ? open_memstream(&text, &text_len) : out;
	int failed;

	if (!mem)
		err(MT_EXIT_UNUSABLE, "<memory>");
	failed = mt_report_compare(mem, base, head, &env->growth, env->json,
				   json_flags(env, out), reason, len);
	if (!env->json) {
		mt_sites_growth_text(out, grown, &v);
		json_decref(grown);
		return failed;
	}
	fclose(mem);
	o = json_loads(text, 0, NULL);
	free(text);
	if (!o)
		errx(MT_EXIT_UNUSABLE, "the comparison is not JSON");
	json_object_set_new(o, "sites_grown", grown);
	json_object_set_new(o, "sites_grown_by",
			    json_pack("{s:s, s:s}", "space",
				      mt_site_space_name(v.space), "metric",
				      mt_site_metric_name(v.sort)));
	json_dumpf(o, out, json_flags(env, out));
	fputc('\n', out);
	json_decref(o);
	return failed;
}

static int check_gates(const struct env *env, json_t *doc, json_t *results)
{
	char reason[512];

	if (!mt_gates_any(&env->gates))
		return 0;
	if (mt_report_gates(doc, &env->gates, reason, sizeof(reason),
			    results)) {
		warnx("%s", reason);
		return MT_EXIT_GATE;
	}
	return 0;
}

/* the worse of two statuses: unusable input over a failed gate */
static int worse(int a, int b)
{
	return a > b ? a : b;
}

static int compare(const struct env *env, FILE *out, const char *head_path)
{
	json_t *base = load(env, env->compare_base);
	json_t *head = load(env, head_path);
	char reason[512];
	int status = 0;

	if (compare_with_sites(env, out, base, head, reason, sizeof(reason))) {
		warnx("%s", reason);
		status = MT_EXIT_GATE;
	}
	status = worse(status, check_gates(env, head, NULL));
	status = worse(status, check_complete(env, base, env->compare_base));
	status = worse(status, check_complete(env, head, head_path));
	json_decref(base);
	json_decref(head);
	return status;
}

static int report(const struct env *env, FILE *out, const char *path)
{
	json_t *doc = load(env, path);
	json_t *results = json_array();
	int status;

	/* --folded with nothing folded would print nothing and succeed:
	 * a script piping it to flamegraph.pl would not learn why */
	if (env->folded && !mt_top_sites_present(doc))
		errx(MT_EXIT_UNUSABLE,
		     "--folded: no call stacks in this run (trace it with "
		     "mt-trace --stacks)");
	if (env->svg)
		write_svg(env->svg, doc, &env->view);
	if (env->html)
		write_html(env, doc);
	if (env->flamegraph)
		write_flamegraph(env, doc);
	if (env->pprof)
		write_profile("--pprof", env->pprof, doc, pprof_writer,
			      &env->pprof_inuse);
	if (env->dhat)
		write_profile("--dhat", env->dhat, doc, dhat_writer, NULL);
	status = check_gates(env, doc, results);
	if (env->json) {
		json_t *facts = mt_report_facts(doc, &env->view);

		if (mt_gates_any(&env->gates)) {
			json_object_set(facts, "gates", results);
			json_object_set_new(facts, "ok",
					    json_boolean(status == 0));
		}
		/* without stacks "sites" is null and "mapped_sites" (newer)
		 * left out, so such a report reads as it always did */
		for (int sp = 0; sp < MT_SITE_SPACES; sp++) {
			struct mt_sites_view v = env->sites;

			v.space = (enum mt_site_space)sp;
			if (sp && !mt_top_sites_present(doc))
				break;
			json_object_set_new(facts,
					    mt_site_space_section(v.space),
					    mt_top_sites_json(doc, &v));
		}
		json_dumpf(facts, out, json_flags(env, out));
		fputc('\n', out);
		json_decref(facts);
	} else if (env->folded) {
		if (mt_flame_folded(out, doc, env->sites.space, env->flame_of) <
		    0)
			mt_output_failed(out, env->output ? env->output
							  : "<stdout>");
	} else if (out != stdout ||
		   (!to_stdout(env->svg) && !to_stdout(env->html) &&
		    !to_stdout(env->flamegraph) && !to_stdout(env->pprof) &&
		    !to_stdout(env->dhat))) {
		mt_report_text(out, doc, &env->view);
		for (int sp = 0; sp < MT_SITE_SPACES; sp++) {
			struct mt_sites_view v = env->sites;

			v.space = (enum mt_site_space)sp;
			mt_top_sites_text(out, doc, &v);
		}
	}
	status = worse(status, check_complete(env, doc, path));
	json_decref(results);
	json_decref(doc);
	return status;
}

int main(int argc, char **argv)
{
	struct env env = {.view = {.top = 10, .leaks = 10},
			  .sites = {.sort = MT_SITE_PEAK, .stack_depth = 6},
			  .flame_of = MT_SITE_PEAK};
	FILE *out = stdout;
	int status;

	mt_output_init();
	mt_growth_none(&env.growth);
	mt_recon_opts_default(&env.recon);
	mt_cli_name(argv);
	parse_args(&env, argc, argv);
	/* reconstructing in-process, keep only what is shown */
	env.recon.doc_procs = env.view.top == MT_ALL ? 0
			      : env.view.top	     ? env.view.top
						     : 1;
	/* and the sites --top shows, unless all are drawn */
	env.sites.top = env.view.top;
	env.recon.max_sites = env.flamegraph || env.folded || env.pprof ||
				      env.dhat || env.html ||
				      env.view.top == MT_ALL
				  ? 0
			      : env.view.top ? env.view.top
					     : 1;
	/* the list is kept while reading: "all" is bounded there */
	if (env.view.leaks > env.recon.max_leaks)
		env.recon.max_leaks = env.view.leaks < MAX_LEAKS_KEPT
					  ? env.view.leaks
					  : MAX_LEAKS_KEPT;
	if (env.output && !(out = fopen(env.output, "w")))
		err(MT_EXIT_UNUSABLE, "%s", env.output);
	if (env.compare_base)
		status = compare(&env, out, argv[optind]);
	else
		status = report(&env, out, optind < argc ? argv[optind] : "-");
	mt_output_close(out, env.output ? env.output : "<stdout>");
	return status;
}
