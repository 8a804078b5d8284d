/* SPDX-License-Identifier: MIT */
/*
 * tracer_int.h - the state of mt-trace's engine (tracer.c: the process,
 * the rings, the stream), with the inspection of the code traced processes
 * map (tracer_code.h) inside it.  Not an interface.
 */
#ifndef MT_TRACER_INT_H
#define MT_TRACER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "mt_attach.h"
#include "mt_control.h"
#include "mt_event.h"
#include "mt_probe.h"
#include "mt_tracer.h"
#include "tracer_code.h"

struct ring_buffer;
struct mt_trace;

struct staged_life {
	uint64_t timestamp;
	size_t first; /* index into life_slots */
	size_t nslots;
};

struct tracer {
	const struct mt_tracer_opts *opts;
	struct mt_trace *skel;
	struct mt_code code;	       /* finding and probing allocators */
	enum mt_probe_mode probe_mode; /* what the loaded programs are for */
	struct ring_buffer *rings;
	pid_t child;
	int pidfd;
	int release_fd;	 /* write end: one byte lets the child exec */
	int exec_err_fd; /* read end: errno of a failed exec */
	int ncpus;
	bool rss; /* kmem:rss_stat is traced */
	struct mt_control control;
	bool has_control;
	int sample_fd; /* timerfd for --physical sampling, or -1 */
	/* processes alive now, from the lifecycle events (for sampling) */
	pid_t *live;
	size_t nlive, cap_live;
	/* records consumed, before merging by time (those after the last
	 * drain's watermark wait here for the next) */
	struct mt_event *ev;
	size_t nev, cap_ev;
	struct mt_event *life_slots;
	size_t nlife_slots, cap_life_slots;
	struct staged_life *life;
	size_t nlife, cap_life;
	/* the batch being built: header then records */
	unsigned char *batch;
	size_t batch_records;
	uint64_t seq;
	uint64_t lost_reported;
	uint64_t events_written;
	uint64_t written_until;	 /* every record up to this time is written */
	uint64_t last_record_ns; /* the latest record written */
	bool output_failed;
	uint64_t start_monotonic_ns; /* before anything was attached */
	uint64_t start_realtime_ns;
};

#endif /* MT_TRACER_INT_H */
