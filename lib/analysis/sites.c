// SPDX-License-Identifier: MIT
/*
 * sites.c - the heap aggregated by call stack, with each site's live bytes
 * at the tree's heap peak found lazily (see mt_sites.h), and its JSON.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_sites.h"

struct site {
	uint64_t live;	/* bytes live now */
	uint64_t saved; /* live when epoch saved_epoch began */
	uint64_t metric[MT_SITE_METRICS]; /* [MT_SITE_PEAK] set at the end */
	uint64_t leaked_blocks;
	uint32_t saved_epoch;
	uint32_t nframes;
	uint64_t *frames; /* MT_FRAME() values, innermost first */
	bool described;	  /* its Stack record was seen */
	bool truncated;
};

struct code_file {
	uint32_t id;
	char *path;
	uint8_t *build_id;
	size_t build_id_len;
};

struct mt_sites {
	struct site *v; /* by stack id; [0]: blocks without a stack */
	size_t n;
	bool any;
	/* the tree's heap and its peak */
	uint64_t heap, peak;
	bool at_new_peak; /* heap == peak, reached since the last epoch */
	uint32_t epoch;	  /* began when the heap last fell from a peak */
	struct code_file *files;
	size_t nfiles;
};

static const char *const metric_names[MT_SITE_METRICS] = {"peak", "allocated",
							  "count", "not-freed"};
static const char *const metric_keys[MT_SITE_METRICS] = {
    "peak_bytes", "allocated_bytes", "allocations", "not_freed_bytes"};

const char *mt_site_metric_name(enum mt_site_metric m)
{
	return m < MT_SITE_METRICS ? metric_names[m] : NULL;
}

const char *mt_site_metric_key(enum mt_site_metric m)
{
	return m < MT_SITE_METRICS ? metric_keys[m] : NULL;
}

const char *mt_site_metric_words(enum mt_site_metric m)
{
	switch (m) {
	case MT_SITE_PEAK:
		return "bytes live at the heap peak";
	case MT_SITE_ALLOCATED:
		return "bytes allocated";
	case MT_SITE_COUNT:
		return "allocation calls";
	default:
		return "bytes not freed";
	}
}

int mt_site_metric_parse(const char *name, enum mt_site_metric *m)
{
	/* its name until 0.4: "leaked" read as valgrind's "definitely lost" */
	if (!strcmp(name, "leaked"))
		name = metric_names[MT_SITE_METRICS - 1];
	for (int i = 0; i < MT_SITE_METRICS; i++)
		if (!strcmp(name, metric_names[i])) {
			*m = (enum mt_site_metric)i;
			return 0;
		}
	return -1;
}

struct mt_sites *mt_sites_new(void)
{
	struct mt_sites *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->n = 64;
	s->v = calloc(s->n, sizeof(*s->v));
	if (!s->v) {
		free(s);
		return NULL;
	}
	return s;
}

void mt_sites_free(struct mt_sites *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].frames);
	free(s->v);
	for (size_t i = 0; i < s->nfiles; i++) {
		free(s->files[i].path);
		free(s->files[i].build_id);
	}
	free(s->files);
	free(s);
}

/* The site of stack id, the table grown to hold it; site 0 when the id is
 * beyond reason or memory runs out (its bytes still add up). */
static struct site *site_of(struct mt_sites *s, uint64_t stack)
{
	if (stack < s->n)
		return &s->v[stack];
	if (stack > UINT32_MAX)
		return &s->v[0];
	size_t n = s->n;
	struct site *grown;

	while (n <= stack)
		n *= 2;
	grown = realloc(s->v, n * sizeof(*grown));
	if (!grown)
		return &s->v[0];
	memset(grown + s->n, 0, (n - s->n) * sizeof(*grown));
	s->v = grown;
	s->n = n;
	return &s->v[stack];
}

static int describe_stack(struct mt_sites *s, const struct mt_record *rec)
{
	uint64_t id = rec->ev.addr;
	struct site *site;
	uint64_t *frames = NULL;

	if (id == 0 || id > UINT32_MAX)
		return 0; /* the reader refuses these; nothing to attach */
	site = site_of(s, id);
	if (site == &s->v[0])
		return -1;
	if (rec->nframes) {
		frames = malloc(rec->nframes * sizeof(*frames));
		if (!frames)
			return -1;
		memcpy(frames, rec->frames, rec->nframes * sizeof(*frames));
	}
	free(site->frames);
	site->frames = frames;
	site->nframes = rec->nframes;
	site->truncated = rec->ev.flags & MT_STACK_TRUNCATED;
	site->described = true;
	s->any = true;
	return 0;
}

static int describe_file(struct mt_sites *s, const struct mt_record *rec)
{
	struct code_file *grown, *f;

	grown = realloc(s->files, (s->nfiles + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	s->files = grown;
	f = &s->files[s->nfiles];
	*f = (struct code_file){.id = (uint32_t)rec->ev.addr};
	f->path = strndup(rec->str ? rec->str : "", rec->str_len);
	if (rec->build_id_len) {
		f->build_id = malloc(rec->build_id_len);
		if (f->build_id)
			memcpy(f->build_id, rec->build_id, rec->build_id_len);
		f->build_id_len = rec->build_id_len;
	}
	if (!f->path || (rec->build_id_len && !f->build_id)) {
		free(f->path);
		free(f->build_id);
		return -1;
	}
	s->nfiles++;
	return 0;
}

int mt_sites_describe(struct mt_sites *s, const struct mt_record *rec)
{
	switch (rec->ev.kind) {
	case MT_EV_STACK:
		return describe_stack(s, rec);
	case MT_EV_CODE_FILE:
		return describe_file(s, rec);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Heap changes                                                         */

/* Before site's live bytes change: the first change in an epoch saves
 * what they were when it began. */
static inline void touch(const struct mt_sites *s, struct site *site)
{
	if (site->saved_epoch != s->epoch) {
		site->saved_epoch = s->epoch;
		site->saved = site->live;
	}
}

/* The heap is about to fall: if it stood at a peak not yet left, that
 * moment is the one to remember. */
static inline void before_fall(struct mt_sites *s)
{
	if (s->at_new_peak) {
		s->at_new_peak = false;
		s->epoch++;
	}
}

void mt_sites_alloc(struct mt_sites *s, uint64_t stack, uint64_t size,
		    bool counted)
{
	struct site *site = site_of(s, stack);

	if (stack)
		s->any = true;
	if (counted) {
		site->metric[MT_SITE_ALLOCATED] += size;
		site->metric[MT_SITE_COUNT]++;
	}
	if (!size)
		return;
	touch(s, site);
	site->live += size;
	s->heap += size;
	if (s->heap > s->peak) {
		s->peak = s->heap;
		s->at_new_peak = true;
	}
}

static void release(struct mt_sites *s, struct site *site, uint64_t size)
{
	if (!size)
		return;
	before_fall(s);
	touch(s, site);
	/* never below 0, whatever the caller's bookkeeping */
	size = size < site->live ? size : site->live;
	site->live -= size;
	s->heap -= size < s->heap ? size : s->heap;
}

void mt_sites_release(struct mt_sites *s, uint64_t stack, uint64_t size)
{
	release(s, site_of(s, stack), size);
}

void mt_sites_leak(struct mt_sites *s, uint64_t stack, uint64_t size)
{
	struct site *site = site_of(s, stack);

	site->metric[MT_SITE_LEAKED] += size;
	site->leaked_blocks++;
	release(s, site, size);
}

bool mt_sites_any(const struct mt_sites *s)
{
	return s->any;
}

uint64_t mt_sites_heap(const struct mt_sites *s)
{
	return s->heap;
}

uint64_t mt_sites_heap_peak(const struct mt_sites *s)
{
	return s->peak;
}

/* Every site's live bytes at the peak into metric[MT_SITE_PEAK]. */
static void settle_peak(struct mt_sites *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct site *site = &s->v[i];

		/* still at the last peak: what is live now; else what was
		 * live when the epoch after it began, if changed since */
		if (s->at_new_peak || site->saved_epoch != s->epoch)
			site->metric[MT_SITE_PEAK] = site->live;
		else
			site->metric[MT_SITE_PEAK] = site->saved;
	}
}

/* ------------------------------------------------------------------ */
/* JSON                                                                 */

static const struct code_file *file_named(const struct mt_sites *s, uint32_t id)
{
	for (size_t i = s->nfiles; i-- > 0;)
		if (s->files[i].id == id)
			return &s->files[i];
	return NULL;
}

static json_t *frame_json(const struct mt_sym_frame *fr, const char *object,
			  uint64_t addr)
{
	json_t *o = json_object();
	char hex[24];

	json_object_set_new(o, "function", json_string(fr->function));
	if (fr->file && fr->line) {
		json_object_set_new(o, "file", json_string(fr->file));
		json_object_set_new(o, "line", json_integer(fr->line));
	}
	if (fr->inlined)
		json_object_set_new(o, "inlined", json_true());
	if (object)
		json_object_set_new(o, "object", json_string(object));
	snprintf(hex, sizeof(hex), "0x%" PRIx64, addr);
	json_object_set_new(o, "address", json_string(hex));
	return o;
}

static json_t *frames_json(struct mt_sites *s, struct mt_symbolizer *sym,
			   const struct site *site)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < site->nframes; i++) {
		uint32_t file = MT_FRAME_FILE(site->frames[i]);
		uint64_t addr = MT_FRAME_ADDR(site->frames[i]);
		const struct code_file *f = file ? file_named(s, file) : NULL;
		const struct mt_sym_loc *loc = mt_sym_lookup(sym, file, addr);

		for (unsigned k = 0; k < loc->nframes; k++)
			json_array_append_new(a, frame_json(&loc->frames[k],
							    f ? f->path : NULL,
							    addr));
	}
	return a;
}

static json_t *site_json(struct mt_sites *s, struct mt_symbolizer *sym,
			 size_t id)
{
	const struct site *site = &s->v[id];
	json_t *o = json_object();

	json_object_set_new(o, "stack", json_integer((json_int_t)id));
	for (int m = 0; m < MT_SITE_METRICS; m++)
		json_object_set_new(o, metric_keys[m],
				    json_integer((json_int_t)site->metric[m]));
	json_object_set_new(o, "not_freed_blocks",
			    json_integer((json_int_t)site->leaked_blocks));
	json_object_set_new(o, "truncated", json_boolean(site->truncated));
	json_object_set_new(o, "frames", frames_json(s, sym, site));
	return o;
}

static bool has_anything(const struct site *site)
{
	for (int m = 0; m < MT_SITE_METRICS; m++)
		if (site->metric[m])
			return true;
	return false;
}

/* qsort context: no qsort_r in C11, and sorting is not reentrant here */
static const struct site *sort_sites;
static enum mt_site_metric sort_metric;

/* by the metric, heaviest first; ties by peak, allocated, then id */
static int site_cmp(const void *a, const void *b)
{
	const struct site *x = &sort_sites[*(const size_t *)a];
	const struct site *y = &sort_sites[*(const size_t *)b];
	enum mt_site_metric order[] = {sort_metric, MT_SITE_PEAK,
				       MT_SITE_ALLOCATED, MT_SITE_COUNT};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (x->metric[order[i]] != y->metric[order[i]])
			return x->metric[order[i]] > y->metric[order[i]] ? -1
									 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static void sort_by(const struct mt_sites *s, size_t *ids, size_t n,
		    enum mt_site_metric m)
{
	sort_sites = s->v;
	sort_metric = m;
	qsort(ids, n, sizeof(*ids), site_cmp);
}

/* With max_sites: keep[i] for the heaviest max_sites by each metric. */
static void choose(const struct mt_sites *s, size_t *ids, size_t n,
		   unsigned max_sites, bool *keep)
{
	for (int m = MT_SITE_METRICS - 1; m >= 0; m--) {
		sort_by(s, ids, n, (enum mt_site_metric)m);
		for (size_t i = 0; i < n; i++)
			keep[ids[i]] |= i < max_sites;
	}
}

static json_t *add_symbols(struct mt_sites *s, const struct mt_sym_opts *opts,
			   struct mt_symbolizer **sym)
{
	*sym = mt_sym_new(opts);
	if (!*sym)
		return NULL;
	for (size_t i = 0; i < s->nfiles; i++)
		mt_sym_add_file(*sym, s->files[i].id, s->files[i].path,
				s->files[i].build_id, s->files[i].build_id_len);
	return json_object();
}

json_t *mt_sites_json(struct mt_sites *s, const struct mt_sym_opts *opts,
		      unsigned max_sites)
{
	struct mt_symbolizer *sym;
	json_t *doc = add_symbols(s, opts, &sym), *list = json_array();
	size_t *ids = malloc(s->n * sizeof(*ids)), n = 0, omitted = 0;
	bool *keep = calloc(s->n, sizeof(*keep));
	uint64_t omitted_peak = 0;

	if (!doc || !list || !ids || !keep) {
		json_decref(doc);
		json_decref(list);
		doc = NULL;
		goto out;
	}
	settle_peak(s);
	for (size_t i = 0; i < s->n; i++)
		if (has_anything(&s->v[i]))
			ids[n++] = i;
	if (max_sites)
		choose(s, ids, n, max_sites, keep);
	sort_by(s, ids, n, MT_SITE_PEAK);
	for (size_t i = 0; i < n; i++) {
		if (max_sites && !keep[ids[i]]) {
			omitted++;
			omitted_peak += s->v[ids[i]].metric[MT_SITE_PEAK];
			continue;
		}
		json_array_append_new(list, site_json(s, sym, ids[i]));
	}
	json_object_set_new(doc, "count", json_integer((json_int_t)n));
	json_object_set_new(doc, "heap_peak",
			    json_integer((json_int_t)s->peak));
	json_object_set_new(doc, "omitted", json_integer((json_int_t)omitted));
	json_object_set_new(doc, "omitted_peak_bytes",
			    json_integer((json_int_t)omitted_peak));
	json_object_set_new(doc, "sites", list);
out:
	free(ids);
	free(keep);
	mt_sym_free(sym);
	return doc;
}
