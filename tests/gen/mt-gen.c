/* SPDX-License-Identifier: MIT */
/*
 * mt-gen - write a synthetic raw stream (what mt-trace writes), the same
 * for the same seed: a realistic mix of allocator calls from a few
 * processes and threads, fork/exec/exit, mmap/munmap/mremap/brk, RSS, and
 * markers.  For tests and benchmarks of the stages after mt-trace.
 *
 * --expect FILE also writes the records a reader must yield, one JSON
 * object per line with the raw fields ({"kind":1,"pid":...}), so tests have
 * a truth that does not come from the reader under test.
 *
 * --packed writes the batches packed, as mt-trace does (mt_raw.h); else
 * they are fixed records.
 *
 * --event-size N (more than MT_EVENT_SIZE, into a file) pads every record
 * to N bytes, as the header's event_size allows; the padding is left a
 * hole, so a stream of many GiB (tests of inputs over 4 GiB) is made in
 * moments and takes little disk.
 */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "mt_raw.h"

#define MAX_PROCS 8
#define MAX_LIVE  512

struct proc {
	uint32_t pid;
	uint32_t threads;
	uint64_t heap_next; /* next fresh heap address */
	uint64_t brk;
	uint64_t mmap_next;
	uint64_t live[MAX_LIVE]; /* live heap blocks */
	uint64_t live_size[MAX_LIVE];
	int nlive;
	uint64_t maps[16]; /* live mappings: addr, size */
	uint64_t map_size[16];
	int nmaps;
};

struct gen {
	uint64_t rng;
	uint64_t events;     /* records to write (not counting payload slots) */
	uint64_t lost;	     /* lost events to spread over batches */
	uint32_t batch;	     /* slots per batch */
	uint32_t event_size; /* bytes per record in the stream */
	bool truncate;	     /* leave the trailer out */
	bool packed;	     /* packed batches */
	void *pack;	     /* their buffer */
	size_t pack_size;
	int fd;
	FILE *expect;
	uint64_t ts;
	struct proc procs[MAX_PROCS];
	int nprocs;
	uint32_t next_pid;
	/* the batch being filled */
	struct mt_event *slots;
	uint32_t nslots;
	uint64_t seq;
	uint64_t lost_left;
	uint64_t batch_lost; /* lost count of the batch being filled */
	struct mt_meta meta;
	uint64_t emitted; /* records, not counting payload slots */
};

static uint64_t rnd(struct gen *g)
{
	/* xorshift64*: small, fast, and the same everywhere */
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return g->rng * 0x2545f4914f6cdd1dull;
}

static uint64_t below(struct gen *g, uint64_t n)
{
	return n ? rnd(g) % n : 0;
}

static void check(int ret, const char *what)
{
	if (ret) {
		errno = -ret;
		err(1, "%s", what);
	}
}

/* A batch whose records are event_size bytes: each record's bytes, then
 * a hole up to the next. */
static void write_padded_batch(struct gen *g)
{
	struct mt_raw_batch b = {
	    .magic = MT_BATCH_MAGIC,
	    .count = g->nslots,
	    .bytes = g->nslots * g->event_size,
	    .seq = g->seq,
	    .lost = g->batch_lost,
	};

	if ((uint64_t)g->nslots * g->event_size > UINT32_MAX)
		errx(2, "--event-size: a batch of %u records is over 4 GiB",
		     g->nslots);
	if (write(g->fd, &b, sizeof(b)) != sizeof(b))
		err(1, "write batch");
	for (uint32_t i = 0; i < g->nslots; i++)
		if (write(g->fd, &g->slots[i], MT_EVENT_SIZE) !=
			MT_EVENT_SIZE ||
		    lseek(g->fd, g->event_size - MT_EVENT_SIZE, SEEK_CUR) < 0)
			err(1, "write batch");
}

static void flush_batch(struct gen *g)
{
	if (g->event_size > MT_EVENT_SIZE)
		write_padded_batch(g);
	else if (g->packed)
		check(mt_raw_write_packed_batch(g->fd, g->seq, g->batch_lost,
						g->slots, g->nslots, &g->pack,
						&g->pack_size),
		      "write batch");
	else
		check(mt_raw_write_batch(g->fd, g->seq, g->batch_lost, g->slots,
					 g->nslots),
		      "write batch");
	g->seq++;
	g->meta.events += g->nslots;
	g->meta.lost += g->batch_lost;
	g->meta.batches++;
	g->nslots = 0;
	g->batch_lost = 0;
	/* every third batch reports some lost events */
	if (g->lost_left && g->seq % 3 == 1) {
		g->batch_lost = 1 + below(g, g->lost_left);
		g->lost_left -= g->batch_lost;
	}
}

static void expect_lost(struct gen *g, uint64_t ts)
{
	if (g->expect && g->batch_lost && g->nslots == 0)
		fprintf(
		    g->expect,
		    "{\"kind\":%d,\"pid\":0,\"tid\":0,\"timestamp\":%" PRIu64
		    ",\"size\":%" PRIu64 "}\n",
		    MT_EV_LOST, ts, g->batch_lost);
}

static void expect_record(struct gen *g, const struct mt_event *ev,
			  const char *str, size_t len)
{
	if (!g->expect)
		return;
	fprintf(g->expect,
		"{\"kind\":%u,\"pid\":%u,\"tid\":%u,\"timestamp\":%" PRIu64
		",\"flags\":%u,\"aux\":%u,\"addr\":%" PRIu64
		",\"size\":%" PRIu64 ",\"old_addr\":%" PRIu64
		",\"old_size\":%" PRIu64,
		ev->kind, ev->pid, ev->tid, (uint64_t)ev->timestamp, ev->flags,
		ev->aux, (uint64_t)ev->addr, (uint64_t)ev->size,
		(uint64_t)ev->old_addr, (uint64_t)ev->old_size);
	if (str) {
		json_t *j = json_stringn(str, len);
		char *text = json_dumps(j, JSON_ENCODE_ANY);

		fprintf(g->expect, ",\"str\":%s", text);
		free(text);
		json_decref(j);
	}
	fputs("}\n", g->expect);
}

/* Appends one record (and its payload slots) to the batch. */
static void emit(struct gen *g, struct mt_event *ev, const char *str)
{
	size_t len = str ? strlen(str) : 0;
	uint32_t slots = 1 + (len + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE;

	if (g->nslots + slots > g->batch)
		flush_batch(g);
	g->ts += 1 + below(g, 2000);
	ev->timestamp = g->ts;
	if (str)
		ev->aux = len;
	g->emitted++;
	expect_lost(g, ev->timestamp);
	expect_record(g, ev, str, len);
	g->slots[g->nslots++] = *ev;
	for (size_t off = 0; off < len; off += MT_EVENT_SIZE) {
		struct mt_event *data = &g->slots[g->nslots++];
		size_t part =
		    len - off < MT_EVENT_SIZE ? len - off : MT_EVENT_SIZE;

		memset(data, 0, sizeof(*data));
		memcpy(data, str + off, part);
	}
}

static struct mt_event event(struct proc *p, struct gen *g, unsigned kind)
{
	return (struct mt_event){
	    .pid = p->pid,
	    .tid = p->pid + below(g, p->threads),
	    .kind = kind,
	};
}

static uint64_t alloc_size(struct gen *g)
{
	static const uint64_t sizes[] = {
	    8, 16, 24, 32, 48, 64, 100, 128, 256, 1000, 4096, 65536, 1 << 20};
	return sizes[below(g, sizeof(sizes) / sizeof(sizes[0]))];
}

static void add_live(struct proc *p, uint64_t addr, uint64_t size)
{
	if (p->nlive < MAX_LIVE) {
		p->live[p->nlive] = addr;
		p->live_size[p->nlive++] = size;
	}
}

static uint64_t fresh(struct proc *p, uint64_t size)
{
	uint64_t addr = p->heap_next;

	p->heap_next += (size + 31) & ~31ull;
	return addr;
}

static void gen_alloc(struct gen *g, struct proc *p, unsigned kind)
{
	struct mt_event ev = event(p, g, kind);

	ev.size = alloc_size(g);
	ev.addr = fresh(p, ev.size);
	if (kind == MT_EV_CALLOC)
		ev.size *= 1 + below(g, 4);
	if (kind == MT_EV_ALIGNED_ALLOC) {
		ev.old_size = 64 << below(g, 4);
		ev.addr = (ev.addr + ev.old_size) & ~(ev.old_size - 1);
	}
	add_live(p, ev.addr, ev.size);
	emit(g, &ev, NULL);
}

static void gen_free(struct gen *g, struct proc *p)
{
	struct mt_event ev = event(p, g, MT_EV_FREE);
	int i;

	if (p->nlive == 0)
		return gen_alloc(g, p, MT_EV_MALLOC);
	i = below(g, p->nlive);
	ev.addr = p->live[i];
	p->live[i] = p->live[--p->nlive];
	p->live_size[i] = p->live_size[p->nlive];
	emit(g, &ev, NULL);
}

static void gen_realloc(struct gen *g, struct proc *p)
{
	struct mt_event ev = event(p, g, MT_EV_REALLOC);
	int i;

	ev.size = alloc_size(g);
	ev.addr = fresh(p, ev.size);
	if (p->nlive && below(g, 8)) {
		i = below(g, p->nlive);
		ev.old_addr = p->live[i];
		p->live[i] = ev.addr;
		p->live_size[i] = ev.size;
	} else {
		add_live(p, ev.addr, ev.size); /* realloc(NULL, n) */
	}
	emit(g, &ev, NULL);
}

static void gen_mmap(struct gen *g, struct proc *p)
{
	struct mt_event ev = event(p, g, MT_EV_MMAP);

	if (p->nmaps == 16)
		return;
	ev.size = 4096 << below(g, 8);
	ev.addr = p->mmap_next -= ev.size;
	ev.flags = 3;  /* PROT_READ | PROT_WRITE */
	ev.aux = 0x22; /* MAP_PRIVATE | MAP_ANONYMOUS */
	p->maps[p->nmaps] = ev.addr;
	p->map_size[p->nmaps++] = ev.size;
	emit(g, &ev, NULL);
}

static void gen_unmap(struct gen *g, struct proc *p, bool remap)
{
	struct mt_event ev = event(p, g, remap ? MT_EV_MREMAP : MT_EV_MUNMAP);
	int i;

	if (p->nmaps == 0)
		return gen_mmap(g, p);
	i = below(g, p->nmaps);
	if (remap) {
		ev.old_addr = p->maps[i];
		ev.old_size = p->map_size[i];
		/* grow small mappings, shrink big ones: sizes stay real */
		ev.size = ev.old_size < (16u << 20) ? ev.old_size * 2
						    : ev.old_size / 2;
		ev.addr = p->mmap_next -= ev.size;
		p->maps[i] = ev.addr;
		p->map_size[i] = ev.size;
	} else {
		ev.addr = p->maps[i];
		ev.size = p->map_size[i];
		p->maps[i] = p->maps[--p->nmaps];
		p->map_size[i] = p->map_size[p->nmaps];
	}
	emit(g, &ev, NULL);
}

static void gen_brk(struct gen *g, struct proc *p)
{
	struct mt_event ev = event(p, g, MT_EV_BRK);

	ev.old_addr = p->brk;
	p->brk += 4096 * (1 + below(g, 32));
	ev.addr = p->brk;
	ev.size = ev.addr - ev.old_addr; /* what the artifact's Brk says */
	emit(g, &ev, NULL);
}

static void init_proc(struct proc *p, uint32_t pid)
{
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->threads = 1;
	p->heap_next = 0x5500000000ull + (uint64_t)pid * 0x10000000ull;
	p->brk = p->heap_next - 0x1000000;
	p->mmap_next = 0x7f0000000000ull - (uint64_t)pid * 0x10000000ull;
	/* pids stay below 32768 (see new_pid): addresses stay below 2^47 */
}

static void gen_exec(struct gen *g, struct proc *p)
{
	/* lengths around the 56-byte slot size, and characters JSON must
	 * escape */
	static const char *const paths[] = {
	    "/bin/sh",
	    "/usr/bin/python3.11",
	    "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus-with-56-bytes!",
	    "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus-with-57-bytes!!",
	    "/tmp/a \"quoted\" \\ path\twith\ttabs/and/\xc3\xa9t\xc3\xa9",
	    "",
	};
	struct mt_event ev = event(p, g, MT_EV_EXEC);
	const char *path = paths[below(g, sizeof(paths) / sizeof(paths[0]))];

	ev.tid = p->pid;
	p->nlive = 0;
	p->nmaps = 0;
	emit(g, &ev, path);
}

/* Like the kernel's: pids go up, wrap below 32768, and skip live ones. */
static uint32_t new_pid(struct gen *g)
{
	for (;;) {
		uint32_t pid = g->next_pid;
		bool live = false;

		g->next_pid = pid + 100 < 32768 ? pid + 100 : 1001 + pid % 97;
		for (int i = 0; i < g->nprocs; i++)
			live |= g->procs[i].pid == pid;
		if (!live)
			return pid;
	}
}

static void gen_fork(struct gen *g, struct proc *parent)
{
	struct proc *child;
	struct mt_event ev = event(parent, g, MT_EV_FORK);
	uint32_t pid;

	if (g->nprocs == MAX_PROCS)
		return;
	pid = new_pid(g);
	child = &g->procs[g->nprocs++];
	init_proc(child, pid);
	child->threads = 1 + below(g, 3);
	ev.pid = child->pid;
	ev.tid = child->pid;
	ev.old_addr = parent->pid;
	emit(g, &ev, NULL);
}

static void gen_exit(struct gen *g, int i)
{
	struct proc *p = &g->procs[i];
	struct mt_event ev = event(p, g, MT_EV_EXIT);

	ev.tid = p->pid;
	ev.aux = below(g, 4) ? (below(g, 3) << 8) : 9; /* code, or SIGKILL */
	emit(g, &ev, NULL);
	g->procs[i] = g->procs[--g->nprocs];
}

static void gen_other(struct gen *g, struct proc *p, uint64_t r)
{
	struct mt_event ev = event(p, g, MT_EV_RSS);

	if (r < 996) {
		ev.aux = below(g, 4);
		ev.size = 4096 * below(g, 100000);
		emit(g, &ev, NULL);
	} else if (r < 998) {
		ev.kind = MT_EV_PSS;
		ev.size = 4096 * below(g, 1000);
		ev.addr = ev.size / 2;
		ev.old_addr = ev.size / 4;
		ev.old_size = ev.size / 8;
		emit(g, &ev, NULL);
	} else {
		ev.kind = MT_EV_MARKER;
		emit(g, &ev,
		     below(g, 2) ? "phase-1"
				 : "a marker named at some "
				   "length, past one slot");
	}
}

/* One record of the mix (weights per thousand). */
static void gen_one(struct gen *g)
{
	int i = below(g, g->nprocs);
	struct proc *p = &g->procs[i];
	uint64_t r = below(g, 1000);

	if (r < 330)
		gen_alloc(g, p, MT_EV_MALLOC);
	else if (r < 620)
		gen_free(g, p);
	else if (r < 680)
		gen_alloc(g, p, MT_EV_CALLOC);
	else if (r < 780)
		gen_realloc(g, p);
	else if (r < 800)
		gen_alloc(g, p, MT_EV_ALIGNED_ALLOC);
	else if (r < 830)
		gen_mmap(g, p);
	else if (r < 850)
		gen_unmap(g, p, false);
	else if (r < 860)
		gen_unmap(g, p, true);
	else if (r < 880)
		gen_brk(g, p);
	else if (r < 884)
		gen_fork(g, p);
	else if (r < 887)
		gen_exec(g, p);
	else if (r < 890 && i > 0)
		gen_exit(g, i);
	else
		gen_other(g, p, below(g, 1000));
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mt-gen [--events N] [--seed S] [--batch N] [--lost N]\n"
		"              [--truncate] [--expect FILE] [--event-size N] "
		"[--packed]\n"
		"              [-o FILE]\n");
}

static uint64_t number(const char *s)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s)
		errx(2, "not a number: %s", s);
	return v;
}

static void parse_args(int argc, char **argv, struct gen *g, uint64_t *seed)
{
	static const struct option opts[] = {
	    {"events", required_argument, NULL, 'n'},
	    {"seed", required_argument, NULL, 's'},
	    {"batch", required_argument, NULL, 'b'},
	    {"lost", required_argument, NULL, 'l'},
	    {"truncate", no_argument, NULL, 't'},
	    {"expect", required_argument, NULL, 'e'},
	    {"output", required_argument, NULL, 'o'},
	    {"event-size", required_argument, NULL, 'E'},
	    {"packed", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "n:s:b:l:te:o:h", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'n':
			g->events = number(optarg);
			break;
		case 's':
			*seed = number(optarg);
			break;
		case 'b':
			g->batch = number(optarg);
			if (g->batch < 80 || g->batch > 1 << 20)
				errx(2, "--batch: 80 to 1048576 slots");
			break;
		case 'l':
			g->lost = number(optarg);
			break;
		case 't':
			g->truncate = true;
			break;
		case 'P':
			g->packed = true;
			break;
		case 'E':
			g->event_size = number(optarg);
			if (g->event_size < MT_EVENT_SIZE ||
			    g->event_size > 4 << 20)
				errx(2, "--event-size: %d to 4194304 bytes",
				     MT_EVENT_SIZE);
			break;
		case 'e':
			g->expect = fopen(optarg, "w");
			if (!g->expect)
				err(1, "%s", optarg);
			break;
		case 'o':
			g->fd =
			    open(optarg, O_WRONLY | O_CREAT | O_TRUNC, 0666);
			if (g->fd < 0)
				err(1, "%s", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	static char *args[] = {"mt-gen-workload", "--synthetic", NULL};
	struct gen g = {.events = 1000,
			.batch = 256,
			.event_size = MT_EVENT_SIZE,
			.fd = STDOUT_FILENO};
	uint64_t seed = 1;

	parse_args(argc, argv, &g, &seed);
	if (g.packed && g.event_size != MT_EVENT_SIZE)
		errx(2, "--packed: batches of %d-byte records only",
		     MT_EVENT_SIZE);
	g.rng = seed * 0x9e3779b97f4a7c15ull + 1;
	g.lost_left = g.lost;
	g.slots = calloc(g.batch, sizeof(*g.slots));
	if (!g.slots)
		err(1, "calloc");
	g.meta = (struct mt_meta){
	    .version = MT_RAW_VERSION,
	    .page_size = 4096,
	    .clock_id = 1,
	    .root_pid = 1000,
	    .flags = MT_HDR_ALLOCATORS | MT_HDR_SYSCALLS | MT_HDR_RSS,
	    .start_monotonic_ns = 1000000000ull * (1000 + seed % 1000),
	    .start_realtime_ns = 1700000000000000000ull + seed,
	    .host = "mt-gen-host",
	    .argc = 2,
	    .argv = args,
	};
	g.ts = g.meta.start_monotonic_ns;
	g.nprocs = 1;
	g.next_pid = 1100;
	init_proc(&g.procs[0], 1000);
	g.procs[0].threads = 4;
	check(mt_raw_write_header(g.fd, &g.meta), "write header");
	/* the writer's header says MT_EVENT_SIZE: say event_size instead */
	if (g.event_size != MT_EVENT_SIZE &&
	    pwrite(g.fd, &g.event_size, sizeof(g.event_size),
		   offsetof(struct mt_raw_header, event_size)) !=
		sizeof(g.event_size))
		err(1, "--event-size needs -o FILE");
	while (g.emitted < g.events)
		gen_one(&g);
	if (g.nslots)
		flush_batch(&g);
	if (g.batch_lost + g.lost_left) {
		/* the rest of the losses, in an empty batch */
		g.batch_lost += g.lost_left;
		g.lost_left = 0;
		expect_lost(&g, g.ts);
		flush_batch(&g);
	}
	g.meta.exit_kind = MT_EXIT_CODE;
	g.meta.exit_value = 0;
	g.meta.end_monotonic_ns = g.ts + 1000;
	if (!g.truncate)
		check(mt_raw_write_trailer(g.fd, &g.meta), "write trailer");
	if (g.expect && fclose(g.expect))
		err(1, "expect file");
	free(g.slots);
	free(g.pack);
	return 0;
}
