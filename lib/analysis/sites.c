// SPDX-License-Identifier: MIT
/*
 * sites.c - the heap and the address space aggregated by call stack, with
 * each site's bytes at the tree's peak found lazily (see mt_sites.h), and
 * their JSON.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_sites.h"

/* A site's counters in one space */
struct site {
	uint64_t live;	/* bytes held now */
	uint64_t saved; /* live when epoch saved_epoch began */
	uint64_t metric[MT_SITE_METRICS]; /* [MT_SITE_PEAK] set at the end */
	uint64_t leaked_blocks;
	/* blocks held now, when saved, and at the peak (set at the end);
	 * the most bytes held at once and the blocks then (DHAT's "max");
	 * for the heap: a range of the address space may be unmapped in
	 * parts, so its blocks are not counted */
	uint64_t live_blocks, saved_blocks, peak_blocks;
	uint64_t max_bytes, max_blocks;
	uint64_t lifetimes_ns; /* of its heap blocks, summed */
	uint64_t temporary;    /* its heap blocks that were temporary */
	uint32_t saved_epoch;
};

/* A stack as its Stack record described it */
struct stack_desc {
	uint64_t *frames; /* MT_FRAME() values, innermost first */
	uint32_t nframes;
	bool truncated;
};

struct code_file {
	uint32_t id;
	char *path;
	uint8_t *build_id;
	size_t build_id_len;
};

/* A CPython code object as its PyCode record described it */
struct py_code {
	char *label_base; /* "qualname (file.py:" */
	char *path;	  /* its file name as the interpreter had it */
	uint8_t *linetable;
	uint32_t linetable_len;
	int32_t first_line;
	uint16_t version; /* major << 8 | minor */
};

/* One space's sites, by stack id ([0]: what has no stack), and the
 * tree's bytes in it */
struct space {
	struct site *v;
	size_t n;
	uint64_t heap, peak;
	bool at_new_peak; /* heap == peak, reached since the last epoch */
	uint32_t epoch;	  /* began when the heap last fell from a peak */
};

struct mt_sites {
	struct space space[MT_SITE_SPACES];
	struct stack_desc *stacks; /* by stack id */
	size_t nstacks;
	bool any;
	struct code_file *files;
	size_t nfiles;
	struct mt_symbolizer *sym; /* made at the first mt_sites_json */
	struct py_code *py;	   /* by code id (PyCode records) */
	size_t npy;
	bool python_only; /* the first mt_sites_json's opts say */
};

static const char *const metric_names[MT_SITE_METRICS] = {"peak", "allocated",
							  "count", "not-freed"};
static const char *const metric_keys[MT_SITE_METRICS] = {
    "peak_bytes", "allocated_bytes", "allocations", "not_freed_bytes"};
static const char *const space_names[MT_SITE_SPACES] = {"heap", "mapped"};
static const char *const space_sections[MT_SITE_SPACES] = {"sites",
							   "mapped_sites"};
static const char *const space_peak_keys[MT_SITE_SPACES] = {"heap_peak",
							    "mapped_peak"};
static const char *const metric_words[MT_SITE_SPACES][MT_SITE_METRICS] = {
    {"bytes live at the heap peak", "bytes allocated", "allocation calls",
     "bytes not freed"},
    {"bytes mapped at the peak", "bytes mapped", "mapping calls",
     "bytes not unmapped"},
};

const char *mt_site_metric_name(enum mt_site_metric m)
{
	return m < MT_SITE_METRICS ? metric_names[m] : NULL;
}

const char *mt_site_metric_key(enum mt_site_metric m)
{
	return m < MT_SITE_METRICS ? metric_keys[m] : NULL;
}

const char *mt_site_metric_words(enum mt_site_space space,
				 enum mt_site_metric m)
{
	if (space >= MT_SITE_SPACES || m >= MT_SITE_METRICS)
		return NULL;
	return metric_words[space][m];
}

/* name's place in names[0..n), or -1 */
static int name_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

int mt_site_metric_parse(const char *name, enum mt_site_metric *m)
{
	int i;

	/* its name until 0.4: "leaked" read as valgrind's "definitely lost" */
	if (!strcmp(name, "leaked"))
		name = metric_names[MT_SITE_METRICS - 1];
	i = name_index(metric_names, MT_SITE_METRICS, name);
	if (i < 0)
		return -1;
	*m = (enum mt_site_metric)i;
	return 0;
}

const char *mt_site_space_name(enum mt_site_space space)
{
	return space < MT_SITE_SPACES ? space_names[space] : NULL;
}

int mt_site_space_parse(const char *name, enum mt_site_space *space)
{
	int i = name_index(space_names, MT_SITE_SPACES, name);

	if (i < 0)
		return -1;
	*space = (enum mt_site_space)i;
	return 0;
}

const char *mt_site_space_section(enum mt_site_space space)
{
	return space < MT_SITE_SPACES ? space_sections[space] : NULL;
}

const char *mt_site_space_peak_key(enum mt_site_space space)
{
	return space < MT_SITE_SPACES ? space_peak_keys[space] : NULL;
}

struct mt_sites *mt_sites_new(void)
{
	struct mt_sites *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	for (int i = 0; i < MT_SITE_SPACES; i++) {
		s->space[i].n = 64;
		s->space[i].v = calloc(s->space[i].n, sizeof(struct site));
		if (!s->space[i].v) {
			mt_sites_free(s);
			return NULL;
		}
	}
	return s;
}

void mt_sites_free(struct mt_sites *s)
{
	if (!s)
		return;
	for (int i = 0; i < MT_SITE_SPACES; i++)
		free(s->space[i].v);
	for (size_t i = 0; i < s->nstacks; i++)
		free(s->stacks[i].frames);
	free(s->stacks);
	for (size_t i = 0; i < s->nfiles; i++) {
		free(s->files[i].path);
		free(s->files[i].build_id);
	}
	free(s->files);
	for (size_t i = 0; i < s->npy; i++) {
		free(s->py[i].label_base);
		free(s->py[i].path);
		free(s->py[i].linetable);
	}
	free(s->py);
	mt_sym_free(s->sym);
	free(s);
}

/* Grows *v (*n elements of size bytes, zeroed) to hold index i: 0, or -1
 * on out-of-memory. */
static int grow_to(void **v, size_t *n, size_t size, uint64_t i)
{
	size_t want = *n ? *n : 64;
	char *grown;

	while (want <= i)
		want *= 2;
	grown = realloc(*v, want * size);
	if (!grown)
		return -1;
	memset(grown + *n * size, 0, (want - *n) * size);
	*v = grown;
	*n = want;
	return 0;
}

/* The site of stack id in sp, the table grown to hold it; site 0 when the
 * id is beyond reason or memory runs out (its bytes still add up). */
static struct site *site_of(struct space *sp, uint64_t stack)
{
	if (stack < sp->n)
		return &sp->v[stack];
	if (stack > UINT32_MAX ||
	    grow_to((void **)&sp->v, &sp->n, sizeof(*sp->v), stack) < 0)
		return &sp->v[0];
	return &sp->v[stack];
}

static int describe_stack(struct mt_sites *s, const struct mt_record *rec)
{
	uint64_t id = rec->ev.addr;
	uint32_t nframes = rec->ev.size > UINT32_MAX ? 0 : rec->ev.size;
	struct stack_desc *d;
	uint64_t *frames = NULL;

	if (id == 0 || id > UINT32_MAX)
		return 0; /* the reader refuses these; nothing to attach */
	if (id >= s->nstacks && grow_to((void **)&s->stacks, &s->nstacks,
					sizeof(*s->stacks), id) < 0)
		return -1;
	if (nframes) {
		frames = malloc(nframes * sizeof(*frames));
		if (!frames)
			return -1;
		memcpy(frames, rec->frames, nframes * sizeof(*frames));
	}
	d = &s->stacks[id];
	free(d->frames);
	d->frames = frames;
	d->nframes = nframes;
	d->truncated = rec->ev.flags & MT_STACK_TRUNCATED;
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
	if (rec->ev.flags) { /* the build-id's length */
		f->build_id = malloc(rec->ev.flags);
		if (f->build_id)
			memcpy(f->build_id, rec->build_id, rec->ev.flags);
		f->build_id_len = rec->ev.flags;
	}
	if (!f->path || (rec->ev.flags && !f->build_id)) {
		free(f->path);
		free(f->build_id);
		return -1;
	}
	s->nfiles++;
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* A PyCode record: its code object kept by id (a later record of the same
 * id, which no recorder writes, replaces it). */
static int describe_pycode(struct mt_sites *s, const struct mt_record *rec)
{
	struct mt_pycode c;
	uint64_t id = rec->ev.addr;
	struct py_code *p;
	char *path;

	if (mt_pycode_parse(rec, &c) || id == 0 || id > MT_PYCODE_ID_MAX)
		return 0;
	if (id >= s->npy) {
		size_t n = id + 1 > 2 * s->npy ? id + 1 : 2 * s->npy;
		struct py_code *grown = realloc(s->py, n * sizeof(*grown));

		if (!grown)
			return -1;
		memset(grown + s->npy, 0, (n - s->npy) * sizeof(*grown));
		s->py = grown;
		s->npy = n;
	}
	p = &s->py[id];
	free(p->label_base);
	free(p->path);
	free(p->linetable);
	memset(p, 0, sizeof(*p));
	path = strndup(c.file, c.file_len);
	p->linetable = malloc(c.linetable_len ? c.linetable_len : 1);
	if (!path || !p->linetable ||
	    asprintf(&p->label_base, "%.*s (%s:",
		     (int)(c.qualname_len ? c.qualname_len : c.name_len),
		     c.qualname_len ? c.qualname : c.name,
		     base_name(path)) < 0) {
		free(path);
		free(p->linetable);
		memset(p, 0, sizeof(*p));
		return -1;
	}
	p->path = path;
	memcpy(p->linetable, c.linetable, c.linetable_len);
	p->linetable_len = c.linetable_len;
	p->first_line = (int32_t)rec->ev.size;
	p->version = rec->ev.flags;
	return 0;
}

int mt_sites_describe(struct mt_sites *s, const struct mt_record *rec)
{
	switch (rec->ev.kind) {
	case MT_EV_STACK:
		return describe_stack(s, rec);
	case MT_EV_CODE_FILE:
		return describe_file(s, rec);
	case MT_EV_PYCODE:
		return describe_pycode(s, rec);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Changes of the heap and of the address space                         */

/* Before site's live bytes change: the first change in an epoch saves
 * what they were when it began. */
static inline void touch(const struct space *sp, struct site *site)
{
	if (site->saved_epoch != sp->epoch) {
		site->saved_epoch = sp->epoch;
		site->saved = site->live;
		site->saved_blocks = site->live_blocks;
	}
}

/* The space is about to fall: if it stood at a peak not yet left, that
 * moment is the one to remember. */
static inline void before_fall(struct space *sp)
{
	if (sp->at_new_peak) {
		sp->at_new_peak = false;
		sp->epoch++;
	}
}

void mt_sites_alloc(struct mt_sites *s, enum mt_site_space space,
		    uint64_t stack, uint64_t size, bool counted)
{
	struct space *sp = &s->space[space];
	struct site *site = site_of(sp, stack);

	if (stack)
		s->any = true;
	if (counted) {
		site->metric[MT_SITE_ALLOCATED] += size;
		site->metric[MT_SITE_COUNT]++;
	}
	if (!size)
		return;
	touch(sp, site);
	site->live += size;
	site->live_blocks++;
	if (site->live > site->max_bytes) {
		site->max_bytes = site->live;
		site->max_blocks = site->live_blocks;
	}
	sp->heap += size;
	if (sp->heap > sp->peak) {
		sp->peak = sp->heap;
		sp->at_new_peak = true;
	}
}

static void release(struct space *sp, struct site *site, uint64_t size)
{
	if (!size)
		return;
	before_fall(sp);
	touch(sp, site);
	/* never below 0, whatever the caller's bookkeeping */
	size = size < site->live ? size : site->live;
	site->live -= size;
	site->live_blocks -= site->live_blocks > 0;
	sp->heap -= size < sp->heap ? size : sp->heap;
}

void mt_sites_release(struct mt_sites *s, enum mt_site_space space,
		      uint64_t stack, uint64_t size)
{
	struct space *sp = &s->space[space];

	release(sp, site_of(sp, stack), size);
}

void mt_sites_leak(struct mt_sites *s, enum mt_site_space space, uint64_t stack,
		   uint64_t size)
{
	struct space *sp = &s->space[space];
	struct site *site = site_of(sp, stack);

	site->metric[MT_SITE_LEAKED] += size;
	site->leaked_blocks++;
	release(sp, site, size);
}

void mt_sites_lifetime(struct mt_sites *s, uint64_t stack, uint64_t ns)
{
	site_of(&s->space[MT_SITES_HEAP], stack)->lifetimes_ns += ns;
}

void mt_sites_temporary(struct mt_sites *s, uint64_t stack)
{
	site_of(&s->space[MT_SITES_HEAP], stack)->temporary++;
}

bool mt_sites_any(const struct mt_sites *s)
{
	return s->any;
}

uint64_t mt_sites_heap(const struct mt_sites *s, enum mt_site_space space)
{
	return s->space[space].heap;
}

uint64_t mt_sites_heap_peak(const struct mt_sites *s, enum mt_site_space space)
{
	return s->space[space].peak;
}

/* Every site's bytes at the peak into metric[MT_SITE_PEAK]. */
static void settle_peak(struct space *sp)
{
	for (size_t i = 0; i < sp->n; i++) {
		struct site *site = &sp->v[i];

		/* still at the last peak: what is live now; else what was
		 * live when the epoch after it began, if changed since */
		if (sp->at_new_peak || site->saved_epoch != sp->epoch) {
			site->metric[MT_SITE_PEAK] = site->live;
			site->peak_blocks = site->live_blocks;
		} else {
			site->metric[MT_SITE_PEAK] = site->saved;
			site->peak_blocks = site->saved_blocks;
		}
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

/* CPython's line tables (3.11, 3.12: Objects/locations.md), an unsigned
 * and a signed varint: 6 bits a byte, bit 6 says more follow. */
static bool py_varint(const uint8_t *t, uint32_t len, uint32_t *at,
		      uint32_t *out)
{
	uint32_t shift = 0, v = 0;
	uint8_t b;

	do {
		if (*at >= len || shift > 30)
			return false;
		b = t[(*at)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*out = v;
	return true;
}

static bool py_svarint(const uint8_t *t, uint32_t len, uint32_t *at,
		       int32_t *out)
{
	uint32_t v;

	if (!py_varint(t, len, at, &v))
		return false;
	*out = v & 1 ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return true;
}

/* The line of the instruction at offset (code units) of code c; 0 when
 * the table does not say (no location, cut short, another format). */
static unsigned py_line(const struct py_code *c, uint32_t offset)
{
	const uint8_t *t = c->linetable;
	uint32_t at = 0, addr = 0, skip;
	int32_t line = c->first_line, delta;

	if (c->version != 0x030b && c->version != 0x030c)
		return 0;
	while (at < c->linetable_len) {
		uint8_t head = t[at++];
		unsigned code = head >> 3 & 15, length = (head & 7) + 1;
		bool known = true;

		if (!(head & 128))
			return 0; /* not an entry's first byte */
		if (code == 15) {
			known = false;
		} else if (code == 14) {
			if (!py_svarint(t, c->linetable_len, &at, &delta) ||
			    !py_varint(t, c->linetable_len, &at, &skip) ||
			    !py_varint(t, c->linetable_len, &at, &skip) ||
			    !py_varint(t, c->linetable_len, &at, &skip))
				return 0;
			line += delta;
		} else if (code == 13) {
			if (!py_svarint(t, c->linetable_len, &at, &delta))
				return 0;
			line += delta;
		} else if (code >= 10) {
			line += code - 10;
			at += 2;
		} else {
			at += 1;
		}
		if (offset >= addr && offset < addr + length)
			return known && line > 0 ? (unsigned)line : 0;
		addr += length;
	}
	return 0;
}

/* A Python frame: "qualname (file.py:LINE)", its file and line. */
static json_t *py_frame_json(const struct mt_sites *s, uint64_t frame)
{
	uint32_t id = MT_PYFRAME_CODE(frame);
	const struct py_code *c =
	    id < s->npy && s->py[id].label_base ? &s->py[id] : NULL;
	json_t *o = json_object();
	unsigned line = c ? py_line(c, MT_PYFRAME_OFFSET(frame)) : 0;
	char *name = NULL, hex[24];

	if (!c || (line ? asprintf(&name, "%s%u)", c->label_base, line)
			: asprintf(&name, "%s?)", c->label_base)) < 0)
		name = NULL;
	json_object_set_new(o, "function",
			    json_string(name ? name : "<python>"));
	free(name);
	if (c && line) {
		json_object_set_new(o, "file", json_string(c->path));
		json_object_set_new(o, "line", json_integer(line));
	}
	json_object_set_new(o, "python", json_true());
	snprintf(hex, sizeof(hex), "0x%" PRIx64,
		 (uint64_t)MT_FRAME_ADDR(frame));
	json_object_set_new(o, "address", json_string(hex));
	return o;
}

/*
 * A stack's frames, innermost first.  The Python frames an evaluation
 * loop call ran stand just inside its native frame (man/mt-format.5):
 * that frame (_PyEval_EvalFrameDefault) is replaced by them.  With
 * python_only, the native frames between the innermost Python frame and
 * the outermost are left out too.
 */
static json_t *frames_json(struct mt_sites *s, size_t id, bool python_only)
{
	json_t *a = json_array();
	const struct stack_desc *d = id < s->nstacks ? &s->stacks[id] : NULL;
	uint32_t first_py = UINT32_MAX, last_py = 0;

	for (uint32_t i = 0; d && i < d->nframes; i++)
		if (MT_FRAME_FILE(d->frames[i]) == MT_FRAME_FILE_PYTHON) {
			if (first_py == UINT32_MAX)
				first_py = i;
			last_py = i;
		}
	for (uint32_t i = 0; d && i < d->nframes; i++) {
		uint32_t file = MT_FRAME_FILE(d->frames[i]);
		uint64_t addr = MT_FRAME_ADDR(d->frames[i]);
		const struct code_file *f;
		const struct mt_sym_loc *loc;

		if (file == MT_FRAME_FILE_PYTHON) {
			json_array_append_new(a,
					      py_frame_json(s, d->frames[i]));
			continue;
		}
		if (i > 0 &&
		    MT_FRAME_FILE(d->frames[i - 1]) == MT_FRAME_FILE_PYTHON)
			continue; /* the evaluation loop's: replaced */
		if (python_only && first_py < i && i < last_py)
			continue;
		f = file ? file_named(s, file) : NULL;
		loc = mt_sym_lookup(s->sym, file, addr);
		for (unsigned k = 0; k < loc->nframes; k++)
			json_array_append_new(a, frame_json(&loc->frames[k],
							    f ? f->path : NULL,
							    addr));
	}
	return a;
}

static json_t *site_json(struct mt_sites *s, const struct space *sp, size_t id)
{
	bool heap = sp == &s->space[MT_SITES_HEAP];
	const struct site *site = &sp->v[id];
	json_t *o = json_object();
	bool truncated = id < s->nstacks && s->stacks[id].truncated;

	json_object_set_new(o, "stack", json_integer((json_int_t)id));
	for (int m = 0; m < MT_SITE_METRICS; m++)
		json_object_set_new(o, metric_keys[m],
				    json_integer((json_int_t)site->metric[m]));
	json_object_set_new(o, "not_freed_blocks",
			    json_integer((json_int_t)site->leaked_blocks));
	if (heap) {
		json_object_set_new(
		    o, "peak_blocks",
		    json_integer((json_int_t)site->peak_blocks));
		json_object_set_new(o, "max_bytes",
				    json_integer((json_int_t)site->max_bytes));
		json_object_set_new(o, "max_blocks",
				    json_integer((json_int_t)site->max_blocks));
		json_object_set_new(
		    o, "lifetimes_ns",
		    json_integer((json_int_t)site->lifetimes_ns));
		json_object_set_new(o, "temporary",
				    json_integer((json_int_t)site->temporary));
	}
	json_object_set_new(o, "truncated", json_boolean(truncated));
	json_object_set_new(o, "frames", frames_json(s, id, s->python_only));
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

static void sort_by(const struct space *sp, size_t *ids, size_t n,
		    enum mt_site_metric m)
{
	sort_sites = sp->v;
	sort_metric = m;
	qsort(ids, n, sizeof(*ids), site_cmp);
}

/* With max_sites: keep[i] for the heaviest max_sites by each metric. */
static void choose(const struct space *sp, size_t *ids, size_t n,
		   unsigned max_sites, bool *keep)
{
	for (int m = MT_SITE_METRICS - 1; m >= 0; m--) {
		sort_by(sp, ids, n, (enum mt_site_metric)m);
		for (size_t i = 0; i < n; i++)
			keep[ids[i]] |= i < max_sites;
	}
}

/* The symbolizer, told every code file, made once: 0, or -1 on
 * out-of-memory. */
static int symbolizer(struct mt_sites *s, const struct mt_sym_opts *opts)
{
	if (s->sym)
		return 0;
	s->python_only = opts && opts->python_only;
	s->sym = mt_sym_new(opts);
	if (!s->sym)
		return -1;
	for (size_t i = 0; i < s->nfiles; i++)
		mt_sym_add_file(s->sym, s->files[i].id, s->files[i].path,
				s->files[i].build_id, s->files[i].build_id_len);
	return 0;
}

json_t *mt_sites_json(struct mt_sites *s, enum mt_site_space space,
		      const struct mt_sym_opts *opts, unsigned max_sites)
{
	struct space *sp = &s->space[space];
	json_t *doc = json_object(), *list = json_array();
	size_t *ids = malloc(sp->n * sizeof(*ids)), n = 0, omitted = 0;
	bool *keep = calloc(sp->n, sizeof(*keep));
	uint64_t omitted_peak = 0;

	if (symbolizer(s, opts) < 0 || !doc || !list || !ids || !keep) {
		json_decref(doc);
		json_decref(list);
		doc = NULL;
		goto out;
	}
	settle_peak(sp);
	for (size_t i = 0; i < sp->n; i++)
		if (has_anything(&sp->v[i]))
			ids[n++] = i;
	if (max_sites)
		choose(sp, ids, n, max_sites, keep);
	sort_by(sp, ids, n, MT_SITE_PEAK);
	for (size_t i = 0; i < n; i++) {
		if (max_sites && !keep[ids[i]]) {
			omitted++;
			omitted_peak += sp->v[ids[i]].metric[MT_SITE_PEAK];
			continue;
		}
		json_array_append_new(list, site_json(s, sp, ids[i]));
	}
	json_object_set_new(doc, "count", json_integer((json_int_t)n));
	json_object_set_new(doc, space_peak_keys[space],
			    json_integer((json_int_t)sp->peak));
	json_object_set_new(doc, "omitted", json_integer((json_int_t)omitted));
	json_object_set_new(doc, "omitted_peak_bytes",
			    json_integer((json_int_t)omitted_peak));
	json_object_set_new(doc, "sites", list);
out:
	free(ids);
	free(keep);
	return doc;
}
