/* SPDX-License-Identifier: MIT */
/* mt_stops.h - has mt-trace undone a stop the BPF side made? */
#ifndef MT_STOPS_H
#define MT_STOPS_H

#include <stdbool.h>

#include <bpf/bpf.h>

/*
 * The BPF side notes each stop it makes of a traced process in the
 * process's `traced` entry (struct mt_traced: `stopped` for new code,
 * `throttled` for backpressure), as the stop's timestamp; mt-trace notes
 * each stop it undid in a table of its own, one per kind (`resumed`,
 * `unthrottled`: pid -> the stop undone).  The stop made at `stop` (0:
 * none) is undone when done_fd's entry for pid holds it.
 */
static inline bool mt_stop_undone(int done_fd, __u32 pid, __u64 stop)
{
	__u64 done;

	return !stop ||
	       (bpf_map_lookup_elem(done_fd, &pid, &done) == 0 && done == stop);
}

#endif /* MT_STOPS_H */
