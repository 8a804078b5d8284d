/* SPDX-License-Identifier: MIT */
/*
 * fuzz_rawpack - libFuzzer entry for packed raw batches (rawpack.h).
 * An input that starts with the raw stream's magic is read as one, its
 * packed batches' CRC-32 set right first (so that mutations reach the
 * unpacker, not only the CRC check): the reader must end cleanly or with
 * an error message, never crash, hang or read out of bounds.  Any other
 * input: after its first byte (the chunk size), 56-byte slots, packed and
 * unpacked; every byte must come back.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_input.h"
#include "mt_raw.h"
#include "rawpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void codec_round_trip(const uint8_t *data, size_t size)
{
	uint32_t chunk = size ? data[0] % 131 + 1 : 1;
	uint32_t n = size > 1 ? (size - 1) / MT_EVENT_SIZE : 0;
	struct mt_event *slots = malloc((size_t)n * MT_EVENT_SIZE + 1);
	struct mt_event *out = malloc((size_t)n * MT_EVENT_SIZE + 1);
	unsigned char *body = malloc(mt_rawpack_bound(n));
	struct mt_rawunpack u;
	uint32_t got = 0;
	size_t bytes;
	int r = 0;

	if (!slots || !out || !body)
		abort();
	memcpy(slots, data + 1, (size_t)n * MT_EVENT_SIZE);
	bytes = mt_rawpack(slots, n, body);
	if (bytes > mt_rawpack_bound(n))
		__builtin_trap();
	mt_rawunpack_init(&u, body, bytes, n);
	while (got < n && (r = mt_rawunpack(&u, out + got, NULL, chunk)) > 0)
		got += r;
	if (got != n || memcmp(out, slots, (size_t)n * MT_EVENT_SIZE) ||
	    u.p != u.end)
		__builtin_trap();
	free(slots);
	free(out);
	free(body);
}

/* Each packed batch's check set to its CRC, as far as the layout holds. */
static void fix_checks(uint8_t *d, size_t size)
{
	struct mt_raw_header h;
	size_t off;

	if (size < sizeof(h))
		return;
	memcpy(&h, d, sizeof(h));
	off = h.header_size;
	while (off + sizeof(struct mt_raw_batch) <= size) {
		struct mt_raw_batch b;

		memcpy(&b, d + off, sizeof(b));
		if (b.magic != MT_BATCH_MAGIC &&
		    b.magic != MT_BATCH_PACKED_MAGIC)
			return;
		if (b.bytes > size - off - sizeof(b))
			return;
		if (b.magic == MT_BATCH_PACKED_MAGIC) {
			b.check = mt_raw_packed_check(&b, d + off + sizeof(b));
			memcpy(d + off, &b, sizeof(b));
		}
		off += sizeof(b) + b.bytes;
	}
}

static void read_stream(const uint8_t *data, size_t size)
{
	uint8_t *d = malloc(size);
	struct mt_input *in;
	struct mt_record rec;
	char err[1024];
	FILE *f;
	int ret;

	if (!d)
		abort();
	memcpy(d, data, size);
	fix_checks(d, size);
	f = fmemopen(d, size, "r");
	if (!f) {
		free(d);
		return;
	}
	in = mt_input_fopen(f, "fuzz", err, sizeof(err));
	if (in) {
		while ((ret = mt_input_next(in, &rec)) > 0)
			if (rec.str && rec.str[rec.str_len])
				__builtin_trap();
		if (ret < 0 && !mt_input_error(in)[0])
			__builtin_trap(); /* an error must say what */
		mt_input_close(in);
	}
	free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= MT_RAW_MAGIC_LEN &&
	    !memcmp(data, MT_RAW_MAGIC, MT_RAW_MAGIC_LEN))
		read_stream(data, size);
	else
		codec_round_trip(data, size);
	return 0;
}
