// SPDX-License-Identifier: MIT
/*
 * verifier_stats.c - the verifier's statistics of each program loaded, read
 * from the log it writes at BPF_LOG_STATS (level 4): a few lines a program,
 * "verification time N usec" and "processed N insns ...".  One log buffer
 * a program, in the order libbpf walks them.
 */
#include <bpf/libbpf.h>
#include <stdlib.h>
#include <string.h>

#include "mt_log.h"
#include "mt_verifier_stats.h"

enum { STATS_LOG_BYTES = 4096, BPF_LOG_STATS_LEVEL = 4 };

struct mt_verifier_stats {
	size_t n;
	char logs[][STATS_LOG_BYTES];
};

static size_t count_programs(struct bpf_object *obj)
{
	struct bpf_program *prog;
	size_t n = 0;

	bpf_object__for_each_program(prog, obj) n++;
	return n;
}

struct mt_verifier_stats *mt_verifier_stats_ask(struct bpf_object *obj)
{
	size_t n = count_programs(obj), i = 0;
	struct mt_verifier_stats *s;
	struct bpf_program *prog;

	s = calloc(1, sizeof(*s) + n * STATS_LOG_BYTES);
	if (!s)
		return NULL;
	s->n = n;
	bpf_object__for_each_program(prog, obj)
	{
		if (bpf_program__autoload(prog)) {
			bpf_program__set_log_buf(prog, s->logs[i],
						 STATS_LOG_BYTES);
			bpf_program__set_log_level(prog, BPF_LOG_STATS_LEVEL);
		}
		i++;
	}
	return s;
}

/* The number after key in log, or -1. */
static long stat_after(const char *log, const char *key)
{
	const char *at = strstr(log, key);

	return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

void mt_verifier_stats_print(struct mt_verifier_stats *s,
			     struct bpf_object *obj)
{
	struct bpf_program *prog;
	long total_us = 0;
	size_t i = 0;

	if (!s)
		return;
	bpf_object__for_each_program(prog, obj)
	{
		if (i == s->n) /* the programs asked for, all of them */
			break;
		const char *log = s->logs[i++];
		long us = stat_after(log, "verification time ");

		/* not loaded, or a load that stopped before it (a failed
		 * one: libbpf says why) */
		if (!bpf_program__autoload(prog) || us < 0)
			continue;
		mt_verbose("verifier: %-20s %6.2f ms, %ld instructions walked",
			   bpf_program__name(prog), us / 1000.0,
			   stat_after(log, "processed "));
		total_us += us;
	}
	mt_verbose("verifier: total %18.2f ms", total_us / 1000.0);
	free(s);
}
