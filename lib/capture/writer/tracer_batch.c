// SPDX-License-Identifier: MIT
/*
 * tracer_batch.c - the raw stream's batches as mt-trace fills and writes
 * them: records appended in order, the lost counters read at each write,
 * a reader that went away said once.  The tracer core (tracer.c) and the
 * call-stack records (tracer_stacks.c) both write through here.
 *
 * A full batch goes to a writer thread, which writes it while the drain
 * goes on: the drain is what the traced program waits for when a ring is
 * full (--fast: its thread sleeps; BPF: backpressure stops it), and a
 * write into the page cache costs ~20 ns a record (allocheavy --fast:
 * ~80 ms of a 4 M event run), more when the disk or a pipe's reader is
 * slow.  Up to WRITER_QUEUE batches wait; past that the drain waits as
 * it did before.  The thread never preempts the program it traces
 * (SCHED_BATCH): it runs beside it, or when the program waits.
 *
 * Batches are written packed (lib/format/rawpack.h: ~7 bytes a record on
 * allocheavy, not 56): the writer thread packs each one, off the drain's
 * path, into a buffer it keeps.  --fast's drain, when one thread's ring
 * alone holds records, packs them itself as it reads them (and the BPF
 * side's events it merges in), into the batch's own packed buffer
 * (t->out.batch_pack): no 56-byte slot is written and read again for them
 * (allocheavy --fast: 4 M records); the writer packs the slots appended
 * after them, if any, after their bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "mt_raw.h"
#include "mt_trace.skel.h"
#include "tracer_fast.h"
#include "tracer_int.h"
#include "mt_xalloc.h"

/* Batches handed over and not yet written: each up to 3.5 MiB (only what
 * a batch fills is touched), so mt-trace holds at most five. */
#define WRITER_QUEUE 4
#define BATCH_BYTES                                                            \
	(sizeof(struct mt_raw_batch) +                                         \
	 (size_t)BATCH_MAX_RECORDS * MT_EVENT_SIZE)
/* A batch's records packed by --fast's drain (t->out.batch_pack): up to
 * 4.6 MiB, the same touched only as far as it fills (~7 bytes a record) */
#define PACK_BYTES                                                             \
	(sizeof(struct mt_raw_batch) + mt_rawpack_bound(BATCH_MAX_RECORDS))

/* A batch's buffers: as t->batch (header room, then the slots) and
 * t->batch_pack (NULL until a drain packs into it). */
struct batch_bufs {
	unsigned char *buf, *pack;
};

struct queued_batch {
	struct batch_bufs bufs;
	uint32_t count;
	uint64_t seq, lost;
	/* the first records packed already (t->out.batch_packed...) */
	uint32_t packed;
	size_t pack_bytes;
	struct mt_rawpack_state pack_state;
};

struct mt_batch_writer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work; /* a batch was queued, or stop */
	pthread_cond_t done; /* a batch was written */
	struct queued_batch queue[WRITER_QUEUE];
	size_t first, nqueued;
	/* written buffers, for the next batches; buffers made besides the
	 * tracer's first */
	struct batch_bufs spare[WRITER_QUEUE + 1];
	size_t nspare, nmade;
	int fd;
	void *pack; /* the packed batch's buffer, grown as needed */
	size_t pack_size;
	int err;	   /* the first write's failure (-errno), or 0 */
	bool err_reported; /* the drain said it (its thread's state) */
	bool stop;
};
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
	if (t->out.output_failed)
		return; /* said once: its write and its epoll both tell */
	mt_error("%s: the reader went away; stopping the command",
		 t->opts->out_name);
	t->out.output_failed = true;
}

/* A write failed: said once (the reader gone, or the error), and the
 * command stopped by the core (t->out.output_failed). */
static void write_failed(struct tracer *t, int err)
{
	if (err == -EPIPE)
		mt_tracer_output_gone(t);
	else if (!t->out.output_failed)
		mt_error("%s: %s", t->opts->out_name, strerror(-err));
	t->out.output_failed = true;
}

/* ---- the writer thread -------------------------------------------- */

static void *writer_main(void *arg)
{
	struct mt_batch_writer *w = arg;
	struct sched_param none = {0};

	/* beside the traced program, never in its way: a wake-up does not
	 * preempt it (the drain, which it may wait for, stays SCHED_OTHER) */
	pthread_setschedparam(pthread_self(), SCHED_BATCH, &none);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct queued_batch b;
		bool cut;
		int err = 0;

		while (!w->nqueued && !w->stop)
			pthread_cond_wait(&w->work, &w->lock);
		if (!w->nqueued)
			break;
		b = w->queue[w->first];
		cut = w->err != 0; /* after a failure: nothing more */
		pthread_mutex_unlock(&w->lock);
		if (!cut && b.packed)
			err = mt_raw_write_packed_rest(
			    w->fd, b.seq, b.lost,
			    (struct mt_event *)(b.bufs.buf +
						sizeof(struct mt_raw_batch)),
			    b.count, b.packed, b.bufs.pack, b.pack_bytes,
			    &b.pack_state);
		else if (!cut)
			err = mt_raw_write_packed_batch(
			    w->fd, b.seq, b.lost,
			    b.bufs.buf + sizeof(struct mt_raw_batch), b.count,
			    &w->pack, &w->pack_size);
		pthread_mutex_lock(&w->lock);
		if (err && !w->err)
			w->err = err;
		w->first = (w->first + 1) % WRITER_QUEUE;
		w->nqueued--;
		w->spare[w->nspare++] = b.bufs;
		pthread_cond_broadcast(&w->done);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* The writer, started at the first batch; NULL if it cannot be (batches
 * are then written by the drain). */
static struct mt_batch_writer *writer_of(struct tracer *t)
{
	struct mt_batch_writer *w;
	pthread_condattr_t monotonic;

	if (t->out.writer || t->out.writer_failed)
		return t->out.writer;
	w = mt_xcalloc(1, sizeof(*w));
	w->fd = t->opts->out_fd;
	pthread_condattr_init(&monotonic);
	pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->done, &monotonic); /* wait_for_writer's clock */
	pthread_condattr_destroy(&monotonic);
	if (pthread_create(&w->thread, NULL, writer_main, w)) {
		free(w);
		t->out.writer_failed = true;
		return NULL;
	}
	t->out.writer = w;
	return w;
}

/* Buffers for the next batch: written ones, or new ones while fewer
 * than WRITER_QUEUE + 1 exist (the packed one made when a drain packs);
 * false: none free yet (called with the lock held). */
static bool take_spare(struct mt_batch_writer *w, struct batch_bufs *out)
{
	if (w->nspare) {
		*out = w->spare[--w->nspare];
		return true;
	}
	if (w->nmade == WRITER_QUEUE)
		return false;
	out->buf = mt_xmalloc(BATCH_BYTES);
	out->pack = NULL;
	w->nmade++;
	return true;
}

/* How long mt-trace's thread waits for the writer before it looks at its
 * signals (mt_tracer_output_stalled): an output nobody reads must not
 * leave it deaf to SIGTERM and SIGINT. */
#define STALL_LOOK_MS 100

/* Wait, w->lock held, for the writer to give a buffer back. */
static void wait_for_writer(struct tracer *t, struct mt_batch_writer *w)
{
	struct timespec until = mt_timespec_of(mt_clock_ns(CLOCK_MONOTONIC) +
					       STALL_LOOK_MS * 1000000ull);

	if (pthread_cond_timedwait(&w->done, &w->lock, &until) == ETIMEDOUT) {
		pthread_mutex_unlock(&w->lock);
		mt_tracer_output_stalled(t);
		pthread_mutex_lock(&w->lock);
	}
}

/* The batch in t->out.batch handed to the writer, t->out.batch a free buffer;
 * false when it cannot be (no thread; no buffer free, and nothing
 * queued): the caller writes it, after every batch before it. */
static bool hand_over(struct tracer *t, uint64_t lost)
{
	struct mt_batch_writer *w = writer_of(t);
	struct batch_bufs next;
	bool got;

	if (!w)
		return false;
	pthread_mutex_lock(&w->lock);
	while (!(got = take_spare(w, &next)) && w->nqueued)
		wait_for_writer(t, w);
	if (got) {
		w->queue[(w->first + w->nqueued) % WRITER_QUEUE] =
		    (struct queued_batch){
			.bufs = {t->out.batch, t->out.batch_pack},
			.count = t->out.batch_records,
			.seq = t->out.seq,
			.lost = lost,
			.packed = t->out.batch_packed,
			.pack_bytes = t->out.batch_pack_bytes,
			.pack_state = t->out.batch_pack_state,
		    };
		w->nqueued++;
		t->out.batch = next.buf;
		t->out.batch_pack = next.pack;
		pthread_cond_signal(&w->work);
	}
	pthread_mutex_unlock(&w->lock);
	return got;
}

/* Everything handed to the writer written (or failed). */
static void writer_settle(struct mt_batch_writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	while (w->nqueued)
		pthread_cond_wait(&w->done, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/*
 * Whether the batch goes to the writer.  The last drain's batches do
 * not: nothing runs beside that drain any more, and a short session
 * (mt-trace -- true: one batch, at the end) then starts no thread, nor
 * waits at its end for a SCHED_BATCH thread's turn on a busy machine
 * (0.1-6.6 ms of "exit: last drain" at load ~5).  What the writer still
 * holds is written first: the batches stay in order.
 */
static bool to_writer(struct tracer *t, uint64_t lost)
{
	if (!t->out.writing_last)
		return hand_over(t, lost);
	writer_settle(t->out.writer);
	return false;
}

/* A failure the writer met since the last look, said (once). */
static int writer_error(struct tracer *t)
{
	struct mt_batch_writer *w = t->out.writer;
	int err;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	err = w->err;
	pthread_mutex_unlock(&w->lock);
	if (err && !w->err_reported) {
		w->err_reported = true;
		write_failed(t, err);
	}
	return err;
}

/* The batch written by the drain itself: with the writer's buffer when
 * there is a writer (idle: everything handed to it is written), else
 * with one of its own. */
static int write_here(struct tracer *t, uint64_t lost, struct mt_event *records)
{
	struct mt_batch_writer *w = t->out.writer;
	void *pack = NULL;
	size_t pack_size = 0;
	int err;

	if (t->out.batch_packed)
		return mt_raw_write_packed_rest(
		    t->opts->out_fd, t->out.seq, lost, records,
		    t->out.batch_records, t->out.batch_packed,
		    t->out.batch_pack, t->out.batch_pack_bytes,
		    &t->out.batch_pack_state);
	if (w)
		return mt_raw_write_packed_batch(
		    t->opts->out_fd, t->out.seq, lost, records,
		    t->out.batch_records, &w->pack, &w->pack_size);
	err = mt_raw_write_packed_batch(t->opts->out_fd, t->out.seq, lost,
					records, t->out.batch_records, &pack,
					&pack_size);
	free(pack);
	return err;
}

int mt_tracer_write_batch(struct tracer *t)
{
	struct mt_event *records =
	    (struct mt_event *)(t->out.batch + sizeof(struct mt_raw_batch));
	uint64_t lost_now = read_lost(t);
	uint64_t lost = lost_now - t->out.lost_reported;
	int err;

	if (writer_error(t))
		return -1;
	if (t->out.batch_records == 0 && lost == 0)
		return 0;
	if (!to_writer(t, lost)) {
		err = write_here(t, lost, records);
		if (err) {
			write_failed(t, err);
			return -1;
		}
	}
	t->out.seq++;
	t->out.lost_reported = lost_now;
	t->out.events_written += t->out.batch_records;
	t->out.batch_records = 0;
	t->out.batch_packed = t->out.batch_pack_bytes = 0;
	t->out.batch_pack_state = (struct mt_rawpack_state){0};
	return 0;
}

int mt_tracer_flush(struct tracer *t)
{
	struct mt_batch_writer *w = t->out.writer;

	if (mt_tracer_write_batch(t))
		return -1;
	if (!w)
		return 0;
	writer_settle(w);
	return writer_error(t) ? -1 : 0;
}

void mt_tracer_writer_end(struct tracer *t)
{
	struct mt_batch_writer *w = t->out.writer;

	free(t->out.batch_pack); /* t->out.batch is the tracer's */
	t->out.batch_pack = NULL;
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true; /* what is queued is written first */
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	while (w->nspare) {
		w->nspare--;
		free(w->spare[w->nspare].buf);
		free(w->spare[w->nspare].pack);
	}
	free(w->pack);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->done);
	free(w);
	t->out.writer = NULL;
}

int mt_tracer_append(struct tracer *t, const struct mt_event *slots, size_t n)
{
	struct mt_event *records;

	if (t->out.batch_records + n > BATCH_MAX_RECORDS &&
	    mt_tracer_write_batch(t))
		return -1;
	/* after the write: it hands t->out.batch to the writer and takes
	 * another buffer */
	records =
	    (struct mt_event *)(t->out.batch + sizeof(struct mt_raw_batch));
	memcpy(&records[t->out.batch_records], slots, n * MT_EVENT_SIZE);
	t->out.batch_records += n;
	if (slots[0].timestamp > t->out.last_record_ns)
		t->out.last_record_ns = slots[0].timestamp;
	return 0;
}

struct mt_event *mt_tracer_batch_room(struct tracer *t, size_t want,
				      size_t *room)
{
	struct mt_event *records;

	if (t->out.batch_records == BATCH_MAX_RECORDS &&
	    mt_tracer_write_batch(t))
		return NULL;
	records =
	    (struct mt_event *)(t->out.batch + sizeof(struct mt_raw_batch));
	*room = BATCH_MAX_RECORDS - t->out.batch_records;
	if (*room > want)
		*room = want;
	return &records[t->out.batch_records];
}

void mt_tracer_appended(struct tracer *t, size_t n, uint64_t last_ns)
{
	t->out.batch_records += n;
	if (n && last_ns > t->out.last_record_ns)
		t->out.last_record_ns = last_ns;
}

int mt_tracer_pack_room(struct tracer *t, size_t want, size_t *room,
			unsigned char **p, struct mt_rawpack_state **st)
{
	if (t->out.batch_records == BATCH_MAX_RECORDS &&
	    mt_tracer_write_batch(t))
		return -1;
	/* packed after slots, a record would be packed before them */
	if (t->out.batch_records != t->out.batch_packed)
		return 0;
	if (!t->out.batch_pack)
		t->out.batch_pack = mt_xmalloc(PACK_BYTES);
	*room = BATCH_MAX_RECORDS - t->out.batch_records;
	if (*room > want)
		*room = want;
	*p = t->out.batch_pack + sizeof(struct mt_raw_batch) +
	     t->out.batch_pack_bytes;
	*st = &t->out.batch_pack_state;
	return 1;
}

void mt_tracer_packed(struct tracer *t, size_t n, unsigned char *end,
		      uint64_t last_ns)
{
	t->out.batch_pack_bytes =
	    end - (t->out.batch_pack + sizeof(struct mt_raw_batch));
	t->out.batch_packed += n;
	mt_tracer_appended(t, n, last_ns);
}
