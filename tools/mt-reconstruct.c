// SPDX-License-Identifier: MIT
/*
 * mt-reconstruct - event stream in, timelines JSON out (man mt-reconstruct).
 */
#include <err.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_cli.h"
#include "mt_human.h"
#include "mt_reconstruct.h"
#include "mt_sanitizer.h"
#include "mt_version.h"

/*
 * Freeing the reconstruction walks every process's tables and series just
 * before exit gives all of it back anyway (0.05 s of 1.2 s on 10 M
 * events), so a normal build leaves that to exit.  Sanitizer builds still
 * free, so LeakSanitizer keeps checking that everything can be freed; the
 * static pointer keeps it reachable for valgrind's leak check.
 */
#define FREE_AT_EXIT MT_LEAK_CHECKED

static struct mt_recon *recon;

static const char usage_text[] =
    "usage: mt-reconstruct [options] [FILE]\n"
    "\n"
    "Reads an event stream (raw stream, artifact, JSON Lines, memtrack\n"
    "artifact) from FILE or standard input and writes its timelines JSON:\n"
    "heap, mapped memory and RSS over time, peaks, totals, blocks not\n"
    "freed, per process and for the whole tree (man mt-format).\n"
    "\n"
    "options:\n"
    "  -o, --output FILE          write to FILE, not stdout\n"
    "      --pretty, --compact    indent the JSON, or one line (default: "
    "indented\n"
    "                             on a terminal, one line otherwise)\n"
    "      --resolution DURATION  fixed buckets (e.g. 1ms; 0: every "
    "change)\n"
    "      --max-points N         adaptive buckets: at most N points a "
    "tree series\n"
    "                             (default 2000, at least 4)\n"
    "      --leaks N              blocks not freed listed: N for the tree "
    "and each\n"
    "                             process (default 20 and 5)\n"
    "      --top-sizes N          most frequent sizes listed (default "
    "10)\n"
    "      --process-series N|all series of the N heaviest processes "
    "(default 20)\n"
    "      --section NAME         count only between markers NAME and "
    "NAME-end\n"
    "      --allow-incomplete     a truncated input is not an error "
    "(exit 0)\n"
    "      --max-sites N          allocation sites written: the N "
    "heaviest by each\n"
    "                             measure (default 100, 0: all)\n"
    "      --debug-dir DIR        separate debug files also under DIR "
    "(repeatable)\n"
    "      --sysroot DIR          the traced files under DIR (a trace "
    "from\n"
    "                             another machine)\n"
    "  -h, --help                 this help\n"
    "  -V, --version              the version\n"
    "\n"
    "exit status: 0 ok, 2 unusable or incomplete input (the timelines of "
    "what\n"
    "was read are still written), usage or output error.  man "
    "mt-reconstruct.\n";

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

static uint64_t count_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (mt_parse_count(v, &n) < 0 || n > 100000000)
		usage_error("%s: not a count (0 to 100000000): %s", opt, v);
	return n;
}

enum json_style { JSON_AUTO, JSON_PRETTY, JSON_ONE_LINE };

struct env {
	struct mt_recon_opts opts;
	const char *output; /* NULL: stdout */
	enum json_style json_style;
	bool allow_incomplete;
	const char *debug_dirs[64]; /* --debug-dir, in opts.symbols */
};

static void option(struct env *env, int c, const char *v)
{
	struct mt_recon_opts *opts = &env->opts;

	switch (c) {
	case 'o':
		env->output = v;
		break;
	case 'r':
		if (mt_parse_duration(v, &opts->resolution_ns) < 0)
			usage_error("--resolution: not a duration (e.g. 1ms, "
				    "0): %s",
				    v);
		opts->mode = opts->resolution_ns ? MT_RES_FIXED : MT_RES_EXACT;
		break;
	case 'p':
		opts->max_points = (unsigned)count_arg("--max-points", v);
		if (opts->max_points < 4)
			usage_error("--max-points: at least 4, not %s", v);
		break;
	case 'l':
		opts->max_leaks = (unsigned)count_arg("--leaks", v);
		opts->max_proc_leaks = opts->max_leaks;
		break;
	case 's':
		opts->top_sizes = (unsigned)count_arg("--top-sizes", v);
		break;
	case 'n':
		opts->series_procs =
		    strcmp(v, "all") == 0
			? UINT_MAX
			: (unsigned)count_arg("--process-series", v);
		break;
	case 'P':
		env->json_style = JSON_PRETTY;
		break;
	case 'C':
		env->json_style = JSON_ONE_LINE;
		break;
	case 'S':
		opts->section = v;
		break;
	case 'A':
		env->allow_incomplete = true;
		break;
	case 'm':
		opts->max_sites = (unsigned)count_arg("--max-sites", v);
		break;
	case 'd':
		if (opts->symbols.ndebug_dirs == 64)
			usage_error("--debug-dir: at most 64");
		env->debug_dirs[opts->symbols.ndebug_dirs++] = v;
		opts->symbols.debug_dirs = env->debug_dirs;
		break;
	case 'R':
		opts->symbols.sysroot = v;
		break;
	case 'V':
		mt_print_version(stdout, "mt-reconstruct");
		mt_output_close(stdout, "<stdout>");
		exit(0);
	case 'h':
		usage(stdout, 0);
		break;
	default: /* getopt said what */
		mt_try_help(MT_EXIT_UNUSABLE);
	}
}

static const char *parse_args(struct env *env, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"resolution", required_argument, NULL, 'r'},
	    {"max-points", required_argument, NULL, 'p'},
	    {"leaks", required_argument, NULL, 'l'},
	    {"top-sizes", required_argument, NULL, 's'},
	    {"process-series", required_argument, NULL, 'n'},
	    {"pretty", no_argument, NULL, 'P'},
	    {"compact", no_argument, NULL, 'C'},
	    {"section", required_argument, NULL, 'S'},
	    {"allow-incomplete", no_argument, NULL, 'A'},
	    {"max-sites", required_argument, NULL, 'm'},
	    {"debug-dir", required_argument, NULL, 'd'},
	    {"sysroot", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "o:hV", longopts, NULL)) != -1)
		option(env, c, optarg);
	if (argc - optind > 1)
		usage_error("one FILE at a time, not %d (%s, %s%s)",
			    argc - optind, argv[optind], argv[optind + 1],
			    argc - optind > 2 ? ", ..." : "");
	return optind < argc ? argv[optind] : "-";
}

static void on_progress(void *arg, const struct mt_input *in, uint64_t records)
{
	mt_progress_update(arg, records, mt_input_offset(in));
}

static size_t json_flags(const struct env *env, FILE *out)
{
	bool pretty = env->json_style == JSON_PRETTY ||
		      (env->json_style == JSON_AUTO && isatty(fileno(out)));

	return (pretty ? JSON_INDENT(2) : JSON_COMPACT) |
	       JSON_REAL_PRECISION(12);
}

int main(int argc, char **argv)
{
	struct env env = {0};
	const char *path, *name;
	char errbuf[1024];
	struct mt_input *in;
	struct mt_progress progress;
	bool complete;

	mt_output_init();
	mt_recon_opts_default(&env.opts);
	env.opts.max_sites = 100;
	mt_cli_name(argv);
	path = parse_args(&env, argc, argv);
	name = env.output ? env.output : "<stdout>";

	mt_stdin_note(path);
	in = mt_input_open(path, errbuf, sizeof(errbuf));
	if (!in)
		errx(MT_EXIT_UNUSABLE, "%s", errbuf);
	if (mt_input_format(in) == MT_FMT_TIMELINES)
		errx(MT_EXIT_UNUSABLE, "%s", mt_input_error(in));
	if (env.output && !freopen(env.output, "w", stdout))
		err(MT_EXIT_UNUSABLE, "%s", env.output);
	mt_progress_init(&progress, "mt-reconstruct");
	env.opts.progress = on_progress;
	env.opts.progress_arg = &progress;
	recon = mt_recon_new(&env.opts, mt_input_meta(in), mt_input_format(in));
	if (!recon)
		errx(MT_EXIT_UNUSABLE, "out of memory");
	complete = mt_recon_read(recon, in) == 0;
	mt_progress_end(&progress);
	if (env.opts.section && !mt_recon_section_seen(recon))
		errx(MT_EXIT_UNUSABLE, "--section %s: no marker \"%s\" in %s",
		     env.opts.section, env.opts.section, path);
	if (!complete)
		warnx("incomplete trace: %s (timelines of what was read "
		      "written, marked incomplete%s)",
		      mt_input_error(in),
		      env.allow_incomplete ? ""
					   : "; --allow-incomplete accepts it");
	if (mt_recon_write(recon, mt_input_meta(in),
			   complete ? NULL : mt_input_error(in), stdout,
			   json_flags(&env, stdout)) < 0)
		mt_output_failed(stdout, name);
	mt_output_close(stdout, name);
	if (FREE_AT_EXIT)
		mt_recon_free(recon);
	mt_input_close(in);
	return complete || env.allow_incomplete ? 0 : MT_EXIT_UNUSABLE;
}
