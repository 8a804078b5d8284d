// SPDX-License-Identifier: MIT
/*
 * reconstruct.c - from events to timelines, totals and leaks: the model
 * and its per-event path.
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
 *
 * recon_int.h lists the files of the other concerns.
 */
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

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
			if (r->sites_on)
				mt_sites_release(r->sites, MT_SITES_HEAP,
						 b->stack, b->size);
		}
	} else {
		p->blocks.used++;
	}
	if (r->in_section) {
		*b = (struct block){addr, size, t, (uint32_t)r->cur_stack,
				    r->cur_tid};
		temp_allocated(r, r->cur_tid, addr);
		if (r->sites_on)
			mt_sites_alloc(r->sites, MT_SITES_HEAP, r->cur_stack,
				       size, true);
		p->heap_own += size;
		r->tree_heap += size;
	} else {
		*b = (struct block){addr, size | OUTSIDE, t,
				    (uint32_t)r->cur_stack};
	}
	heap_changed(r, p, t); /* also when a reused address fell out */
}

/* Returns the bytes released, or -1 when addr was not live; t: now */
static int64_t heap_release(struct mt_recon *r, struct proc *p, uint64_t addr,
			    uint64_t t)
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
	lifetime_count(r, t > b->t ? t - b->t : 0, size);
	if (temp_released(r, b->tid, addr)) {
		p->tot.temporary++;
		if (r->sites_on)
			mt_sites_temporary(r->sites, b->stack);
	}
	if (r->sites_on) {
		mt_sites_release(r->sites, MT_SITES_HEAP, b->stack, size);
		mt_sites_lifetime(r->sites, b->stack, t > b->t ? t - b->t : 0);
	}
	blocks_remove(&p->blocks, b);
	return (int64_t)size;
}

static void on_free(struct mt_recon *r, struct proc *p, uint64_t addr,
		    uint64_t t)
{
	int64_t released;

	if (!addr)
		return; /* free(NULL) does nothing */
	released = heap_release(r, p, addr, t);
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
		int64_t released = heap_release(r, p, ev->old_addr, t);

		if (r->in_section && released < 0) {
			p->tot.unknown_reallocs++;
		} else if (r->in_section) {
			p->tot.realloc_frees++;
			p->tot.freed_bytes += (uint64_t)released;
		}
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

/* mt-trace's own mappings in p now (the ranges marked tracer), and at
 * most */
static void tracer_mapped(struct proc *p)
{
	struct proc_sum *s = p->sum;

	s->tracer_live = p->maps.tracer_bytes;
	if (s->tracer_live > s->tracer_mapped)
		s->tracer_mapped = s->tracer_live;
}

/* mremap is taken as realloc is: the old range released from its site,
 * the new one (all of it) allocated by the mremap's stack. */
static void on_mapping(struct mt_recon *r, struct proc *p,
		       const struct mt_event *ev, uint64_t t)
{
	uint64_t before = p->maps.own_bytes;
	struct mt_sites *sites = r->sites_on ? r->sites : NULL;
	uint32_t stack = (uint32_t)r->cur_stack;

	switch (ev->kind) {
	case MT_EV_MMAP:
		/* mt-trace's own (the --fast recorder's rings, its library,
		 * its walk state): kept to be unmapped as any, counted
		 * apart, never as the program's */
		ranges_add(&p->maps, ev->addr, ev->addr + page_up(r, ev->size),
			   !r->in_section, ev->flags & MT_MMAP_TRACER, stack,
			   sites);
		break;
	case MT_EV_MUNMAP:
		ranges_remove(&p->maps, ev->addr,
			      ev->addr + page_up(r, ev->size), sites);
		break;
	case MT_EV_MREMAP:
		ranges_remove(&p->maps, ev->old_addr,
			      ev->old_addr + page_up(r, ev->old_size), sites);
		ranges_add(&p->maps, ev->addr, ev->addr + page_up(r, ev->size),
			   !r->in_section, false, stack, sites);
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
				   !r->in_section, false, stack, sites);
		else if (brk < old)
			ranges_remove(&p->maps, page_up(r, brk),
				      page_up(r, old), sites);
		break;
	}
	}
	mapped_changed(r, p, before, t);
	tracer_mapped(p);
}

/* ------------------------------------------------------------------ */
/* RSS and physical memory                                              */

void gauge_set(struct mt_recon *r, struct proc *p, enum gauge g, uint64_t v,
	       uint64_t t)
{
	struct series *s = proc_gauge_s(p, g);

	if (!s) { /* a PSS gauge, the process's first */
		p->pss_s = calloc(NGAUGES - G_PSS_TOTAL, sizeof(*p->pss_s));
		if (!p->pss_s)
			return; /* out of memory: the sample goes unseen */
		s = proc_gauge_s(p, g);
	}
	if (p->gauge[g] == v && s->n)
		return;
	r->gauge[g] += v - p->gauge[g]; /* wraps correctly when lower */
	p->gauge[g] = v;
	track(r, s, &r->pcfg, t, v);
	track(r, &r->gauge_s[g], &r->cfg, t, r->gauge[g]);
}

/* The tracer's resident bytes in p now (swap is not resident). */
static void tracer_rss_changed(struct proc *p)
{
	uint64_t now = p->tracer_rss[G_RSS_FILE] + p->tracer_rss[G_RSS_ANON] +
		       p->tracer_rss[G_RSS_SHMEM];

	if (now > p->sum->tracer_rss)
		p->sum->tracer_rss = now;
}

/*
 * A counter's new value holds the program's pages and the tracer's: a
 * change the tracer made (MT_RSS_TRACER: a page fault in the recorder's
 * memory or code) leaves the program's part where it was and is the
 * tracer's; any other is the program's.  A counter below the part that
 * is not changing lost pages of both (reclaim, exit): the other part
 * gives them back first, never going below zero.
 */
static void on_rss(struct mt_recon *r, struct proc *p,
		   const struct mt_event *ev, uint64_t t)
{
	uint64_t v = ev->size, *tracer, program;

	if (ev->aux > G_RSS_SHMEM)
		return;
	r->have_rss = true;
	tracer = &p->tracer_rss[ev->aux];
	program = p->gauge[ev->aux];
	if (ev->flags & MT_RSS_TRACER) {
		*tracer = v > program ? v - program : 0;
		program = v < program ? v : program;
	} else {
		*tracer = v < *tracer ? v : *tracer;
		program = v - *tracer;
	}
	tracer_rss_changed(p);
	gauge_set(r, p, (enum gauge)ev->aux, program, t);
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
void gauges_reset(struct mt_recon *r, struct proc *p, uint64_t t)
{
	for (int g = 0; g < NGAUGES; g++)
		if (p->gauge[g])
			gauge_set(r, p, (enum gauge)g, 0, t);
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
	if (ev->kind == MT_EV_STACK || ev->kind == MT_EV_CODE_FILE ||
	    ev->kind == MT_EV_PYCODE) {
		/* sites count from the first stack on (a trace with stacks
		 * describes one before its first allocation): what is live
		 * before is the no-stack site's */
		if (!r->sites_on && ev->kind == MT_EV_STACK) {
			r->sites_on = true;
			mt_sites_alloc(r->sites, MT_SITES_HEAP, 0, r->tree_heap,
				       false);
			mt_sites_alloc(r->sites, MT_SITES_MAPPED, 0,
				       r->tree_mapped, false);
		}
		mt_sites_describe(r->sites, rec);
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
	r->cur_stack = rec->stack;
	r->cur_tid = ev->tid;
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
	if (ev->kind == MT_EV_RSS && ev->aux <= G_RSS_SHMEM) {
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
	uint64_t records = 0;
	int rc;

	for (;;) {
		struct mt_record *x = &ring[(head + n) & (RING - 1)];

		rc = mt_input_next(in, x);
		if (rc <= 0)
			break;
		if (++records % MT_RECON_PROGRESS_EVERY == 0 &&
		    r->opts.progress)
			r->opts.progress(r->opts.progress_arg, in, records);
		/* strings and frames are valid only until the next read:
		 * apply now */
		if (x->str || x->ev.kind == MT_EV_STACK) {
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
	r->sites = mt_sites_new();
	if (!r->sizes || !r->small_sizes || !r->sites ||
	    leak_top_init(&r->leaks, r->opts.max_leaks) < 0) {
		mt_recon_free(r);
		return NULL;
	}
	return r;
}

void mt_recon_free(struct mt_recon *r)
{
	if (!r)
		return;
	for (struct proc_sum *p = r->first, *next; p; p = next) {
		next = p->next;
		proc_free(p);
	}
	free(r->pids);
	free(r->kept);
	mt_sites_free(r->sites);
	temp_free(r);
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
