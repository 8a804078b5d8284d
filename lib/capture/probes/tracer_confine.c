// SPDX-License-Identifier: MIT
/*
 * tracer_confine.c - mt-trace's use of confine.c: which files the tree gets
 * private copies of, the namespace entered before the command is forked,
 * and the copying done by a thread while the BPF side loads.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mt_confine.h"
#include "mt_elf.h"
#include "mt_log.h"
#include "mt_xalloc.h"
#include "tracer_fast.h"
#include "tracer_int.h"

/* --fast: the files the preload records (libc.so.6, libstdc++.so.6) carry
 * no probes, so need no private copy; the same test, by DT_SONAME, as the
 * code inspection's (mt_fast_covers). */
static bool recorded_by_preload(const struct tracer *t, const char *path)
{
	enum mt_alloc_family family;
	bool covered;
	int fd;

	if (!t->fast)
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	covered = mt_fast_covers(t->fast, fd, &family);
	close(fd);
	return covered;
}

/*
 * Probes for the tree alone (confine.c): private copies of the C library
 * and the known allocator libraries, in a mount namespace the command
 * inherits, so it is entered before the command is forked.  The copying
 * (3-5 ms) runs in a thread beside the BPF load, which the kernel does on
 * one CPU; the probes wait for it (setup_bpf).  Without the privilege
 * for it the probes are global, as they always were: every process
 * mapping those files pays a trap per call while the trace runs.
 */
struct confine_job {
	struct tracer *t;
	char paths[MT_CONFINE_MAX_FILES][4096];
	const char *list[MT_CONFINE_MAX_FILES];
	size_t n;
	int err;
	uint64_t ns; /* the copying took */
	pthread_t thread;
	bool threaded;
};

static void say_not_confined(const struct tracer *t, const char *path)
{
	mt_warning("allocator probes are global: every "
		   "process on the machine that maps %s pays a trap per "
		   "allocator call while this trace runs (confining them "
		   "to the traced tree failed: %s)",
		   path, t->probes.confine.why);
}

void mt_tracer_confine_begin(struct tracer *t)
{
	const struct mt_tracer_opts *o = t->opts;
	const char *libc = o->libc_path ? o->libc_path : mt_self_libc();
	struct confine_job *job;
	size_t n;

	if (!o->track_allocators || o->global_probes || !libc[0])
		return;
	job = mt_xcalloc(1, sizeof(*job));
	job->t = t;
	n = mt_confine_known_files(libc, job->paths);
	for (size_t i = 0; i < n; i++)
		if (!recorded_by_preload(t, job->paths[i]))
			job->list[job->n++] = job->paths[i];
	if (job->n == 0) { /* --fast and no other allocator library here */
		free(job);
		return;
	}
	if (mt_confine_enter(&t->probes.confine)) {
		say_not_confined(t, job->list[0]);
		free(job);
		return;
	}
	t->parallel.copies = job;
}

static void *confine_copy(void *arg)
{
	struct confine_job *job = arg;
	uint64_t start = mt_clock_ns(CLOCK_MONOTONIC);

	job->err = mt_confine_copy(&job->t->probes.confine, job->list, job->n,
				   job->t->opts->verbose);
	job->ns = mt_clock_ns(CLOCK_MONOTONIC) - start;
	return NULL;
}

/* After the fork: the command shares the namespace, and sees the copies
 * as soon as they are bound (it waits on its release pipe until then). */
void mt_tracer_confine_copies_begin(struct tracer *t)
{
	struct confine_job *job = t->parallel.copies;

	if (!job)
		return;
	job->threaded =
	    pthread_create(&job->thread, NULL, confine_copy, job) == 0;
	if (!job->threaded)
		confine_copy(job);
}

/* Wait for the copies; say how it went unless quiet (a failed start). */
static void copies_finish(struct tracer *t, bool quiet)
{
	struct confine_job *job = t->parallel.copies;

	if (!job)
		return;
	if (job->threaded)
		pthread_join(job->thread, NULL);
	t->parallel.copies = NULL;
	if (!quiet && job->err) {
		say_not_confined(t, job->list[0]);
	} else if (!quiet && t->opts->verbose) {
		mt_verbose("allocator probes confined to the tree: %zu "
			   "private copies, %zu KiB, in %.2f ms",
			   t->probes.confine.ncopies,
			   t->probes.confine.copy_bytes >> 10, job->ns / 1e6);
	}
	free(job);
}

int mt_tracer_confine_copies_await(struct tracer *t)
{
	copies_finish(t, false);
	return 0;
}

void mt_tracer_confine_copies_end(struct tracer *t)
{
	copies_finish(t, true);
}
