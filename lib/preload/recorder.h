/* SPDX-License-Identifier: MIT */
/*
 * recorder.h - the recording core of libmt-preload.so (mt_preload.c) as
 * its interposers see it: the C API's (mt_preload.c), C++ operator new and
 * delete (cxx_ops.c) and CPython's allocator hook (pymalloc.c).  Whether a
 * call is the program's (enter, leave), its time stamp (now) and its record
 * in the thread's ring (put) are inlined into each of them: the usual call
 * is a few stores, no call (bench/RESULTS.md, "the ring's cache lines").
 * Everything here is hidden (-fvisibility=hidden) but what EXPORT marks.
 */
#ifndef MT_PRELOAD_RECORDER_H
#define MT_PRELOAD_RECORDER_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "mt_event.h"
#include "mt_fast.h"
#include "stack_walk.h"

#define EXPORT	    __attribute__((visibility("default")))
#define unlikely(x) __builtin_expect(!!(x), 0)
#define likely(x)   __builtin_expect(!!(x), 1)

/* C++ operators, by their Itanium names (64-bit size_t) */
enum cxx_op {
	CXX_NEW,	       /* _Znwm */
	CXX_NEW_ARRAY,	       /* _Znam */
	CXX_NEW_NOTHROW,       /* _ZnwmRKSt9nothrow_t */
	CXX_NEW_ARRAY_NOTHROW, /* _ZnamRKSt9nothrow_t */
	CXX_NEW_ALIGNED,       /* _ZnwmSt11align_val_t */
	CXX_NEW_ARRAY_ALIGNED, /* _ZnamSt11align_val_t */
	CXX_NEW_ALIGNED_NOTHROW,
	CXX_NEW_ARRAY_ALIGNED_NOTHROW,
	CXX_DELETE,		/* _ZdlPv */
	CXX_DELETE_ARRAY,	/* _ZdaPv */
	CXX_DELETE_SIZED,	/* _ZdlPvm */
	CXX_DELETE_ARRAY_SIZED, /* _ZdaPvm */
	CXX_DELETE_NOTHROW,
	CXX_DELETE_ARRAY_NOTHROW,
	CXX_DELETE_ALIGNED,
	CXX_DELETE_ARRAY_ALIGNED,
	CXX_DELETE_SIZED_ALIGNED,
	CXX_DELETE_ARRAY_SIZED_ALIGNED,
	CXX_DELETE_ALIGNED_NOTHROW,
	CXX_DELETE_ARRAY_ALIGNED_NOTHROW,
	CXX_OPS
};

/* their names, and the next definition of each (cxx_ops.c: next_op) */
extern const char *const cxx_names[CXX_OPS];
extern void *next_cxx[CXX_OPS];

/* record the C API's calls: the next malloc is glibc's */
extern bool record_c;
/* record operator new and delete: the next ones are libstdc++'s */
extern bool record_cxx;
extern int init_state; /* 0 not yet, 1 resolving, 2 done */
/* the session's shared memory; NULL: nothing is recorded */
extern struct mt_fast_header *shm;
extern uint64_t ring_records, ring_mask; /* records a ring holds; that - 1 */
extern bool clock_tsc;			 /* records stamped by rdtsc */
extern bool have_prefetchw;		 /* x86-64: the CPU has PREFETCHW */

struct stack_state;

/* Each thread's ring, and its depth inside interposed calls (a call made
 * at depth > 0 is the allocator's own, not the program's). */
struct thread_state {
	struct mt_fast_ring *ring;
	struct mt_fast_record *recs;
	uint64_t head;	    /* records written (the ring's head, cached) */
	uint64_t tail_seen; /* the ring's tail when last looked at */
	unsigned depth;
	bool claim_failed;
	bool stacks_failed;	    /* no memory for its stack state */
	struct stack_state *stacks; /* --stacks: mapped at its first stack */
};

extern __thread struct thread_state self
    __attribute__((tls_model("initial-exec")));

/* Resolve the next allocator and map the shared memory (once; a nested
 * call while it runs returns at once). */
void recorder_init(void);
/* What put() cannot write inline (mt_preload.c). */
void put_slow(unsigned kind, uint64_t when, uint64_t addr, uint64_t size,
	      uint64_t extra);
void wake_tracer(void);
/* A CPython symbol looked up at start-up, or NULL. */
void *python_symbol(const char *name);
/* The next operator op (cxx_ops.c); NULL: there is none. */
void *next_op(enum cxx_op op);
/* CPython's MEM and OBJ domains hooked, if this is an interpreter
 * (pymalloc.c). */
void hook_pymalloc(void);

static inline uint64_t now(void)
{
#if defined(__x86_64__)
	if (likely(clock_tsc)) {
		uint32_t lo, hi;

		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		return ((uint64_t)hi << 32) | lo;
	}
#endif
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * How far ahead of its head a thread asks for its ring's lines, in
 * records (2 a cache line): mt-trace reads each line soon after it is
 * written, so when the thread comes round to it again a copy sits in the
 * other CPU's cache, and a plain store waits for that copy to be
 * invalidated.  Asked for with a write prefetch early enough, the store
 * finds the line its own: 2 M malloc+free pairs take 179 ms in place of
 * 228 (152 untraced; bench/RESULTS.md, "the ring's cache lines").  A
 * read prefetch (prefetcht0) does nothing for it: the line must be owned.
 */
#define OWN_AHEAD 64

static inline __attribute__((always_inline)) void
own_ahead(struct thread_state *t, uint64_t h)
{
	struct mt_fast_record *ahead = &t->recs[(h + OWN_AHEAD) & ring_mask];
#if defined(__x86_64__)
	/* 0F 0D /1: not every x86-64 decodes it, hence the CPUID check */
	if (likely(have_prefetchw))
		__asm__ volatile("prefetchw %0" : : "m"(*ahead));
#else
	__builtin_prefetch(ahead, 1, 3);
#endif
}

/*
 * One record of the program's call in the thread's ring.  Inlined into
 * each interposer: the usual call (a ring with room, no stacks) is a
 * check, a write prefetch, four stores and the head's release store (a
 * plain store on x86-64), no call.
 */
static inline __attribute__((always_inline)) void
put(unsigned kind, uint64_t when, uint64_t addr, uint64_t size, uint64_t extra)
{
	struct thread_state *t = &self;
	struct mt_fast_record *rec;
	uint64_t h = t->head;

	/* kind is a constant where this is inlined: a Free never asks stk */
	if (unlikely((stk && kind != MT_EV_FREE) || !t->ring ||
		     h - t->tail_seen >= ring_records)) {
		put_slow(kind, when, addr, size, extra);
		return;
	}
	rec = &t->recs[h & ring_mask];
	own_ahead(t, h);
	rec->when_kind = when << MT_FAST_KIND_BITS | kind;
	rec->addr = addr;
	rec->size = size;
	rec->extra = extra;
	__atomic_store_n(&t->ring->head, h + 1, __ATOMIC_RELEASE);
	t->head = h + 1;
	/* wake mt-trace each half ring: it drains before the ring is full */
	if (unlikely(((h + 1) & (ring_mask >> 1)) == 0))
		wake_tracer();
}

/*
 * Enter an interposed call: whether to record it (the program's own call,
 * a recorder in place, events on).  Every entry is paired with leave().
 */
static inline bool enter(bool family)
{
	if (unlikely(init_state != 2))
		recorder_init();
	return self.depth++ == 0 && family && shm &&
	       __atomic_load_n(&shm->enabled, __ATOMIC_RELAXED);
}

static inline void leave(void)
{
	self.depth--;
}

#endif /* MT_PRELOAD_RECORDER_H */
