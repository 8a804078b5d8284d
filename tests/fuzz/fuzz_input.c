/* SPDX-License-Identifier: MIT */
/*
 * fuzz_input - libFuzzer entry: any bytes through the reader of every
 * format (lib/format/mt_input.h), drained to the end.  The reader must answer
 * each input with records and a clean end or an error message, and never
 * crash, hang, leak or read out of bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mt_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1024];
	struct mt_input *in;
	struct mt_record rec;
	uint64_t strings = 0;
	FILE *f;
	int ret;

	if (size == 0)
		return 0; /* fmemopen refuses an empty buffer */
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	in = mt_input_fopen(f, "fuzz", err, sizeof(err));
	if (!in)
		return 0;
	if (mt_input_format(in) == MT_FMT_TIMELINES) {
		/* mt-report's reading of timelines: their bytes, to the end */
		char text[4096];
		ssize_t n;

		while ((n = mt_input_read_text(in, text, sizeof(text))) > 0)
			strings += text[n - 1];
		if (n < 0 && !mt_input_error(in)[0])
			__builtin_trap();
	}
	while ((ret = mt_input_next(in, &rec)) > 0) {
		/* touch what the reader hands out */
		if (rec.str)
			strings += strlen(rec.str) + rec.str[rec.str_len];
		if (!mt_kind_name(rec.ev.kind))
			__builtin_trap();
	}
	if (ret < 0 && !mt_input_error(in)[0])
		__builtin_trap(); /* an error must say what */
	if (mt_input_offset(in) > size)
		__builtin_trap();
	(void)strings;
	mt_input_close(in);
	return 0;
}
