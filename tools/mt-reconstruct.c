// SPDX-License-Identifier: MIT
/*
 * mt-reconstruct - event stream in, timelines JSON out (man mt-reconstruct).
 */
#include <err.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_reconstruct.h"

enum { EXIT_TRUNCATED = 1, EXIT_UNUSABLE = 2 };

static void usage(FILE *to, int status)
{
	fprintf(to, "usage: mt-reconstruct [-o FILE] [--resolution DURATION] "
		    "[--max-points N]\n"
		    "                      [--leaks N] [--top-sizes N] "
		    "[--no-process-series] [--pretty] [FILE]\n");
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
	    {"no-process-series", no_argument, NULL, 'n'},
	    {"pretty", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct mt_recon_opts opts;
	const char *output = NULL, *path;
	size_t flags = JSON_COMPACT;
	char errbuf[1024];
	struct mt_input *in;
	json_t *doc;
	bool complete;
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
			break;
		case 's':
			opts.top_sizes =
			    (unsigned)count_arg("--top-sizes", optarg);
			break;
		case 'n':
			opts.process_series = false;
			break;
		case 'P':
			flags = JSON_INDENT(1);
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
	doc = mt_recon_input(in, &opts, &complete);
	if (!doc)
		errx(EXIT_UNUSABLE, "out of memory");
	if (!complete && json_is_string(json_object_get(
			     json_object_get(doc, "input"), "error")))
		warnx("%s (timelines written, marked incomplete)",
		      json_string_value(json_object_get(
			  json_object_get(doc, "input"), "error")));
	mt_input_close(in);

	if (output && !freopen(output, "w", stdout))
		err(EXIT_UNUSABLE, "%s", output);
	if (json_dumpf(doc, stdout, flags | JSON_REAL_PRECISION(12)) < 0 ||
	    fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
		err(EXIT_UNUSABLE, "%s", output ? output : "<stdout>");
	json_decref(doc);
	return complete ? 0 : EXIT_TRUNCATED;
}
