/* SPDX-License-Identifier: MIT */
/*
 * mt-read - read any stream through lib/format/mt_input.h.  For tests and
 * benchmarks of the reader:
 *
 *   mt-read FILE           counts records; prints format, records, lost,
 *                          seconds and records/s on stderr
 *   mt-read --dump FILE    also prints every record in mt-gen --expect's
 *                          form (raw fields as JSON), so a test can diff
 *                          what the reader yields against mt-gen's truth
 *
 * Exit 0 for a complete stream, 2 if it is truncated or corrupt (after
 * printing the reader's message).
 */
#include <err.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "mt_input.h"

static void dump(const struct mt_record *rec)
{
	const struct mt_event *ev = &rec->ev;

	if (ev->kind == MT_EV_LOST) {
		printf(
		    "{\"kind\":%u,\"pid\":%u,\"tid\":%u,\"timestamp\":%" PRIu64
		    ",\"size\":%" PRIu64 "}\n",
		    ev->kind, ev->pid, ev->tid, (uint64_t)ev->timestamp,
		    (uint64_t)ev->size);
		return;
	}
	printf("{\"kind\":%u,\"pid\":%u,\"tid\":%u,\"timestamp\":%" PRIu64
	       ",\"flags\":%u,\"aux\":%u,\"addr\":%" PRIu64 ",\"size\":%" PRIu64
	       ",\"old_addr\":%" PRIu64 ",\"old_size\":%" PRIu64,
	       ev->kind, ev->pid, ev->tid, (uint64_t)ev->timestamp, ev->flags,
	       ev->aux, (uint64_t)ev->addr, (uint64_t)ev->size,
	       (uint64_t)ev->old_addr, (uint64_t)ev->old_size);
	if (rec->str) {
		json_t *j = json_stringn(rec->str, rec->str_len);
		char *text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

		printf(",\"str\":%s", text ? text : "null");
		free(text);
		json_decref(j);
	}
	printf("}\n");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dump", no_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	bool want_dump = false;
	char msg[1024];
	struct mt_input *in;
	struct mt_record rec;
	uint64_t records = 0, lost = 0;
	double t0, secs;
	int c, ret;

	while ((c = getopt_long(argc, argv, "dh", opts, NULL)) != -1) {
		if (c == 'd') {
			want_dump = true;
			continue;
		}
		fprintf(c == 'h' ? stdout : stderr,
			"usage: mt-read [--dump] [FILE]\n");
		return c == 'h' ? 0 : 2;
	}
	t0 = now();
	in = mt_input_open(optind < argc ? argv[optind] : NULL, msg,
			   sizeof(msg));
	if (!in)
		errx(2, "%s", msg);
	while ((ret = mt_input_next(in, &rec)) > 0) {
		records++;
		if (rec.ev.kind == MT_EV_LOST)
			lost += rec.ev.size;
		if (want_dump)
			dump(&rec);
	}
	secs = now() - t0;
	fprintf(stderr,
		"format %s, %" PRIu64 " records, %" PRIu64
		" lost, %.3f s, %.2f M records/s\n",
		mt_format_name(mt_input_format(in)), records, lost, secs,
		records / secs / 1e6);
	if (ret < 0)
		warnx("%s", mt_input_error(in));
	mt_input_close(in);
	return ret < 0 ? 2 : 0;
}
