// SPDX-License-Identifier: MIT
/*
 * tracer_batch.c - the raw stream's batches as mt-trace fills and writes
 * them: records appended in order, the lost counters read at each write,
 * a reader that went away said once.  The tracer core (tracer.c) and the
 * call-stack records (tracer_stacks.c) both write through here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_raw.h"
#include "mt_trace.skel.h"
#include "tracer_fast.h"
#include "tracer_int.h"

/* Sum of the per-CPU counters first..last-1 of the `lost` map. */
uint64_t mt_tracer_read_counters(struct tracer *t, __u32 first, __u32 last)
{
	uint64_t total = 0, vals[t->ncpus];

	for (__u32 k = first; k < last; k++) {
		if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.lost), &k,
					vals))
			continue;
		for (int c = 0; c < t->ncpus; c++)
			total += vals[c];
	}
	return total;
}

static uint64_t read_lost(struct tracer *t)
{
	return mt_tracer_read_counters(t, 0, MT_LOST_MAX) +
	       (t->fast ? mt_fast_lost(t->fast) : 0);
}

void mt_tracer_output_gone(struct tracer *t)
{
	if (t->output_failed)
		return; /* said once: its write and its epoll both tell */
	fprintf(stderr,
		"mt-trace: %s: the reader went away; stopping the command\n",
		t->opts->out_name);
	t->output_failed = true;
}

int mt_tracer_write_batch(struct tracer *t)
{
	struct mt_event *records =
	    (struct mt_event *)(t->batch + sizeof(struct mt_raw_batch));
	uint64_t lost_now = read_lost(t);
	uint64_t lost = lost_now - t->lost_reported;
	int err;

	if (t->batch_records == 0 && lost == 0)
		return 0;
	err = mt_raw_write_batch(t->opts->out_fd, t->seq, lost, records,
				 t->batch_records);
	if (err) {
		if (err == -EPIPE)
			mt_tracer_output_gone(t);
		else
			fprintf(stderr, "mt-trace: %s: %s\n", t->opts->out_name,
				strerror(-err));
		t->output_failed = true;
		return -1;
	}
	t->seq++;
	t->lost_reported = lost_now;
	t->events_written += t->batch_records;
	t->batch_records = 0;
	return 0;
}

int mt_tracer_append(struct tracer *t, const struct mt_event *slots, size_t n)
{
	struct mt_event *records =
	    (struct mt_event *)(t->batch + sizeof(struct mt_raw_batch));

	if (t->batch_records + n > BATCH_MAX_RECORDS &&
	    mt_tracer_write_batch(t))
		return -1;
	memcpy(&records[t->batch_records], slots, n * MT_EVENT_SIZE);
	t->batch_records += n;
	if (slots[0].timestamp > t->last_record_ns)
		t->last_record_ns = slots[0].timestamp;
	return 0;
}
