/* SPDX-License-Identifier: MIT */
/*
 * mt_fast.h - the shared memory between mt-trace --fast and its preloaded
 * recorder (lib/preload/mt_preload.c, built as libmt-preload.so).
 *
 * mt-trace creates one memfd holding a header, a pool of ring headers and
 * the rings' records.  Every process of the traced tree that carries the
 * preload maps it (inherited fd, named in the environment); each thread
 * claims a ring of its own and writes fixed-size records into it: one
 * producer (the thread), one consumer (mt-trace), no lock and no system
 * call on the fast path.  The records live in shared memory, so a record
 * written is never lost by a fork, an exec, _exit, abort or a SIGKILL of
 * its process: mt-trace reads it anyway.  A full ring makes its thread
 * wait for mt-trace (nothing is dropped); only when mt-trace stops
 * draining for MT_FAST_GIVE_UP_NS does the thread drop and count.
 *
 * Everything here is shared between two programs built apart (the preload
 * has no other part of mt): keep it plain, fixed-size, little-endian x86-64
 * and aarch64, and bump MT_FAST_VERSION on any change.
 */
#ifndef MT_FAST_H
#define MT_FAST_H

#include <stdint.h>

#define MT_FAST_MAGIC	0x7473616674746dull /* "mtfast\0" */
#define MT_FAST_VERSION 5

/* The environment variable that hands the memfd to the preload:
 * "MEMFD_FD,EVENTFD_FD,INODE,TRACER_PID" (see mt_preload.c). */
#define MT_FAST_ENV "MT_FAST_SHM"

/* Record kinds (3 bits): the allocator events of mt_event.h the preload
 * makes (same numbers as enum mt_event_kind, 1-5), and with --stacks: */
#define MT_FAST_KIND_BITS 3
#define MT_FAST_KIND_MASK ((1u << MT_FAST_KIND_BITS) - 1)
/* A call stack the thread has not sent before: addr = its key (FNV-1a of
 * its frames, as the BPF side's), size = frames, extra = MT_STACK_*
 * flags; the frames (MT_FRAME values, innermost first) fill the next
 * ceil(size / 4) records, which have no kind of their own. */
#define MT_FAST_KIND_STACK 6
/* The next record's call stack: addr = its key. */
#define MT_FAST_KIND_STACK_REF 7
/* A STACK record with this bit in extra is a CPython code object
 * (MT_EV_PYCODE): addr = its id, size = payload bytes, extra bits 16-31
 * the interpreter's version, 32-63 its first line; the payload fills the
 * next ceil(size / 32) records. */
#define MT_FAST_STACK_PYCODE 0x100
/* Frames in one record's 32 bytes. */
#define MT_FAST_FRAMES_PER_RECORD 4

/*
 * One allocator call: 32 bytes, two to a cache line.  when_kind holds the
 * time in its top 61 bits and the kind (MT_EV_MALLOC .. MT_EV_ALIGNED_ALLOC)
 * in the low 3.  The time is the CPU's time-stamp counter when the header
 * says MT_FAST_CLOCK_TSC (mt-trace converts it to CLOCK_MONOTONIC), else
 * CLOCK_MONOTONIC nanoseconds.
 */
struct mt_fast_record {
	uint64_t when_kind;
	uint64_t addr;	/* the block (Free: the block freed) */
	uint64_t size;	/* bytes asked for */
	uint64_t extra; /* Realloc: old address; AlignedAlloc: alignment */
};

enum mt_fast_clock {
	MT_FAST_CLOCK_MONOTONIC = 0,
	MT_FAST_CLOCK_TSC = 1,
};

/* A ring's owner state. */
enum mt_fast_ring_state {
	MT_FAST_RING_FREE = 0,	   /* in the pool */
	MT_FAST_RING_OWNED = 1,	   /* a thread writes it */
	MT_FAST_RING_RELEASED = 2, /* its thread is done: mt-trace drains it
				    * and returns it to the pool */
};

/* Each ring's header: three cache lines, so that the producer's and the
 * consumer's stores never share one. */
struct mt_fast_ring {
	/* owner, written by the producer at claim, read by mt-trace */
	uint32_t state; /* enum mt_fast_ring_state */
	uint32_t pid;
	uint32_t tid;
	uint32_t waiting; /* the producer sleeps on tail (futex) */
	uint64_t claimed; /* the claim's time (same clock as records) */
	uint8_t pad0[40];
	/* records written: the producer's */
	uint64_t head;
	uint8_t pad1[56];
	/* records read: mt-trace's; its low 32 bits are the futex word */
	uint64_t tail;
	uint8_t pad2[56];
};

struct mt_fast_header {
	uint64_t magic;
	uint32_t version;
	uint32_t nrings;
	uint64_t ring_records; /* records per ring, a power of two */
	uint64_t rings_offset; /* struct mt_fast_ring[nrings] */
	uint64_t data_offset;  /* records of ring i at data_offset +
				* i * ring_records * 32 */
	uint32_t clock;	       /* enum mt_fast_clock */
	uint32_t enabled;      /* allocator events on (--control) */
	uint64_t page_size;
	/* written by the preload */
	uint64_t lost;		/* records dropped (mt-trace gone) */
	uint64_t no_ring;	/* calls not recorded: the pool was empty */
	uint32_t preloaded;	/* processes that mapped this */
	uint32_t rings_used;	/* rings ever claimed: [0, rings_used) */
	uint32_t gone;		/* a producer gave up waiting: mt-trace is
				 * gone, nobody waits any more */
	uint32_t max_pids;	/* entries of the pid table */
	uint64_t pids_offset;	/* struct mt_fast_pid[max_pids]: each process
				 * that loaded the recorder (again after an
				 * exec), so mt-trace can tell one that did
				 * not */
	uint32_t npids;		/* entries claimed (past max_pids: not kept) */
	uint32_t stack_depth;	/* frames a stack holds at most; 0: no stacks */
	uint64_t stacks_offset; /* struct mt_fast_stacks, when stack_depth */
	uint64_t waits;		/* times a producer found its ring full and
				 * slept until mt-trace drained it */
	uint8_t pad1[8];
};

/*
 * --stacks: the unwind rows of each code file, mt-trace's own (the ones
 * it gives the BPF side, lib/capture/cfi.c), so that the recorder walks
 * its thread's stack in process.  mt-trace appends files and publishes
 * each by raising nfiles (release) after its rows are written; the
 * recorders only read.
 */
struct mt_fast_stacks {
	uint32_t nfiles; /* published entries of files[] */
	uint32_t max_files;
	uint64_t files_offset; /* struct mt_fast_file[max_files] */
	uint64_t rows_offset; /* struct mt_cfi_row[max_rows] (bpf/mt_stack.h) */
	uint32_t max_rows;
	uint32_t code_ids; /* CPython code objects numbered so far: the
			    * recorders', one count for the whole tree */
};

/* A code file, by the kernel's identity of its inode (dev as the kernel
 * keeps it, major << 20 | minor), with what struct mt_stack_file says of
 * it to the BPF side.  A later entry of the same inode is a newer file
 * on a deleted one's inode number (its generation differs). */
struct mt_fast_file {
	uint64_t dev;
	uint64_t ino;
	int64_t vaddr_minus_offset;
	uint32_t id;	    /* the CODE_FILE id its frames carry */
	uint32_t first_row; /* its rows in rows[] */
	uint32_t nrows;	    /* 0: none (frames named, the walk stops) */
	uint32_t pad;
};

/* A process that carries the recorder (written once, when first loaded in
 * it or when it was forked): pid is written last, 0 = not yet. */
struct mt_fast_pid {
	uint64_t when; /* same clock as records */
	uint32_t pid;
	uint32_t flags; /* MT_FAST_PID_*: what its recorder records */
};

/* The recorder records the C API's calls (the next malloc is glibc's);
 * else it passes them on to the allocator that comes next (a preloaded
 * one, a sanitizer's runtime), whose functions carry uprobes. */
#define MT_FAST_PID_RECORDS_C (1u << 0)
/* ... and C++ operator new and delete (the next is libstdc++'s). */
#define MT_FAST_PID_RECORDS_CXX (1u << 1)
/* Its next operator new is another allocator's (probed), not libstdc++'s. */
#define MT_FAST_PID_OTHER_CXX (1u << 2)

/* A full ring: how long a thread waits for mt-trace before it drops. */
#define MT_FAST_GIVE_UP_NS (10ull * 1000000000ull)

#endif /* MT_FAST_H */
