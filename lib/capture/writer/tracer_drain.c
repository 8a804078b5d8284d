// SPDX-License-Identifier: MIT
/*
 * tracer_drain.c - the two ring buffers drained into the raw stream's
 * batches: events and lifecycle records merged by time against a
 * watermark so that each process's records stay in order (its Fork
 * before, its Exit after all it did), new code queued for inspection,
 * and the events mt-trace makes itself stamped after what the rings held.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "mt_grow.h"
#include "mt_probe.h"
#include "mt_raw.h"
#include "mt_stack.h"
#include "mt_trace.skel.h"
#include "tracer_fast.h"
#include "tracer_int.h"

/* ---- the rings drained into batches ------------------------------------ */

/*
 * An event with a stack becomes two staged records, a STACK_REF (addr =
 * the stack's key) and the event, with the same timestamp: the merge by
 * time is stable, so they stay together (tracer_stacks.c turns the key
 * into an id).  A stack's own record is kept aside until first used.
 */
int mt_tracer_on_event(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct mt_stacked_event *se = data;

	if (size < sizeof(struct mt_event))
		return 0;
	if (se->ev.kind == MT_EV_STACK) {
		mt_tracer_stack_seen(t, data, size);
		return 0;
	}
	t->staged.ev = mt_grow(t->staged.ev, &t->staged.cap_ev,
			       t->staged.nev + 2, sizeof(*t->staged.ev));
	if (size >= sizeof(*se) && se->stack_key) {
		t->staged.ev[t->staged.nev] = se->ev;
		t->staged.ev[t->staged.nev].kind = MT_EV_STACK_REF;
		t->staged.ev[t->staged.nev].flags = 0;
		t->staged.ev[t->staged.nev].aux = 0;
		t->staged.ev[t->staged.nev].addr = se->stack_key;
		t->staged.ev[t->staged.nev].size =
		    t->staged.ev[t->staged.nev].old_addr =
			t->staged.ev[t->staged.nev].old_size = 0;
		/* its Python frames' key (tracer_stacks.c merges them) */
		if (size >= sizeof(struct mt_py_stacked_event))
			t->staged.ev[t->staged.nev].old_addr =
			    ((const struct mt_py_stacked_event *)data)->py_key;
		t->staged.nev++;
	}
	memcpy(&t->staged.ev[t->staged.nev++], data, sizeof(struct mt_event));
	return 0;
}

void mt_tracer_live_add(struct tracer *t, pid_t pid)
{
	t->live =
	    mt_grow(t->live, &t->cap_live, t->nlive + 1, sizeof(*t->live));
	t->live[t->nlive++] = pid;
}

/* Where pid is in t->live; t->nlive when it is not there. */
static size_t live_index(const struct tracer *t, pid_t pid)
{
	size_t i = 0;

	while (i < t->nlive && t->live[i] != pid)
		i++;
	return i;
}

static void live_remove(struct tracer *t, pid_t pid)
{
	size_t i = live_index(t, pid);

	if (i < t->nlive)
		t->live[i] = t->live[--t->nlive];
}

static bool is_live(const struct tracer *t, pid_t pid)
{
	return live_index(t, pid) < t->nlive;
}

/*
 * An exec's record from the ring (bpf/mt_trace.bpf.c, on_exec: the path,
 * a NUL, the argument bytes read) as the raw stream holds it: *path_len
 * and *args_len bytes of the ring record, and whether the arguments need
 * a NUL of their own at the end (cut in the middle of one).  The bytes are
 * the traced program's: every length is checked against the record's.
 */
static void exec_parts(const struct mt_event *e, size_t size, size_t *path_len,
		       size_t *args_len, bool *add_nul)
{
	size_t after = size - sizeof(*e);
	const char *args;

	*path_len = e->aux < after ? e->aux : after;
	*args_len = 0;
	*add_nul = false;
	if (!e->size || *path_len + 1 >= after)
		return;
	*args_len =
	    e->size < after - *path_len - 1 ? e->size : after - *path_len - 1;
	if (*args_len > MT_ARGS_MAX)
		*args_len = MT_ARGS_MAX;
	args = (const char *)(e + 1) + *path_len + 1;
	*add_nul = args[*args_len - 1] != '\0';
}

/* Lifecycle records keep their payload (an exec's path and arguments) as
 * DATA slots right after the record, as the raw format wants them. */
int mt_tracer_on_lifecycle(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	const struct mt_event *e = data;
	size_t payload = 0, nslots, path_len = 0, args_len = 0;
	bool add_nul = false;
	struct mt_event *slot;

	if (size < sizeof(*e))
		return 0;
	if (e->kind == MT_EV_NEW_CODE) {
		/* for mt-trace alone: the process waits for its inspection */
		mt_code_queue(&t->probes.code, e);
		return 0;
	}
	if (e->kind == MT_EV_FORK) {
		mt_tracer_live_add(t, e->pid);
	} else if (e->kind == MT_EV_EXIT) {
		live_remove(t, e->pid);
		if (t->watchdog > 0) /* stops are made and recorded */
			mt_code_exited(&t->probes.code, e->pid);
		mt_backpressure_exited(t, e->pid);
		if (t->fast) { /* its rings, once drained, go back */
			mt_fast_exited(t->fast, e->pid);
			mt_fast_links_exited(&t->links, e->pid);
		}
	}
	if (e->kind == MT_EV_EXEC) {
		exec_parts(e, size, &path_len, &args_len, &add_nul);
		payload = path_len + (args_len ? 1 + args_len + add_nul : 0);
		if (t->fast) /* it should load the recorder */
			mt_fast_exec(t->fast, e->pid, e->timestamp,
				     (const char *)(e + 1), path_len);
	}
	nslots = 1 + (payload + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE;
	t->staged.life_slots = mt_grow(
	    t->staged.life_slots, &t->staged.cap_life_slots,
	    t->staged.nlife_slots + nslots, sizeof(*t->staged.life_slots));
	t->staged.life = mt_grow(t->staged.life, &t->staged.cap_life,
				 t->staged.nlife + 1, sizeof(*t->staged.life));
	slot = &t->staged.life_slots[t->staged.nlife_slots];
	memset(slot, 0, nslots * MT_EVENT_SIZE);
	memcpy(slot, e, sizeof(*e));
	if (e->kind == MT_EV_EXEC) {
		/* the zeroed slots hold the NULs */
		memcpy(slot + 1, e + 1, payload - add_nul);
		slot->aux = payload;
		slot->size = args_len ? args_len + add_nul : 0;
		slot->old_size = args_len && e->old_size > slot->size
				     ? e->old_size
				     : slot->size;
		slot->flags =
		    args_len && e->old_size > args_len ? MT_EXEC_ARGS_CUT : 0;
		slot->old_addr = 0;
		slot->addr = 0;
	}
	t->staged.life[t->staged.nlife++] = (struct staged_life){
	    .timestamp = e->timestamp,
	    .first = t->staged.nlife_slots,
	    .nslots = nslots,
	};
	t->staged.nlife_slots += nslots;
	return 0;
}

/* Sort the few records the rings delivered out of time order (per-CPU
 * reservations race); nearly sorted input, so insertion sort. */
static void sort_by_time(struct mt_event *ev, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct mt_event x = ev[i];
		size_t j = i;

		while (j > 0 && ev[j - 1].timestamp > x.timestamp) {
			ev[j] = ev[j - 1];
			j--;
		}
		ev[j] = x;
	}
}

/*
 * A record stamped before the last drain's watermark that was not in the
 * rings then (reserved on one CPU, committed after the drain read the
 * ring) is placed at the watermark: records up to it are written, and
 * per thread the file is in time order.  The map is monotonic, so the
 * sorted events stay sorted.
 */
static void after_written(struct tracer *t)
{
	uint64_t floor = t->staged.written_until;

	for (size_t i = 0;
	     i < t->staged.nev && t->staged.ev[i].timestamp < floor; i++)
		t->staged.ev[i].timestamp = floor;
	for (size_t j = 0; j < t->staged.nlife; j++)
		if (t->staged.life[j].timestamp < floor) {
			t->staged.life[j].timestamp = floor;
			t->staged.life_slots[t->staged.life[j].first]
			    .timestamp = floor;
		}
}

/* Keep the staged lifecycle records from first on (held for the next
 * drain) at the front of their arrays. */
void mt_tracer_keep_life_from(struct tracer *t, size_t first)
{
	size_t slot = 0;

	for (size_t k = first; k < t->staged.nlife; k++) {
		struct staged_life *l = &t->staged.life[k];

		memmove(&t->staged.life_slots[slot],
			&t->staged.life_slots[l->first],
			l->nslots * sizeof(*t->staged.life_slots));
		t->staged.life[k - first] =
		    (struct staged_life){.timestamp = l->timestamp,
					 .first = slot,
					 .nslots = l->nslots};
		slot += l->nslots;
	}
	t->staged.nlife -= first;
	t->staged.nlife_slots = slot;
}

/* How many events from t->staged.ev[i] on go to the batch as they are, with one
 * copy: up to the watermark, before the next lifecycle record (life[j]),
 * none a record that takes a path of its own, at most a batch. */
static size_t plain_run(const struct tracer *t, size_t i, size_t j,
			uint64_t until)
{
	uint64_t end = until;
	size_t n = 1;

	if (j < t->staged.nlife && t->staged.life[j].timestamp <= end)
		end =
		    t->staged.life[j].timestamp - 1; /* the life record first */
	while (i + n < t->staged.nev && n < BATCH_MAX_RECORDS &&
	       t->staged.ev[i + n].timestamp <= end &&
	       t->staged.ev[i + n].kind != MT_EV_STACK_REF &&
	       t->staged.ev[i + n].kind != MT_EV_CODE_MAP)
		n++;
	return n;
}

/*
 * Drain both rings and merge them by time into the batch, up to a
 * watermark: the time just before the lifecycle ring is read.  Every
 * record stamped up to it is written now, in time order; later ones wait
 * for the next drain.  That keeps each process's records in order across
 * the two rings:
 *  - an exit is committed after the process's last event: the lifecycle
 *    ring is read first and the events ring after it, so the events of an
 *    exit read now are all read too (reading the events ring first wrote
 *    a Munmap made just before an exit one drain after the Exit);
 *  - a fork is committed before the child first runs: a child's event
 *    stamped up to the watermark has its Fork in this drain or an earlier
 *    one, and a child whose Fork is not read yet has only later events.
 * final: the command is gone, write everything.
 */
int mt_tracer_collect(struct tracer *t, bool final)
{
	uint64_t until = final ? UINT64_MAX : mt_clock_ns(CLOCK_MONOTONIC);
	size_t i = 0, j = 0;
	int rc;

	/* rings still being made (tracer.c): the command is not released
	 * yet, no BPF program has written to them */
	rc = t->parallel.rings_ready ? ring_buffer__consume(t->rings) : 0;
	if (rc < 0 && rc != -EINTR) {
		mt_error("ring buffer: %s", strerror(-rc));
		return -1;
	}
	sort_by_time(t->staged.ev, t->staged.nev);
	after_written(t);
	/* the preloaded recorders' rings after the events ring, merged in
	 * by time: what a process recorded before its Exit is read by now */
	if (t->fast && mt_fast_collect(t, until))
		return -1;
	while ((i < t->staged.nev && t->staged.ev[i].timestamp <= until) ||
	       (j < t->staged.nlife && t->staged.life[j].timestamp <= until)) {
		if (j < t->staged.nlife &&
		    t->staged.life[j].timestamp <= until &&
		    (i == t->staged.nev || t->staged.life[j].timestamp <=
					       t->staged.ev[i].timestamp)) {
			rc = mt_tracer_append(
			    t, &t->staged.life_slots[t->staged.life[j].first],
			    t->staged.life[j].nslots);
			j++;
		} else if (t->staged.ev[i].kind == MT_EV_STACK_REF) {
			/* with its event, which follows it (same time): a
			 * reader takes a StackRef for the record after it
			 * in its batch */
			const struct mt_event *next =
			    i + 1 < t->staged.nev ? &t->staged.ev[i + 1] : NULL;

			rc = mt_tracer_stack_ref(t, &t->staged.ev[i], next);
			i += mt_tracer_stack_ref_pairs(&t->staged.ev[i], next)
				 ? 2
				 : 1;
		} else if (t->staged.ev[i].kind == MT_EV_CODE_MAP) {
			rc = mt_tracer_code_map(t, &t->staged.ev[i]);
			i++;
		} else {
			size_t n = plain_run(t, i, j, until);

			rc = mt_tracer_append(t, &t->staged.ev[i], n);
			i += n;
			/* the append saw the run's first time only */
			if (t->staged.ev[i - 1].timestamp >
			    t->out.last_record_ns)
				t->out.last_record_ns =
				    t->staged.ev[i - 1].timestamp;
		}
		if (rc)
			return -1;
	}
	/* t->staged.ev is NULL until the first event: memmove's arguments may
	 * not */
	if (i < t->staged.nev)
		memmove(t->staged.ev, t->staged.ev + i,
			(t->staged.nev - i) * sizeof(*t->staged.ev));
	t->staged.nev -= i;
	mt_tracer_keep_life_from(t, j);
	t->staged.written_until = until;
	return 0;
}

/* a CodeMap that waited for its file's inspection, stamped now */
static int code_map_event(struct tracer *t, const struct mt_event *e)
{
	return mt_tracer_own_event(t, MT_EV_CODE_MAP, e->pid, NULL, 0, e);
}

int mt_tracer_drain(struct tracer *t, bool final)
{
	t->out.writing_last = final; /* tracer_batch.c: why */
	if (mt_tracer_collect(t, final))
		return -1;
	/* stopped processes wait for this: before anything else */
	if (t->probes.code.nqueued || t->probes.code.nexited)
		mt_code_inspect_queued(&t->probes.code);
	if (t->fast) /* links that went, closed off our path */
		mt_fast_links_flush(&t->links);
	mt_tracer_code_maps_pending(t, code_map_event);
	/* the rings are empty now: whoever filled them goes on */
	mt_backpressure_release(t, false);
	return mt_tracer_write_batch(t);
}

/*
 * An event mt-trace itself makes (marker, enable, disable, PSS sample):
 * stamped now, after everything the rings hold, so it lands after every
 * event that happened before it (and before those mt_tracer_collect() keeps for
 * the next drain).
 */
int mt_tracer_own_event(struct tracer *t, uint16_t kind, pid_t pid,
			const void *payload, size_t len,
			const struct mt_event *fields)
{
	struct mt_event
	    slots[1 + (PATH_MAX + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE];
	size_t nslots = 1 + (len + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE;

	if (len > PATH_MAX)
		return -1;
	if (mt_tracer_collect(t, false))
		return -1;
	/* a PSS sample read before its process's Exit was collected: after
	 * the Exit it would count the freed memory again */
	if (kind == MT_EV_PSS && !is_live(t, pid))
		return 0;
	memset(slots, 0, nslots * MT_EVENT_SIZE);
	if (fields)
		slots[0] = *fields;
	slots[0].timestamp = mt_clock_ns(CLOCK_MONOTONIC);
	if (slots[0].timestamp > t->staged.written_until)
		slots[0].timestamp = t->staged.written_until;
	slots[0].pid = slots[0].tid = pid;
	slots[0].kind = kind;
	slots[0].aux = len ? len : slots[0].aux;
	if (len)
		memcpy(&slots[1], payload, len);
	return mt_tracer_append(t, slots, nslots);
}

void mt_tracer_staging_free(struct tracer_staging *s)
{
	free(s->ev);
	free(s->life);
	free(s->life_slots);
	memset(s, 0, sizeof(*s));
}
