/* SPDX-License-Identifier: MIT */
/*
 * tracer_int.h - the state mt-trace's engine shares between tracer.c (the
 * process, the rings, the stream) and tracer_code.c (finding allocators
 * in the code traced processes map).  Not an interface.
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

struct ring_buffer;
struct mt_trace;

struct symbol_donor {
	uint8_t build_id[64];
	int len;
	char *path;
};

struct staged_life {
	uint64_t timestamp;
	size_t first; /* index into life_slots */
	size_t nslots;
};

struct tracer {
	const struct mt_tracer_opts *opts;
	struct mt_trace *skel;
	struct mt_attach attach;
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
	/* records consumed in this drain, before merging by time */
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
	bool output_failed;
	uint64_t start_monotonic_ns; /* before anything was attached */
	uint64_t start_realtime_ns;
	/* files whose code was inspected for allocators (both the kernel's
	 * and stat's idea of their identity) */
	struct mt_code_key *inspected;
	size_t ninspected, cap_inspected;
	/* --scan files with a build ID: their symbols serve a stripped
	 * binary with the same ID */
	struct symbol_donor *donors;
	size_t ndonors, cap_donors;
	/* code mapped by stopped processes, waiting for inspection */
	struct mt_event *new_code;
	size_t nnew_code, cap_new_code;
};

/* realloc for a growing array, exiting on failure */
void *mt_tracer_grow(void *p, size_t *cap, size_t need, size_t elem);

uint64_t mt_clock_ns(clockid_t id);

/* Append an event mt-trace makes itself, after all the rings hold. */
int mt_tracer_own_event(struct tracer *t, uint16_t kind, pid_t pid,
			const void *payload, size_t len,
			const struct mt_event *fields);

/* (Re)load the BPF object, its allocator programs for mode. */
int mt_tracer_load_bpf(struct tracer *t, enum mt_probe_mode mode);

/* (Re)create the ring buffer consumers for the loaded object. */
int mt_tracer_make_rings(struct tracer *t);

/* tracer_code.c */
int mt_tracer_attach_initial(struct tracer *t);
void mt_tracer_inspect_new_code(struct tracer *t);
void mt_tracer_code_free(struct tracer *t);

#endif /* MT_TRACER_INT_H */
