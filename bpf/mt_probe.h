/* SPDX-License-Identifier: MIT */
/*
 * mt_probe.h - what each allocator uprobe means, shared by the BPF side
 * (which reads it from the probe's attach cookie) and the attach code in
 * lib/ (which sets the cookie).  One id per function signature, so the BPF
 * side knows which argument holds the size or the pointer.
 */
#ifndef MT_PROBE_H
#define MT_PROBE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum mt_probe_fn {
	MT_FN_NONE = 0,
	MT_FN_MALLOC,	      /* void *f(size_t size): malloc, new, mi_malloc */
	MT_FN_CALLOC,	      /* void *f(size_t n, size_t size) */
	MT_FN_REALLOC,	      /* void *f(void *p, size_t size) */
	MT_FN_REALLOCARRAY,   /* void *f(void *p, size_t n, size_t size) */
	MT_FN_MEMALIGN,	      /* void *f(size_t align, size_t size) */
	MT_FN_POSIX_MEMALIGN, /* int f(void **p, size_t align, size_t size) */
	MT_FN_VALLOC,	      /* void *f(size_t size), page aligned */
	MT_FN_FREE,	      /* void f(void *p, ...): free, delete, dallocx */
	MT_FN_MALLOC_N,	      /* void *f(size_t n, size_t size), not zeroed */
	MT_FN_ALIGNED_SIZE_FIRST, /* void *f(size_t size, size_t align):
				   * aligned new, mi_malloc_aligned */
	MT_FN_CALLOC_ALIGNED, /* void *f(size_t n, size_t size, size_t align) */
	MT_FN_REALLOC_ALIGNED, /* void *f(void *p, size_t size, size_t align) */
	MT_FN_XALLOCX, /* size_t xallocx(void *p, size_t size, size_t extra,
			* int flags): resizes in place, returns the size */
	MT_FN_MAX
};

/* The attach cookie: the function id in the low byte.  MT_FN_FREE probes
 * have no return probe and emit at entry. */
#define MT_COOKIE_FN(c) ((unsigned)((c)&0xff))
/* The high 32 bits: 0 for a probe every traced process shares, else the
 * serial number of one process's own links (mt-trace --fast: a process
 * without the preloaded recorder, lib/capture/recorder/fast_links.c).  Its
 * calls count only while the `pid_links` table holds that serial for it: links
 * being closed (their process exec'd a program that carries the recorder,
 * or got new links) record nothing more, even while they still trap. */
#define MT_COOKIE_LINK(c)   ((__u32)((c) >> 32))
#define MT_COOKIE(fn, link) ((__u64)(fn) | ((__u64)(link) << 32))
/* Bits 8-31: 0, or the id of a free-like function whose own file calls it
 * directly (glibc's libc.so.6: its thread-exit tcache frees, which no
 * program made and which an interposer never sees): the `internal_calls`
 * table holds MT_INTERNAL_KEY(site, return address - probed address) of
 * each such call, and a call returning there is not recorded. */
#define MT_COOKIE_SITE(c)	     ((unsigned)(((c) >> 8) & 0xffffff))
#define MT_COOKIE_WITH_SITE(site)    ((__u64)(site) << 8)
#define MT_INTERNAL_KEY(site, delta) (((__u64)(site) << 32) | (__u32)(delta))
/* entries of internal_calls: glibc 2.36 has 2 (one site) */
#define MT_INTERNAL_CALLS_MAX 64

/*
 * The BPF side's tables' sizes.  A hash table's bucket array is allocated
 * and initialised when the table is made and freed when it goes, 16 bytes
 * a slot, whatever it holds: a 32,768-slot table cost ~0.4 ms to make and
 * ~0.3 to free, and every session made four (three process tables and
 * code_files).  The process tables (traced, resumed, unthrottled; --fast's
 * pid_links and fork_stops) hold one entry per live process of the tree:
 * a fork beyond MT_PROCESS_SLOTS processes alive at once is not followed
 * and counted lost (MT_LOST_PID_TABLE).  code_files holds one entry per
 * code file the tree maps: beyond MT_CODE_FILE_SLOTS a file's mappings
 * stop its process each time, as a new file's first one does (slower, no
 * loss).  man/mt-trace.1 LIMITS.
 */
#define MT_PROCESS_SLOTS   8192
#define MT_CODE_FILE_SLOTS 4096

/* Indexes of the per-CPU lost-event counters. */
enum mt_lost_reason {
	MT_LOST_EVENTS_RING = 0, /* events ring buffer full */
	MT_LOST_LIFECYCLE_RING,	 /* lifecycle ring buffer full */
	MT_LOST_CALL_STATE,	 /* no per-thread storage for a call */
	MT_LOST_PID_TABLE, /* traced-process table full: fork not followed */
	MT_LOST_MAX
};

/* Counters that are not lost events (indexes into the same map, after
 * MT_LOST_MAX, not summed into the lost count). */
enum mt_drop_reason {
	/* an RSS update of a traced process's memory that cannot be charged
	 * safely (its mm is not yet or no longer the owner's: fork, exec,
	 * exit): dropped rather than charged to the wrong process */
	MT_DROP_RSS_UNATTRIBUTED = MT_LOST_MAX,
	/* a call stack not taken: a walk was under way on the CPU (its
	 * program preempted, on a kernel that preempts BPF programs); the
	 * event is recorded without a stack (mt_stack.bpf.h) */
	MT_DROP_STACK_BUSY,
	/* a free-like call the allocator's own file made directly (glibc's
	 * thread-exit tcache frees, MT_COOKIE_SITE): not the program's,
	 * not recorded */
	MT_DROP_INTERNAL_FREE,
	MT_COUNTER_MAX
};

/* Values of the BPF side's `traced` table. */
enum mt_traced_state {
	MT_TRACED = 1,	      /* its events are recorded */
	MT_AWAITING_EXEC = 2, /* mt-trace's forked copy of itself, held before
			       * its exec: traced from its exec on, so nothing
			       * of mt-trace's own address space is recorded */
	MT_PRIVILEGED = 3,    /* it exec'd a program that runs with more
			       * rights than the user mt-trace acts for
			       * (privileged_unseen): its exit alone is */
};

/*
 * A value of the `traced` table: the process's state and the stops the
 * BPF side made of it, each a timestamp (0: none).  Only the BPF side
 * writes a stop, in place, into the entry fork or mt-trace made (mt-trace
 * writes an entry once, before its process runs); the stops mt-trace has
 * undone are in tables of its own (`resumed`, `unthrottled`), so that no
 * write can hide another's.  One table rather than one per kind of stop:
 * each 32,768-slot table cost ~1-2 ms of every start (its bucket array).
 */
struct mt_traced {
	__u32 state; /* enum mt_traced_state */
	__u32 unused;
	__u64 stopped;		/* the NEW_CODE record of its latest stop */
	__u64 throttled;	/* its latest backpressure stop */
	__u64 stopped_by_other; /* a stop signal from another after it */
	__u64 brk; /* its break as last seen (fork, exec, brk), 0: unknown */
	/* memory the tracer added to it (--fast): [lo, hi) of the recorder's
	 * shared memory (MT_TRACER_SHM) and of its library's span
	 * (MT_TRACER_CODE), as the BPF side saw them mapped; 0: none */
	__u64 tracer_lo[2];
	__u64 tracer_hi[2];
};

enum mt_tracer_range { MT_TRACER_SHM = 0, MT_TRACER_CODE = 1 };

/* Files whose code the BPF side has seen mapped, keyed by device and
 * inode (the kernel's dev_t: major << 20 | minor); the inode's generation
 * is in the value (struct mt_code_seen). */
struct mt_code_key {
	__u64 dev;
	__u64 ino;
};

enum mt_code_state {
	MT_CODE_PENDING = 1, /* reported to mt-trace, not yet inspected */
	MT_CODE_DONE = 2,    /* inspected, its allocators (if any) traced */
	/* inspected before any process mapped it (mt-trace's start-up
	 * scan) on a file system that does not tell userspace an inode's
	 * generation: whatever the generation */
	MT_CODE_DONE_ANY_GENERATION = 3,
};

/*
 * A value of code_files.  Device and inode name a file only while it
 * exists: once deleted, its inode number may be given to a new file (ext4
 * and xfs reuse them at once), which then must be inspected too, or an
 * allocator in it would go untraced.  The inode's generation
 * (i_generation, drawn anew for each inode on ext4 and tmpfs) tells them
 * apart.
 */
struct mt_code_seen {
	__u32 state;	  /* enum mt_code_state */
	__u32 generation; /* of the inode seen or inspected */
};

/* A NEW_CODE record's flags: its process was stopped for it (and is in
 * the `stopped` table): mt-trace must send SIGCONT. */
#define MT_NEW_CODE_STOPPED 1
/* Not new code: a new process forked by one that has links of its own
 * (--fast), stopped at its first return to user space so that it gets
 * its own before it runs (a fork child inherits the breakpoints, not the
 * link).  pid = the child, old_addr = its parent; no file. */
#define MT_NEW_CODE_FORKED 2

#endif /* MT_PROBE_H */
