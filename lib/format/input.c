/* SPDX-License-Identifier: MIT */
/*
 * input.c - the one reader of every event stream mt understands (see
 * mt_input.h): the raw stream, the MessagePack artifact, its JSON Lines
 * twin, and CodSpeed memtrack artifacts.  The format is told from
 * content.  This file holds the API and the dispatch; each format reads
 * in a file of its own (input_int.h lists them).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <jansson.h>
#include <msgpack.h>

#include "input_int.h"
#include "mt_zstd.h"

static int next_fields(struct mt_input *in, struct fields *f, uint64_t *off,
		       json_t **root)
{
	*root = NULL;
	if (in->fmt == MT_FMT_JSONL)
		return js_next_fields(in, f, off, root);
	return mp_next_fields(in, f, off);
}

int objects_next(struct mt_input *in, struct mt_record *rec)
{
	struct fields f;
	uint64_t off;
	json_t *root;
	int ret;

	if (in->have_first) {
		*rec = in->first;
		in->have_first = false;
		return 1;
	}
	ret = next_fields(in, &f, &off, &root);
	if (ret == 0) {
		if (in->fmt == MT_FMT_MEMTRACK) {
			in->meta.events = in->maps_seen;
			in->meta.lost = in->map_lost;
			in->state = 1;
			return 0;
		}
		return input_fail(
		    in, off, "truncated: no trailer after %" PRIu64 " events",
		    in->maps_seen);
	}
	if (ret > 0) {
		ret = object_next(in, off, &f, rec);
		json_decref(root);
	}
	if (ret == 0) {
		if (fill(in, 1))
			return input_fail(in, offset_now(in),
					  "data after the trailer");
		if (in->state < 0)
			return -1;
		in->meta.has_trailer = true;
		in->state = 1;
	}
	return ret;
}

static int detect(struct mt_input *in)
{
	unsigned char c;

	/* zstd frames around any format: told by their 4-byte magic */
	if ((!fill(in, 4) && in->state < 0) || input_start_zstd(in))
		return -1;
	if (!fill(in, 1)) {
		if (in->state < 0)
			return -1;
		return input_fail(in, 0, "empty input");
	}
	c = cur(in)[0];
	if (c == (unsigned char)MT_RAW_MAGIC[0]) {
		in->fmt = MT_FMT_RAW;
		return raw_open(in);
	}
	if ((c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf)
		return mp_open(in);
	if (c == '{')
		return js_open(in);
	return input_fail(
	    in, 0,
	    "unknown format (first byte 0x%02x): not an mt raw stream, "
	    "artifact, JSON Lines or memtrack artifact",
	    c);
}

/* ---- API ------------------------------------------------------------- */

static struct mt_input *input_new(FILE *f, const char *name)
{
	struct mt_input *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->f = f;
	in->name = strdup(name);
	in->cap = BUF_START;
	in->buf = malloc(in->cap);
	in->zone_ready = msgpack_zone_init(&in->zone, 8192);
	if (!in->name || !in->buf || !in->zone_ready) {
		mt_input_close(in);
		return NULL;
	}
	input_map_file(in);
	return in;
}

struct mt_input *mt_input_fopen(FILE *f, const char *name, char *err,
				size_t errlen)
{
	struct mt_input *in = input_new(f, name ? name : "<input>");

	if (!in) {
		snprintf(err, errlen, "%s: out of memory", name);
		fclose(f);
		return NULL;
	}
	if (detect(in)) {
		snprintf(err, errlen, "%s", in->err);
		mt_input_close(in);
		return NULL;
	}
	if (in->fmt == MT_FMT_TIMELINES)
		input_fail(in, 0,
			   "mt-reconstruct timelines are not an event stream "
			   "(mt-report reads them)");
	return in;
}

struct mt_input *mt_input_open(const char *path, char *err, size_t errlen)
{
	FILE *f;

	if (!path || !strcmp(path, "-"))
		return mt_input_fopen(stdin, "<stdin>", err, errlen);
	f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	return mt_input_fopen(f, path, err, errlen);
}

enum mt_format mt_input_format(const struct mt_input *in)
{
	return in->fmt;
}

const char *mt_format_name(enum mt_format fmt)
{
	switch (fmt) {
	case MT_FMT_RAW:
		return "raw";
	case MT_FMT_ARTIFACT:
		return "artifact";
	case MT_FMT_JSONL:
		return "jsonl";
	case MT_FMT_MEMTRACK:
		return "memtrack";
	case MT_FMT_TIMELINES:
		return "timelines";
	default:
		return "unknown";
	}
}

const struct mt_meta *mt_input_meta(const struct mt_input *in)
{
	return &in->meta;
}

const char *mt_input_error(const struct mt_input *in)
{
	return in->err;
}

uint64_t mt_input_offset(const struct mt_input *in)
{
	/* compressed: how far into the file, not into what it holds */
	return in->zstd ? mt_zreader_offset(in->zstd) : offset_now(in);
}

ssize_t mt_input_read_text(struct mt_input *in, void *dst, size_t cap)
{
	size_t n;

	/* input_refill stops at the end (eof) or on an error it sets */
	if (!avail(in) && !in->mapped && !input_refill(in, 1))
		return in->eof ? 0 : -1;
	n = avail(in) < cap ? avail(in) : cap;
	memcpy(dst, cur(in), n);
	consume(in, n);
	return n;
}

void mt_input_close(struct mt_input *in)
{
	if (!in)
		return;
	mt_zreader_free(in->zstd); /* its thread reads f: stopped first */
	if (in->f && in->f != stdin)
		fclose(in->f);
	if (in->zone_ready)
		msgpack_zone_destroy(&in->zone);
	mt_meta_free(&in->meta);
	free(in->str);
	free(in->frames);
	free(in->guesses);
	if (in->mapped)
		input_unmap_file(in);
	else
		free(in->buf);
	free(in->name);
	free(in);
}
