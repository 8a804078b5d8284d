// SPDX-License-Identifier: MIT
/*
 * recon_int.h - what the files of the reconstruction share, and nothing
 * outside them includes: the model (processes, blocks, ranges, series,
 * leaks) and the per-event operations inlined into reconstruct.c's path.
 *
 *   reconstruct.c   the model and its per-event path (allocator, address
 *                   space, RSS/PSS events), reading ahead; new and free
 *   recon_series.c  timelines: bucketed series that keep every peak
 *   recon_blocks.c  the table of live heap blocks (grow, clear)
 *   recon_ranges.c  the map of mapped address ranges
 *   recon_procs.c   processes (fork, exec, exit, which keep series) and
 *                   the --section markers
 *   recon_leaks.c   leak ranking
 *   recon_emit.c    the JSON emitter: jansson's text, streamed, or a tree
 *   recon_doc.c     the timelines document
 */
#ifndef MT_RECON_INT_H
#define MT_RECON_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "mt_reconstruct.h"
#include "mt_sites.h"

#define INHERITED      (1ull << 63) /* flag bits in block.size */
#define OUTSIDE	       (1ull << 62) /* allocated outside the --section */
#define NOT_OWN	       (INHERITED | OUTSIDE) /* not counted in the heap */
#define SIZE_MASK      (~NOT_OWN)
#define SIZE_TABLE_MAX 65536 /* slots; half hold sizes counted exactly */
#define SMALL_SIZES    4096  /* sizes below: counted in a dense array */
#define HIST_BUCKETS   65
/* block lifetimes: [0, 1 us), [1 us, 10 us), ... [1 s, 10 s), 10 s on */
#define LIFE_BUCKETS 9
#define RECENT	     1024 /* recently seen processes, by pid */

/* Absolute per-process values (RSS from kmem:rss_stat, PSS samples): each
 * process keeps its current value, the tree their sum. */
enum gauge {
	G_RSS_FILE, /* = the event's member number, 0..3 */
	G_RSS_ANON,
	G_RSS_SWAP,
	G_RSS_SHMEM,
	G_RSS_TOTAL, /* resident: file + anon + shmem */
	G_PSS_TOTAL,
	G_PSS_ANON,
	G_PSS_FILE,
	G_PSS_SHMEM,
	NGAUGES
};

/* ------------------------------------------------------------------ */
/* Series: sparse buckets in time order, each keeping its maximum.     */

struct point {
	uint64_t idx; /* bucket number since the origin */
	uint64_t max;
	uint64_t last;
};

struct series {
	struct point *pts;
	size_t n, alloc;
	/* the last point, pts[n - 1] (which is stale: only a new point
	 * writes it back): the events of thousands of processes interleave,
	 * and their series' points would cost a cache miss per event */
	struct point tail;
	unsigned shift; /* adaptive/exact: bucket = t >> shift */
	uint64_t peak;	/* exact, never bucketed */
	uint64_t peak_t;
	uint64_t cur;
};

struct series_cfg {
	enum mt_resolution_mode mode;
	uint64_t width;
	size_t max_points;
};

/* ------------------------------------------------------------------ */
/* Live heap blocks: open addressing, linear probing, backward-shift    */
/* deletion (no tombstones, so probes stay short after many frees).     */

struct block {
	uint64_t addr;	/* 0 = empty slot */
	uint64_t size;	/* | INHERITED, OUTSIDE */
	uint64_t t;	/* first seen, ns since origin */
	uint32_t stack; /* its call stack (mt_sites.h), 0: none */
	uint32_t tid;	/* the thread that allocated it */
};

struct blocks {
	struct block *slot;
	size_t mask; /* slots - 1, slots a power of two */
	size_t used;
	unsigned bits;
};

/* ------------------------------------------------------------------ */
/* Mapped ranges: sorted, non-overlapping [start, end).                 */

struct range {
	uint64_t start, end;
	bool uncounted; /* inherited at fork, or mapped outside the section */
	uint32_t stack; /* the call stack that mapped it (mt_sites.h) */
	bool tracer;	/* mt-trace's own (MT_MMAP_TRACER): uncounted too */
};

struct ranges {
	struct range *v;
	size_t n, alloc;
	uint64_t own_bytes;
	uint64_t tracer_bytes; /* of the ranges marked tracer */
};

/* ------------------------------------------------------------------ */
/* Processes                                                            */

struct totals {
	uint64_t allocated_bytes;
	uint64_t allocations; /* calls that returned a block */
	uint64_t mallocs, callocs, reallocs, aligned_allocs;
	uint64_t frees; /* free() calls that released a known block */
	uint64_t freed_bytes;
	uint64_t unknown_frees;	   /* free of an address never allocated */
	uint64_t unknown_reallocs; /* realloc of such an address */
	uint64_t failed_allocations;
	uint64_t reused_addresses; /* allocated while still live: a free was
				      missed (lost events) */
	/* blocks freed (or reallocated) before the thread that allocated
	 * them allocated again: heaptrack's temporary allocations */
	uint64_t temporary;
	/* blocks released by realloc (moved, or realloc(p, 0)): with frees,
	 * what allocations - blocks not freed adds up to */
	uint64_t realloc_frees;
};

struct leak {
	uint32_t pid;
	uint64_t addr, size, first_t, at_t;
	const char *at; /* "exec", "exit", "end" */
};

/* The heaviest max_leaks leaks (leak_before's order): a min-heap. */
struct leak_top {
	struct leak *v;
	size_t n, cap;
	uint64_t count, bytes;
};

/* A program's arguments as the document gives them: each valid UTF-8
 * (exec_path) and ending in a NUL, len bytes in all; cut: the trace had
 * only the first MT_ARGS_MAX bytes of them.  args NULL: not known. */
struct cmdline {
	char *args;
	size_t len;
	bool cut;
};

/* An exec: its path (valid UTF-8, see exec_path), its arguments, when. */
struct exec {
	char *path;
	size_t len;
	struct cmdline cmd;
	uint64_t t;
};

/* A series' figures that outlive its points: what the document prints of
 * a process whose points are not written. */
struct level {
	uint64_t peak, peak_t, cur;
};

static inline struct level level_of(const struct series *s)
{
	return (struct level){s->peak, s->peak_t, s->cur};
}

/* The RSS gauges (G_RSS_FILE..G_RSS_TOTAL) and the PSS ones */
#define RSS_GAUGES (G_RSS_TOTAL + 1)
#define PSS_GAUGES (NGAUGES - G_PSS_TOTAL)

struct proc;

/*
 * A process as the document lists it: what a process keeps once it ended,
 * and all an ended one keeps unless it is among the heaviest (a build
 * starts hundreds of thousands of processes).  Its figures (events,
 * totals, levels, leaks) are copied from the live model when the process
 * ends, or at the end of the trace (proc_summarize); live is its model,
 * NULL once the process ended and its series are not kept.
 */
struct proc_sum {
	uint32_t pid, ppid;
	bool ended, has_ppid;
	bool with_series; /* among the heaviest: its series are written */
	int exit_kind;	  /* MT_EXIT_* */
	int exit_value;
	uint64_t start_t, end_t;
	uint64_t events;
	struct totals tot;
	struct level heap, mapped, rss[RSS_GAUGES];
	struct level *pss; /* [PSS_GAUGES], NULL: it had no PSS event */
	/* bytes of mt-trace's own memory mapped in it (MT_MMAP_TRACER, never
	 * in mapped): now, and at most */
	uint64_t tracer_live, tracer_mapped;
	/* bytes of it resident for mt-trace (Rss events marked
	 * MT_RSS_TRACER: the recorder's pages, never in rss): the peak of
	 * file + anon + shmem */
	uint64_t tracer_rss;
	struct leak_top leaks;
	struct exec *execs;
	size_t nexecs;
	char *program; /* forked without exec: the parent's program */
	struct cmdline program_cmd; /* and its arguments */
	size_t rank;		    /* 0 = the heaviest, set at the end */
	struct proc *live;
	struct proc_sum *next; /* creation order */
};

/* The model of a live process (and the series of an ended one that keeps
 * them). */
struct proc {
	/* first what every allocator event touches, in a few cache lines:
	 * a trace has thousands of processes, and their events interleave */
	uint32_t pid;
	bool ended;
	uint64_t events;
	struct blocks blocks;
	uint64_t heap_own, inherited_bytes;
	struct series heap;
	struct totals tot;
	/* the rest */
	struct proc_sum *sum;
	struct ranges maps;
	uint64_t brk_cur;
	struct series mapped;
	uint64_t gauge[NGAUGES];
	/* the tracer's part of each RSS counter (G_RSS_FILE..G_RSS_SHMEM):
	 * the kernel's counter is gauge[] + this */
	uint64_t tracer_rss[G_RSS_SHMEM + 1];
	/* the RSS gauges' series; the PSS ones (--physical only) are
	 * allocated at the first PSS event: see proc_gauge_s */
	struct series gauge_s[RSS_GAUGES];
	struct series *pss_s;
	struct leak_top leaks;
};

struct pid_slot {
	uint32_t pid; /* 0 = empty: pid 0 is never traced */
	struct proc_sum *p;
};

struct mt_recon {
	struct mt_recon_opts opts;
	struct series_cfg cfg;	/* tree series */
	struct series_cfg pcfg; /* per-process series: fewer points */
	struct mt_meta meta;	/* header fields; strings borrowed via json */
	json_t *header;		/* command, host: copied at open */
	enum mt_format fmt;
	bool have_origin;
	uint64_t origin, last_t;
	/* processes */
	struct pid_slot *pids;
	size_t pid_mask, pid_used;
	struct proc_sum *first, **tail;
	/* the live process last seen with each pid modulo RECENT: events of
	 * a few processes interleave, and this spares the pid hash */
	struct proc *recent[RECENT];
	size_t nprocs;
	/* tree */
	uint64_t tree_heap, tree_mapped;
	struct series heap, mapped;
	uint64_t gauge[NGAUGES];
	struct series gauge_s[NGAUGES];
	bool have_rss, have_physical;
	/* --section: only what happens between its markers counts */
	bool in_section;
	uint64_t section_start, section_ns;
	json_t *sections; /* [[start_ns, end_ns], ...] */
	/* the heaviest ended processes (a min-heap, lightest first): only
	 * they and live processes keep series points */
	struct proc_sum **kept;
	size_t nkept;
	uint64_t hist_count[HIST_BUCKETS], hist_bytes[HIST_BUCKETS];
	struct size_slot {
		uint64_t size; /* stored + 1 so 0 means empty */
		uint64_t count;
	} * sizes;
	uint64_t *small_sizes; /* [size] = count, for sizes < SMALL_SIZES */
	size_t sizes_used;     /* distinct sizes counted, in either */
	uint64_t sizes_untracked;
	struct leak_top leaks;
	uint64_t events, lost_events, by_kind[MT_EV_KIND_MAX + 1];
	/* events of a process after its exit (not its pid's reuse): not
	 * applied, and no new process */
	uint64_t late_events;
	json_t *markers;
	/* allocation sites, from the first Stack record on; the stack of
	 * the event being applied */
	struct mt_sites *sites;
	bool sites_on;
	uint64_t cur_stack;
	/* the thread of the event being applied, and each thread's latest
	 * allocation (recon_temp.c): what makes a block temporary */
	uint32_t cur_tid;
	struct thread_last *last;
	size_t last_mask, last_used;
	/* heap blocks freed, by lifetime (recon_temp.c's buckets) */
	uint64_t life_count[LIFE_BUCKETS], life_bytes[LIFE_BUCKETS];
};

/* ---- temporary blocks, lifetimes (recon_temp.c) ---------------------- */

/* A thread allocated the block at addr (it is its latest). */
void temp_allocated(struct mt_recon *r, uint32_t tid, uint64_t addr);
/* The block at addr, allocated by tid, is released: whether it is
 * temporary (tid allocated nothing since). */
bool temp_released(struct mt_recon *r, uint32_t tid, uint64_t addr);
/* A heap block of size bytes freed ns after its allocation. */
void lifetime_count(struct mt_recon *r, uint64_t ns, uint64_t size);
/* The lower bound of lifetime bucket b in ns (b < LIFE_BUCKETS). */
uint64_t lifetime_from(unsigned b);
void temp_free(struct mt_recon *r);

/* Process p's series of gauge g; NULL for a PSS gauge it never had. */
static inline struct series *proc_gauge_s(struct proc *p, enum gauge g)
{
	if (g <= G_RSS_TOTAL)
		return &p->gauge_s[g];
	return p->pss_s ? &p->pss_s[g - G_PSS_TOTAL] : NULL;
}

/* ---- series (recon_series.c) ----------------------------------------- */

void series_widen(struct series *s, unsigned k);
/* Doubles the bucket width until at most target points are left. */
void series_coarsen(struct series *s, size_t target);
int series_grow(struct series *s);
/* An ended process's series no longer grows: give back the slack. */
void series_shrink(struct series *s);
void series_drop(struct series *s);
uint64_t series_width(const struct series *s, const struct series_cfg *cfg);

static inline void series_set(struct series *s, const struct series_cfg *cfg,
			      uint64_t t, uint64_t v)
{
	uint64_t idx =
	    cfg->mode == MT_RES_FIXED ? t / cfg->width : t >> s->shift;

	s->cur = v;
	if (v > s->peak) {
		s->peak = v;
		s->peak_t = t;
	}
	/* events slightly out of order fall into the latest bucket */
	if (s->n > 0 && idx <= s->tail.idx) {
		if (v > s->tail.max)
			s->tail.max = v;
		s->tail.last = v;
		return;
	}
	if (s->n == s->alloc && series_grow(s) < 0)
		return; /* out of memory: the exact peak is still kept */
	if (s->n > 0)
		s->pts[s->n - 1] = s->tail;
	s->tail = (struct point){idx, v, v};
	s->pts[s->n++] = s->tail;
	if (cfg->mode == MT_RES_ADAPTIVE && s->n > cfg->max_points) {
		series_coarsen(s, cfg->max_points / 2);
		s->tail = s->pts[s->n - 1];
	}
}

/* ---- blocks (recon_blocks.c) ----------------------------------------- */

int blocks_rehash(struct blocks *b, unsigned bits);
void blocks_clear(struct blocks *b);

static inline size_t block_home(const struct blocks *b, uint64_t addr)
{
	return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> (64 - b->bits));
}

static inline struct block *blocks_find(const struct blocks *b, uint64_t addr)
{
	if (!b->used)
		return NULL;
	for (size_t i = block_home(b, addr);; i = (i + 1) & b->mask) {
		if (b->slot[i].addr == addr)
			return &b->slot[i];
		if (!b->slot[i].addr)
			return NULL;
	}
}

/* Returns the slot for addr, new (addr 0 on return means "was empty") or
 * existing; NULL when out of memory. */
static inline struct block *blocks_slot(struct blocks *b, uint64_t addr)
{
	if (!b->slot || (b->used + 1) * 4 > (b->mask + 1) * 3)
		if (blocks_rehash(b, b->slot ? b->bits + 1 : 6) < 0)
			return NULL;
	size_t i = block_home(b, addr);

	while (b->slot[i].addr && b->slot[i].addr != addr)
		i = (i + 1) & b->mask;
	return &b->slot[i];
}

static inline void blocks_remove(struct blocks *b, struct block *victim)
{
	size_t i = (size_t)(victim - b->slot);

	for (size_t j = (i + 1) & b->mask; b->slot[j].addr;
	     j = (j + 1) & b->mask) {
		size_t k = block_home(b, b->slot[j].addr);

		/* move j back into the hole at i unless its home k lies
		 * cyclically in (i, j] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		b->slot[i] = b->slot[j];
		i = j;
	}
	b->slot[i].addr = 0;
	b->used--;
}

/* ---- ranges (recon_ranges.c) ----------------------------------------- */

/* The first range whose end lies above addr. */
size_t ranges_search(const struct ranges *r, uint64_t addr);
int ranges_insert_at(struct ranges *r, size_t i, struct range x);
/* Unmap [start, end): trims, splits (a hole in a mapping) or drops.  The
 * counted bytes gone are released from their sites (sites NULL: none). */
void ranges_remove(struct ranges *r, uint64_t start, uint64_t end,
		   struct mt_sites *sites);
/* Map [start, end), replacing whatever was there (MAP_FIXED); counted,
 * the new range's bytes are allocated by stack in sites (NULL: none). */
void ranges_add(struct ranges *r, uint64_t start, uint64_t end, bool uncounted,
		bool tracer, uint32_t stack, struct mt_sites *sites);
void ranges_clear(struct ranges *r);

/* ---- leaks (recon_leaks.c) ------------------------------------------- */

/* An empty top of cap leaks; its array is allocated at the first leak. */
int leak_top_init(struct leak_top *lt, size_t cap);
/* A process's top once it ended: its array cut to the leaks it holds (no
 * leak_add after). */
void leak_top_shrink(struct leak_top *lt);
void leak_add(struct leak_top *lt, const struct leak *lk);
/* The kept leaks in listing order, heaviest first. */
void leak_top_sort(struct leak_top *lt);

/* ---- processes and sections (recon_procs.c) -------------------------- */

struct pid_slot *pid_slot(struct mt_recon *r, uint32_t pid);
/* proc_get past the recent processes: the pid hash, or a new process
 * (forked: for the process's Fork); NULL for a late event of an ended
 * process (counted in late_events). */
struct proc *proc_lookup(struct mt_recon *r, uint32_t pid, uint64_t t,
			 bool forked);
/* exec or exit: what the process still held is leaked (why says which). */
void end_address_space(struct mt_recon *r, struct proc *p, uint64_t t,
		       const char *why);
void on_process_fork(struct mt_recon *r, const struct mt_event *ev, uint64_t t);
/* the program p runs (its last exec, inherited at fork, or the command
 * for the root process): NULL when unknown */
const char *proc_program(const struct mt_recon *r, const struct proc_sum *p,
			 size_t *len);
/* its arguments, NULL when not known (proc_program's chain) */
const struct cmdline *proc_cmdline(const struct proc_sum *p);
void on_process_exec(struct mt_recon *r, struct proc *p,
		     const struct mt_record *rec, uint64_t t);
void on_process_exit(struct mt_recon *r, struct proc *p, uint32_t status,
		     uint64_t t);
/* Copies the figures of a process whose model is finished (it ended, or
 * the trace did) into its summary. */
void proc_summarize(struct proc *p);
/* Heavier first: a total order of processes, by their summaries. */
int proc_cmp(const struct proc_sum *x, const struct proc_sum *y);
void proc_free(struct proc_sum *s);
/* Markers, enable, disable: listed; the --section's open and close it. */
void on_marker(struct mt_recon *r, const struct mt_record *rec, uint64_t t);
void section_end(struct mt_recon *r, uint64_t t);

/* ---- the model (reconstruct.c) --------------------------------------- */

/* Sets gauge g of process p (and the tree's sum) to v at t. */
void gauge_set(struct mt_recon *r, struct proc *p, enum gauge g, uint64_t v,
	       uint64_t t);
/* exec and exit: the old memory is gone; the peaks stay. */
void gauges_reset(struct mt_recon *r, struct proc *p, uint64_t t);

static inline uint64_t rel_time(struct mt_recon *r, uint64_t ts)
{
	if (!r->have_origin) {
		r->origin = ts;
		r->have_origin = true;
	}
	if (ts > r->last_t)
		r->last_t = ts;
	return ts > r->origin ? ts - r->origin : 0;
}

/* The live process with this pid; a new one if it never was seen; NULL
 * for a late event of one that ended (proc_lookup). */
static inline struct proc *proc_get(struct mt_recon *r, uint32_t pid,
				    uint64_t t)
{
	struct proc *p = r->recent[pid % RECENT];

	if (p && p->pid == pid && !p->ended)
		return p;
	return proc_lookup(r, pid, t, false);
}

/* A series takes points and peaks only inside the section (always when
 * there is no --section); outside, it just follows the value. */
static inline void track(const struct mt_recon *r, struct series *s,
			 const struct series_cfg *cfg, uint64_t t, uint64_t v)
{
	if (r->in_section)
		series_set(s, cfg, t, v);
	else
		s->cur = v;
}

static inline void heap_changed(struct mt_recon *r, struct proc *p, uint64_t t)
{
	track(r, &p->heap, &r->pcfg, t, p->heap_own);
	track(r, &r->heap, &r->cfg, t, r->tree_heap);
}

static inline void mapped_changed(struct mt_recon *r, struct proc *p,
				  uint64_t before, uint64_t t)
{
	uint64_t after = p->maps.own_bytes;

	if (after == before)
		return;
	r->tree_mapped += after - before; /* wraps correctly when lower */
	track(r, &p->mapped, &r->pcfg, t, after);
	track(r, &r->mapped, &r->cfg, t, r->tree_mapped);
}

#endif /* MT_RECON_INT_H */
