// SPDX-License-Identifier: MIT
/*
 * test_pss.c - --physical's sampling: smaps_rollup's text parsed, and a
 * round of samples written in an order whose running tree total never
 * passes both the last round's total and this one's (mt_pss.h), on the
 * forked-child case that once showed a 64 MiB tree at 102 MB and on random
 * rounds against a brute-force sum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_pss.h"
#include "formats_test.h"

#define MIB	 (1024ull * 1024)
#define MAX_PIDS 16

static void parse(void)
{
	struct mt_pss p;

	CHECK_INT(mt_pss_parse("Rss:  100 kB\nPss:   40 kB\nPss_Anon:  30 kB\n"
			       "Pss_File:  10 kB\nPss_Shmem:  0 kB\n",
			       &p),
		  0);
	CHECK_INT(p.pss, 40 * 1024);
	CHECK_INT(p.pss_anon, 30 * 1024);
	CHECK_INT(p.pss_file, 10 * 1024);
	CHECK_INT(mt_pss_parse("Rss: 100 kB\n", &p), -EINVAL);
}

/* The tree's total as a reader sums it: each process's latest sample. */
struct tree {
	uint64_t pss[MAX_PIDS + 1]; /* by pid 1..MAX_PIDS */
};

static uint64_t total(const struct tree *tr)
{
	uint64_t sum = 0;

	for (int pid = 1; pid <= MAX_PIDS; pid++)
		sum += tr->pss[pid];
	return sum;
}

/* Write w's round into tr in w->order; the highest total on the way. */
static uint64_t write_round(struct mt_pss_sweep *w, struct tree *tr)
{
	uint64_t high = total(tr);

	for (size_t k = 0; k < w->nnow; k++) {
		const struct mt_pss_sample *s = &w->now[w->order[k]];

		tr->pss[s->pid] = s->pss.pss;
		if (total(tr) > high)
			high = total(tr);
	}
	mt_pss_sweep_next(w);
	return high;
}

static void round_of(struct mt_pss_sweep *w, const pid_t *pids,
		     const uint64_t *pss, size_t n)
{
	w->now = realloc(w->now, (n ? n : 1) * sizeof(*w->now));
	w->order = realloc(w->order, (n ? n : 1) * sizeof(*w->order));
	w->cap_now = w->cap_order = n;
	for (size_t i = 0; i < n; i++)
		w->now[i] = (struct mt_pss_sample){.pid = pids[i],
						   .pss = {.pss = pss[i]}};
	w->nnow = n;
	mt_pss_sweep_order(w);
}

/* shared_fork's case: the parent's 64 MiB counted alone, then a round
 * with the child (listed first) sharing them. */
static void forked_child(void)
{
	struct mt_pss_sweep w = {0};
	struct tree tr = {0};
	pid_t alone[] = {3};
	uint64_t alone_pss[] = {64 * MIB};
	pid_t both[] = {9, 3};
	uint64_t both_pss[] = {32 * MIB, 32 * MIB};

	round_of(&w, alone, alone_pss, 1);
	CHECK_INT(write_round(&w, &tr), 64 * MIB);
	round_of(&w, both, both_pss, 2);
	CHECK_INT(w.now[w.order[0]].pid, 3); /* the parent's fall first */
	CHECK_INT(w.now[w.order[1]].pid, 9);
	CHECK_INT(write_round(&w, &tr), 64 * MIB);
	CHECK_INT(total(&tr), 64 * MIB);
	mt_pss_sweep_free(&w);
}

/* Random rounds: the running total never passes the larger of the
 * totals before and after a round. */
static void random_rounds(unsigned seed)
{
	struct mt_pss_sweep w = {0};
	struct tree tr = {0};

	srand(seed);
	for (int r = 0; r < 200; r++) {
		pid_t pids[MAX_PIDS];
		uint64_t pss[MAX_PIDS];
		struct tree after;
		size_t n = 0;
		uint64_t before_total, want;

		/* a process missing from a round has exited: its Exit,
		 * written before the round, took its memory off */
		for (pid_t pid = MAX_PIDS; pid >= 1; pid--)
			if (rand() % 3 == 0)
				tr.pss[pid] = 0;
			else
				pids[n++] = pid;
		after = tr;
		before_total = total(&tr);
		for (size_t i = 0; i < n; i++) {
			pid_t pid = pids[i];

			pss[i] = (uint64_t)(rand() % 100) * MIB;
			after.pss[pid] = pss[i];
		}
		want =
		    total(&after) > before_total ? total(&after) : before_total;
		round_of(&w, pids, pss, n);
		CHECK_INT(write_round(&w, &tr), want);
		CHECK_INT(total(&tr), total(&after));
	}
	mt_pss_sweep_free(&w);
}

/* Reading: this process is read, a pid that cannot exist is left out. */
static void read_live(void)
{
	struct mt_pss_sweep w = {0};
	pid_t pids[] = {getpid(), 0x7ffffff0};

	mt_pss_sweep_read(&w, pids, 2);
	CHECK_INT(w.nnow, 1);
	CHECK_INT(w.now[0].pid, getpid());
	CHECK(w.now[0].pss.pss > 0);
	mt_pss_sweep_free(&w);
}

int main(void)
{
	parse();
	forked_child();
	for (unsigned seed = 1; seed <= 20; seed++)
		random_rounds(seed);
	read_live();
	return test_summary("test_pss");
}
