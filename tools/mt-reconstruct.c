// SPDX-License-Identifier: MIT
/*
 * mt-reconstruct - event stream in, timelines JSON out (man mt-reconstruct).
 */
#include <err.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_reconstruct.h"

enum { EXIT_TRUNCATED = 1, EXIT_UNUSABLE = 2 };

/*
 * Freeing the reconstruction walks every process's tables and series just
 * before exit gives all of it back anyway (0.05 s of 1.2 s on 10 M
 * events), so a normal build leaves that to exit.  Sanitizer builds still
 * free, so LeakSanitizer keeps checking that everything can be freed; the
 * static pointer keeps it reachable for valgrind's leak check.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_LEAK__)
#define FREE_AT_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define FREE_AT_EXIT 1
#endif
#endif
#ifndef FREE_AT_EXIT
#define FREE_AT_EXIT 0
#endif

static struct mt_recon *recon;

static void usage(FILE *to, int status)
{
	fprintf(to, "usage: mt-reconstruct [-o FILE] [--resolution DURATION] "
		    "[--max-points N]\n"
		    "                      [--leaks N] [--top-sizes N] "
		    "[--process-series N|all] [--section NAME]\n"
		    "                      [--pretty] [FILE]\n");
	exit(status);
}

static uint64_t count_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (mt_parse_count(v, &n) < 0 || n > 100000000)
		errx(EXIT_UNUSABLE, "%s: not a count: %s", opt, v);
	return n;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"resolution", required_argument, NULL, 'r'},
	    {"max-points", required_argument, NULL, 'p'},
	    {"leaks", required_argument, NULL, 'l'},
	    {"top-sizes", required_argument, NULL, 's'},
	    {"process-series", required_argument, NULL, 'n'},
	    {"pretty", no_argument, NULL, 'P'},
	    {"section", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct mt_recon_opts opts;
	const char *output = NULL, *path;
	size_t flags = JSON_COMPACT;
	char errbuf[1024];
	struct mt_input *in;
	bool complete;
	int rc;
	int c;

	mt_recon_opts_default(&opts);
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 'r':
			if (mt_parse_duration(optarg, &opts.resolution_ns) < 0)
				errx(EXIT_UNUSABLE,
				     "--resolution: not a duration (e.g. 1ms, "
				     "0): %s",
				     optarg);
			opts.mode =
			    opts.resolution_ns ? MT_RES_FIXED : MT_RES_EXACT;
			break;
		case 'p':
			opts.max_points =
			    (unsigned)count_arg("--max-points", optarg);
			if (opts.max_points < 4)
				errx(EXIT_UNUSABLE, "--max-points: at least 4");
			break;
		case 'l':
			opts.max_leaks = (unsigned)count_arg("--leaks", optarg);
			opts.max_proc_leaks = opts.max_leaks;
			break;
		case 's':
			opts.top_sizes =
			    (unsigned)count_arg("--top-sizes", optarg);
			break;
		case 'n':
			opts.series_procs =
			    strcmp(optarg, "all") == 0
				? UINT_MAX
				: (unsigned)count_arg("--process-series",
						      optarg);
			break;
		case 'P':
			flags = JSON_INDENT(1);
			break;
		case 'S':
			opts.section = optarg;
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, EXIT_UNUSABLE);
		}
	}
	if (argc - optind > 1)
		usage(stderr, EXIT_UNUSABLE);
	path = optind < argc ? argv[optind] : "-";

	in = mt_input_open(path, errbuf, sizeof(errbuf));
	if (!in)
		errx(EXIT_UNUSABLE, "%s", errbuf);
	if (mt_input_format(in) == MT_FMT_TIMELINES)
		errx(EXIT_UNUSABLE, "%s", mt_input_error(in));
	if (output && !freopen(output, "w", stdout))
		err(EXIT_UNUSABLE, "%s", output);
	recon = mt_recon_new(&opts, mt_input_meta(in), mt_input_format(in));
	if (!recon)
		errx(EXIT_UNUSABLE, "out of memory");
	rc = mt_recon_read(recon, in);
	complete = rc == 0;
	if (opts.section && !mt_recon_section_seen(recon))
		errx(EXIT_UNUSABLE, "--section %s: no marker \"%s\" in %s",
		     opts.section, opts.section, path);
	if (!complete)
		warnx("%s (timelines written, marked incomplete)",
		      mt_input_error(in));
	if (mt_recon_write(recon, mt_input_meta(in),
			   complete ? NULL : mt_input_error(in), stdout,
			   flags | JSON_REAL_PRECISION(12)) < 0 ||
	    fflush(stdout) == EOF)
		err(EXIT_UNUSABLE, "%s", output ? output : "<stdout>");
	if (FREE_AT_EXIT)
		mt_recon_free(recon);
	mt_input_close(in);
	return complete ? 0 : EXIT_TRUNCATED;
}
