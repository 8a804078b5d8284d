/* SPDX-License-Identifier: MIT */
/*
 * tracer_fast_int.h - what tracer_fast.c (start, the processes with and
 * without the recorder, the recorders' unwind rows) and tracer_fast_drain.c
 * (reading the rings into the staged events) share: the private state of
 * --fast.  Not an interface: tracer_fast.h is the tracer's.
 */
#ifndef MT_TRACER_FAST_INT_H
#define MT_TRACER_FAST_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fast_clock.h"
#include "mt_fast.h"

struct mt_cfi_row;

/* threads with a ring at once (the file is sparse: untouched rings cost
 * nothing) */
#define NRINGS 1024u
/* programs named in a warning about running without the recorder */
#define MAX_WARNED 16

/* A point of the counter-to-monotonic line. */
struct calib {
	uint64_t tsc;
	uint64_t ns;
};

struct mt_fast {
	int memfd, wakefd;
	struct mt_fast_header *hdr;
	size_t size;
	struct mt_fast_ring *rings;
	struct mt_fast_record *records;
	/* --stacks: the files and rows the recorders walk with */
	struct mt_fast_stacks *stacks;
	struct mt_fast_file *stack_files;
	struct mt_cfi_row *stack_rows;
	char preload[PATH_MAX];
	dev_t preload_dev;
	ino_t preload_ino;
	uint64_t ring_records;		  /* a power of two */
	struct mt_fast_clock_facts clock; /* what decides tsc */
	const char *clock_why;		  /* why (fast_clock.c); NULL: not
					     decided yet */
	bool tsc;			  /* records stamped by the TSC */
	struct calib prev, cur;		  /* the last two calibration points */
	struct mt_tsc_line line;	  /* the line through them */
	/* processes that exited since the last drain */
	pid_t *exited;
	size_t nexited, cap_exited;
	/* where each run of this drain's staged events ends (the events
	 * staged before it, then one run per ring read), and room to merge
	 * them */
	size_t *runs;
	size_t nruns, cap_runs;
	struct mt_event *merged;
	size_t cap_merged;
	/* each ring's last record's time, as read (ns; NRINGS of them,
	 * NULL until the first drain): a thread's records never go back in
	 * time (tracer_fast_drain.c: in_order) */
	uint64_t *ring_last;
	/* processes that exec'd a dynamic program and have not yet said
	 * they carry the recorder (the pid table), with that program */
	struct exec_wait {
		pid_t pid;
		char *path;
		uint64_t since; /* the exec (ns) */
	} * waiting;
	size_t nwaiting, cap_waiting;
	/* processes seen loading the recorder, and when (ns), until they
	 * exit: an Exec record read after its program's registration */
	struct mt_fast_pid *loaded;
	size_t nloaded, cap_loaded;
	uint32_t pids_read; /* pid table entries read */
	char *warned[MAX_WARNED];
	size_t nwarned;
	uint64_t uncovered; /* processes that ran without the recorder */
	int verbose;
};

/* A record's counter value as CLOCK_MONOTONIC ns, on the line through the
 * last two calibration points (extended before the first of them for a
 * record that waited a drain: its thread was preempted before publishing
 * it). */
static inline uint64_t tsc_to_ns(const struct mt_fast *f, uint64_t tsc)
{
	return mt_tsc_line_ns(&f->line, tsc);
}

/*
 * A drain's start: the recorders' wake-ups consumed, a new calibration
 * point, the processes that said they carry the recorder, and the ones
 * that exited without it said.  false if the wake-up eventfd failed;
 * else *limit is the latest stamp (counter or ns) this drain reads.
 */
bool mt_fast_drain_begin(struct mt_fast *f, uint64_t *limit);

#endif /* MT_TRACER_FAST_INT_H */
