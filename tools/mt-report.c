// SPDX-License-Identifier: MIT
/*
 * mt-report - any stage's output in, a summary for people, JSON for
 * scripts, an SVG, or a CI verdict out (man mt-report).
 */
#include <err.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "mt_report.h"
#include "mt_svg.h"

enum { EXIT_GATE = 1, EXIT_UNUSABLE = 2 };

struct env {
	bool json;
	unsigned top;
	const char *svg;
	const char *compare_base;
	double max_growth; /* < 0: none */
	struct mt_gates gates;
	struct mt_recon_opts recon;
};

static void usage(FILE *to, int status)
{
	fprintf(to,
		"usage: mt-report [--json] [--top N] [--svg FILE] "
		"[--resolution DURATION] [--section NAME]\n"
		"                 [--max-peak-heap SIZE] "
		"[--max-total-allocated SIZE]\n"
		"                 [--max-allocations N] [--max-leaked SIZE] "
		"[--max-peak-rss SIZE]\n                 "
		"[--strict] [FILE]\n"
		"       mt-report --compare BASE HEAD [--max-growth PCT] "
		"[--json] [gates]\n");
	exit(status);
}

static uint64_t size_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (mt_parse_size(v, &n) < 0)
		errx(EXIT_UNUSABLE, "%s: not a size (e.g. 10MiB, 5M): %s", opt,
		     v);
	return n;
}

static uint64_t count_arg(const char *opt, const char *v)
{
	uint64_t n;

	if (mt_parse_count(v, &n) < 0)
		errx(EXIT_UNUSABLE, "%s: not a count: %s", opt, v);
	return n;
}

static void parse_args(struct env *env, int argc, char **argv)
{
	enum {
		O_TOP = 256,
		O_SVG,
		O_RES,
		O_PEAK,
		O_TOTAL,
		O_ALLOCS,
		O_LEAKED,
		O_STRICT,
		O_COMPARE,
		O_GROWTH,
		O_JSON,
		O_RSS,
		O_SECTION,
	};
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, O_JSON},
	    {"top", required_argument, NULL, O_TOP},
	    {"svg", required_argument, NULL, O_SVG},
	    {"resolution", required_argument, NULL, O_RES},
	    {"max-peak-heap", required_argument, NULL, O_PEAK},
	    {"max-total-allocated", required_argument, NULL, O_TOTAL},
	    {"max-allocations", required_argument, NULL, O_ALLOCS},
	    {"max-leaked", required_argument, NULL, O_LEAKED},
	    {"max-peak-rss", required_argument, NULL, O_RSS},
	    {"strict", no_argument, NULL, O_STRICT},
	    {"compare", required_argument, NULL, O_COMPARE},
	    {"max-growth", required_argument, NULL, O_GROWTH},
	    {"section", required_argument, NULL, O_SECTION},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct mt_gates *g = &env->gates;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_JSON:
			env->json = true;
			break;
		case O_TOP:
			env->top = (unsigned)count_arg("--top", optarg);
			break;
		case O_SVG:
			env->svg = optarg;
			break;
		case O_RES:
			if (mt_parse_duration(optarg,
					      &env->recon.resolution_ns) < 0)
				errx(EXIT_UNUSABLE,
				     "--resolution: not a duration (e.g. "
				     "1ms, 0): %s",
				     optarg);
			env->recon.mode = env->recon.resolution_ns
					      ? MT_RES_FIXED
					      : MT_RES_EXACT;
			break;
		case O_PEAK:
			g->has_peak_heap = true;
			g->max_peak_heap = size_arg("--max-peak-heap", optarg);
			break;
		case O_TOTAL:
			g->has_total_allocated = true;
			g->max_total_allocated =
			    size_arg("--max-total-allocated", optarg);
			break;
		case O_ALLOCS:
			g->has_allocations = true;
			g->max_allocations =
			    count_arg("--max-allocations", optarg);
			break;
		case O_LEAKED:
			g->has_leaked = true;
			g->max_leaked = size_arg("--max-leaked", optarg);
			break;
		case O_RSS:
			g->has_peak_rss = true;
			g->max_peak_rss = size_arg("--max-peak-rss", optarg);
			break;
		case O_SECTION:
			env->recon.section = optarg;
			break;
		case O_STRICT:
			g->strict = true;
			break;
		case O_COMPARE:
			env->compare_base = optarg;
			break;
		case O_GROWTH:
			if (mt_parse_percent(optarg, &env->max_growth) < 0)
				errx(EXIT_UNUSABLE,
				     "--max-growth: not a percentage (e.g. "
				     "5%%): %s",
				     optarg);
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, EXIT_UNUSABLE);
		}
	}
}

static json_t *load(const struct env *env, const char *path)
{
	char errbuf[1024];
	json_t *doc = mt_report_load(path, &env->recon, errbuf, sizeof(errbuf));

	if (!doc)
		errx(EXIT_UNUSABLE, "%s", errbuf);
	return doc;
}

static void write_svg(const char *path, json_t *doc)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		err(EXIT_UNUSABLE, "%s", path);
	if (mt_svg_write(f, doc) < 0 || (f != stdout && fclose(f) == EOF))
		err(EXIT_UNUSABLE, "%s", path);
}

static int check_gates(const struct env *env, json_t *doc, json_t *results)
{
	char reason[512];

	if (!mt_gates_any(&env->gates))
		return 0;
	if (mt_report_gates(doc, &env->gates, reason, sizeof(reason),
			    results)) {
		warnx("%s", reason);
		return EXIT_GATE;
	}
	return 0;
}

static int compare(const struct env *env, const char *head_path)
{
	json_t *base = load(env, env->compare_base);
	json_t *head = load(env, head_path);
	char reason[512];
	int status = 0;

	if (mt_report_compare(stdout, base, head, env->max_growth, env->json,
			      reason, sizeof(reason))) {
		warnx("%s", reason);
		status = EXIT_GATE;
	}
	if (!status)
		status = check_gates(env, head, NULL);
	json_decref(base);
	json_decref(head);
	return status;
}

int main(int argc, char **argv)
{
	struct env env = {.top = 10, .max_growth = -1};
	json_t *doc, *results;
	int status;

	mt_recon_opts_default(&env.recon);
	parse_args(&env, argc, argv);
	/* reconstructing in-process, keep only the processes shown */
	env.recon.doc_procs = env.top;
	if (env.compare_base) {
		if (argc - optind != 1)
			usage(stderr, EXIT_UNUSABLE);
		if (env.svg)
			errx(EXIT_UNUSABLE, "--svg: one run at a time, not "
					    "with --compare");
		return compare(&env, argv[optind]);
	}
	if (env.max_growth >= 0)
		errx(EXIT_UNUSABLE, "--max-growth needs --compare BASE HEAD");
	if (argc - optind > 1)
		usage(stderr, EXIT_UNUSABLE);

	doc = load(&env, optind < argc ? argv[optind] : "-");
	results = json_array();
	if (env.svg)
		write_svg(env.svg, doc);
	status = check_gates(&env, doc, results);
	if (env.json) {
		json_t *facts = mt_report_facts(doc, env.top);

		if (mt_gates_any(&env.gates)) {
			json_object_set(facts, "gates", results);
			json_object_set_new(facts, "ok",
					    json_boolean(status == 0));
		}
		json_dumpf(facts, stdout,
			   JSON_INDENT(2) | JSON_REAL_PRECISION(12));
		fputc('\n', stdout);
		json_decref(facts);
	} else if (!env.svg || strcmp(env.svg, "-")) {
		mt_report_text(stdout, doc, env.top);
	}
	json_decref(results);
	json_decref(doc);
	if (fflush(stdout) == EOF)
		err(EXIT_UNUSABLE, "<stdout>");
	return status;
}
