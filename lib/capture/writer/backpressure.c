// SPDX-License-Identifier: MIT
/*
 * backpressure.c - continue the processes the BPF side stopped because a
 * ring was filling up.
 *
 * Rather than drop what a full ring cannot hold, the BPF side stops a
 * traced process whose record finds a ring past its high-water mark (half
 * of it) and notes the stop in the process's `traced` entry
 * (struct mt_traced: throttled).
 * Here, once a drain has emptied the rings down to their low-water mark
 * (a quarter of each: the ring's own positions say so, not what the
 * consumer found to read: see rings_drained()), every stop noted and not
 * yet undone gets a
 * SIGCONT, then its note in `unthrottled`, in that order: should mt-trace
 * die between the two, its watchdog (watchdog.c) continues the process
 * once more, which is harmless; never not at all.  A process also stopped
 * for new code it mapped waits for that inspection to end first
 * (tracer_code.c continues it; this stop is undone at the drain after).
 * A process someone else stopped meanwhile (^Z, kill -STOP: the entry's
 * stopped_by_other) stays stopped: a SIGCONT would undo that stop too.
 * Whoever stopped it continues it.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "mt_stops.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

void mt_backpressure_configure(struct tracer *t, struct mt_trace *skel)
{
	bool on = t->bp.on;

	skel->rodata->events_high_water = on ? t->opts->ring_bytes / 2 : 0;
	skel->rodata->lifecycle_high_water =
	    on ? bpf_map__max_entries(skel->maps.lifecycle) / 2 : 0;
	skel->bss->backpressure = on;
	bpf_program__set_autoload(skel->progs.on_signal_generate, on);
}

/* Is pid's latest stop for new code (in its entry) still waiting for its
 * inspection? */
static bool waits_for_code(struct mt_trace *skel, __u32 pid,
			   const struct mt_traced *entry)
{
	return !mt_stop_undone(bpf_map__fd(skel->maps.resumed), pid,
			       entry->stopped);
}

/* Continue every backpressure stop in `traced` not undone yet; false when
 * one had to wait (for a code inspection). */
static bool continue_throttled(struct mt_trace *skel)
{
	int traced_fd = bpf_map__fd(skel->maps.traced);
	int unthrottled_fd = bpf_map__fd(skel->maps.unthrottled);
	__u32 key, next, *prev = NULL;
	struct mt_traced entry;
	__u64 stop;
	bool all = true;

	while (bpf_map_get_next_key(traced_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(traced_fd, &key, &entry))
			continue; /* it exited meanwhile */
		stop = entry.throttled;
		if (mt_stop_undone(unthrottled_fd, key, stop))
			continue;
		if (waits_for_code(skel, key, &entry)) {
			all = false;
			continue;
		}
		/* another's stop after ours: a SIGCONT would undo it too */
		if (entry.stopped_by_other < stop)
			kill(key, SIGCONT);
		bpf_map_update_elem(unthrottled_fd, &key, &stop, BPF_ANY);
	}
	return all;
}

/*
 * A BPF ring's consumer position is on its first page, its producer
 * position on the second; both are mapped read-only here, beside
 * libbpf's own mapping (which libbpf 1.1 does not expose).
 */
static void *map_ring_positions(int fd, long page)
{
	void *p = mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

void mt_backpressure_watch_rings(struct tracer *t)
{
	long page = sysconf(_SC_PAGESIZE);
	struct bpf_map *rings[2] = {t->skel->maps.lifecycle,
				    t->skel->maps.events};

	mt_backpressure_unwatch_rings(t);
	if (!t->bp.on)
		return;
	for (int i = 0; i < 2; i++) {
		t->bp.ring_pos[i] =
		    map_ring_positions(bpf_map__fd(rings[i]), page);
		t->bp.ring_low_water[i] = bpf_map__max_entries(rings[i]) / 4;
		if (!t->bp.ring_pos[i] && t->opts->verbose)
			mt_verbose("mapping a ring's positions: %s",
				   strerror(errno));
	}
}

void mt_backpressure_unwatch_rings(struct tracer *t)
{
	long page = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < 2; i++) {
		if (t->bp.ring_pos[i])
			munmap(t->bp.ring_pos[i], 2 * page);
		t->bp.ring_pos[i] = NULL;
	}
}

/* Bytes of ring i not consumed yet, as the BPF side's fill level counts
 * them: the records submitted and those reserved but not yet submitted. */
static uint64_t ring_unconsumed(const struct tracer *t, int i)
{
	long page = sysconf(_SC_PAGESIZE);
	const unsigned long *consumer = t->bp.ring_pos[i];
	const unsigned long *producer =
	    (const unsigned long *)((const char *)t->bp.ring_pos[i] + page);

	return __atomic_load_n(producer, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(consumer, __ATOMIC_ACQUIRE);
}

/*
 * Are both rings below their low-water mark?  A drain reads up to the
 * first record reserved and not yet submitted: one whose program was
 * preempted between the two (uprobe programs run preemptible) holds back
 * everything the other threads submitted after it.  Undoing the stops then
 * let them fill the ring behind it, and lose what did not fit (seen: 1,004
 * events of 64 threads storming on a 64 KiB ring beside a CPU hog, one run
 * in ten at load 8-12).  The held record's thread is not stopped (a stop
 * takes effect on the way back to user space, after its submit), so the
 * ring drains once it runs again, and its submit wakes mt-trace.
 */
static bool rings_drained(const struct tracer *t)
{
	for (int i = 0; i < 2; i++)
		if (t->bp.ring_pos[i] &&
		    ring_unconsumed(t, i) >= t->bp.ring_low_water[i])
			return false;
	return true;
}

void mt_backpressure_release(struct tracer *t, bool all)
{
	/* read before the table: a stop made after it is seen next time */
	__u64 throttles = t->skel ? t->skel->bss->throttles : 0;

	if (!t->bp.on || !t->skel)
		return;
	if (!all && throttles == t->bp.throttles_released)
		return; /* the common case: one load, no system call */
	if (!all && !rings_drained(t)) {
		t->bp.releases_held++;
		return; /* the next drain undoes them */
	}
	if (continue_throttled(t->skel))
		t->bp.throttles_released = throttles;
}

void mt_backpressure_exited(struct tracer *t, pid_t pid)
{
	__u32 key = pid;

	if (t->bp.on && t->skel)
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.unthrottled),
				    &key);
}
