// SPDX-License-Identifier: MIT
/*
 * reconstruct.c - from events to timelines, totals and leaks.
 *
 * Per live process: a hash of live heap blocks (addr -> size, first seen)
 * and a sorted interval set of mapped ranges.  Every change of a process's
 * heap or mapped bytes updates a bucketed series for the process and one
 * for the tree.  A process counts only what it allocated or mapped itself:
 * what a forked child inherits is tracked (so freeing it in the child is no
 * error) but counted in the parent, so the tree counts every block once.
 * RSS and PSS are absolute values per process, summed for the tree.  With
 * a --section, state follows every event but only events inside the
 * section count (blocks and mappings made outside are tracked, not
 * counted).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "mt_decimal.h"
#include "mt_reconstruct.h"

#define INHERITED      (1ull << 63) /* flag bits in block.size */
#define OUTSIDE	       (1ull << 62) /* allocated outside the --section */
#define NOT_OWN	       (INHERITED | OUTSIDE) /* not counted in the heap */
#define SIZE_MASK      (~NOT_OWN)
#define SIZE_TABLE_MAX 65536 /* slots; half hold sizes counted exactly */
#define SMALL_SIZES    4096  /* sizes below: counted in a dense array */
#define HIST_BUCKETS   65
#define RECENT	       1024 /* recently seen processes, by pid */

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
	uint64_t width; /* fixed: bucket = t / width */
	uint64_t peak;	/* exact, never bucketed */
	uint64_t peak_t;
	uint64_t cur;
};

struct series_cfg {
	enum mt_resolution_mode mode;
	uint64_t width;
	size_t max_points;
};

/* Widen the buckets 2^k times, merging neighbours; keeping each maximum
 * is what keeps every peak visible. */
static void series_widen(struct series *s, unsigned k)
{
	size_t o = 0;

	s->shift += k;
	for (size_t i = 0; i < s->n; i++) {
		struct point p = s->pts[i];

		p.idx >>= k;
		if (o > 0 && s->pts[o - 1].idx == p.idx) {
			struct point *q = &s->pts[o - 1];

			if (p.max > q->max)
				q->max = p.max;
			q->last = p.last;
		} else {
			s->pts[o++] = p;
		}
	}
	s->n = o;
}

/*
 * Double the bucket width until at most target points are left (or the
 * width is 2^63).  Doubling k times merges exactly what widening 2^k
 * times at once does, and two neighbours share a bucket once k reaches the
 * bit length of idx ^ the previous idx: so one pass counts neighbours by
 * that length, which tells the fewest doublings, and one pass merges.
 */
static void series_coarsen(struct series *s, size_t target)
{
	size_t by_len[65] = {0}, left;
	unsigned k, k_max;

	if (s->n <= target || s->shift >= 63)
		return;
	for (size_t i = 1; i < s->n; i++) {
		uint64_t diff = s->pts[i].idx ^ s->pts[i - 1].idx;

		by_len[diff ? 64 - __builtin_clzll(diff) : 0]++;
	}
	k_max = 63 - s->shift;
	left = s->n - by_len[0];
	for (k = 1;; k++) {
		left -= by_len[k];
		if (left <= target || k == k_max)
			break;
	}
	series_widen(s, k);
}

static int series_grow(struct series *s)
{
	size_t alloc = s->alloc ? s->alloc * 2 : 16;
	struct point *p = realloc(s->pts, alloc * sizeof(*p));

	if (!p)
		return -1;
	s->pts = p;
	s->alloc = alloc;
	return 0;
}

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

/* An ended process's series no longer grows: give back the slack. */
static void series_shrink(struct series *s)
{
	struct point *p;

	if (s->n == s->alloc)
		return;
	if (!s->n) {
		free(s->pts);
		s->pts = NULL;
		s->alloc = 0;
		return;
	}
	p = realloc(s->pts, s->n * sizeof(*p));
	if (p) {
		s->pts = p;
		s->alloc = s->n;
	}
}

static uint64_t series_width(const struct series *s,
			     const struct series_cfg *cfg)
{
	return cfg->mode == MT_RES_FIXED ? cfg->width : 1ull << s->shift;
}

/* ------------------------------------------------------------------ */
/* Live heap blocks: open addressing, linear probing, backward-shift    */
/* deletion (no tombstones, so probes stay short after many frees).     */

struct block {
	uint64_t addr; /* 0 = empty slot */
	uint64_t size; /* | INHERITED, OUTSIDE */
	uint64_t t;    /* first seen, ns since origin */
};

struct blocks {
	struct block *slot;
	size_t mask; /* slots - 1, slots a power of two */
	size_t used;
	unsigned bits;
};

static inline size_t block_home(const struct blocks *b, uint64_t addr)
{
	return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> (64 - b->bits));
}

static int blocks_rehash(struct blocks *b, unsigned bits)
{
	struct blocks nb = {.bits = bits, .mask = (1ull << bits) - 1};

	nb.slot = calloc(nb.mask + 1, sizeof(*nb.slot));
	if (!nb.slot)
		return -1;
	for (size_t i = 0; b->slot && i <= b->mask; i++) {
		if (!b->slot[i].addr)
			continue;
		size_t j = block_home(&nb, b->slot[i].addr);

		while (nb.slot[j].addr)
			j = (j + 1) & nb.mask;
		nb.slot[j] = b->slot[i];
		nb.used++;
	}
	free(b->slot);
	*b = nb;
	return 0;
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

static void blocks_clear(struct blocks *b)
{
	free(b->slot);
	memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------------ */
/* Mapped ranges: sorted, non-overlapping [start, end).                 */

struct range {
	uint64_t start, end;
	bool uncounted; /* inherited at fork, or mapped outside the section */
};

struct ranges {
	struct range *v;
	size_t n, alloc;
	uint64_t own_bytes;
};

/* first range whose end lies above addr */
static size_t ranges_search(const struct ranges *r, uint64_t addr)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int ranges_insert_at(struct ranges *r, size_t i, struct range x)
{
	if (r->n == r->alloc) {
		size_t alloc = r->alloc ? r->alloc * 2 : 16;
		struct range *v = realloc(r->v, alloc * sizeof(*v));

		if (!v)
			return -1;
		r->v = v;
		r->alloc = alloc;
	}
	memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(*r->v));
	r->v[i] = x;
	r->n++;
	if (!x.uncounted)
		r->own_bytes += x.end - x.start;
	return 0;
}

static void ranges_uncount(struct ranges *r, const struct range *x,
			   uint64_t bytes)
{
	if (!x->uncounted)
		r->own_bytes -= bytes;
}

/* Unmap [start, end): trims, splits (a hole in a mapping) or drops. */
static void ranges_remove(struct ranges *r, uint64_t start, uint64_t end)
{
	size_t i = ranges_search(r, start), j;

	if (i < r->n && r->v[i].start < start) {
		struct range *x = &r->v[i];

		if (x->end > end) { /* a hole inside one mapping */
			struct range tail = {end, x->end, x->uncounted};

			ranges_uncount(r, x, end - start);
			x->end = start;
			/* the tail's bytes stay counted: insert re-adds */
			if (!tail.uncounted)
				r->own_bytes -= tail.end - tail.start;
			ranges_insert_at(r, i + 1, tail);
			return;
		}
		ranges_uncount(r, x, x->end - start);
		x->end = start;
		i++;
	}
	for (j = i; j < r->n && r->v[j].end <= end; j++)
		ranges_uncount(r, &r->v[j], r->v[j].end - r->v[j].start);
	if (j < r->n && r->v[j].start < end) {
		ranges_uncount(r, &r->v[j], end - r->v[j].start);
		r->v[j].start = end;
	}
	if (j > i) {
		memmove(&r->v[i], &r->v[j], (r->n - j) * sizeof(*r->v));
		r->n -= j - i;
	}
}

/* Map [start, end), replacing whatever was there (MAP_FIXED). */
static void ranges_add(struct ranges *r, uint64_t start, uint64_t end,
		       bool uncounted)
{
	if (end <= start)
		return;
	ranges_remove(r, start, end);
	ranges_insert_at(r, ranges_search(r, start),
			 (struct range){start, end, uncounted});
}

static void ranges_clear(struct ranges *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

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

/* An exec: its path (valid UTF-8, see exec_path) and when. */
struct exec {
	char *path;
	size_t len;
	uint64_t t;
};

struct proc {
	/* first what every allocator event touches, in a few cache lines:
	 * a trace has thousands of processes, and their events interleave */
	uint32_t pid, ppid;
	bool ended, has_ppid;
	bool with_series; /* among the heaviest: its series are written */
	uint64_t events;
	struct blocks blocks;
	uint64_t heap_own, inherited_bytes;
	struct series heap;
	struct totals tot;
	/* the rest */
	size_t rank;   /* 0 = the heaviest, set at the end */
	int exit_kind; /* MT_EXIT_* */
	int exit_value;
	uint64_t start_t, end_t;
	struct exec *execs;
	size_t nexecs;
	struct ranges maps;
	uint64_t brk_cur;
	struct series mapped;
	uint64_t gauge[NGAUGES];
	struct series gauge_s[NGAUGES];
	struct leak_top leaks;
	struct proc *next; /* creation order */
};

struct pid_slot {
	uint32_t pid; /* 0 = empty: pid 0 is never traced */
	struct proc *p;
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
	struct proc *first, **tail;
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
	struct proc **kept;
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
	json_t *markers;
};

void mt_recon_opts_default(struct mt_recon_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->mode = MT_RES_ADAPTIVE;
	opts->max_points = 2000;
	opts->proc_points = 128;
	opts->max_leaks = 20;
	opts->max_proc_leaks = 5;
	opts->top_sizes = 10;
	opts->series_procs = 20;
}

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

/*
 * Whether leak x is listed before y: the bigger first, then the older,
 * then by address and pid.  A total order, so which leaks make the list
 * does not depend on the order they were found in (a hash table's).
 */
static bool leak_before(const struct leak *x, const struct leak *y)
{
	if (x->size != y->size)
		return x->size > y->size;
	if (x->first_t != y->first_t)
		return x->first_t < y->first_t;
	if (x->addr != y->addr)
		return x->addr < y->addr;
	return x->pid < y->pid;
}

static void leak_sift_down(struct leak_top *lt, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < lt->n && leak_before(&lt->v[m], &lt->v[l]))
			m = l;
		if (l + 1 < lt->n && leak_before(&lt->v[m], &lt->v[l + 1]))
			m = l + 1;
		if (m == i)
			return;
		struct leak tmp = lt->v[i];

		lt->v[i] = lt->v[m];
		lt->v[m] = tmp;
		i = m;
	}
}

static void leak_add(struct leak_top *lt, const struct leak *lk)
{
	lt->count++;
	lt->bytes += lk->size;
	if (!lt->cap)
		return;
	if (lt->n < lt->cap) {
		size_t i = lt->n++;

		lt->v[i] = *lk;
		while (i > 0 && leak_before(&lt->v[(i - 1) / 2], &lt->v[i])) {
			struct leak tmp = lt->v[i];

			lt->v[i] = lt->v[(i - 1) / 2];
			lt->v[(i - 1) / 2] = tmp;
			i = (i - 1) / 2;
		}
	} else if (leak_before(lk, &lt->v[0])) {
		lt->v[0] = *lk;
		leak_sift_down(lt, 0);
	}
}

static int leak_top_init(struct leak_top *lt, size_t cap)
{
	memset(lt, 0, sizeof(*lt));
	lt->cap = cap;
	if (cap && !(lt->v = calloc(cap, sizeof(*lt->v))))
		return -1;
	return 0;
}

static struct proc *proc_new(struct mt_recon *r, uint32_t pid, uint64_t t)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (!p || leak_top_init(&p->leaks, r->opts.max_proc_leaks) < 0) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->start_t = t;
	*r->tail = p;
	r->tail = &p->next;
	r->nprocs++;
	return p;
}

static struct pid_slot *pid_slot(struct mt_recon *r, uint32_t pid)
{
	if (!r->pids || (r->pid_used + 1) * 2 > r->pid_mask + 1) {
		size_t n = r->pids ? (r->pid_mask + 1) * 2 : 256;
		struct pid_slot *t = calloc(n, sizeof(*t));

		if (!t)
			return NULL;
		for (size_t i = 0; r->pids && i <= r->pid_mask; i++) {
			if (!r->pids[i].pid)
				continue;
			size_t j = (r->pids[i].pid * 2654435761u) & (n - 1);

			while (t[j].pid)
				j = (j + 1) & (n - 1);
			t[j] = r->pids[i];
		}
		free(r->pids);
		r->pids = t;
		r->pid_mask = n - 1;
	}
	size_t i = (pid * 2654435761u) & r->pid_mask;

	while (r->pids[i].pid && r->pids[i].pid != pid)
		i = (i + 1) & r->pid_mask;
	return &r->pids[i];
}

/* proc_get past the recent processes: the pid hash, or a new process. */
static struct proc *proc_lookup(struct mt_recon *r, uint32_t pid, uint64_t t)
{
	struct proc **recent = &r->recent[pid % RECENT];
	struct pid_slot *s = pid_slot(r, pid);

	if (!s)
		return NULL;
	if (!s->pid || s->p->ended) {
		struct proc *p = proc_new(r, pid, t);

		if (!p)
			return NULL;
		if (!s->pid)
			r->pid_used++;
		s->pid = pid;
		s->p = p;
	}
	*recent = s->p;
	return s->p;
}

/* The live process with this pid; a new one if it never was seen or its
 * last incarnation ended (pid reuse). */
static inline struct proc *proc_get(struct mt_recon *r, uint32_t pid,
				    uint64_t t)
{
	struct proc *p = r->recent[pid % RECENT];

	if (p && p->pid == pid && !p->ended)
		return p;
	return proc_lookup(r, pid, t);
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

/* ------------------------------------------------------------------ */
/* Allocator events                                                     */

static inline void count_size(struct mt_recon *r, uint64_t size)
{
	unsigned b = size ? 64 - (unsigned)__builtin_clzll(size) : 0;

	r->hist_count[b]++;
	r->hist_bytes[b] += size;

	/* most sizes are small: a dense array keeps their counts in a few
	 * cache lines, where the hash table would spread them over 1 MiB */
	if (size < SMALL_SIZES) {
		uint64_t *c = &r->small_sizes[size];

		if (*c) {
			++*c;
		} else if (r->sizes_used < SIZE_TABLE_MAX / 2) {
			*c = 1;
			r->sizes_used++;
		} else {
			r->sizes_untracked++;
		}
		return;
	}

	size_t mask = SIZE_TABLE_MAX - 1;
	size_t i = (size_t)((size * 0x9E3779B97F4A7C15ull) >> 48) & mask;

	while (r->sizes[i].size && r->sizes[i].size != size + 1)
		i = (i + 1) & mask;
	if (r->sizes[i].size) {
		r->sizes[i].count++;
	} else if (r->sizes_used < SIZE_TABLE_MAX / 2) {
		/* half full at most, so probes stay short */
		r->sizes[i].size = size + 1;
		r->sizes[i].count = 1;
		r->sizes_used++;
	} else {
		r->sizes_untracked++;
	}
}

static void heap_alloc(struct mt_recon *r, struct proc *p, uint64_t addr,
		       uint64_t size, uint64_t t)
{
	struct block *b;

	if (r->in_section) {
		p->tot.allocations++;
		p->tot.allocated_bytes += size;
		count_size(r, size);
	}
	b = blocks_slot(&p->blocks, addr);
	if (!b)
		return;
	if (b->addr) { /* still live: its free was lost */
		p->tot.reused_addresses += r->in_section;
		if (b->size & INHERITED) {
			p->inherited_bytes -= b->size & SIZE_MASK;
		} else if (!(b->size & OUTSIDE)) {
			p->heap_own -= b->size;
			r->tree_heap -= b->size;
		}
	} else {
		p->blocks.used++;
	}
	if (r->in_section) {
		*b = (struct block){addr, size, t};
		p->heap_own += size;
		r->tree_heap += size;
	} else {
		*b = (struct block){addr, size | OUTSIDE, t};
	}
	heap_changed(r, p, t); /* also when a reused address fell out */
}

/* Returns the bytes released, or -1 when addr was not live. */
static int64_t heap_release(struct mt_recon *r, struct proc *p, uint64_t addr)
{
	struct block *b = blocks_find(&p->blocks, addr);
	uint64_t size;

	if (!b)
		return -1;
	size = b->size & SIZE_MASK;
	if (b->size & NOT_OWN) {
		if (b->size & INHERITED)
			p->inherited_bytes -= size;
		blocks_remove(&p->blocks, b);
		return 0; /* counted in the parent, or not at all */
	}
	p->heap_own -= size;
	r->tree_heap -= size;
	blocks_remove(&p->blocks, b);
	return (int64_t)size;
}

static void on_free(struct mt_recon *r, struct proc *p, uint64_t addr,
		    uint64_t t)
{
	int64_t released;

	if (!addr)
		return; /* free(NULL) does nothing */
	released = heap_release(r, p, addr);
	if (released < 0) {
		p->tot.unknown_frees += r->in_section;
		return;
	}
	if (r->in_section) {
		p->tot.frees++;
		p->tot.freed_bytes += (uint64_t)released;
	}
	if (released)
		heap_changed(r, p, t);
}

static void on_realloc(struct mt_recon *r, struct proc *p,
		       const struct mt_event *ev, uint64_t t)
{
	p->tot.reallocs += r->in_section;
	if (!ev->addr && ev->size) {
		/* the old block stays */
		p->tot.failed_allocations += r->in_section;
		return;
	}
	if (ev->old_addr) {
		int64_t released = heap_release(r, p, ev->old_addr);

		if (r->in_section && released < 0)
			p->tot.unknown_reallocs++;
		else if (r->in_section)
			p->tot.freed_bytes += (uint64_t)released;
	}
	if (ev->addr)
		heap_alloc(r, p, ev->addr, ev->size, t);
	else
		heap_changed(r, p, t); /* realloc(p, 0) freed p */
}

/* ------------------------------------------------------------------ */
/* Address-space events                                                 */

static inline uint64_t page_up(const struct mt_recon *r, uint64_t x)
{
	uint64_t ps = r->meta.page_size ? r->meta.page_size : 4096;

	return (x + ps - 1) / ps * ps;
}

static void on_mapping(struct mt_recon *r, struct proc *p,
		       const struct mt_event *ev, uint64_t t)
{
	uint64_t before = p->maps.own_bytes;

	switch (ev->kind) {
	case MT_EV_MMAP:
		ranges_add(&p->maps, ev->addr, ev->addr + page_up(r, ev->size),
			   !r->in_section);
		break;
	case MT_EV_MUNMAP:
		ranges_remove(&p->maps, ev->addr,
			      ev->addr + page_up(r, ev->size));
		break;
	case MT_EV_MREMAP:
		ranges_remove(&p->maps, ev->old_addr,
			      ev->old_addr + page_up(r, ev->old_size));
		ranges_add(&p->maps, ev->addr, ev->addr + page_up(r, ev->size),
			   !r->in_section);
		break;
	case MT_EV_BRK: {
		/* memtrack has no previous break: use the last one seen */
		uint64_t old = ev->old_addr ? ev->old_addr : p->brk_cur;
		uint64_t brk = ev->addr;

		p->brk_cur = brk;
		if (!old || !brk)
			break;
		if (brk > old)
			ranges_add(&p->maps, page_up(r, old), page_up(r, brk),
				   !r->in_section);
		else if (brk < old)
			ranges_remove(&p->maps, page_up(r, brk),
				      page_up(r, old));
		break;
	}
	}
	mapped_changed(r, p, before, t);
}

/* ------------------------------------------------------------------ */
/* Process life                                                         */

/* ------------------------------------------------------------------ */
/* RSS and physical memory                                              */

static void gauge_set(struct mt_recon *r, struct proc *p, enum gauge g,
		      uint64_t v, uint64_t t)
{
	if (p->gauge[g] == v && p->gauge_s[g].n)
		return;
	r->gauge[g] += v - p->gauge[g]; /* wraps correctly when lower */
	p->gauge[g] = v;
	track(r, &p->gauge_s[g], &r->pcfg, t, v);
	track(r, &r->gauge_s[g], &r->cfg, t, r->gauge[g]);
}

static void on_rss(struct mt_recon *r, struct proc *p,
		   const struct mt_event *ev, uint64_t t)
{
	if (ev->aux > G_RSS_SHMEM)
		return;
	r->have_rss = true;
	gauge_set(r, p, (enum gauge)ev->aux, ev->size, t);
	gauge_set(r, p, G_RSS_TOTAL,
		  p->gauge[G_RSS_FILE] + p->gauge[G_RSS_ANON] +
		      p->gauge[G_RSS_SHMEM],
		  t);
}

static void on_pss(struct mt_recon *r, struct proc *p,
		   const struct mt_event *ev, uint64_t t)
{
	r->have_physical = true;
	gauge_set(r, p, G_PSS_TOTAL, ev->size, t);
	gauge_set(r, p, G_PSS_ANON, ev->addr, t);
	gauge_set(r, p, G_PSS_FILE, ev->old_addr, t);
	gauge_set(r, p, G_PSS_SHMEM, ev->old_size, t);
}

/* exec and exit: the old memory is gone; the peaks stay */
static void gauges_reset(struct mt_recon *r, struct proc *p, uint64_t t)
{
	for (int g = 0; g < NGAUGES; g++)
		if (p->gauge[g])
			gauge_set(r, p, (enum gauge)g, 0, t);
}

/* exec or exit: what the process still held is leaked; what it inherited
 * is dropped silently (its parent accounts for it). */
static void end_address_space(struct mt_recon *r, struct proc *p, uint64_t t,
			      const char *why)
{
	uint64_t before = p->maps.own_bytes;

	for (size_t i = 0; p->blocks.slot && i <= p->blocks.mask; i++) {
		const struct block *b = &p->blocks.slot[i];

		if (!b->addr || (b->size & NOT_OWN))
			continue;
		struct leak lk = {p->pid, b->addr, b->size, b->t, t, why};

		leak_add(&p->leaks, &lk);
		leak_add(&r->leaks, &lk);
	}
	blocks_clear(&p->blocks);
	if (p->heap_own) {
		r->tree_heap -= p->heap_own;
		p->heap_own = 0;
		heap_changed(r, p, t);
	}
	p->inherited_bytes = 0;
	ranges_clear(&p->maps);
	mapped_changed(r, p, before, t);
	p->brk_cur = 0;
	gauges_reset(r, p, t);
}

/* The parent's live blocks, marked inherited, into the child's table.
 * A child with none of its own yet (the usual case: the fork event comes
 * first) takes a copy of the parent's table as it is, slots in place:
 * same size, same hash, so the same probe sequences hold. */
static void inherit_blocks(struct proc *child, const struct proc *parent)
{
	const struct blocks *pb = &parent->blocks;
	struct blocks *cb = &child->blocks;
	struct block *copy;

	if (!pb->used)
		return;
	if (!cb->used &&
	    (copy = malloc((pb->mask + 1) * sizeof(*copy))) != NULL) {
		memcpy(copy, pb->slot, (pb->mask + 1) * sizeof(*copy));
		free(cb->slot);
		*cb = *pb;
		cb->slot = copy;
		for (size_t i = 0; i <= cb->mask; i++) {
			if (!copy[i].addr)
				continue;
			child->inherited_bytes += copy[i].size & SIZE_MASK;
			copy[i].size |= INHERITED;
		}
		return;
	}
	for (size_t i = 0; i <= pb->mask; i++) {
		const struct block *b = &pb->slot[i];
		struct block *c;

		if (!b->addr || !(c = blocks_slot(cb, b->addr)))
			continue;
		if (c->addr) /* the child's own event came first: keep it */
			continue;
		*c = (struct block){b->addr, b->size | INHERITED, b->t};
		cb->used++;
		child->inherited_bytes += b->size & SIZE_MASK;
	}
}

static void on_process_fork(struct mt_recon *r, const struct mt_event *ev,
			    uint64_t t)
{
	uint32_t ppid = (uint32_t)ev->old_addr;
	struct pid_slot *ps = ppid ? pid_slot(r, ppid) : NULL;
	struct proc *parent = ps && ps->pid && !ps->p->ended ? ps->p : NULL;
	struct proc *child;

	r->recent[ev->pid % RECENT] = NULL;
	child = proc_get(r, ev->pid, t);
	if (!child)
		return;
	child->ppid = ppid;
	child->has_ppid = true;
	if (!parent || parent == child)
		return;
	/* the child's address space is a copy of the parent's */
	inherit_blocks(child, parent);
	for (size_t i = 0; i < parent->maps.n; i++) {
		const struct range *x = &parent->maps.v[i];
		size_t at = ranges_search(&child->maps, x->start);

		if (at < child->maps.n && child->maps.v[at].start < x->end)
			continue; /* overlaps something the child did */
		ranges_insert_at(&child->maps, at,
				 (struct range){x->start, x->end, true});
	}
	child->brk_cur = parent->brk_cur;
	/* the child's resident pages start as the parent's (shared until
	 * written); PSS is not seeded: it already splits shared pages */
	for (int g = G_RSS_FILE; g <= G_RSS_TOTAL; g++)
		if (parent->gauge[g] && !child->gauge[g])
			gauge_set(r, child, (enum gauge)g, parent->gauge[g], t);
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none:
 * no overlong form, surrogate or code point past U+10FFFF (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80   ? 1
		     : s[0] < 0xc2 ? 0
		     : s[0] < 0xe0 ? 2
		     : s[0] < 0xf0 ? 3
		     : s[0] < 0xf5 ? 4
				   : 0;
	unsigned char lo = 0x80, hi = 0xbf;

	if (!len || len > n)
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	for (size_t i = 1; i < len; i++, lo = 0x80, hi = 0xbf)
		if (s[i] < lo || s[i] > hi)
			return 0;
	return len;
}

/*
 * A path as JSON can hold it: a copy, with each byte that does not start
 * a valid UTF-8 sequence replaced by U+FFFD (a Linux path is any bytes;
 * dropping the exec would lose it).  NULL when out of memory.
 */
static char *exec_path(const char *s, size_t n, size_t *len)
{
	char *out = malloc(3 * n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq((const unsigned char *)s + i, n - i);

		if (k) {
			memcpy(o, s + i, k);
			o += k;
			i += k;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = 0;
	*len = o - out;
	return out;
}

static void on_process_exec(struct mt_recon *r, struct proc *p,
			    const struct mt_record *rec, uint64_t t)
{
	struct exec *v, x = {.t = t};

	end_address_space(r, p, t, "exec");
	x.path = exec_path(rec->str ? rec->str : "",
			   rec->str ? rec->str_len : 0, &x.len);
	v = realloc(p->execs, (p->nexecs + 1) * sizeof(*v));
	if (!x.path || !v) {
		free(x.path);
		return; /* out of memory: the exec goes unlisted */
	}
	p->execs = v;
	v[p->nexecs++] = x;
}

/* Heavier first: by peak heap, then peak RSS, then peak mapped; a total
 * order, so "the N heaviest" is well defined. */
static int proc_cmp(const struct proc *x, const struct proc *y)
{
	uint64_t a[] = {x->heap.peak, x->gauge_s[G_RSS_TOTAL].peak,
			x->mapped.peak};
	uint64_t b[] = {y->heap.peak, y->gauge_s[G_RSS_TOTAL].peak,
			y->mapped.peak};

	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? 1 : -1;
	if (x->start_t != y->start_t)
		return x->start_t < y->start_t ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void series_drop(struct series *s)
{
	free(s->pts);
	s->pts = NULL;
	s->n = s->alloc = 0;
}

static void proc_drop_series(struct proc *p)
{
	series_drop(&p->heap);
	series_drop(&p->mapped);
	for (int g = 0; g < NGAUGES; g++)
		series_drop(&p->gauge_s[g]);
}

static void proc_keep_series(struct proc *p)
{
	series_shrink(&p->heap);
	series_shrink(&p->mapped);
	for (int g = 0; g < NGAUGES; g++)
		series_shrink(&p->gauge_s[g]);
}

static void kept_sift_down(struct mt_recon *r, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < r->nkept && proc_cmp(r->kept[l], r->kept[m]) > 0)
			m = l;
		if (l + 1 < r->nkept &&
		    proc_cmp(r->kept[l + 1], r->kept[m]) > 0)
			m = l + 1;
		if (m == i)
			return;
		struct proc *tmp = r->kept[i];

		r->kept[i] = r->kept[m];
		r->kept[m] = tmp;
		i = m;
	}
}

/* An ended process keeps its series points only while it is among the
 * series_procs heaviest ended ones: one that drops out has that many
 * heavier processes and can never be written with its series.  So points
 * take memory for live processes and a bounded few, not for every process
 * a long build started. */
static void keep_if_heavy(struct mt_recon *r, struct proc *p)
{
	size_t cap = r->opts.series_procs;

	if (cap == UINT_MAX) {
		proc_keep_series(p);
		return;
	}
	if (!r->kept && cap && !(r->kept = calloc(cap, sizeof(*r->kept))))
		cap = 0;
	if (r->nkept < cap) {
		size_t i = r->nkept++;

		r->kept[i] = p;
		while (i > 0 &&
		       proc_cmp(r->kept[(i - 1) / 2], r->kept[i]) < 0) {
			struct proc *tmp = r->kept[i];

			r->kept[i] = r->kept[(i - 1) / 2];
			r->kept[(i - 1) / 2] = tmp;
			i = (i - 1) / 2;
		}
		proc_keep_series(p);
	} else if (cap && proc_cmp(p, r->kept[0]) < 0) {
		proc_drop_series(r->kept[0]);
		r->kept[0] = p;
		kept_sift_down(r, 0);
		proc_keep_series(p);
	} else {
		proc_drop_series(p);
	}
}

static void on_process_exit(struct mt_recon *r, struct proc *p, uint32_t status,
			    uint64_t t)
{
	end_address_space(r, p, t, "exit");
	keep_if_heavy(r, p);
	p->ended = true;
	p->end_t = t;
	if (WIFEXITED(status)) {
		p->exit_kind = MT_EXIT_CODE;
		p->exit_value = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		p->exit_kind = MT_EXIT_SIGNAL;
		p->exit_value = WTERMSIG(status);
	}
	if (r->recent[p->pid % RECENT] == p)
		r->recent[p->pid % RECENT] = NULL;
}

static bool name_is(const char *s, size_t len, const char *name,
		    const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return len == n + k && !memcmp(s, name, n) && !memcmp(s + n, suffix, k);
}

/* The tree's series get a point where the section starts or ends, so the
 * plot shows the level the section started from. */
static void section_edge(struct mt_recon *r, uint64_t t)
{
	series_set(&r->heap, &r->cfg, t, r->tree_heap);
	series_set(&r->mapped, &r->cfg, t, r->tree_mapped);
	for (int g = 0; g < NGAUGES; g++)
		if (r->gauge_s[g].n || r->gauge[g])
			series_set(&r->gauge_s[g], &r->cfg, t, r->gauge[g]);
}

static void section_end(struct mt_recon *r, uint64_t t)
{
	if (!r->in_section)
		return;
	section_edge(r, t);
	r->in_section = false;
	r->section_ns += t - r->section_start;
	json_array_append_new(
	    r->sections,
	    json_pack("[I, I]", (json_int_t)r->section_start, (json_int_t)t));
}

/* Markers NAME or NAME-start open the section, NAME-end closes it; it may
 * open and close many times (each iteration of a benchmark). */
static void section_marker(struct mt_recon *r, const char *s, size_t len,
			   uint64_t t)
{
	const char *name = r->opts.section;

	if (name_is(s, len, name, "") || name_is(s, len, name, "-start")) {
		if (r->in_section)
			return;
		r->in_section = true;
		r->section_start = t;
		section_edge(r, t);
	} else if (name_is(s, len, name, "-end")) {
		section_end(r, t);
	}
}

static void on_marker(struct mt_recon *r, const struct mt_record *rec,
		      uint64_t t)
{
	const char *kind = rec->ev.kind == MT_EV_MARKER	  ? "marker"
			   : rec->ev.kind == MT_EV_ENABLE ? "enable"
							  : "disable";
	json_t *m = json_pack("{s:s, s:I, s:I}", "kind", kind, "t_ns",
			      (json_int_t)t, "pid", (json_int_t)rec->ev.pid);

	if (m && rec->str)
		json_object_set_new(m, "name",
				    json_stringn(rec->str, rec->str_len));
	if (m)
		json_array_append_new(r->markers, m);
	if (rec->ev.kind == MT_EV_MARKER && r->opts.section && rec->str)
		section_marker(r, rec->str, rec->str_len, t);
}

static inline void count_call(struct mt_recon *r, struct proc *p, unsigned kind)
{
	if (!r->in_section)
		return;
	if (kind == MT_EV_MALLOC)
		p->tot.mallocs++;
	else if (kind == MT_EV_CALLOC)
		p->tot.callocs++;
	else
		p->tot.aligned_allocs++;
}

static inline bool of_a_process(unsigned kind)
{
	return (kind >= MT_EV_MALLOC && kind <= MT_EV_BRK) ||
	       kind == MT_EV_EXEC || kind == MT_EV_EXIT || kind == MT_EV_RSS ||
	       kind == MT_EV_PSS;
}

/* The events of a process's heap and address space, the most of any
 * trace, on the shortest path. */
static inline void on_memory(struct mt_recon *r, struct proc *p,
			     const struct mt_event *ev, uint64_t t)
{
	switch (ev->kind) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_ALIGNED_ALLOC:
		count_call(r, p, ev->kind);
		if (ev->addr)
			heap_alloc(r, p, ev->addr, ev->size, t);
		else
			p->tot.failed_allocations += r->in_section;
		break;
	case MT_EV_FREE:
		on_free(r, p, ev->addr, t);
		break;
	case MT_EV_REALLOC:
		on_realloc(r, p, ev, t);
		break;
	default: /* MMAP, MUNMAP, MREMAP, BRK */
		on_mapping(r, p, ev, t);
		break;
	}
}

/* Every other kind: process life, RSS, markers, lost counts. */
static void on_other(struct mt_recon *r, const struct mt_record *rec)
{
	const struct mt_event *ev = &rec->ev;
	uint64_t t;
	struct proc *p;

	if (ev->kind == MT_EV_LOST) {
		r->lost_events += ev->size;
		return;
	}
	t = rel_time(r, ev->timestamp);
	if (ev->kind == MT_EV_FORK) {
		if (ev->pid)
			on_process_fork(r, ev, t);
		return;
	}
	if (ev->kind >= MT_EV_MARKER && ev->kind <= MT_EV_DISABLE) {
		on_marker(r, rec, t);
		return;
	}
	/* events of no process (the tracer's own), and kinds this version
	 * does not reconstruct, only count */
	if (!ev->pid || !of_a_process(ev->kind))
		return;
	p = proc_get(r, ev->pid, t);
	if (!p)
		return;
	p->events++;
	switch (ev->kind) {
	case MT_EV_EXEC:
		on_process_exec(r, p, rec, t);
		break;
	case MT_EV_EXIT:
		on_process_exit(r, p, ev->aux, t);
		break;
	case MT_EV_RSS:
		on_rss(r, p, ev, t);
		break;
	case MT_EV_PSS:
		on_pss(r, p, ev, t);
		break;
	default: /* memory kinds: mt_recon_event took them */
		break;
	}
}

void mt_recon_event(struct mt_recon *r, const struct mt_record *rec)
{
	const struct mt_event *ev = &rec->ev;
	unsigned kind = ev->kind;
	uint64_t t;
	struct proc *p;

	r->events++;
	r->by_kind[kind <= MT_EV_KIND_MAX ? kind : MT_EV_KIND_MAX]++;
	if (kind < MT_EV_MALLOC || kind > MT_EV_BRK || !ev->pid) {
		on_other(r, rec);
		return;
	}
	t = rel_time(r, ev->timestamp);
	p = proc_get(r, ev->pid, t);
	if (!p)
		return;
	p->events++;
	on_memory(r, p, ev, t);
}

/*
 * Reading ahead, ask for the memory an event will touch before it is
 * applied: first its process (as the recent table has it) when it is read,
 * and two records later, with the process at hand, the home slot of its
 * block.  Events of thousands of processes interleave, so both are mostly
 * cache misses otherwise (the recent table is large enough that a process
 * seldom falls out of it between two of its events; then neither would be
 * asked for).  A prefetch never faults, and a stale one only wastes it.
 */
static inline void prefetch_proc(const struct mt_recon *r,
				 const struct mt_event *ev)
{
	const struct proc *p = r->recent[ev->pid % RECENT];

	if (!p)
		return;
	__builtin_prefetch(p);
	__builtin_prefetch((const char *)p + 64);
	__builtin_prefetch((const char *)p + 128);
	if (ev->kind == MT_EV_RSS && ev->aux < NGAUGES) {
		__builtin_prefetch(&p->gauge[ev->aux]);
		__builtin_prefetch(&p->gauge_s[ev->aux]);
		__builtin_prefetch(&p->gauge_s[G_RSS_TOTAL]);
	}
}

/* a 24-byte slot can straddle two cache lines: ask for both */
static inline void prefetch_slot(const struct block *b)
{
	__builtin_prefetch(b);
	__builtin_prefetch((const char *)(b + 1) - 1);
}

static inline void prefetch_block(const struct mt_recon *r,
				  const struct mt_event *ev)
{
	const struct proc *p = r->recent[ev->pid % RECENT];
	const struct block *slot;

	if (!p || p->pid != ev->pid || !(slot = p->blocks.slot))
		return;
	if (ev->kind >= MT_EV_MALLOC && ev->kind <= MT_EV_ALIGNED_ALLOC)
		prefetch_slot(&slot[block_home(&p->blocks, ev->addr)]);
	if (ev->kind == MT_EV_REALLOC && ev->old_addr)
		prefetch_slot(&slot[block_home(&p->blocks, ev->old_addr)]);
}

#define AHEAD	    6 /* records held: the one applied next and five read ahead */
#define RING	    8 /* a power of two: positions by a mask */
#define BLOCK_AHEAD 3 /* block slots asked for this many records ahead */

int mt_recon_read(struct mt_recon *r, struct mt_input *in)
{
	struct mt_record ring[RING];
	unsigned head = 0, n = 0; /* held: ring[head], ... n of them */
	int rc;

	for (;;) {
		struct mt_record *x = &ring[(head + n) & (RING - 1)];

		rc = mt_input_next(in, x);
		if (rc <= 0)
			break;
		if (x->str) { /* valid only until the next read: apply now */
			for (; n; n--, head = (head + 1) & (RING - 1))
				mt_recon_event(r, &ring[head]);
			mt_recon_event(r, x);
			continue;
		}
		prefetch_proc(r, &x->ev);
		if (++n < AHEAD)
			continue;
		prefetch_block(r, &ring[(head + BLOCK_AHEAD) & (RING - 1)].ev);
		mt_recon_event(r, &ring[head]);
		head = (head + 1) & (RING - 1);
		n--;
	}
	for (; n; n--, head = (head + 1) & (RING - 1))
		mt_recon_event(r, &ring[head]);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Set-up and tear-down                                                 */

static json_t *header_json(const struct mt_meta *meta)
{
	json_t *h = json_object(), *cmd = json_array();

	for (int i = 0; meta && i < meta->argc; i++)
		json_array_append_new(
		    cmd, json_string(meta->argv[i] ? meta->argv[i] : ""));
	json_object_set_new(h, "command", cmd);
	json_object_set_new(h, "host",
			    meta && meta->host ? json_string(meta->host)
					       : json_null());
	return h;
}

struct mt_recon *mt_recon_new(const struct mt_recon_opts *opts,
			      const struct mt_meta *meta, enum mt_format fmt)
{
	struct mt_recon *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (opts)
		r->opts = *opts;
	else
		mt_recon_opts_default(&r->opts);
	if (r->opts.max_points < 4)
		r->opts.max_points = 4;
	if (r->opts.proc_points < 4)
		r->opts.proc_points = 4;
	if (r->opts.mode == MT_RES_FIXED && !r->opts.resolution_ns)
		r->opts.mode = MT_RES_EXACT;
	r->cfg.mode = r->opts.mode;
	r->cfg.width = r->opts.resolution_ns ? r->opts.resolution_ns : 1;
	r->cfg.max_points = r->opts.max_points;
	r->pcfg = r->cfg;
	r->pcfg.max_points = r->opts.proc_points;
	if (meta) {
		r->meta = *meta;
		r->meta.host = NULL;
		r->meta.argv = NULL;
		if (meta->start_monotonic_ns) {
			r->origin = meta->start_monotonic_ns;
			r->have_origin = true;
		}
	}
	r->fmt = fmt;
	r->have_rss = r->meta.flags & MT_HDR_RSS;
	r->have_physical = r->meta.flags & MT_HDR_PHYSICAL;
	r->header = header_json(meta);
	r->tail = &r->first;
	r->markers = json_array();
	r->sections = json_array();
	r->in_section = !r->opts.section;
	r->sizes = calloc(SIZE_TABLE_MAX, sizeof(*r->sizes));
	r->small_sizes = calloc(SMALL_SIZES, sizeof(*r->small_sizes));
	if (!r->sizes || !r->small_sizes ||
	    leak_top_init(&r->leaks, r->opts.max_leaks) < 0) {
		mt_recon_free(r);
		return NULL;
	}
	return r;
}

static void proc_free(struct proc *p)
{
	blocks_clear(&p->blocks);
	ranges_clear(&p->maps);
	free(p->heap.pts);
	free(p->mapped.pts);
	for (int g = 0; g < NGAUGES; g++)
		free(p->gauge_s[g].pts);
	free(p->leaks.v);
	for (size_t i = 0; i < p->nexecs; i++)
		free(p->execs[i].path);
	free(p->execs);
	free(p);
}

void mt_recon_free(struct mt_recon *r)
{
	if (!r)
		return;
	for (struct proc *p = r->first, *next; p; p = next) {
		next = p->next;
		proc_free(p);
	}
	free(r->pids);
	free(r->kept);
	free(r->heap.pts);
	free(r->mapped.pts);
	for (int g = 0; g < NGAUGES; g++)
		free(r->gauge_s[g].pts);
	free(r->sizes);
	free(r->small_sizes);
	free(r->leaks.v);
	json_decref(r->header);
	json_decref(r->markers);
	json_decref(r->sections);
	free(r);
}

/* ------------------------------------------------------------------ */
/* Output                                                               */

#define JI(x) json_integer((json_int_t)(x))

/*
 * The process objects are most of the document (a build starts tens of
 * thousands of processes), so their shape is written once, against an
 * emitter with two back ends: text in exactly jansson's format, which
 * mt_recon_write streams without building a tree per process, or a json_t
 * tree, for mt_recon_finish and the head of the document.
 */
#define EMIT_DEPTH 16
#define EMIT_BUF   (64 * 1024)

#define KEY_MAX 64 /* longer keys (none here) take the general path */

struct emit {
	FILE *out;    /* text to out; NULL: a json_t tree */
	size_t flags; /* jansson's dump flags */
	char *buf;    /* text not yet written */
	size_t len;
	int depth;	       /* containers open */
	bool flat;	       /* text with no indentation: see text_room */
	char sep[2], colon[2]; /* flat: "," or ", ", ":" or ": " */
	unsigned sep_len, colon_len;
	bool items[EMIT_DEPTH];	   /* text: the container has items */
	json_t *stack[EMIT_DEPTH]; /* tree: the containers */
};

/* A text emitter writing to out in jansson's format for flags. */
static struct emit emit_text(FILE *out, size_t flags)
{
	bool compact = flags & JSON_COMPACT;
	struct emit e = {.out = out,
			 .flags = flags,
			 .buf = malloc(EMIT_BUF),
			 .flat = !(flags & JSON_MAX_INDENT),
			 .sep = {',', ' '},
			 .colon = {':', ' '},
			 .sep_len = compact ? 1 : 2,
			 .colon_len = compact ? 1 : 2};

	return e;
}

/* A tree emitter adding to an existing object or array. */
static struct emit emit_into(json_t *container)
{
	return (struct emit){.depth = 1, .stack = {container}};
}

static void text_flush(struct emit *e)
{
	fwrite(e->buf, 1, e->len, e->out);
	e->len = 0;
}

/* Inline, so that the many puts of a byte or two are a store or two. */
static inline __attribute__((always_inline)) void
text_put(struct emit *e, const char *s, size_t n)
{
	if (e->len + n > EMIT_BUF) {
		text_flush(e);
		if (n > EMIT_BUF) {
			fwrite(s, 1, n, e->out);
			return;
		}
	}
	memcpy(e->buf + e->len, s, n);
	e->len += n;
}

/* A value as jansson writes it (strings, reals, booleans). */
static void text_json(struct emit *e, const json_t *v)
{
	char *s = json_dumps(v, e->flags | JSON_ENCODE_ANY);

	if (s)
		text_put(e, s, strlen(s));
	free(s);
}

/* A string jansson writes as it is: no quote, backslash or control
 * character, no slash or non-ASCII byte when the flags escape those.  The
 * strings here are valid UTF-8: exec paths made so by exec_path, the rest
 * literals. */
static bool text_plain(const struct emit *e, const char *s, size_t n)
{
	bool slash = e->flags & JSON_ESCAPE_SLASH;
	bool ascii = e->flags & JSON_ENSURE_ASCII;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c < 0x20 || c == '"' || c == '\\' || (slash && c == '/') ||
		    (ascii && c >= 0x80))
			return false;
	}
	return true;
}

/* Plain strings are copied; anything jansson would escape, it writes. */
static void text_string(struct emit *e, const char *s, size_t n)
{
	json_t *j;

	if (!text_plain(e, s, n)) {
		j = json_stringn(s, n);
		text_json(e, j);
		json_decref(j);
		return;
	}
	text_put(e, "\"", 1);
	text_put(e, s, n);
	text_put(e, "\"", 1);
}

/* jansson's dump_indent: a newline and depth indents, or in one-line
 * output a space where asked unless JSON_COMPACT. */
static void text_indent(struct emit *e, int depth, bool space)
{
	unsigned indent = e->flags & JSON_MAX_INDENT;

	if (indent) {
		text_put(e, "\n", 1);
		for (unsigned i = 0; i < depth * indent; i++)
			text_put(e, " ", 1);
	} else if (space && !(e->flags & JSON_COMPACT)) {
		text_put(e, " ", 1);
	}
}

/* A key and its separator.  The keys of the shapes below are this file's
 * literals, plain ASCII: copied as they are. */
static void text_key(struct emit *e, const char *key)
{
	size_t n = strlen(key);
	char *b;

	if (n > KEY_MAX) {
		text_string(e, key, n);
		text_put(e, ": ", e->flags & JSON_COMPACT ? 1 : 2);
		return;
	}
	if (e->len + n + 4 > EMIT_BUF)
		text_flush(e);
	b = e->buf + e->len;
	*b++ = '"';
	memcpy(b, key, n);
	b += n;
	*b++ = '"';
	*b++ = ':';
	if (!(e->flags & JSON_COMPACT))
		*b++ = ' ';
	e->len = b - e->buf;
}

/* Before a value: its separator and, in an object, its key. */
static void text_item(struct emit *e, const char *key)
{
	if (e->depth > 0) {
		if (e->items[e->depth - 1])
			text_put(e, ",", 1);
		text_indent(e, e->depth, e->items[e->depth - 1]);
		e->items[e->depth - 1] = true;
	}
	if (key)
		text_key(e, key);
}

/* Tree: v under key in the open object, or appended to the open array
 * (v is taken, as by json_object_set_new). */
static void tree_add(struct emit *e, const char *key, json_t *v)
{
	json_t *top = e->stack[e->depth - 1];

	if (key)
		json_object_set_new(top, key, v);
	else
		json_array_append_new(top, v);
}

/* n bytes of key (n <= KEY_MAX) to dst: a few wide moves, not a call */
static inline void copy_key(char *dst, const char *key, size_t n)
{
	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8)
			memcpy(dst + i, key + i, 8);
		memcpy(dst + n - 8, key + n - 8, 8); /* the tail, overlapping */
	} else if (n >= 4) {
		memcpy(dst, key, 4);
		memcpy(dst + n - 4, key + n - 4, 4);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = key[i];
	}
}

/*
 * Text: the separator and key of an item, and room for size more bytes
 * after them; returns where its value goes (the caller moves e->len past
 * it).  Flat output, where the document is most of its bytes, takes one
 * check for room and a few stores; indented output and the top level go
 * through text_item.
 */
static inline char *text_room(struct emit *e, const char *key, size_t klen,
			      size_t size)
{
	char *b;

	if (!e->flat || !e->depth || klen > KEY_MAX) {
		text_item(e, key);
		if (e->len + size > EMIT_BUF)
			text_flush(e);
		return e->buf + e->len;
	}
	if (e->len + 2 + KEY_MAX + 4 + size > EMIT_BUF)
		text_flush(e);
	b = e->buf + e->len;
	if (e->items[e->depth - 1]) {
		memcpy(b, e->sep, 2);
		b += e->sep_len;
	}
	e->items[e->depth - 1] = true;
	if (key) {
		*b++ = '"';
		copy_key(b, key, klen);
		b += klen;
		*b++ = '"';
		memcpy(b, e->colon, 2);
		b += e->colon_len;
	}
	return b;
}

static void emit_open_k(struct emit *e, const char *key, size_t klen,
			bool array)
{
	if (e->depth == EMIT_DEPTH)
		abort(); /* the shapes below are a few levels deep */
	if (e->out) {
		char *b = text_room(e, key, klen, 1);

		*b++ = array ? '[' : '{';
		e->len = b - e->buf;
		e->items[e->depth++] = false;
		return;
	}
	json_t *c = array ? json_array() : json_object();

	if (e->depth)
		tree_add(e, key, c);
	e->stack[e->depth++] = c;
}

static void emit_close(struct emit *e, bool array)
{
	e->depth--;
	if (!e->out)
		return;
	if (e->items[e->depth] && !e->flat)
		text_indent(e, e->depth, false);
	text_put(e, array ? "]" : "}", 1);
}

static void emit_int_k(struct emit *e, const char *key, size_t klen,
		       json_int_t v)
{
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	unsigned n = mt_decimal_len(u);
	char *b;

	if (!e->out) {
		tree_add(e, key, json_integer(v));
		return;
	}
	b = text_room(e, key, klen, n + 1);
	if (v < 0)
		*b++ = '-';
	mt_put_decimal(b, u, n);
	e->len = b + n - e->buf;
}

static void emit_null_k(struct emit *e, const char *key, size_t klen)
{
	char *b;

	if (!e->out) {
		tree_add(e, key, json_null());
		return;
	}
	b = text_room(e, key, klen, 4);
	memcpy(b, "null", 4);
	e->len = b + 4 - e->buf;
}

/* A string of n bytes, valid UTF-8 (NUL bytes included). */
static void emit_strn_k(struct emit *e, const char *key, size_t klen,
			const char *s, size_t n)
{
	if (!e->out) {
		tree_add(e, key, json_stringn(s, n));
		return;
	}
	e->len = text_room(e, key, klen, 0) - e->buf;
	text_string(e, s, n);
}

/*
 * The keys below are literals: these wrappers, inlined, measure them when
 * compiling (strlen of a literal is a constant), so that writing a key
 * is a copy of known length.
 */
#define KEY_LEN(key) ((key) ? strlen(key) : 0)

static inline __attribute__((always_inline)) void
emit_open(struct emit *e, const char *key, bool array)
{
	emit_open_k(e, key, KEY_LEN(key), array);
}

static inline __attribute__((always_inline)) void
emit_int(struct emit *e, const char *key, json_int_t v)
{
	emit_int_k(e, key, KEY_LEN(key), v);
}

static inline __attribute__((always_inline)) void emit_null(struct emit *e,
							    const char *key)
{
	emit_null_k(e, key, KEY_LEN(key));
}

static inline __attribute__((always_inline)) void
emit_strn(struct emit *e, const char *key, const char *s, size_t n)
{
	emit_strn_k(e, key, KEY_LEN(key), s, n);
}

static inline __attribute__((always_inline)) void
emit_str(struct emit *e, const char *key, const char *s)
{
	emit_strn_k(e, key, KEY_LEN(key), s, strlen(s));
}

/*
 * A real as jansson writes it: "%.*g" at the flags' precision (17 when
 * none), ".0" added when that reads as an integer, and the exponent
 * without "+" or leading zeros.  Formatting it here saves a json_t and a
 * json_dumps per process; test_write_is_jansson holds it to jansson's.
 */
static size_t real_text(char *out, size_t size, double x, size_t flags)
{
	int precision = (int)((flags >> 11) & 0x1F);
	int n = snprintf(out, size, "%.*g", precision ? precision : 17, x);
	char *exp, *digits;
	size_t len;

	if (n < 0 || (size_t)n + 3 > size)
		return 0;
	len = (size_t)n;
	if (!memchr(out, '.', len) && !memchr(out, 'e', len)) {
		memcpy(out + len, ".0", 3);
		len += 2;
	}
	exp = memchr(out, 'e', len);
	if (exp) {
		char *sign = exp + 1;

		digits = sign + (*sign == '-' || *sign == '+');
		if (*sign == '-')
			sign++; /* keep the minus */
		while (*digits == '0' && digits[1])
			digits++;
		memmove(sign, digits, out + len + 1 - digits);
		len -= digits - sign;
	}
	return len;
}

/* A real, or nothing when json_real refuses it (NaN, infinity). */
static void emit_real(struct emit *e, const char *key, double x)
{
	char text[40];
	size_t n;
	char *b;

	if (!isfinite(x))
		return;
	if (!e->out) {
		tree_add(e, key, json_real(x));
		return;
	}
	n = real_text(text, sizeof(text), x, e->flags);
	if (!n)
		return;
	b = text_room(e, key, KEY_LEN(key), n);
	memcpy(b, text, n);
	e->len = b + n - e->buf;
}

static void series_emit(struct emit *e, const char *key, const struct series *s,
			const struct series_cfg *cfg, bool with_points)
{
	emit_open(e, key, false);
	emit_int(e, "peak", s->peak);
	if (s->peak)
		emit_int(e, "peak_t_ns", s->peak_t);
	else
		emit_null(e, "peak_t_ns");
	emit_int(e, "final", s->cur);
	if (with_points) {
		uint64_t width = series_width(s, cfg);

		emit_int(e, "bucket_ns", width);
		emit_open(e, "points", true);
		for (size_t i = 0; i < s->n; i++) {
			const struct point *q =
			    i + 1 < s->n ? &s->pts[i] : &s->tail;

			emit_open(e, NULL, true);
			emit_int(e, NULL, q->idx * width);
			emit_int(e, NULL, q->max);
			emit_int(e, NULL, q->last);
			emit_close(e, true);
		}
		emit_close(e, true);
	}
	emit_close(e, false);
}

static void totals_add(struct totals *sum, const struct totals *t)
{
	const uint64_t *src = (const uint64_t *)t;
	uint64_t *dst = (uint64_t *)sum;

	for (size_t i = 0; i < sizeof(*t) / sizeof(uint64_t); i++)
		dst[i] += src[i];
}

static void totals_emit(struct emit *e, const char *key, const struct totals *t)
{
	emit_open(e, key, false);
	emit_int(e, "allocated_bytes", t->allocated_bytes);
	emit_int(e, "allocations", t->allocations);
	emit_open(e, "calls", false);
	emit_int(e, "malloc", t->mallocs);
	emit_int(e, "calloc", t->callocs);
	emit_int(e, "realloc", t->reallocs);
	emit_int(e, "aligned_alloc", t->aligned_allocs);
	emit_int(e, "free", t->frees + t->unknown_frees);
	emit_close(e, false);
	emit_int(e, "frees", t->frees);
	emit_int(e, "freed_bytes", t->freed_bytes);
	emit_int(e, "reallocs", t->reallocs);
	if (t->allocations)
		emit_real(e, "average_size",
			  (double)t->allocated_bytes / (double)t->allocations);
	else
		emit_null(e, "average_size");
	emit_int(e, "unknown_frees", t->unknown_frees);
	emit_int(e, "unknown_reallocs", t->unknown_reallocs);
	emit_int(e, "failed_allocations", t->failed_allocations);
	emit_int(e, "reused_addresses", t->reused_addresses);
	emit_close(e, false);
}

static int leak_cmp(const void *a, const void *b)
{
	const struct leak *x = a, *y = b;

	return leak_before(x, y) ? -1 : leak_before(y, x);
}

static void leaks_emit(struct emit *e, const char *key, struct leak_top *lt,
		       bool with_pid)
{
	qsort(lt->v, lt->n, sizeof(*lt->v), leak_cmp);
	emit_open(e, key, false);
	emit_int(e, "count", lt->count);
	emit_int(e, "bytes", lt->bytes);
	emit_open(e, "blocks", true);
	for (size_t i = 0; i < lt->n; i++) {
		const struct leak *lk = &lt->v[i];

		emit_open(e, NULL, false);
		emit_int(e, "addr", lk->addr);
		emit_int(e, "size", lk->size);
		emit_int(e, "first_seen_ns", lk->first_t);
		emit_str(e, "at", lk->at);
		emit_int(e, "at_ns", lk->at_t);
		if (with_pid)
			emit_int(e, "pid", lk->pid);
		emit_close(e, false);
	}
	emit_close(e, true);
	emit_int(e, "blocks_listed_max", lt->cap);
	emit_close(e, false);
}

static void exit_emit(struct emit *e, const char *key, int kind, int value)
{
	if (kind != MT_EXIT_CODE && kind != MT_EXIT_SIGNAL) {
		emit_null(e, key);
		return;
	}
	emit_open(e, key, false);
	emit_int(e, kind == MT_EXIT_CODE ? "code" : "signal", value);
	emit_close(e, false);
}

static void gauges_emit(struct emit *e, const char *key,
			const struct mt_recon *r, const struct series *s,
			const struct series_cfg *cfg, bool points,
			bool physical)
{
	static const struct {
		const char *name;
		enum gauge g;
	} rss[] = {{"total", G_RSS_TOTAL},
		   {"anon", G_RSS_ANON},
		   {"file", G_RSS_FILE},
		   {"shmem", G_RSS_SHMEM},
		   {"swap", G_RSS_SWAP}},
	  pss[] = {{"total", G_PSS_TOTAL},
		   {"anon", G_PSS_ANON},
		   {"file", G_PSS_FILE},
		   {"shmem", G_PSS_SHMEM}};
	size_t n = physical ? 4 : 5;

	if (!(physical ? r->have_physical : r->have_rss)) {
		emit_null(e, key);
		return;
	}
	emit_open(e, key, false);
	for (size_t i = 0; i < n; i++) {
		const char *name = physical ? pss[i].name : rss[i].name;
		enum gauge g = physical ? pss[i].g : rss[i].g;

		series_emit(e, name, &s[g], cfg, points);
	}
	emit_close(e, false);
}

static void execs_emit(struct emit *e, const char *key, const struct proc *p)
{
	emit_open(e, key, true);
	for (size_t i = 0; i < p->nexecs; i++) {
		emit_open(e, NULL, false);
		emit_strn(e, "path", p->execs[i].path, p->execs[i].len);
		emit_int(e, "t_ns", p->execs[i].t);
		emit_close(e, false);
	}
	emit_close(e, true);
}

static void proc_emit(struct emit *e, struct mt_recon *r, struct proc *p)
{
	bool pts = p->with_series;

	emit_open(e, NULL, false);
	emit_int(e, "pid", p->pid);
	if (p->has_ppid)
		emit_int(e, "ppid", p->ppid);
	else
		emit_null(e, "ppid");
	execs_emit(e, "execs", p);
	emit_int(e, "start_ns", p->start_t);
	if (p->ended)
		emit_int(e, "end_ns", p->end_t);
	else
		emit_null(e, "end_ns");
	exit_emit(e, "exit", p->exit_kind, p->exit_value);
	emit_int(e, "events", p->events);
	series_emit(e, "heap", &p->heap, &r->pcfg, pts);
	series_emit(e, "mapped", &p->mapped, &r->pcfg, pts);
	gauges_emit(e, "rss", r, p->gauge_s, &r->pcfg, pts, false);
	gauges_emit(e, "physical", r, p->gauge_s, &r->pcfg, pts, true);
	totals_emit(e, "totals", &p->tot);
	leaks_emit(e, "leaks", &p->leaks, false);
	emit_close(e, false);
}

static json_t *histogram_json(const struct mt_recon *r)
{
	json_t *a = json_array();

	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		if (!r->hist_count[b])
			continue;
		uint64_t lo = b ? 1ull << (b - 1) : 0;
		uint64_t hi = b ? (b == 64 ? ~0ull : (1ull << b) - 1) : 0;

		json_array_append_new(
		    a, json_pack("{s:I, s:I, s:I, s:I}", "from", (json_int_t)lo,
				 "to", (json_int_t)hi, "count",
				 (json_int_t)r->hist_count[b], "bytes",
				 (json_int_t)r->hist_bytes[b]));
	}
	return a;
}

static int size_cmp(const void *a, const void *b)
{
	const struct size_slot *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->size < y->size ? -1 : x->size > y->size;
}

static json_t *top_sizes_json(struct mt_recon *r)
{
	json_t *o = json_object(), *a = json_array();
	size_t n = 0;

	/* compact the table in place and add the small sizes after (at most
	 * SIZE_TABLE_MAX / 2 in all): finish runs once, nothing counts sizes
	 * after it */
	for (size_t i = 0; i < SIZE_TABLE_MAX; i++)
		if (r->sizes[i].size)
			r->sizes[n++] = r->sizes[i];
	for (uint64_t size = 0; size < SMALL_SIZES; size++)
		if (r->small_sizes[size])
			r->sizes[n++] =
			    (struct size_slot){size + 1, r->small_sizes[size]};
	qsort(r->sizes, n, sizeof(*r->sizes), size_cmp);
	for (size_t i = 0; i < n && i < r->opts.top_sizes; i++)
		json_array_append_new(
		    a, json_pack("{s:I, s:I}", "size",
				 (json_int_t)(r->sizes[i].size - 1), "count",
				 (json_int_t)r->sizes[i].count));
	json_object_set_new(o, "sizes", a);
	json_object_set_new(o, "distinct_tracked", JI(n));
	json_object_set_new(o, "distinct_max", JI(SIZE_TABLE_MAX / 2));
	json_object_set_new(o, "untracked_allocations", JI(r->sizes_untracked));
	return o;
}

static json_t *kinds_json(const struct mt_recon *r)
{
	json_t *o = json_object();

	for (unsigned k = 0; k <= MT_EV_KIND_MAX; k++) {
		if (!r->by_kind[k])
			continue;
		const char *name = k < MT_EV_KIND_MAX ? mt_kind_name(k) : NULL;
		char tmp[32];

		if (!name) {
			snprintf(tmp, sizeof(tmp), "kind%u", k);
			name = tmp;
		}
		json_object_set_new(o, name, JI(r->by_kind[k]));
	}
	return o;
}

/* The header says so; memtrack always tracks them; and a trace that has
 * allocator events did track them, whatever an old header says. */
static bool allocators_tracked(const struct mt_recon *r)
{
	if (r->fmt == MT_FMT_MEMTRACK || !r->fmt ||
	    (r->meta.flags & MT_HDR_ALLOCATORS))
		return true;
	for (unsigned k = MT_EV_MALLOC; k <= MT_EV_ALIGNED_ALLOC; k++)
		if (r->by_kind[k])
			return true;
	return false;
}

static const char *resolution_name(enum mt_resolution_mode m)
{
	return m == MT_RES_FIXED   ? "fixed"
	       : m == MT_RES_EXACT ? "exact"
				   : "adaptive";
}

static int heavier_first(const void *a, const void *b)
{
	return proc_cmp(*(struct proc *const *)a, *(struct proc *const *)b);
}

/* Per-process series are written for the heaviest processes only: a
 * build can start thousands of short processes nobody plots. */
static void mark_heaviest(struct mt_recon *r)
{
	struct proc **v = calloc(r->nprocs ? r->nprocs : 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		return;
	for (struct proc *p = r->first; p; p = p->next)
		v[n++] = p;
	qsort(v, n, sizeof(*v), heavier_first);
	for (size_t i = 0; i < n; i++) {
		v[i]->rank = i;
		v[i]->with_series = i < r->opts.series_procs;
	}
	free(v);
}

/* End of trace: what is still live is live at the end.  Then everything
 * but the "processes" array, which callers add or stream. */
static json_t *finish_head(struct mt_recon *r, const struct mt_meta *meta,
			   const char *error)
{
	json_t *doc = json_object(), *in, *tree;
	struct emit e = emit_into(doc);
	struct totals sum = {0};
	uint64_t end_t;
	bool trailer = meta && meta->has_trailer;
	bool complete = !error && (trailer || r->fmt == MT_FMT_MEMTRACK);
	size_t nprocs = 0;

	if (trailer && meta->end_monotonic_ns > r->origin)
		end_t = meta->end_monotonic_ns - r->origin;
	else
		end_t = r->last_t > r->origin ? r->last_t - r->origin : 0;
	if (r->opts.section)
		section_end(r, end_t);
	for (struct proc *p = r->first; p; p = p->next)
		if (!p->ended)
			end_address_space(r, p, end_t, "end");
	mark_heaviest(r);
	for (struct proc *p = r->first; p; p = p->next) {
		totals_add(&sum, &p->tot);
		nprocs++;
	}

	json_object_set_new(doc, "format", json_string(MT_TIMELINES_FORMAT));
	json_object_set_new(doc, "version", JI(MT_TIMELINES_VERSION));
	in = json_object();
	json_object_set_new(in, "format", json_string(mt_format_name(r->fmt)));
	json_object_set_new(in, "complete", json_boolean(complete));
	json_object_set_new(in, "has_trailer", json_boolean(trailer));
	json_object_set_new(in, "error",
			    error ? json_string(error) : json_null());
	json_object_set_new(doc, "input", in);
	json_object_update(doc, r->header);
	json_object_set_new(doc, "root_pid",
			    r->meta.root_pid ? JI(r->meta.root_pid)
					     : json_null());
	json_object_set_new(doc, "page_size",
			    r->meta.page_size ? JI(r->meta.page_size)
					      : json_null());
	json_object_set_new(doc, "start_time_ns",
			    r->meta.start_realtime_ns
				? JI(r->meta.start_realtime_ns)
				: json_null());
	json_object_set_new(doc, "start_monotonic_ns", JI(r->origin));
	json_object_set_new(doc, "duration_ns", JI(end_t));
	if (trailer)
		exit_emit(&e, "exit", (int)meta->exit_kind, meta->exit_value);
	else
		emit_null(&e, "exit");
	json_object_set_new(doc, "allocators_tracked",
			    json_boolean(allocators_tracked(r)));
	json_object_set_new(doc, "events", JI(r->events));
	json_object_set_new(doc, "events_by_type", kinds_json(r));
	json_object_set_new(doc, "lost_events",
			    JI(meta && meta->lost > r->lost_events
				   ? meta->lost
				   : r->lost_events));
	json_object_set_new(
	    doc, "resolution",
	    json_pack("{s:s, s:I, s:I}", "mode", resolution_name(r->cfg.mode),
		      "bucket_ns", (json_int_t)series_width(&r->heap, &r->cfg),
		      "max_points",
		      (json_int_t)(r->cfg.mode == MT_RES_ADAPTIVE
				       ? r->cfg.max_points
				       : 0)));
	json_object_set_new(doc, "processes_count", JI(nprocs));

	tree = json_object();
	e = emit_into(tree);
	series_emit(&e, "heap", &r->heap, &r->cfg, true);
	series_emit(&e, "mapped", &r->mapped, &r->cfg, true);
	gauges_emit(&e, "rss", r, r->gauge_s, &r->cfg, true, false);
	gauges_emit(&e, "physical", r, r->gauge_s, &r->cfg, true, true);
	totals_emit(&e, "totals", &sum);
	leaks_emit(&e, "leaks", &r->leaks, true);
	json_object_set_new(tree, "histogram", histogram_json(r));
	json_object_set_new(tree, "top_sizes", top_sizes_json(r));
	json_object_set_new(doc, "tree", tree);
	json_object_set_new(doc, "markers", json_incref(r->markers));
	json_object_set_new(doc, "section",
			    r->opts.section
				? json_pack("{s:s, s:O, s:I}", "name",
					    r->opts.section, "intervals",
					    r->sections, "duration_ns",
					    (json_int_t)r->section_ns)
				: json_null());
	return doc;
}

bool mt_recon_section_seen(const struct mt_recon *r)
{
	return r->in_section || json_array_size(r->sections) > 0;
}

json_t *mt_recon_finish(struct mt_recon *r, const struct mt_meta *meta,
			const char *error)
{
	json_t *doc = finish_head(r, meta, error), *procs = json_array();
	struct emit e = emit_into(procs);

	for (struct proc *p = r->first; p; p = p->next)
		if (!r->opts.doc_procs || p->rank < r->opts.doc_procs)
			proc_emit(&e, r, p);
	json_object_set_new(doc, "processes", procs);
	return doc;
}

int mt_recon_write(struct mt_recon *r, const struct mt_meta *meta,
		   const char *error, FILE *out, size_t flags)
{
	json_t *head = finish_head(r, meta, error);
	char *text = json_dumps(head, flags);
	struct emit e = emit_text(out, flags);
	size_t len;

	json_decref(head);
	if (!text || !e.buf) {
		free(text);
		free(e.buf);
		return -1;
	}
	/* reopen the object: drop its closing brace */
	len = strlen(text);
	while (len > 0 && text[len - 1] != '}')
		len--;
	fwrite(text, 1, len ? len - 1 : 0, out);
	free(text);
	fputs(",\"processes\":[", out);
	for (struct proc *p = r->first; p; p = p->next) {
		if (p != r->first)
			text_put(&e, ",", 1);
		proc_emit(&e, r, p);
	}
	text_flush(&e);
	free(e.buf);
	fputs("]}\n", out);
	return ferror(out) ? -1 : 0;
}

json_t *mt_recon_input(struct mt_input *in, const struct mt_recon_opts *opts,
		       bool *complete)
{
	struct mt_recon *r =
	    mt_recon_new(opts, mt_input_meta(in), mt_input_format(in));
	int rc;
	json_t *doc;

	if (!r)
		return NULL;
	rc = mt_recon_read(r, in);
	doc = mt_recon_finish(r, mt_input_meta(in),
			      rc < 0 ? mt_input_error(in) : NULL);
	mt_recon_free(r);
	if (complete && doc)
		*complete = json_is_true(
		    json_object_get(json_object_get(doc, "input"), "complete"));
	return doc;
}
