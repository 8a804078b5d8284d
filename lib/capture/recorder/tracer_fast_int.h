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

/* Why mt-trace gave up on what the traced command's memory held (the
 * trace is then marked incomplete: mt_fast_incomplete). */
enum mt_fast_damage {
	MT_FAST_DAMAGE_NONE = 0,
	MT_FAST_DAMAGE_POSITIONS, /* a ring's head before its tail, or past
				     its capacity */
	MT_FAST_DAMAGE_RECORD,	  /* a record of no known kind, or a stack
				     record cut or of impossible size */
	MT_FAST_DAMAGE_COUNTER,	  /* a count the recorders keep went back or
				     past any possible value */
};

/* A recorder's counter as mt-trace takes it: never back, never past
 * MT_FAST_COUNTER_MAX (a count of calls: 2^40 is days of calls at any
 * speed) */
#define MT_FAST_COUNTER_MAX (1ull << 40)

/*
 * The shared memory is the traced command's to write (it maps it
 * read-write): every offset, size and count mt-trace needs of it is
 * mt-trace's own copy here, set when it made the memory, and each ring's
 * consumer position is kept here too (written to the ring for the
 * producer, never read back).  What is read from it is data, checked
 * before use (tracer_fast_drain.c).
 */
struct mt_fast {
	int memfd, wakefd;
	struct mt_fast_header *hdr;
	size_t size;
	struct mt_fast_ring *rings;
	struct mt_fast_record *records;
	uint32_t nrings;		/* rings[nrings], NRINGS */
	uint32_t rings_used;		/* rings claimed, as last taken */
	const struct mt_fast_pid *pids; /* the pid table: MAX_PIDS entries */
	uint32_t max_pids;
	unsigned stack_depth; /* frames a stack holds at most; 0: none */
	/* each ring's records read (NRINGS, NULL until the first drain),
	 * its head as read at this drain, and whether it was given up */
	uint64_t *tail;
	uint64_t *head;
	bool *abandoned;
	/* records dropped with the rings given up, and why the first was */
	uint64_t dropped;
	enum mt_fast_damage damage;
	/* the recorders' lost and no_ring counters, as last taken */
	uint64_t lost_seen, no_ring_seen;
	/* --stacks: the files and rows the recorders walk with, and how many
	 * mt-trace published (its own count: st->nfiles is written only) */
	struct mt_fast_stacks *stacks;
	struct mt_fast_file *stack_files;
	struct mt_cfi_row *stack_rows;
	uint32_t stack_nfiles, stack_max_files, stack_max_rows;
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
	/* each thread's last allocator event written, by tid (open
	 * addressing, cap a power of two): one call seen by both paths, a
	 * probe and the recorder, is written once (one_event_per_call) */
	struct last_call {
		uint32_t tid;
		uint8_t cls; /* 1 an allocation, 2 a free */
		uint8_t src; /* 1 the BPF side, 2 a recorder, 0 paired */
		uint64_t addr, size;
	} * calls;
	size_t cap_calls, ncalls;
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

/* The recorders' clock now (counter or ns, as their records' stamps). */
uint64_t mt_fast_clock_now(const struct mt_fast *f);

/* The shared memory held something impossible: noted (the first reason
 * is kept), and said on stderr once. */
void mt_fast_damaged(struct mt_fast *f, enum mt_fast_damage why);

#endif /* MT_TRACER_FAST_INT_H */
