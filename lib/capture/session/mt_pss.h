/* SPDX-License-Identifier: MIT */
/* mt_pss.h - a process's proportional set size from /proc/PID/smaps_rollup. */
#ifndef MT_PSS_H
#define MT_PSS_H

#include <stdint.h>
#include <sys/types.h>

struct mt_pss {
	uint64_t pss; /* bytes, each shared page divided among its users */
	uint64_t pss_anon;
	uint64_t pss_file;
	uint64_t pss_shmem;
};

/* 0, or -errno (-ENOENT once the process is gone). */
int mt_pss_read(pid_t pid, struct mt_pss *out);

/* Parse the text of a smaps_rollup file.  0, or -EINVAL without Pss. */
int mt_pss_parse(const char *text, struct mt_pss *out);

/*
 * One round of --physical's sampling over the live processes.  The tree's
 * physical memory is summed one sample at a time by whoever reads the
 * trace, so a round is read whole first and written falls first: the sum
 * then never passes both the last round's total and this one's (a forked
 * child's first sample written while its parent's still counts the pages
 * they now share is how a 64 MiB tree once showed 102 MB).
 */
struct mt_pss_sample {
	pid_t pid;
	struct mt_pss pss;
};

struct mt_pss_sweep {
	struct mt_pss_sample *last; /* the last round's, by pid */
	size_t nlast, cap_last;
	struct mt_pss_sample *now; /* this round's, by pid */
	size_t nnow, cap_now;
	size_t *order; /* indexes into now, in the order to write them */
	size_t cap_order;
};

/* Read each of pids[0..n) (a process gone meanwhile is left out) into
 * w->now and order them (mt_pss_sweep_order). */
void mt_pss_sweep_read(struct mt_pss_sweep *w, const pid_t *pids, size_t n);

/* Sort w->now by pid and set w->order: the samples whose PSS fell or
 * stayed since the last round first, then those that rose (a process new
 * to the round rose from 0), each group by pid. */
void mt_pss_sweep_order(struct mt_pss_sweep *w);

/* The round written: it becomes the last. */
void mt_pss_sweep_next(struct mt_pss_sweep *w);

void mt_pss_sweep_free(struct mt_pss_sweep *w);

#endif /* MT_PSS_H */
