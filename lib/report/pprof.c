// SPDX-License-Identifier: MIT
/*
 * pprof.c - a run's heap sites as a gzipped pprof profile (see
 * mt_pprof.h): the message built with libprotobuf-c from the code
 * protoc-c generates out of lib/report/profile.proto, packed, then
 * gzipped with zlib.  Functions, locations, mappings and strings are each
 * written once (mt_strtab.h numbers them); ids start at 1, as pprof wants
 * (0 is "none").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gen/profile.pb-c.h"
#include "mt_flame.h"
#include "mt_pprof.h"
#include "mt_sites.h"
#include "mt_strtab.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

enum { NVALUES = 4 }; /* alloc_objects, alloc_space, inuse_... */

struct loc {
	Location msg;
	Line *lines;
	Line **line_ptrs;
};

struct sample {
	Sample msg;
	uint64_t *ids;
	int64_t values[NVALUES];
};

/* Growing arrays of messages; pointers into them are made at the end. */
struct builder {
	struct mt_strtab strings, fn_keys, loc_keys, map_keys;
	Function *fns;
	size_t nfns, capfns;
	struct loc *locs;
	size_t nlocs, caplocs;
	Mapping *maps;
	size_t nmaps, capmaps;
	struct sample *samples;
	size_t nsamples, capsamples;
	bool oom;
};

static const char *const inuse_names[] = {"peak", "exit"};

const char *mt_pprof_inuse_name(enum mt_pprof_inuse inuse)
{
	return inuse <= MT_PPROF_INUSE_EXIT ? inuse_names[inuse] : NULL;
}

int mt_pprof_inuse_parse(const char *name, enum mt_pprof_inuse *inuse)
{
	for (int i = 0; i <= MT_PPROF_INUSE_EXIT; i++)
		if (!strcmp(name, inuse_names[i])) {
			*inuse = (enum mt_pprof_inuse)i;
			return 0;
		}
	return -1;
}

/* room for one more of *n elements of size bytes in *v */
static bool room(void **v, size_t *n, size_t *cap, size_t size)
{
	size_t want = *cap ? 2 * *cap : 64;
	void *grown;

	if (*n < *cap)
		return true;
	grown = realloc(*v, want * size);
	if (!grown)
		return false;
	*v = grown;
	*cap = want;
	return true;
}

/* s's index in the string table ("" is 0, added first) */
static int64_t str(struct builder *b, const char *s)
{
	int added;
	int64_t i = mt_strtab_add(&b->strings, s ? s : "", &added);

	if (i < 0) {
		b->oom = true;
		return 0;
	}
	return i;
}

/* a json string member, NULL when absent */
static const char *member(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* the id of the function named name in file (NULL: unknown) */
static uint64_t function_id(struct builder *b, const char *name,
			    const char *file)
{
	char *key;
	int added;
	int64_t i;
	Function *f;

	if (asprintf(&key, "%s\x01%s", name, file ? file : "") < 0) {
		b->oom = true;
		return 0;
	}
	i = mt_strtab_add(&b->fn_keys, key, &added);
	free(key);
	if (i < 0 || (added && !room((void **)&b->fns, &b->nfns, &b->capfns,
				     sizeof(*b->fns)))) {
		b->oom = true;
		return 0;
	}
	if (added) {
		f = &b->fns[b->nfns++];
		*f = (Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
		f->id = (uint64_t)i + 1;
		f->name = str(b, name);
		f->system_name = f->name;
		f->filename = str(b, file);
	}
	return (uint64_t)i + 1;
}

/* the id of the mapping of object, the file the code is in (NULL: none) */
static uint64_t mapping_id(struct builder *b, const char *object)
{
	int added;
	int64_t i;
	Mapping *m;

	if (!object)
		return 0;
	i = mt_strtab_add(&b->map_keys, object, &added);
	if (i < 0 || (added && !room((void **)&b->maps, &b->nmaps, &b->capmaps,
				     sizeof(*b->maps)))) {
		b->oom = true;
		return 0;
	}
	if (added) {
		m = &b->maps[b->nmaps++];
		*m = (Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
		m->id = (uint64_t)i + 1;
		m->filename = str(b, object);
		/* symbolized already: readers must not look again */
		m->has_functions = m->has_filenames = true;
		m->has_line_numbers = m->has_inline_frames = true;
	}
	return (uint64_t)i + 1;
}

/*
 * The id of the location of frames[k..j]: one return address, the
 * functions inlined there first (innermost first, as pprof orders a
 * location's lines) and the one compiled there last.  A pseudo frame
 * ("[truncated]", "[no stack]") is a location of its own, at address 0.
 */
static uint64_t location_id(struct builder *b, json_t *frames, size_t k,
			    size_t j, const char *pseudo)
{
	json_t *first = pseudo ? NULL : json_array_get(frames, k);
	const char *object = member(first, "object");
	const char *address = member(first, "address");
	char *key;
	int added;
	int64_t i;
	struct loc *l;
	size_t n = pseudo ? 1 : j - k + 1;

	if ((pseudo ? asprintf(&key, "\x02%s", pseudo)
		    : asprintf(&key, "%s\x01%s", object ? object : "",
			       address ? address : "")) < 0) {
		b->oom = true;
		return 0;
	}
	i = mt_strtab_add(&b->loc_keys, key, &added);
	free(key);
	if (i < 0 || (added && !room((void **)&b->locs, &b->nlocs, &b->caplocs,
				     sizeof(*b->locs)))) {
		b->oom = true;
		return 0;
	}
	if (!added)
		return (uint64_t)i + 1;
	l = &b->locs[b->nlocs++];
	l->msg = (Location)PERFTOOLS__PROFILES__LOCATION__INIT;
	l->msg.id = (uint64_t)i + 1;
	l->lines = calloc(n, sizeof(*l->lines));
	l->line_ptrs = calloc(n, sizeof(*l->line_ptrs));
	if (!l->lines || !l->line_ptrs) {
		b->oom = true;
		return 0;
	}
	l->msg.n_line = n;
	l->msg.mapping_id = mapping_id(b, object);
	l->msg.address = address ? strtoull(address, NULL, 16) : 0;
	for (size_t x = 0; x < n; x++) {
		json_t *fr = json_array_get(frames, k + x);
		const char *name = pseudo ? pseudo : member(fr, "function");

		l->lines[x] = (Line)PERFTOOLS__PROFILES__LINE__INIT;
		l->lines[x].function_id = function_id(
		    b, name && *name ? name : "?", member(fr, "file"));
		l->lines[x].line =
		    json_integer_value(json_object_get(fr, "line"));
	}
	return (uint64_t)i + 1;
}

static int64_t site_int(json_t *site, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(site, key));

	return v > 0 ? (int64_t)v : 0;
}

/* the site's stack as location ids, innermost first */
static void add_sample(struct builder *b, json_t *site,
		       enum mt_pprof_inuse inuse)
{
	json_t *frames = json_object_get(site, "frames");
	size_t n = json_array_size(frames), nids = 0;
	bool truncated = json_is_true(json_object_get(site, "truncated"));
	char trunc[512];
	struct sample *s;

	if (!room((void **)&b->samples, &b->nsamples, &b->capsamples,
		  sizeof(*b->samples))) {
		b->oom = true;
		return;
	}
	s = &b->samples[b->nsamples];
	s->msg = (Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
	s->values[0] = site_int(site, "allocations");
	s->values[1] = site_int(site, "allocated_bytes");
	s->values[2] =
	    site_int(site, inuse == MT_PPROF_INUSE_PEAK ? "peak_blocks"
							: "not_freed_blocks");
	s->values[3] =
	    site_int(site, inuse == MT_PPROF_INUSE_PEAK ? "peak_bytes"
							: "not_freed_bytes");
	if (!s->values[0] && !s->values[1] && !s->values[2] && !s->values[3])
		return;
	s->ids = calloc(n + 1, sizeof(*s->ids));
	if (!s->ids) {
		b->oom = true;
		return;
	}
	b->nsamples++;
	for (size_t k = 0; k < n;) {
		size_t j = k;

		while (j + 1 < n && json_is_true(json_object_get(
					json_array_get(frames, j), "inlined")))
			j++;
		s->ids[nids++] = location_id(b, frames, k, j, NULL);
		k = j + 1;
	}
	if (n == 0)
		s->ids[nids++] = location_id(b, NULL, 0, 0, "[no stack]");
	else if (truncated) /* the stack's outer end is missing */
		s->ids[nids++] = location_id(
		    b, NULL, 0, 0,
		    mt_flame_truncated_name(site, trunc, sizeof(trunc)));
	s->msg.n_location_id = nids;
}

static void builder_free(struct builder *b)
{
	mt_strtab_free(&b->strings);
	mt_strtab_free(&b->fn_keys);
	mt_strtab_free(&b->loc_keys);
	mt_strtab_free(&b->map_keys);
	for (size_t i = 0; i < b->nlocs; i++) {
		free(b->locs[i].lines);
		free(b->locs[i].line_ptrs);
	}
	for (size_t i = 0; i < b->nsamples; i++)
		free(b->samples[i].ids);
	free(b->fns);
	free(b->locs);
	free(b->maps);
	free(b->samples);
}

/* pointer arrays of n elements of size bytes at v, as protobuf-c wants */
static void **pointers(void *v, size_t n, size_t size)
{
	void **p = calloc(n ? n : 1, sizeof(*p));

	for (size_t i = 0; p && i < n; i++)
		p[i] = (char *)v + i * size;
	return p;
}

/* The profile's bytes, packed: malloc'ed, *len long; NULL on
 * out-of-memory. */
static uint8_t *pack(struct builder *b, enum mt_pprof_inuse inuse, size_t *len)
{
	static const char *const types[NVALUES][2] = {
	    {"alloc_objects", "count"},
	    {"alloc_space", "bytes"},
	    {"inuse_objects", "count"},
	    {"inuse_space", "bytes"}};
	Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
	ValueType vt[NVALUES], period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	ValueType *vtp[NVALUES];
	int64_t comment;
	uint8_t *buf = NULL;
	void **ptrs[4] = {0};

	for (int i = 0; i < NVALUES; i++) {
		vt[i] = (ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		vt[i].type = str(b, types[i][0]);
		vt[i].unit = str(b, types[i][1]);
		vtp[i] = &vt[i];
	}
	period.type = str(b, "space");
	period.unit = str(b, "bytes");
	comment = str(b, inuse == MT_PPROF_INUSE_PEAK
			     ? "mt: inuse = live at the traced tree's heap "
			       "peak; every allocation counted (period 1)"
			     : "mt: inuse = still live when its process "
			       "ended; every allocation counted (period 1)");
	for (size_t i = 0; i < b->nlocs; i++) {
		struct loc *l = &b->locs[i];

		for (size_t x = 0; x < l->msg.n_line; x++)
			l->line_ptrs[x] = &l->lines[x];
		l->msg.line = l->line_ptrs;
	}
	for (size_t i = 0; i < b->nsamples; i++) {
		struct sample *s = &b->samples[i];

		s->msg.location_id = s->ids;
		s->msg.n_value = NVALUES;
		s->msg.value = s->values;
	}
	ptrs[0] = pointers(b->samples, b->nsamples, sizeof(*b->samples));
	ptrs[1] = pointers(b->maps, b->nmaps, sizeof(*b->maps));
	ptrs[2] = pointers(b->locs, b->nlocs, sizeof(*b->locs));
	ptrs[3] = pointers(b->fns, b->nfns, sizeof(*b->fns));
	if (b->oom || !ptrs[0] || !ptrs[1] || !ptrs[2] || !ptrs[3])
		goto out;
	p.n_sample_type = NVALUES;
	p.sample_type = vtp;
	p.n_sample = b->nsamples;
	p.sample = (Sample **)ptrs[0];
	p.n_mapping = b->nmaps;
	p.mapping = (Mapping **)ptrs[1];
	p.n_location = b->nlocs;
	p.location = (Location **)ptrs[2];
	p.n_function = b->nfns;
	p.function = (Function **)ptrs[3];
	p.n_string_table = b->strings.n;
	p.string_table = b->strings.strs;
	p.period_type = &period;
	p.period = 1;
	p.n_comment = 1;
	p.comment = &comment;
	*len = perftools__profiles__profile__get_packed_size(&p);
	buf = malloc(*len ? *len : 1);
	if (buf)
		perftools__profiles__profile__pack(&p, buf);
out:
	for (int i = 0; i < 4; i++)
		free(ptrs[i]);
	return buf;
}

/* data gzipped to out: 0, or -1 (errno) */
static int write_gzip(FILE *out, const uint8_t *data, size_t len)
{
	z_stream z = {0};
	uint8_t chunk[65536];
	int rc;

	/* 15 + 16: a gzip header and trailer, as pprof reads */
	if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		errno = ENOMEM;
		return -1;
	}
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len; /* a profile is far below 4 GiB */
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		rc = deflate(&z, Z_FINISH);
		if (fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out) !=
		    sizeof(chunk) - z.avail_out) {
			deflateEnd(&z);
			return -1;
		}
	} while (rc == Z_OK);
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		errno = EIO;
		return -1;
	}
	return ferror(out) ? -1 : 0;
}

int mt_pprof_write(FILE *out, json_t *doc, enum mt_pprof_inuse inuse)
{
	struct builder b = {0};
	json_t *sites = json_object_get(
	    json_object_get(doc, mt_site_space_section(MT_SITES_HEAP)),
	    "sites");
	json_t *site;
	size_t i, len = 0;
	uint8_t *buf;
	int rc = -1;

	str(&b, ""); /* pprof: string 0 is "" */
	json_array_foreach(sites, i, site) add_sample(&b, site, inuse);
	buf = pack(&b, inuse, &len);
	if (!buf)
		errno = ENOMEM;
	else
		rc = write_gzip(out, buf, len);
	free(buf);
	builder_free(&b);
	return rc;
}
