/* SPDX-License-Identifier: MIT */
/*
 * trace-span - how long the traced command itself ran, from its trace.
 *
 *   trace-span FILE
 *
 * Reads any stream mt_input.h reads and prints one JSON line:
 *   {"run_ns":R,"first_to_last_ns":S,"records":N,"lost":L,"complete":C}
 * run_ns is from the root process's first exec to its exit (the command's
 * own run under the tracer, without mt-trace's start-up and exit), or -1
 * when the trace holds neither; first_to_last_ns spans all records.
 * bench/run sets it against hyperfine's time for the whole mt-trace run.
 *
 * Exit status: 0; 2 if the stream cannot be read or is truncated.
 */
#include <inttypes.h>
#include <stdio.h>

#include "mt_input.h"

struct span {
	uint64_t first_ts, last_ts, exec_ts, exit_ts, records;
};

static void note(struct span *s, const struct mt_event *ev, uint32_t root)
{
	if (ev->kind == MT_EV_LOST)
		return;
	if (s->records++ == 0)
		s->first_ts = ev->timestamp;
	s->last_ts = ev->timestamp;
	if (ev->pid != root)
		return;
	if (ev->kind == MT_EV_EXEC && !s->exec_ts)
		s->exec_ts = ev->timestamp;
	if (ev->kind == MT_EV_EXIT)
		s->exit_ts = ev->timestamp;
}

int main(int argc, char **argv)
{
	struct span s = {0};
	struct mt_record rec;
	struct mt_input *in;
	const struct mt_meta *meta;
	char err[256];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: trace-span FILE\n");
		return 2;
	}
	in = mt_input_open(argv[1], err, sizeof(err));
	if (!in) {
		fprintf(stderr, "trace-span: %s\n", err);
		return 2;
	}
	meta = mt_input_meta(in);
	while ((rc = mt_input_next(in, &rec)) == 1)
		note(&s, &rec.ev, meta->root_pid);
	if (rc < 0) {
		fprintf(stderr, "trace-span: %s\n", mt_input_error(in));
		mt_input_close(in);
		return 2;
	}
	printf("{\"run_ns\":%" PRId64 ",\"first_to_last_ns\":%" PRIu64
	       ",\"records\":%" PRIu64 ",\"lost\":%" PRIu64
	       ",\"complete\":%s}\n",
	       s.exec_ts && s.exit_ts > s.exec_ts
		   ? (int64_t)(s.exit_ts - s.exec_ts)
		   : (int64_t)-1,
	       s.last_ts - s.first_ts, s.records, meta->lost,
	       meta->has_trailer ? "true" : "false");
	mt_input_close(in);
	return 0;
}
