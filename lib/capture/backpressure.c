// SPDX-License-Identifier: MIT
/*
 * backpressure.c - continue the processes the BPF side stopped because a
 * ring was filling up.
 *
 * Rather than drop what a full ring cannot hold, the BPF side stops a
 * traced process whose record finds a ring past its high-water mark (half
 * of it) and notes the stop in the process's `traced` entry
 * (struct mt_traced: throttled).
 * Here, once a drain has emptied the rings (the low-water mark: what the
 * consumer found is all read), every stop noted and not yet undone gets a
 * SIGCONT, then its note in `unthrottled`, in that order: should mt-trace
 * die between the two, its watchdog (watchdog.c) continues the process
 * once more, which is harmless; never not at all.  A process also stopped
 * for new code it mapped waits for that inspection to end first
 * (tracer_code.c continues it; this stop is undone at the drain after).
 * A process someone else stopped meanwhile (^Z, kill -STOP: the entry's
 * stopped_by_other) stays stopped: a SIGCONT would undo that stop too.
 * Whoever stopped it continues it.
 */
#include <signal.h>
#include <stdbool.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_stops.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

void mt_backpressure_configure(struct tracer *t, struct mt_trace *skel)
{
	bool on = t->backpressure;

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

void mt_backpressure_release(struct tracer *t, bool all)
{
	/* read before the table: a stop made after it is seen next time */
	__u64 throttles = t->skel ? t->skel->bss->throttles : 0;

	if (!t->backpressure || !t->skel)
		return;
	if (!all && throttles == t->throttles_released)
		return; /* the common case: one load, no system call */
	if (continue_throttled(t->skel))
		t->throttles_released = throttles;
}

void mt_backpressure_exited(struct tracer *t, pid_t pid)
{
	__u32 key = pid;

	if (t->backpressure && t->skel)
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.unthrottled),
				    &key);
}
