/* SPDX-License-Identifier: MIT */
/*
 * mt_raw.h - the raw stream mt-trace writes and mt-encode reads.
 *
 * Layout (all integers little-endian; man/mt-format.5 is the reference):
 *
 *   stream header   struct mt_raw_header, then strings_size bytes of
 *                   NUL-terminated strings: host name, then argc argv
 *                   strings; the header is zero padded to a multiple of 8
 *                   (header_size counts everything).
 *   batch *         struct mt_raw_batch, then its records, in one of two
 *                   encodings the batch's magic names.  MT_BATCH_MAGIC
 *                   (fixed): count records of event_size bytes each (bytes
 *                   == count * event_size).  MT_BATCH_PACKED_MAGIC
 *                   (packed, version 2 on, event_size 56 only): the same
 *                   count slots packed into bytes bytes (rawpack.h), with
 *                   check the CRC-32 (zlib's) of the batch header, check
 *                   taken as 0, and the body.  Either way seq counts
 *                   batches from 0; lost is the number of events the
 *                   kernel side could not deliver since the previous batch.
 *   trailer         struct mt_raw_trailer.  A stream that ends without it is
 *                   truncated, whatever else it holds.
 */
#ifndef MT_RAW_H
#define MT_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mt_event.h"

#define MT_RAW_MAGIC "\x89MTRAW\r\n" /* 8 bytes, no NUL */
#define MT_RAW_MAGIC_LEN 8
#define MT_RAW_VERSION 2 /* 1: fixed batches only; 2: packed ones too */
#define MT_BATCH_MAGIC 0x3142544du	  /* "MTB1" */
#define MT_BATCH_PACKED_MAGIC 0x3242544du /* "MTB2" */
/* The largest packed batch body a reader takes (a writer writes a batch
 * that would pack larger as fixed records). */
#define MT_RAW_PACKED_MAX (64u << 20)
#define MT_TRAILER_MAGIC 0x3145544du /* "MTE1" */

/* mt_raw_header.flags / mt_meta.flags */
#define MT_HDR_ALLOCATORS 0x1 /* allocator calls were traced */
#define MT_HDR_SYSCALLS 0x2   /* mmap/munmap/mremap/brk were traced */
#define MT_HDR_RSS 0x4	      /* RSS events were traced */
#define MT_HDR_PHYSICAL 0x8   /* physical (PSS) events were traced */
#define MT_HDR_STACKS 0x10    /* call stacks were captured */
#define MT_HDR_CONFINED 0x20  /* allocator probes trapped only the traced
				 tree (private copies of the C library and
				 known allocator libraries); absent with
				 MT_HDR_ALLOCATORS: probes were global */
/* Allocator calls recorded in-process by the preloaded recorder where it
 * loaded, by probes elsewhere (mt-trace's default); absent with
 * MT_HDR_ALLOCATORS: by probes alone (mt-trace --no-fast). */
#define MT_HDR_RECORDER 0x40

/* mt_raw_trailer.exit_kind / mt_meta.exit_kind */
enum mt_exit_kind {
	MT_EXIT_UNKNOWN = 0, /* the command could not be waited for */
	MT_EXIT_CODE = 1,    /* exited; exit_value is the status 0..255 */
	MT_EXIT_SIGNAL = 2,  /* killed; exit_value is the signal number */
};

struct mt_raw_header {
	char magic[MT_RAW_MAGIC_LEN];
	uint32_t version;     /* MT_RAW_VERSION */
	uint32_t header_size; /* bytes from magic to first batch */
	uint32_t event_size;  /* bytes per record: MT_EVENT_SIZE */
	uint32_t page_size;
	uint32_t clock_id; /* CLOCK_MONOTONIC */
	uint32_t root_pid;
	uint32_t flags; /* MT_HDR_* */
	uint32_t argc;
	uint64_t start_monotonic_ns;
	uint64_t start_realtime_ns; /* ns since the Unix epoch */
	uint32_t strings_size;
	uint32_t reserved;
};

struct mt_raw_batch {
	uint32_t magic; /* MT_BATCH_MAGIC or MT_BATCH_PACKED_MAGIC */
	uint32_t count; /* records that follow */
	uint32_t bytes; /* fixed: count * event_size; packed: the body's */
	uint32_t check; /* fixed: 0; packed: CRC-32 of header and body */
	uint64_t seq;
	uint64_t lost;
};

/* mt_raw_trailer.incomplete / mt_meta.incomplete: why mt-trace itself
 * knows the stream is not the whole trace (0: it is) */
enum mt_incomplete {
	MT_INCOMPLETE_NONE = 0,
	/* the traced command wrote over the shared memory of --fast's
	 * recorders: what a ring held was dropped, or a count was not
	 * taken */
	MT_INCOMPLETE_SHARED_MEMORY = 1,
};

struct mt_raw_trailer {
	uint32_t magic; /* MT_TRAILER_MAGIC */
	uint32_t exit_kind;
	int32_t exit_value;
	uint32_t incomplete; /* enum mt_incomplete */
	uint64_t end_monotonic_ns;
	uint64_t events; /* records written in all batches */
	uint64_t lost;	 /* sum of the batches' lost counts */
	uint64_t batches;
};

/*
 * What a stream says about itself: the header, and once the end is reached,
 * the trailer.  Shared by every format (raw, artifact, memtrack artifact).
 */
struct mt_meta {
	uint32_t version;
	uint32_t page_size;
	uint32_t clock_id;
	uint32_t root_pid;
	uint32_t flags;
	uint64_t start_monotonic_ns;
	uint64_t start_realtime_ns;
	char *host;  /* owned */
	int argc;
	char **argv; /* owned */
	/* trailer */
	bool has_trailer; /* the stream ended with its trailer */
	uint32_t exit_kind;
	int32_t exit_value;
	uint64_t end_monotonic_ns;
	uint64_t events;
	uint64_t lost;
	uint64_t batches;
	uint32_t incomplete; /* enum mt_incomplete */
};

void mt_meta_free(struct mt_meta *meta);

/* Writer: each returns 0, or -errno (a short write is -EIO). */
int mt_raw_write_header(int fd, const struct mt_meta *meta);
int mt_raw_write_batch(int fd, uint64_t seq, uint64_t lost,
		       const void *records, uint32_t count);
/* The same batch packed (fixed if it would pack over MT_RAW_PACKED_MAX,
 * or if no memory is left to pack it in).
 * *scratch (*scratch_size bytes, may be NULL and 0) is the buffer it packs
 * into, grown as needed: the caller keeps it for the next batches and
 * frees it. */
int mt_raw_write_packed_batch(int fd, uint64_t seq, uint64_t lost,
			      const void *records, uint32_t count,
			      void **scratch, size_t *scratch_size);
/* The same, the batch's first `packed` slots packed already by the
 * caller (rawpack.h: mt_rawpack_record, mt_rawpack_from; no payload
 * reaching past them) at
 * buf + sizeof(struct mt_raw_batch): `prefix` bytes, *st the packer's
 * state after them; slots[packed..count) are packed after them.  buf has
 * room for the header and mt_rawpack_bound(count) bytes; slots for count
 * slots: a batch written fixed (over MT_RAW_PACKED_MAX) has its first
 * ones unpacked there. */
struct mt_rawpack_state;
int mt_raw_write_packed_rest(int fd, uint64_t seq, uint64_t lost,
			     struct mt_event *slots, uint32_t count,
			     uint32_t packed, unsigned char *buf, size_t prefix,
			     struct mt_rawpack_state *st);
/* What a packed batch's check must be: b's header (check taken as 0) and
 * its b->bytes of body. */
uint32_t mt_raw_packed_check(const struct mt_raw_batch *b, const void *body);
int mt_raw_write_trailer(int fd, const struct mt_meta *meta);

#endif /* MT_RAW_H */
