/* SPDX-License-Identifier: MIT */
/*
 * mt_verifier_stats.h - what the kernel's verifier says of each BPF program
 * it loads (mt-trace -vvv): its time and the instructions it walked.  The
 * verifier is most of a session's fixed cost, so this is where a change to
 * the BPF side shows its price.
 */
#ifndef MT_VERIFIER_STATS_H
#define MT_VERIFIER_STATS_H

struct bpf_object;
struct mt_verifier_stats;

/* Ask for the statistics of every program obj will load (before its
 * load); NULL when there is no memory for them (the load goes on). */
struct mt_verifier_stats *mt_verifier_stats_ask(struct bpf_object *obj);

/* After the load: one verbose line a program loaded, then free s
 * (NULL: nothing). */
void mt_verifier_stats_print(struct mt_verifier_stats *s,
			     struct bpf_object *obj);

#endif /* MT_VERIFIER_STATS_H */
