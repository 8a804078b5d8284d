/* SPDX-License-Identifier: MIT */
/*
 * zstd_io.c - zstd frames around mt's streams (mt_zstd.h): a writer that
 * makes one independent frame per block, and a streaming reader the input
 * layer puts under its buffer when a stream starts with a zstd magic.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "mt_zstd.h"

#define ZSTD_SKIPPABLE_MASK 0xfffffff0u

/*
 * A reader refuses frames whose window is bigger than this: it bounds the
 * memory one frame may ask for (a damaged header could ask for 2 GiB).
 * mt's frames need 1-4 MiB; zstd's own default limit is the same 128 MiB.
 */
#define WINDOW_LOG_MAX 27

/* Compressed bytes a reader buffers: whole frames of mt's (1 MiB of
 * MessagePack, 0.1-0.3 MiB compressed) with room to spare, so that most
 * frames decode in one call (decode_whole_frame). */
#define ZREAD_BYTES ((size_t)2 << 20)

bool mt_zstd_magic(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint32_t magic;

	if (len < 4)
		return false;
	magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
		(uint32_t)b[3] << 24;
	return magic == ZSTD_MAGICNUMBER ||
	       (magic & ZSTD_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

/* ---- writer ---------------------------------------------------------- */

/*
 * Compression is most of mt-encode's work (zstd level 1 takes 80-170 ns an
 * event here, encoding the MessagePack 35), so with more CPUs the frames
 * are compressed by threads of the writer's own, one per CPU the process
 * may run on (up to COMPRESSORS_MAX), each with its own zstd context,
 * while the caller encodes the next frames: frames are independent, so
 * any thread may compress any of them, and they are written in the order
 * they were given.  A frame given is copied into a job; the caller waits
 * only when every job is taken.
 */
#define COMPRESSORS_MAX 4

/*
 * With no level asked for (MT_ZSTD_LEVEL_AUTO), a frame is compressed one
 * of two ways: "dense", zstd level 1, or "quick", level 1 with the search
 * of zstd's negative levels (ZSTD_c_targetLength 2: where nothing matched
 * it steps over positions, and literals are stored as they are) in a hash
 * table of 4 KiB (ZSTD_c_hashLog 10) that stays in the L1 cache.  On an
 * allocation-heavy trace quick frames are 6% smaller and cost a sixth
 * fewer instructions (a quarter less CPU time); on traces of RSS events
 * or call stacks they are 15-20% bigger.  So the writer compresses a
 * frame both ways now and then, a probe, writes the smaller, and
 * compresses the frames after it the way that won: probes are the first
 * frame, then one in PROBE_EVERY (about 1.5% more work).  A probe's
 * choice applies from PROBE_LAG frames after it on (the frames between
 * keep the last choice; dense before the first): up to COMPRESSORS_MAX + 1
 * frames are in flight, so the caller seldom waits for a probe's end.  A
 * constant: which frames are dense and which quick depends on the bytes
 * given only, not on the CPUs there are, so the output does not either.
 */
#define PROBE_EVERY	 64
#define PROBE_LAG	 (COMPRESSORS_MAX + 1)
#define QUICK_TARGET_LEN 2
#define QUICK_HASH_LOG	 10

enum zmode { ZMODE_DENSE, ZMODE_QUICK, ZMODE_PROBE };

/* The last two probes (a probe's slot: its frame / PROBE_EVERY % 2): a
 * choice is asked of the probe before the last at most. */
struct zprobe {
	uint64_t frame;
	bool done;	/* compressed both ways (or failed: then dense) */
	bool quick_won; /* its quick frame was no bigger than its dense one */
};

enum job_state { JOB_FREE, JOB_QUEUED, JOB_TAKEN };

struct zjob {
	unsigned char *src; /* a copy of the frame's bytes */
	size_t len, cap;
	int fd;
	uint64_t frame; /* its sequence number */
	enum zmode mode;
	enum job_state state;
};

/* A frame's compressed bytes, in a buffer it surely fits in. */
struct zout {
	void *p;
	size_t cap;
};

/* The zstd contexts (quick: NULL unless the writer chooses) and the
 * buffer a whole frame is compressed into; a probe's other way goes to
 * spare, and the two swap when it is the smaller. */
struct zcompressor {
	ZSTD_CCtx *dense, *quick;
	struct zout out, spare;
};

struct mt_zwriter {
	struct zcompressor own; /* no thread: the caller's own compressor */
	uint64_t written;
	int error; /* the first error of a frame, given or written behind */
	/* threaded: compressors[i] runs in threads[i]; the frame of sequence
	 * number s is in jobs[s % njobs] until a thread has compressed it */
	int nthreads;
	pthread_t threads[COMPRESSORS_MAX];
	struct zcompressor compressors[COMPRESSORS_MAX];
	struct zjob jobs[COMPRESSORS_MAX + 1];
	int njobs;
	uint64_t given, taken, done; /* frames given, taken by a thread,
					written (or dropped after an error) */
	pthread_mutex_t lock;
	pthread_cond_t changed;
	bool stop;
	bool adaptive; /* each frame dense or quick, by the probes */
	struct zprobe probes[2];
};

struct compressor_arg {
	struct mt_zwriter *z;
	int index;
};

static int allowed_cpus(void);
static void *compress_behind(void *arg);
static bool start_thread_blocking_signals(pthread_t *thread,
					  void *(*fn)(void *), void *arg);

static ZSTD_CCtx *new_cctx(int level, int workers)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();

	if (!cctx)
		return NULL;
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	/* a flipped bit must not decode into other events silently */
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	if (workers > 0 && !ZSTD_isError(ZSTD_CCtx_setParameter(
			       cctx, ZSTD_c_nbWorkers, workers)))
		/* the smallest job zstd takes: a frame splits into jobs the
		 * workers compress at once */
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_jobSize, 512 * 1024);
	return cctx;
}

/* level MT_ZSTD_LEVEL_AUTO: a quick context beside the dense one */
static bool compressor_init(struct zcompressor *c, int level, int workers)
{
	bool adaptive = level == MT_ZSTD_LEVEL_AUTO;

	c->dense = new_cctx(adaptive ? MT_ZSTD_LEVEL : level, workers);
	c->out.cap = ZSTD_compressBound(MT_ZSTD_FRAME_BYTES);
	c->out.p = malloc(c->out.cap);
	if (!c->dense || !c->out.p)
		return false;
	if (!adaptive)
		return true;
	c->quick = new_cctx(MT_ZSTD_LEVEL, workers);
	if (!c->quick)
		return false;
	/* parameters of the stable API: zstd 1.4 and on take them */
	ZSTD_CCtx_setParameter(c->quick, ZSTD_c_targetLength, QUICK_TARGET_LEN);
	ZSTD_CCtx_setParameter(c->quick, ZSTD_c_hashLog, QUICK_HASH_LOG);
	return true;
}

static void compressor_free(struct zcompressor *c)
{
	ZSTD_freeCCtx(c->dense);
	ZSTD_freeCCtx(c->quick);
	free(c->out.p);
	free(c->spare.p);
}

/*
 * The threads: one per CPU allowed, up to COMPRESSORS_MAX; one only when
 * zstd has workers of its own (they share out each frame already).  With
 * one CPU there are none, and the caller compresses each frame itself.
 */
static void start_compressors(struct mt_zwriter *z, int level, int workers)
{
	int cpus = allowed_cpus();
	int want = workers > 0 ? 1 : cpus;

	if (cpus < 2)
		return;
	if (want > COMPRESSORS_MAX)
		want = COMPRESSORS_MAX;
	pthread_mutex_init(&z->lock, NULL);
	pthread_cond_init(&z->changed, NULL);
	while (z->nthreads < want) {
		struct compressor_arg *arg = malloc(sizeof(*arg));
		int i = z->nthreads;

		if (!arg ||
		    !compressor_init(&z->compressors[i], level, workers))
			goto fail;
		*arg = (struct compressor_arg){.z = z, .index = i};
		if (!start_thread_blocking_signals(&z->threads[i],
						   compress_behind, arg))
			goto fail;
		z->nthreads++;
		continue;
	fail:
		free(arg);
		compressor_free(&z->compressors[i]);
		z->compressors[i] = (struct zcompressor){0};
		break;
	}
	z->njobs = z->nthreads + 1; /* one to fill while each is busy */
	_Static_assert(PROBE_LAG >= COMPRESSORS_MAX + 1 &&
			   PROBE_EVERY > PROBE_LAG,
		       "a probe is done before its slot is taken again");
	if (!z->nthreads) {
		pthread_cond_destroy(&z->changed);
		pthread_mutex_destroy(&z->lock);
	}
}

struct mt_zwriter *mt_zwriter_new(int level, int workers)
{
	struct mt_zwriter *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->adaptive = level == MT_ZSTD_LEVEL_AUTO;
	start_compressors(z, level, workers);
	if (!z->nthreads && !compressor_init(&z->own, level, workers)) {
		mt_zwriter_free(z);
		return NULL;
	}
	return z;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= w;
	}
	return 0;
}

/* One frame of src[0..len) compressed by cctx into out: its length, or
 * -errno. */
static ssize_t compress_into(ZSTD_CCtx *cctx, struct zout *out, const void *src,
			     size_t len)
{
	size_t bound = ZSTD_compressBound(len);
	size_t frame_len;

	/* the whole frame in one call, from the caller's bytes into a buffer
	 * it surely fits in: zstd copies nothing into a window of its own,
	 * and the header says how long the content is */
	if (bound > out->cap) {
		void *p = realloc(out->p, bound);

		if (!p)
			return -ENOMEM;
		out->p = p;
		out->cap = bound;
	}
	frame_len = ZSTD_compress2(cctx, out->p, out->cap, src, len);
	if (ZSTD_isError(frame_len))
		return -EINVAL;
	return frame_len;
}

/*
 * One frame of src[0..len) compressed by c the way mode says, into
 * c->out: its length, or -errno.  A probe compresses it both ways and
 * keeps the smaller (*quick_won: the quick one, also when as small).
 */
static ssize_t compress_frame(struct zcompressor *c, enum zmode mode,
			      const void *src, size_t len, bool *quick_won)
{
	ssize_t dense_len, quick_len;
	struct zout swap;

	*quick_won = false;
	if (mode != ZMODE_PROBE)
		return compress_into(mode == ZMODE_QUICK ? c->quick : c->dense,
				     &c->out, src, len);
	dense_len = compress_into(c->dense, &c->spare, src, len);
	quick_len = compress_into(c->quick, &c->out, src, len);
	if (dense_len < 0 || quick_len < 0)
		return dense_len < 0 ? dense_len : quick_len;
	*quick_won = quick_len <= dense_len;
	if (*quick_won)
		return quick_len;
	swap = c->out;
	c->out = c->spare;
	c->spare = swap;
	return dense_len;
}

/*
 * How frame number `frame` is compressed (see PROBE_EVERY).  With
 * threads, called with z->lock held: it waits for the probe whose choice
 * applies if a thread still compresses it (seldom: PROBE_LAG).
 */
static enum zmode frame_mode(struct mt_zwriter *z, uint64_t frame)
{
	const struct zprobe *probe;
	uint64_t probe_frame;

	if (!z->adaptive)
		return ZMODE_DENSE;
	if (frame % PROBE_EVERY == 0)
		return ZMODE_PROBE;
	if (frame < PROBE_LAG)
		return ZMODE_DENSE;
	probe_frame = (frame - PROBE_LAG) / PROBE_EVERY * PROBE_EVERY;
	probe = &z->probes[probe_frame / PROBE_EVERY % 2];
	while (z->nthreads && !probe->done && !z->error)
		pthread_cond_wait(&z->changed, &z->lock);
	return probe->done && probe->quick_won ? ZMODE_QUICK : ZMODE_DENSE;
}

/* A probe's slot, taken when it is given, filled when it is compressed. */
static struct zprobe *probe_slot(struct mt_zwriter *z, uint64_t frame)
{
	return &z->probes[frame / PROBE_EVERY % 2];
}

/*
 * A compressing thread: takes the oldest frame not taken, compresses it,
 * lets its job be filled again, then writes it when every frame given
 * before it is written.
 */
static void *compress_behind(void *arg)
{
	struct compressor_arg *ca = arg;
	struct mt_zwriter *z = ca->z;
	struct zcompressor *c = &z->compressors[ca->index];

	free(ca);
	for (;;) {
		struct zjob *job;
		uint64_t seq;
		ssize_t frame_len;
		bool quick_won;
		int ret = 0;

		pthread_mutex_lock(&z->lock);
		while (z->taken == z->given && !z->stop)
			pthread_cond_wait(&z->changed, &z->lock);
		if (z->taken == z->given) { /* stopped, nothing left */
			pthread_mutex_unlock(&z->lock);
			return NULL;
		}
		seq = z->taken++;
		job = &z->jobs[seq % z->njobs];
		job->state = JOB_TAKEN;
		pthread_mutex_unlock(&z->lock);

		frame_len = compress_frame(c, job->mode, job->src, job->len,
					   &quick_won);

		pthread_mutex_lock(&z->lock);
		if (job->mode == ZMODE_PROBE)
			*probe_slot(z, job->frame) =
			    (struct zprobe){.frame = job->frame,
					    .done = true,
					    .quick_won = quick_won};
		job->state = JOB_FREE;
		pthread_cond_broadcast(&z->changed);
		while (z->done != seq)
			pthread_cond_wait(&z->changed, &z->lock);
		ret = z->error;
		pthread_mutex_unlock(&z->lock);
		/* its turn: the frames before it are written, and no other
		 * thread writes until done moves on.  After an error nothing
		 * more is written: the file ends with whole frames. */
		if (!ret && frame_len < 0)
			ret = frame_len;
		else if (!ret)
			ret = write_all(job->fd, c->out.p, frame_len);
		pthread_mutex_lock(&z->lock);
		if (!ret && frame_len > 0)
			z->written += frame_len;
		if (ret && !z->error)
			z->error = ret;
		z->done++;
		pthread_cond_broadcast(&z->changed);
		pthread_mutex_unlock(&z->lock);
	}
}

int mt_zwriter_wait(struct mt_zwriter *z)
{
	int ret;

	if (!z->nthreads)
		return z->error;
	pthread_mutex_lock(&z->lock);
	while (z->done != z->given)
		pthread_cond_wait(&z->changed, &z->lock);
	ret = z->error;
	pthread_mutex_unlock(&z->lock);
	return ret;
}

/* One CPU: the frame compressed and written by the caller. */
static int frame_here(struct mt_zwriter *z, int fd, const void *src, size_t len)
{
	uint64_t frame = z->given++;
	enum zmode mode = frame_mode(z, frame);
	ssize_t frame_len;
	bool quick_won;
	int ret;

	if (z->error)
		return z->error;
	frame_len = compress_frame(&z->own, mode, src, len, &quick_won);
	if (mode == ZMODE_PROBE)
		*probe_slot(z, frame) = (struct zprobe){
		    .frame = frame, .done = true, .quick_won = quick_won};
	ret = frame_len < 0 ? (int)frame_len
			    : write_all(fd, z->own.out.p, frame_len);
	if (ret)
		return z->error = ret;
	z->written += frame_len;
	return 0;
}

/* The next job, once free: the caller's until queue_job(); NULL after an
 * error (*ret). */
static struct zjob *free_job(struct mt_zwriter *z, int *ret)
{
	struct zjob *job;

	pthread_mutex_lock(&z->lock);
	job = &z->jobs[z->given % z->njobs];
	while (job->state != JOB_FREE && !z->error)
		pthread_cond_wait(&z->changed, &z->lock);
	*ret = z->error;
	pthread_mutex_unlock(&z->lock);
	return *ret ? NULL : job;
}

static int job_failed(struct mt_zwriter *z, int err)
{
	pthread_mutex_lock(&z->lock);
	if (!z->error)
		z->error = err;
	pthread_mutex_unlock(&z->lock);
	return err;
}

static void queue_job(struct mt_zwriter *z, struct zjob *job, int fd,
		      size_t len)
{
	job->len = len;
	job->fd = fd;
	pthread_mutex_lock(&z->lock);
	job->frame = z->given;
	job->mode = frame_mode(z, job->frame);
	if (job->mode == ZMODE_PROBE)
		*probe_slot(z, job->frame) =
		    (struct zprobe){.frame = job->frame, .done = false};
	job->state = JOB_QUEUED;
	z->given++;
	pthread_cond_broadcast(&z->changed);
	pthread_mutex_unlock(&z->lock);
}

int mt_zwriter_frame(struct mt_zwriter *z, int fd, const void *src, size_t len)
{
	struct zjob *job;
	int ret;

	if (!z->nthreads)
		return frame_here(z, fd, src, len);
	job = free_job(z, &ret);
	if (!job)
		return ret;
	if (len > job->cap) {
		void *src_copy = realloc(job->src, len);

		if (!src_copy)
			return job_failed(z, -ENOMEM);
		job->src = src_copy;
		job->cap = len;
	}
	memcpy(job->src, src, len);
	queue_job(z, job, fd, len);
	return 0;
}

int mt_zwriter_give(struct mt_zwriter *z, int fd, void **buf, size_t *cap,
		    size_t len)
{
	unsigned char *spare;
	size_t spare_cap;
	struct zjob *job;
	int ret;

	if (!z->nthreads)
		return frame_here(z, fd, *buf, len);
	job = free_job(z, &ret);
	if (!job)
		return ret;
	/* what the job held goes back, big enough for the caller: its
	 * bytes were compressed, they need no copy */
	spare = job->src;
	spare_cap = job->cap;
	if (spare_cap < *cap) {
		free(spare);
		spare = malloc(*cap);
		spare_cap = *cap;
		job->src = NULL;
		job->cap = 0;
		if (!spare)
			return job_failed(z, -ENOMEM);
	}
	job->src = *buf;
	job->cap = *cap;
	*buf = spare;
	*cap = spare_cap;
	queue_job(z, job, fd, len);
	return 0;
}

uint64_t mt_zwriter_written(struct mt_zwriter *z)
{
	uint64_t written;

	mt_zwriter_wait(z);
	if (!z->nthreads)
		return z->written;
	pthread_mutex_lock(&z->lock);
	written = z->written;
	pthread_mutex_unlock(&z->lock);
	return written;
}

void mt_zwriter_free(struct mt_zwriter *z)
{
	if (!z)
		return;
	if (z->nthreads) {
		mt_zwriter_wait(z);
		pthread_mutex_lock(&z->lock);
		z->stop = true;
		pthread_cond_broadcast(&z->changed);
		pthread_mutex_unlock(&z->lock);
		for (int i = 0; i < z->nthreads; i++) {
			pthread_join(z->threads[i], NULL);
			compressor_free(&z->compressors[i]);
		}
		for (int i = 0; i < z->njobs; i++)
			free(z->jobs[i].src);
		pthread_cond_destroy(&z->changed);
		pthread_mutex_destroy(&z->lock);
	}
	compressor_free(&z->own);
	free(z);
}

/* ---- reader ---------------------------------------------------------- */

struct zdecoder {
	FILE *f;
	ZSTD_DStream *ds;
	unsigned char *buf; /* compressed bytes; buf[0] is at offset buf_off */
	size_t cap;
	ZSTD_inBuffer in;
	uint64_t buf_off;
	uint64_t frame_off; /* where the frame being decoded started */
	bool eof;
	bool in_frame;	 /* a frame is started and not yet complete */
	bool out_filled; /* the last call filled dst: zstd may hold more */
	char err[256];
};

static bool zdecoder_init(struct zdecoder *z, FILE *f, const void *head,
			  size_t head_len)
{
	z->f = f;
	z->cap = ZREAD_BYTES;
	if (z->cap < head_len)
		z->cap = head_len;
	z->buf = malloc(z->cap);
	z->ds = ZSTD_createDStream();
	if (!z->buf || !z->ds)
		return false;
	ZSTD_DCtx_setParameter(z->ds, ZSTD_d_windowLogMax, WINDOW_LOG_MAX);
	if (head_len) /* head may be NULL then */
		memcpy(z->buf, head, head_len);
	z->in = (ZSTD_inBuffer){.src = z->buf, .size = head_len};
	return true;
}

static ssize_t zfail(struct zdecoder *z, uint64_t off, const char *what)
{
	snprintf(z->err, sizeof(z->err), "byte %" PRIu64 ": %s", off, what);
	return -1;
}

static size_t fread_cancellable(void *p, size_t n, FILE *f);

/* More compressed bytes after those not consumed yet (moved to the
 * buffer's start); false at the end of the input, when the buffer is
 * full, or on an error (with z->err set). */
static bool refill(struct zdecoder *z)
{
	size_t left = z->in.size - z->in.pos;
	size_t n;

	if (z->eof || !z->f)
		return z->eof = true, false;
	if (z->in.pos > 0) {
		memmove(z->buf, z->buf + z->in.pos, left);
		z->buf_off += z->in.pos;
		z->in = (ZSTD_inBuffer){.src = z->buf, .size = left};
	}
	if (left == z->cap)
		return false;
	n = fread_cancellable(z->buf + left, z->cap - left, z->f);
	z->in.size += n;
	if (n == 0) {
		if (ferror(z->f)) {
			snprintf(z->err, sizeof(z->err),
				 "byte %" PRIu64 ": read error: %s",
				 z->buf_off + left, strerror(errno));
			return false;
		}
		z->eof = true;
	}
	return n > 0;
}

/*
 * The next frame decoded whole, straight into dst, when its header says
 * how long it is, that fits in cap, and all of its compressed bytes can be
 * buffered: one call to zstd, no streaming window, no copy out of it (mt's
 * frames are all like that).  > 0 bytes given, 0 when the frame must be
 * streamed instead (unknown or large size, a skippable or empty frame, cut
 * short, damaged: the streaming decoder then says how), -1 on a damaged
 * frame.
 */
static ssize_t decode_whole_frame(struct zdecoder *z, void *dst, size_t cap)
{
	unsigned long long content;
	size_t frame_len, got;

	for (;;) {
		const unsigned char *src = z->buf + z->in.pos;
		size_t have = z->in.size - z->in.pos;

		content = ZSTD_getFrameContentSize(src, have);
		frame_len = ZSTD_findFrameCompressedSize(src, have);
		if (!ZSTD_isError(frame_len))
			break;
		/* the frame's end (or its header) is not buffered: read more;
		 * anything else is for the streaming decoder to name */
		if (ZSTD_getErrorCode(frame_len) != ZSTD_error_srcSize_wrong ||
		    z->err[0] || !refill(z))
			return 0;
	}
	if (content == ZSTD_CONTENTSIZE_UNKNOWN ||
	    content == ZSTD_CONTENTSIZE_ERROR || content == 0 || content > cap)
		return 0;
	z->frame_off = z->buf_off + z->in.pos;
	got =
	    ZSTD_decompressDCtx(z->ds, dst, cap, z->buf + z->in.pos, frame_len);
	if (ZSTD_isError(got)) {
		char what[160];

		snprintf(what, sizeof(what),
			 "zstd frame at byte %" PRIu64 ": %s", z->frame_off,
			 ZSTD_getErrorName(got));
		return zfail(z, z->frame_off, what);
	}
	z->in.pos += frame_len;
	return got;
}

/* One step of the decoder; -1 on damage, else 0. */
static int decode_step(struct zdecoder *z, ZSTD_outBuffer *out)
{
	size_t before = z->in.pos;
	size_t ret;

	if (!z->in_frame)
		z->frame_off = z->buf_off + z->in.pos;
	ret = ZSTD_decompressStream(z->ds, out, &z->in);
	if (ZSTD_isError(ret)) {
		char what[160];

		snprintf(what, sizeof(what),
			 "zstd frame at byte %" PRIu64 ": %s", z->frame_off,
			 ZSTD_getErrorName(ret));
		zfail(z, z->buf_off + before, what);
		return -1;
	}
	/* 0: a frame is complete and all of it given out */
	z->in_frame = ret != 0;
	z->out_filled = out->pos == out->size;
	return 0;
}

/* mt_zreader_read, in the thread that decodes */
static ssize_t zdecode(struct zdecoder *z, void *dst, size_t cap)
{
	ZSTD_outBuffer out = {.dst = dst, .size = cap};

	if (z->err[0])
		return -1;
	if (!z->in_frame) {
		ssize_t whole = decode_whole_frame(z, dst, cap);

		if (whole != 0 || z->err[0])
			return z->err[0] ? -1 : whole;
	}
	while (out.pos < out.size) {
		size_t had = out.pos;
		bool at_end = false;

		/* no input: zstd may still hold output of a frame it is in
		 * (it filled the last buffer), never between frames */
		if (z->in.pos == z->in.size &&
		    !(z->in_frame && z->out_filled) && !refill(z)) {
			if (z->err[0])
				return -1;
			if (!z->in_frame)
				break; /* end of input, between frames */
			at_end = true; /* zstd may still hold the frame's end */
		}
		if (decode_step(z, &out))
			return -1;
		if (at_end && out.pos == had && z->in_frame)
			break; /* nothing more will come: cut short */
		/* a frame's end with bytes given: let the caller use them */
		if (!z->in_frame && out.pos > 0)
			break;
	}
	if (out.pos > 0)
		return out.pos;
	if (z->in_frame) {
		char what[160];

		snprintf(what, sizeof(what),
			 "zstd frame at byte %" PRIu64
			 " cut short: the input ends inside it",
			 z->frame_off);
		return zfail(z, z->buf_off + z->in.size, what);
	}
	return 0;
}

/* Compressed bytes consumed so far. */
static uint64_t zdecoder_offset(const struct zdecoder *z)
{
	return z->buf_off + z->in.pos;
}

static void zdecoder_free(struct zdecoder *z)
{
	ZSTD_freeDStream(z->ds);
	free(z->buf);
}

/* ---- the decoding thread ---------------------------------------------- */

/*
 * With a second CPU to run on, the frames are decoded in a thread of the
 * reader's own, a few frames ahead of the caller: zstd's work (half of
 * mt-reconstruct's time on a compressed artifact) then overlaps with the
 * caller's.  The thread runs the one decoder above (zdecode) into slots,
 * and each slot keeps what the caller would have seen at that point: the
 * bytes, the end or the error, and the compressed offset.
 */
#define SLOTS	   3
#define SLOT_BYTES ((size_t)MT_ZSTD_FRAME_BYTES) /* a whole default frame */
/* a slot's buffer: the bytes decoded at MT_ZREAD_ROOM, room before them */
#define SLOT_BUFFER (MT_ZREAD_ROOM + SLOT_BYTES)

struct zslot {
	unsigned char *buffer; /* cap bytes, SLOT_BUFFER or more */
	size_t cap;
	unsigned char *bytes; /* buffer + MT_ZREAD_ROOM: what was decoded */
	size_t len, pos;      /* bytes [pos, len) not given out yet */
	ssize_t status;	      /* > 0 bytes, 0 the clean end, -1 an error */
	uint64_t offset;      /* compressed bytes consumed once it was full */
	char err[256];	      /* status -1: what */
};

struct mt_zreader {
	struct zdecoder dec;
	bool threaded;
	/* threaded: the caller's view, from the last slot it read */
	char err[256];
	uint64_t offset;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct zslot slot[SLOTS];
	uint64_t filled, taken; /* slots the thread filled, the caller used */
	bool stop;
};

/* The thread's turn to run fread: only there may mt_zreader_free cancel
 * it (a pipe that gives nothing more would block it for ever). */
static size_t fread_cancellable(void *p, size_t n, FILE *f)
{
	int old;
	size_t got;

	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
	got = fread(p, 1, n, f);
	pthread_setcancelstate(old, NULL);
	return got;
}

static void *decode_ahead(void *arg)
{
	struct mt_zreader *r = arg;
	ssize_t status;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	do {
		struct zslot *s;
		bool stop;

		pthread_mutex_lock(&r->lock);
		while (r->filled - r->taken == SLOTS && !r->stop)
			pthread_cond_wait(&r->changed, &r->lock);
		stop = r->stop;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			break;
		/* the caller uses slots filled before, never this one */
		s = &r->slot[r->filled % SLOTS];
		status = zdecode(&r->dec, s->bytes, SLOT_BYTES);
		s->status = status;
		s->len = status > 0 ? (size_t)status : 0;
		s->pos = 0;
		s->offset = zdecoder_offset(&r->dec);
		if (status < 0)
			memcpy(s->err, r->dec.err, sizeof(s->err));
		pthread_mutex_lock(&r->lock);
		r->filled++;
		pthread_cond_broadcast(&r->changed);
		pthread_mutex_unlock(&r->lock);
	} while (status > 0);
	return NULL;
}

/* The CPUs this process may run on (1 if it cannot tell). */
static int allowed_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	return CPU_COUNT(&set);
}

/* A thread running fn(arg) with every signal blocked: signals stay the
 * main thread's (mt-encode's SIGINT, the tools' SIGPIPE).  false if none
 * could be started. */
static bool start_thread_blocking_signals(pthread_t *thread,
					  void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret == 0;
}

/* Starts the thread; false (and nothing started) if it cannot be. */
static bool start_thread(struct mt_zreader *r)
{
	int i;

	for (i = 0; i < SLOTS; i++) {
		r->slot[i].buffer = malloc(SLOT_BUFFER);
		r->slot[i].cap = SLOT_BUFFER;
		r->slot[i].bytes = r->slot[i].buffer + MT_ZREAD_ROOM;
		if (!r->slot[i].buffer)
			return false;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->changed, NULL);
	if (!start_thread_blocking_signals(&r->thread, decode_ahead, r)) {
		pthread_cond_destroy(&r->changed);
		pthread_mutex_destroy(&r->lock);
		return false;
	}
	r->threaded = true;
	return true;
}

/* The slot the caller reads next, once the thread has filled it; NULL at
 * the end or after an error (status and error then the caller's). */
static struct zslot *next_slot(struct mt_zreader *r, ssize_t *status)
{
	struct zslot *s;

	*status = -1;
	if (r->err[0])
		return NULL;
	pthread_mutex_lock(&r->lock);
	while (r->filled == r->taken)
		pthread_cond_wait(&r->changed, &r->lock);
	pthread_mutex_unlock(&r->lock);
	s = &r->slot[r->taken % SLOTS];
	r->offset = s->offset;
	*status = s->status;
	if (s->status > 0)
		return s;
	if (s->status < 0) /* the end, or an error: it stays */
		memcpy(r->err, s->err, sizeof(r->err));
	return NULL;
}

/* The caller is done with the slot it read: the thread may fill it. */
static void slot_used(struct mt_zreader *r)
{
	pthread_mutex_lock(&r->lock);
	r->taken++;
	pthread_cond_broadcast(&r->changed);
	pthread_mutex_unlock(&r->lock);
}

/* The caller's next bytes, from the slots the thread filled. */
static ssize_t read_slots(struct mt_zreader *r, void *dst, size_t cap)
{
	ssize_t status;
	struct zslot *s = next_slot(r, &status);
	size_t n;

	if (!s)
		return status;
	n = s->len - s->pos < cap ? s->len - s->pos : cap;
	memcpy(dst, s->bytes + s->pos, n);
	s->pos += n;
	if (s->pos == s->len)
		slot_used(r);
	return n;
}

ssize_t mt_zreader_take(struct mt_zreader *r, unsigned char **buf, size_t *cap,
			size_t *start, size_t keep)
{
	ssize_t status;
	struct zslot *s;
	unsigned char *given = *buf;
	size_t given_cap = *cap, at;

	if (!r->threaded || *cap < SLOT_BUFFER || keep > MT_ZREAD_ROOM)
		return -2;
	s = next_slot(r, &status);
	if (!s)
		return status;
	/* the bytes kept go just before the block's, then the buffers
	 * change hands: the slot is decoded into the caller's next time */
	at = MT_ZREAD_ROOM + s->pos - keep;
	memcpy(s->buffer + at, given + *start, keep);
	*buf = s->buffer;
	*cap = s->cap;
	*start = at;
	status = s->len - s->pos;
	s->buffer = given;
	s->cap = given_cap;
	s->bytes = given + MT_ZREAD_ROOM;
	slot_used(r);
	return status;
}

static void stop_thread(struct mt_zreader *r)
{
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_broadcast(&r->changed);
	pthread_mutex_unlock(&r->lock);
	/* in fread, it may wait for input that never comes */
	pthread_cancel(r->thread);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->changed);
	pthread_mutex_destroy(&r->lock);
}

/* ---- the reader's API ------------------------------------------------- */

struct mt_zreader *mt_zreader_new(FILE *f, const void *head, size_t head_len)
{
	struct mt_zreader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (!zdecoder_init(&r->dec, f, head, head_len)) {
		mt_zreader_free(r);
		return NULL;
	}
	/* one CPU (or no thread to be had): decode in the caller's */
	if (allowed_cpus() > 1 && !start_thread(r))
		for (int i = 0; i < SLOTS; i++)
			free(r->slot[i].buffer), r->slot[i].buffer = NULL;
	return r;
}

ssize_t mt_zreader_read(struct mt_zreader *r, void *dst, size_t cap)
{
	if (r->threaded)
		return read_slots(r, dst, cap);
	return zdecode(&r->dec, dst, cap);
}

const char *mt_zreader_error(const struct mt_zreader *r)
{
	return r->threaded ? r->err : r->dec.err;
}

uint64_t mt_zreader_offset(const struct mt_zreader *r)
{
	return r->threaded ? r->offset : zdecoder_offset(&r->dec);
}

void mt_zreader_free(struct mt_zreader *r)
{
	if (!r)
		return;
	if (r->threaded)
		stop_thread(r);
	for (int i = 0; i < SLOTS; i++)
		free(r->slot[i].buffer);
	zdecoder_free(&r->dec);
	free(r);
}
