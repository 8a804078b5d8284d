// SPDX-License-Identifier: MIT
/*
 * recon_doc.c - the timelines document (man/mt-format.5, TIMELINES): its
 * head (input, header, totals, the tree's series, histogram, sizes,
 * markers, section) and one object per process, written through the
 * emitter (recon_emit.h) as a json_t tree or streamed as text.
 */
#include <stdlib.h>
#include <string.h>

#include "mt_human.h"
#include "recon_emit.h"
#include "recon_int.h"

#define JI(x) json_integer((json_int_t)(x))

/* A series: its level, and its points unless s is NULL. */
static void series_emit(struct emit *e, const char *key, const struct level *lv,
			const struct series *s, const struct series_cfg *cfg)
{
	emit_open(e, key, false);
	emit_int(e, "peak", lv->peak);
	if (lv->peak)
		emit_int(e, "peak_t_ns", lv->peak_t);
	else
		emit_null(e, "peak_t_ns");
	emit_int(e, "final", lv->cur);
	if (s) {
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
	emit_int(e, "temporary", t->temporary);
	emit_int(e, "realloc_frees", t->realloc_frees);
	emit_close(e, false);
}

static void leaks_emit(struct emit *e, const char *key, struct leak_top *lt,
		       bool with_pid)
{
	leak_top_sort(lt);
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

/* lv[g], s[g]: the level and the series of gauge g; s NULL: no points */
static void gauges_emit(struct emit *e, const char *key,
			const struct mt_recon *r,
			const struct level lv[NGAUGES],
			const struct series *const s[NGAUGES],
			const struct series_cfg *cfg, bool physical)
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

		series_emit(e, name, &lv[g], s ? s[g] : NULL, cfg);
	}
	emit_close(e, false);
}

/* "argv": [...] of a program's arguments (struct cmdline) */
static void argv_emit(struct emit *e, const struct cmdline *c)
{
	emit_open(e, "argv", true);
	for (size_t i = 0; i < c->len;) {
		size_t one = strlen(c->args + i);

		emit_strn(e, NULL, c->args + i, one);
		i += one + 1;
	}
	emit_close(e, true);
}

static void execs_emit(struct emit *e, const char *key,
		       const struct proc_sum *p)
{
	emit_open(e, key, true);
	for (size_t i = 0; i < p->nexecs; i++) {
		emit_open(e, NULL, false);
		emit_strn(e, "path", p->execs[i].path, p->execs[i].len);
		if (p->execs[i].cmd.args) {
			argv_emit(e, &p->execs[i].cmd);
			emit_bool(e, "argv_cut", p->execs[i].cmd.cut);
		}
		emit_int(e, "t_ns", p->execs[i].t);
		emit_close(e, false);
	}
	emit_close(e, true);
}

/* The root process without an exec of its own runs the command: the
 * header's, as a struct cmdline (args NULL when there is none). */
static struct cmdline header_cmdline(const struct mt_recon *r)
{
	json_t *cmd = json_object_get(r->header, "command"), *v;
	struct cmdline c = {0};
	size_t i, n = 0;

	json_array_foreach(cmd, i, v) n += json_string_length(v) + 1;
	if (!json_array_size(cmd) || !(c.args = malloc(n)))
		return c;
	json_array_foreach(cmd, i, v)
	{
		/* a NUL inside would split it: cut there, as exec would */
		const char *s =
		    json_string_value(v) ? json_string_value(v) : "";
		size_t len = strnlen(s, json_string_length(v));

		memcpy(c.args + c.len, s, len);
		c.len += len;
		c.args[c.len++] = '\0';
	}
	return c;
}

/*
 * "argv", "argv_cut" and "command_line" of what the process runs
 * (proc_cmdline; for the root process without an exec, the command), or
 * nulls when its arguments are not known (a trace of mt 0.4 or earlier).
 */
static void cmdline_emit(struct emit *e, const struct mt_recon *r,
			 const struct proc_sum *p)
{
	const struct cmdline *c = proc_cmdline(p);
	struct cmdline root = {0};
	const char **argv;
	size_t *lens, n = 0;
	char *text = NULL;

	if (!c && !p->nexecs && !p->program && r->meta.root_pid &&
	    p->pid == r->meta.root_pid) {
		root = header_cmdline(r);
		c = root.args ? &root : NULL;
	}
	for (size_t i = 0; c && i < c->len; i += strlen(c->args + i) + 1)
		n++;
	argv = calloc(n + 1, sizeof(*argv));
	lens = calloc(n + 1, sizeof(*lens));
	for (size_t i = 0, k = 0; c && argv && lens && i < c->len; k++) {
		argv[k] = c->args + i;
		lens[k] = strlen(argv[k]);
		i += lens[k] + 1;
	}
	if (c && argv && lens)
		text = mt_shell_quote(argv, lens, n);
	if (text) {
		argv_emit(e, c);
		emit_bool(e, "argv_cut", c->cut);
		emit_str(e, "command_line", text);
	} else {
		emit_null(e, "argv");
		emit_null(e, "argv_cut");
		emit_null(e, "command_line");
	}
	free(text);
	free(argv);
	free(lens);
	free(root.args);
}

/* "program": what the process runs (proc_program), or null */
static void program_emit(struct emit *e, const struct mt_recon *r,
			 const struct proc_sum *p)
{
	size_t len;
	const char *program = proc_program(r, p, &len);

	if (program)
		emit_strn(e, "program", program, len);
	else
		emit_null(e, "program");
}

static void proc_emit(struct emit *e, struct mt_recon *r, struct proc_sum *p)
{
	/* a PSS gauge the process never had reads as a series never set */
	static const struct series never;
	struct level lv[NGAUGES] = {0};
	const struct series *s[NGAUGES];
	/* the heaviest keep their model, with its series (keep_if_heavy) */
	struct proc *live = p->with_series ? p->live : NULL;

	for (int g = 0; g < NGAUGES; g++) {
		if (g < RSS_GAUGES)
			lv[g] = p->rss[g];
		else if (p->pss)
			lv[g] = p->pss[g - G_PSS_TOTAL];
		s[g] = live && proc_gauge_s(live, g) ? proc_gauge_s(live, g)
						     : &never;
	}
	emit_open(e, NULL, false);
	emit_int(e, "pid", p->pid);
	if (p->has_ppid)
		emit_int(e, "ppid", p->ppid);
	else
		emit_null(e, "ppid");
	execs_emit(e, "execs", p);
	program_emit(e, r, p);
	cmdline_emit(e, r, p);
	emit_int(e, "start_ns", p->start_t);
	if (p->ended)
		emit_int(e, "end_ns", p->end_t);
	else
		emit_null(e, "end_ns");
	exit_emit(e, "exit", p->exit_kind, p->exit_value);
	emit_int(e, "events", p->events);
	series_emit(e, "heap", &p->heap, live ? &live->heap : NULL, &r->pcfg);
	series_emit(e, "mapped", &p->mapped, live ? &live->mapped : NULL,
		    &r->pcfg);
	emit_int(e, "tracer_mapped", p->tracer_mapped);
	emit_int(e, "tracer_rss", p->tracer_rss);
	gauges_emit(e, "rss", r, lv, live ? s : NULL, &r->pcfg, false);
	gauges_emit(e, "physical", r, lv, live ? s : NULL, &r->pcfg, true);
	totals_emit(e, "totals", &p->tot);
	leaks_emit(e, "not_freed", &p->leaks, false);
	emit_close(e, false);
}

/* Heap blocks freed, by how long they lived: every bucket, "to_ns" the
 * next one's lower bound (null for the last). */
static json_t *lifetimes_json(const struct mt_recon *r)
{
	json_t *a = json_array();

	for (unsigned b = 0; b < LIFE_BUCKETS; b++)
		json_array_append_new(
		    a, json_pack(
			   "{s:I, s:o, s:I, s:I}", "from_ns",
			   (json_int_t)lifetime_from(b), "to_ns",
			   b + 1 < LIFE_BUCKETS
			       ? json_integer((json_int_t)lifetime_from(b + 1))
			       : json_null(),
			   "count", (json_int_t)r->life_count[b], "bytes",
			   (json_int_t)r->life_bytes[b]));
	return a;
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
	return proc_cmp(*(struct proc_sum *const *)a,
			*(struct proc_sum *const *)b);
}

/* Per-process series are written for the heaviest processes only: a
 * build can start thousands of short processes nobody plots. */
static void mark_heaviest(struct mt_recon *r)
{
	struct proc_sum **v = calloc(r->nprocs ? r->nprocs : 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		return;
	for (struct proc_sum *p = r->first; p; p = p->next)
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
	const struct series *tree_gauges[NGAUGES];
	struct level tree_levels[NGAUGES], heap_level, mapped_level;
	struct totals sum = {0};
	uint64_t end_t, tracer_mapped = 0, tracer_rss = 0;
	bool trailer = meta && meta->has_trailer;
	bool complete = !error && (trailer || r->fmt == MT_FMT_MEMTRACK);
	size_t nprocs = 0;

	if (trailer && meta->end_monotonic_ns > r->origin)
		end_t = meta->end_monotonic_ns - r->origin;
	else
		end_t = r->last_t > r->origin ? r->last_t - r->origin : 0;
	if (r->opts.section)
		section_end(r, end_t);
	for (struct proc_sum *p = r->first; p; p = p->next) {
		if (p->ended)
			continue;
		end_address_space(r, p->live, end_t, "end");
		proc_summarize(p->live);
	}
	mark_heaviest(r);
	for (struct proc_sum *p = r->first; p; p = p->next) {
		totals_add(&sum, &p->tot);
		tracer_mapped += p->tracer_mapped;
		tracer_rss += p->tracer_rss;
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
	/* how mt-trace recorded them: its header says (absent in a trace
	 * of another recorder, or without allocators) */
	if (r->fmt && r->fmt != MT_FMT_MEMTRACK &&
	    (r->meta.flags & MT_HDR_ALLOCATORS))
		json_object_set_new(doc, "allocator_recording",
				    json_string(r->meta.flags & MT_HDR_RECORDER
						    ? "recorder"
						    : "probes"));
	json_object_set_new(doc, "events", JI(r->events));
	json_object_set_new(doc, "events_by_type", kinds_json(r));
	json_object_set_new(doc, "lost_events",
			    JI(meta && meta->lost > r->lost_events
				   ? meta->lost
				   : r->lost_events));
	json_object_set_new(doc, "late_events", JI(r->late_events));
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
	heap_level = level_of(&r->heap);
	mapped_level = level_of(&r->mapped);
	series_emit(&e, "heap", &heap_level, &r->heap, &r->cfg);
	series_emit(&e, "mapped", &mapped_level, &r->mapped, &r->cfg);
	emit_int(&e, "tracer_mapped", tracer_mapped);
	emit_int(&e, "tracer_rss", tracer_rss);
	for (int g = 0; g < NGAUGES; g++) {
		tree_gauges[g] = &r->gauge_s[g];
		tree_levels[g] = level_of(&r->gauge_s[g]);
	}
	gauges_emit(&e, "rss", r, tree_levels, tree_gauges, &r->cfg, false);
	gauges_emit(&e, "physical", r, tree_levels, tree_gauges, &r->cfg, true);
	totals_emit(&e, "totals", &sum);
	leaks_emit(&e, "not_freed", &r->leaks, true);
	json_object_set_new(tree, "histogram", histogram_json(r));
	json_object_set_new(tree, "lifetimes", lifetimes_json(r));
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
	for (int sp = 0; r->sites_on && sp < MT_SITE_SPACES; sp++)
		json_object_set_new(
		    doc, mt_site_space_section((enum mt_site_space)sp),
		    mt_sites_json(r->sites, (enum mt_site_space)sp,
				  &r->opts.symbols, r->opts.max_sites));
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

	for (struct proc_sum *p = r->first; p; p = p->next)
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
	for (struct proc_sum *p = r->first; p; p = p->next) {
		if (p != r->first)
			emit_raw(&e, ",", 1);
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
