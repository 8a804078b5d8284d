/* SPDX-License-Identifier: MIT */
/*
 * input_jsonl.c - mt-encode --jsonl's JSON Lines (one map a line, the
 * artifact's maps as JSON), read through jansson into struct fields; and
 * telling them from mt-reconstruct's timelines, which are not events.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "input_int.h"

static bool js_str_at(const void *arr, size_t i, const char **s, size_t *len)
{
	json_t *e = json_array_get((json_t *)arr, i);

	if (!json_is_string(e))
		return false;
	*s = json_string_value(e);
	*len = json_string_length(e);
	return true;
}

/* [a, b]: two unsigned integers (a stack frame) */
static bool js_pair_at(const void *arr, size_t i, uint64_t *a, uint64_t *b)
{
	json_t *e = json_array_get((json_t *)arr, i);
	json_t *x = json_array_get(e, 0), *y = json_array_get(e, 1);

	if (!json_is_array(e) || json_array_size(e) != 2 ||
	    !json_is_integer(x) || !json_is_integer(y) ||
	    json_integer_value(x) < 0 || json_integer_value(y) < 0)
		return false;
	*a = json_integer_value(x);
	*b = json_integer_value(y);
	return true;
}

static void js_value(json_t *j, struct value *v)
{
	memset(v, 0, sizeof(*v));
	switch (json_typeof(j)) {
	case JSON_INTEGER:
		if (json_integer_value(j) < 0) {
			v->type = V_NEGATIVE;
		} else {
			v->type = V_UINT;
			v->u = json_integer_value(j);
		}
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		v->type = V_BOOL;
		v->b = json_is_true(j);
		break;
	case JSON_STRING:
		v->type = V_STR;
		v->s = json_string_value(j);
		v->len = json_string_length(j);
		break;
	case JSON_ARRAY:
		v->type = V_ARRAY;
		v->arr = j;
		v->n = json_array_size(j);
		v->str_at = js_str_at;
		v->pair_at = js_pair_at;
		break;
	default:
		v->type = V_OTHER;
		break;
	}
}

int js_next_fields(struct mt_input *in, struct fields *f, uint64_t *off,
		   json_t **root)
{
	const unsigned char *nl;
	size_t len;
	json_error_t jerr;
	const char *key;
	json_t *jv;

	*root = NULL;
	for (;;) {
		size_t scanned = 0;

		*off = offset_now(in);
		while (!(nl = memchr(cur(in) + scanned, '\n',
				     avail(in) - scanned))) {
			scanned = avail(in);
			if (scanned >= MAX_OBJECT)
				return input_fail(in, *off,
						  "line %" PRIu64
						  ": longer than %u bytes",
						  in->line + 1, MAX_OBJECT);
			if (!fill(in, scanned + 1))
				break;
		}
		if (in->state < 0)
			return -1;
		len = nl ? (size_t)(nl - cur(in)) : avail(in);
		if (!nl && len == 0)
			return 0;
		in->line++;
		if (len > 0)
			break;
		consume(in, 1); /* an empty line */
	}
	*root = json_loadb((const char *)cur(in), len, JSON_ALLOW_NUL, &jerr);
	if (!*root)
		return input_fail(in, *off,
				  "line %" PRIu64 ": invalid JSON: %s",
				  in->line, jerr.text);
	consume(in, nl ? len + 1 : len);
	if (!json_is_object(*root))
		return input_fail(
		    in, *off, "line %" PRIu64 ": expected an object", in->line);
	f->present = 0;
	json_object_foreach(*root, key, jv)
	{
		enum key k = key_from_name(key, strlen(key));

		if (k != K_MAX)
			js_value(jv, set(f, k));
	}
	return 1;
}

/* '{': JSON Lines if the first line is an mt Header, mt-reconstruct's
 * timelines if the document says so (it may span many lines). */
int js_open(struct mt_input *in)
{
	const unsigned char *nl;
	json_t *first;
	json_error_t jerr;
	json_t *format;

	fill(in, in->cap);
	if (in->state < 0)
		return -1;
	nl = memchr(cur(in), '\n', avail(in));
	first = json_loadb((const char *)cur(in),
			   nl ? (size_t)(nl - cur(in)) : avail(in), 0, &jerr);
	format = json_object_get(first, "format");
	if (json_is_string(format) &&
	    !strcmp(json_string_value(format), "mt-timelines")) {
		json_decref(first);
		in->fmt = MT_FMT_TIMELINES;
		return 0;
	}
	if (!first && memmem(cur(in), avail(in), "\"mt-timelines\"", 14)) {
		in->fmt = MT_FMT_TIMELINES;
		return 0;
	}
	json_decref(first);
	in->fmt = MT_FMT_JSONL;
	{
		struct fields f;
		uint64_t off;
		json_t *root;
		int ret = js_next_fields(in, &f, &off, &root);

		if (ret > 0 && !str_is(val(&f, K_TYPE), "Header"))
			ret = input_fail(in, off, "line 1: not an mt Header");
		else if (ret > 0 && !str_is(val(&f, K_FORMAT), "mt"))
			ret = input_fail(in, off,
					 "Header: \"format\" is not \"mt\"");
		else if (ret > 0)
			ret = fields_to_header(in, off, &f) ? -1 : 1;
		json_decref(root);
		return ret > 0 ? 0 : -1;
	}
}
