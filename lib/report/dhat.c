// SPDX-License-Identifier: MIT
/*
 * dhat.c - a run's heap sites as DHAT's JSON (see mt_dhat.h), built with
 * jansson.  Frames are written as valgrind writes them, so that readers
 * parsing them (the Firefox Profiler splits name, file and line) find
 * what they expect: "0xADDR: function (file:line)", or
 * "0xADDR: function (in object)" without line tables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "mt_dhat.h"
#include "mt_flame.h"
#include "mt_report.h"
#include "mt_sites.h"
#include "mt_strtab.h"

static const char *member(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_int_t site_int(json_t *site, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(site, key));

	return v > 0 ? v : 0;
}

/* frame's line in DHAT's shape, malloc'ed (NULL on out-of-memory) */
static char *frame_text(json_t *fr)
{
	const char *address = member(fr, "address");
	const char *function = member(fr, "function");
	const char *file = member(fr, "file");
	const char *object = member(fr, "object");
	json_int_t line = json_integer_value(json_object_get(fr, "line"));
	char *s;
	int rc;

	if (!address)
		address = "0x0";
	if (!function || !*function)
		function = "?";
	if (file && line > 0)
		rc = asprintf(&s, "%s: %s (%s:%lld)", address, function, file,
			      (long long)line);
	else if (object)
		rc = asprintf(&s, "%s: %s (in %s)", address, function, object);
	else
		rc = asprintf(&s, "%s: %s", address, function);
	return rc < 0 ? NULL : s;
}

/* text's index in the frame table, appended when new; -1 on
 * out-of-memory */
static json_int_t frame_index(struct mt_strtab *t, json_t *ftbl,
			      const char *text)
{
	int added;
	int64_t i;

	if (!text)
		return -1;
	i = mt_strtab_add(t, text, &added);
	if (i >= 0 && added && json_array_append_new(ftbl, json_string(text)))
		return -1;
	return i;
}

/* the site's frames as frame table indices, innermost first */
static json_t *site_frames(json_t *site, struct mt_strtab *t, json_t *ftbl)
{
	json_t *frames = json_object_get(site, "frames"), *fr;
	json_t *fs = json_array();
	size_t k;

	json_array_foreach(frames, k, fr)
	{
		char *text = frame_text(fr);
		json_int_t i = frame_index(t, ftbl, text);

		free(text);
		if (i < 0 || json_array_append_new(fs, json_integer(i)))
			goto oom;
	}
	if (json_array_size(frames) == 0 ||
	    json_is_true(json_object_get(site, "truncated"))) {
		char trunc[512];
		json_int_t i = frame_index(
		    t, ftbl,
		    json_array_size(frames)
			? mt_flame_truncated_name(site, trunc, sizeof(trunc))
			: "[no stack]");

		if (i < 0 || json_array_append_new(fs, json_integer(i)))
			goto oom;
	}
	return fs;
oom:
	json_decref(fs);
	return NULL;
}

static json_t *program_point(json_t *site, json_t *fs)
{
	return json_pack("{sI sI sI sI sI sI sI sI sI so}", "tb",
			 site_int(site, "allocated_bytes"), "tbk",
			 site_int(site, "allocations"), "tl",
			 site_int(site, "lifetimes_ns") / 1000, "mb",
			 site_int(site, "max_bytes"), "mbk",
			 site_int(site, "max_blocks"), "gb",
			 site_int(site, "peak_bytes"), "gbk",
			 site_int(site, "peak_blocks"), "eb",
			 site_int(site, "not_freed_bytes"), "ebk",
			 site_int(site, "not_freed_blocks"), "fs", fs);
}

static json_t *program_points(json_t *doc, json_t *ftbl)
{
	json_t *sites = json_object_get(
	    json_object_get(doc, mt_site_space_section(MT_SITES_HEAP)),
	    "sites");
	json_t *pps = json_array(), *site;
	struct mt_strtab t = {0};
	size_t i;
	int added;

	if (!pps || mt_strtab_add(&t, "[root]", &added) < 0 ||
	    json_array_append_new(ftbl, json_string("[root]")))
		goto oom;
	json_array_foreach(sites, i, site)
	{
		json_t *fs = site_frames(site, &t, ftbl);

		if (!fs || json_array_append_new(pps, program_point(site, fs)))
			goto oom;
	}
	mt_strtab_free(&t);
	return pps;
oom:
	mt_strtab_free(&t);
	json_decref(pps);
	return NULL;
}

int mt_dhat_write(FILE *out, json_t *doc)
{
	char cmd[4096];
	json_t *ftbl = json_array(), *pps, *o;
	int rc = -1;

	pps = ftbl ? program_points(doc, ftbl) : NULL;
	if (!pps) {
		json_decref(ftbl);
		errno = ENOMEM;
		return -1;
	}
	/* "o" hands pps and ftbl over, also when packing fails */
	o = json_pack(
	    "{si ss ss sb sb ss ss sI ss sI sI sI so so}", "dhatFileVersion", 2,
	    "mode", "heap", "verb", "Allocated", "bklt", 1, "bkacc", 0, "tu",
	    "\xc2\xb5s", "Mtu", "s", "tuth", (json_int_t)10, "cmd",
	    mt_report_command(doc, cmd, sizeof(cmd)), "pid",
	    (json_int_t)mt_json_u64(doc, "root_pid", 0), "te",
	    (json_int_t)(mt_json_u64(doc, "duration_ns", 0) / 1000), "tg",
	    (json_int_t)(mt_json_u64(doc, "tree.heap.peak_t_ns", 0) / 1000),
	    "pps", pps, "ftbl", ftbl);
	if (!o) {
		errno = ENOMEM;
		return -1;
	}
	if (json_dumpf(o, out, JSON_COMPACT) == 0 && fputc('\n', out) != EOF)
		rc = 0;
	json_decref(o);
	return ferror(out) ? -1 : rc;
}
