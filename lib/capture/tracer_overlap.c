// SPDX-License-Identifier: MIT
/*
 * tracer_overlap.c - start-up work done by threads while the BPF side
 * loads (the private copies have theirs in tracer_confine.c): the first
 * uprobe registration's grace period (uprobe_warm.c) and libc's probe
 * plan, whose branch scan is remembered for the attach (elf.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mt_attach.h"
#include "mt_elf.h"
#include "tracer_int.h"

static void *prepare_libc(void *path)
{
	mt_attach_prepare(path);
	return NULL;
}

/* Where libc's probes go takes ~2 ms to work out (free()'s branch scan):
 * a thread does it while the BPF side loads.  --fast needs it too, for the
 * links of processes without the recorder (fast_links.c). */
static void start_preparing(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();

	if (!t->opts->track_allocators || !libc[0])
		return;
	t->preparing = pthread_create(&t->prepare_thread, NULL, prepare_libc,
				      (void *)libc) == 0;
}

void mt_tracer_overlap_start(struct tracer *t)
{
	if (mt_tracer_follows_code(t->opts))
		mt_uprobe_warm_start(&t->warm);
	start_preparing(t);
}

void mt_tracer_overlap_prepared(struct tracer *t)
{
	if (t->preparing)
		pthread_join(t->prepare_thread, NULL);
	t->preparing = false;
}

void mt_tracer_overlap_probes_made(struct tracer *t)
{
	const struct mt_uprobe_warm *w = &t->warm;

	mt_uprobe_warm_stop(&t->warm);
	if (t->opts->verbose < 2)
		return;
	if (w->nlinks)
		fprintf(stderr,
			"mt-trace: uprobe registration warmed beside the BPF "
			"load: the first in %.2f ms, %zu in all\n",
			w->first_ns / 1e6, w->nlinks);
	else if (w->err)
		fprintf(stderr,
			"mt-trace: uprobe registration not warmed: %s\n",
			strerror(-w->err));
}

void mt_tracer_overlap_end(struct tracer *t)
{
	mt_uprobe_warm_stop(&t->warm); /* a failed start: still warming */
	mt_tracer_overlap_prepared(t);
}
