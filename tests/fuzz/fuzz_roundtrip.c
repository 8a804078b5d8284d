/* SPDX-License-Identifier: MIT */
/*
 * fuzz_roundtrip - libFuzzer entry: whatever the reader accepts is written
 * as an artifact; that artifact read back and written again must give the
 * same bytes.  So the writer never emits what the reader cannot read, and
 * the reader reads back exactly what the writer meant.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mt_artifact.h"
#include "mt_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct encoded {
	char *p;
	size_t len;
	char error[1024]; /* why the input was incomplete, "" if it was not */
	char trailer_error[1024]; /* what the trailer says about it */
};

/* Reads every record of in and writes the artifact into out. */
static void encode(struct mt_input *in, enum mt_artifact_style style,
		   const char *error_again, struct encoded *out)
{
	int fd = memfd_create("fuzz", 0);
	struct mt_artifact *a;
	struct mt_record rec;
	off_t len;
	int ret;

	if (fd < 0)
		abort();
	a = mt_artifact_new(fd, style);
	if (!a)
		abort();
	mt_artifact_header(a, mt_input_meta(in));
	while ((ret = mt_input_next(in, &rec)) > 0)
		if (mt_artifact_record(a, &rec))
			__builtin_trap();
	out->error[0] = '\0';
	if (ret < 0)
		snprintf(out->error, sizeof(out->error), "%s",
			 mt_input_error(in));
	/* the second pass repeats the first one's reason, so that the bytes
	 * can be compared */
	snprintf(out->trailer_error, sizeof(out->trailer_error), "%s",
		 error_again ? error_again : out->error);
	mt_artifact_trailer(a, mt_input_meta(in), ret == 0, out->trailer_error);
	if (mt_artifact_close(a))
		__builtin_trap();
	len = lseek(fd, 0, SEEK_END);
	out->p = malloc(len ? len : 1);
	out->len = len;
	if (pread(fd, out->p, len, 0) != len)
		abort();
	close(fd);
}

static void round_trip(const uint8_t *data, size_t size,
		       enum mt_artifact_style style)
{
	struct encoded first, second;
	struct mt_input *in;
	char err[1024];
	FILE *f = fmemopen((void *)data, size, "r");

	if (!f)
		return;
	in = mt_input_fopen(f, "fuzz", err, sizeof(err));
	if (!in || mt_input_format(in) == MT_FMT_TIMELINES) {
		mt_input_close(in);
		return;
	}
	encode(in, style, NULL, &first);
	mt_input_close(in);

	f = fmemopen(first.p, first.len, "r");
	in = mt_input_fopen(f, "again", err, sizeof(err));
	if (!in) {
		/* JSON integers stop at 2^63 - 1: jansson refuses larger */
		if (style == MT_ARTIFACT_JSONL && strstr(err, "too big"))
			goto out;
		fprintf(stderr, "own artifact unreadable: %s\n", err);
		__builtin_trap();
	}
	encode(in, style, first.error[0] ? first.error : NULL, &second);
	if (style == MT_ARTIFACT_JSONL && strstr(second.error, "too big")) {
		free(second.p);
		mt_input_close(in);
		goto out;
	}
	if (first.error[0] &&
	    !strstr(second.error, "the artifact is incomplete"))
		__builtin_trap();
	if (!first.error[0] && second.error[0]) {
		fprintf(stderr, "own artifact rejected: %s\n", second.error);
		__builtin_trap();
	}
	if (first.len != second.len || memcmp(first.p, second.p, first.len)) {
		FILE *a = fopen("build-fuzz/roundtrip-first", "w");
		FILE *b = fopen("build-fuzz/roundtrip-second", "w");

		/* kept for a look with mt-read --dump */
		fwrite(first.p, 1, first.len, a);
		fwrite(second.p, 1, second.len, b);
		fclose(a);
		fclose(b);
		fprintf(stderr, "artifact changed when read and written again "
				"(see build-fuzz/roundtrip-*)\n");
		__builtin_trap();
	}
	free(second.p);
	mt_input_close(in);
out:
	free(first.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	round_trip(data, size, MT_ARTIFACT_MSGPACK);
	round_trip(data, size, MT_ARTIFACT_JSONL);
	return 0;
}
