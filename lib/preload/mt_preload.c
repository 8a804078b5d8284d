// SPDX-License-Identifier: MIT
/*
 * mt_preload.c - libmt-preload.so, the in-process recorder of
 * `mt-trace --fast` (man/mt-trace.1, FAST MODE).
 *
 * mt-trace puts this library in LD_PRELOAD and a shared memory file in the
 * environment (mt_fast.h).  The library interposes the C allocator API and
 * C++ operator new and delete, calls the allocator that comes next in the
 * lookup order, and writes one fixed-size record per call of the program
 * into its thread's ring: one producer, one consumer (mt-trace), no lock,
 * no system call on the way.  That replaces three uprobe traps (~0.8 us
 * each) per malloc+free pair by a time-stamp read and a 32-byte store.
 *
 * The records are the eBPF path's events, with its rules: one event per
 * call the program makes (a call the allocator makes from inside another,
 * realloc -> malloc, operator new -> malloc, is not the program's);
 * free(NULL) and failed calls none; realloc(p, 0) that frees is a Free;
 * posix_memalign's block is the one stored through its first argument.
 *
 * The library records only where it is sure to be the only one recording:
 * when the next malloc is glibc's (libc.so.6) and the next operator new
 * libstdc++'s.  mt-trace leaves exactly those two files unprobed under
 * --fast; any other allocator (jemalloc, mimalloc, tcmalloc, one linked
 * into the executable) keeps its uprobes, and the library only passes its
 * calls through.
 *
 * In a CPython process it also records Python's own allocator (pymalloc)
 * through CPython's allocator hook (pymalloc.c).  C++ operator new and
 * delete are in cxx_ops.c; what they share with this file, the recording
 * core, is recorder.h.
 *
 * Nothing here may allocate through the interposed API (it would recurse):
 * dlsym's own calloc during start-up is served from a small static arena.
 *
 * With --stacks the recorder walks its thread's stack itself
 * (stack_walk.c), with the unwind rows mt-trace built for the BPF side's
 * walk (shared in the same memory, struct mt_fast_stacks): the same
 * frames as the BPF walk, at a fraction of its cost (man/mt-trace.1,
 * STACKS).  Each thread sends a
 * stack's frames once (a table of the keys it sent) and then only its key.
 */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mt_event.h"
#include "mt_fast.h"
#include "mt_stack.h"
#include "own_mmap.h"
#include "python.h"
#include "recorder.h"
#include "stack_walk.h"

/* ---- the next allocator ------------------------------------------------- */

struct next_api {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
};

const char *const cxx_names[CXX_OPS] = {
    "_Znwm",
    "_Znam",
    "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv",
    "_ZdaPv",
    "_ZdlPvm",
    "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t",
    "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static struct next_api next;
void *next_cxx[CXX_OPS];
/* record the C API's calls: the next malloc is glibc's */
bool record_c;
/* record operator new and delete: the next ones are libstdc++'s (which
 * call the C API, recorded as nested) */
bool record_cxx;
int init_state; /* 0 not yet, 1 resolving, 2 done */

/* ---- the shared memory -------------------------------------------------- */

struct mt_fast_header *shm;
static struct mt_fast_ring *rings;
static struct mt_fast_record *records;
uint64_t ring_records, ring_mask; /* records a ring holds; that - 1 */
bool clock_tsc;			  /* records stamped by rdtsc */
static int wake_fd = -1;
static pthread_key_t ring_key;

__thread struct thread_state self __attribute__((tls_model("initial-exec")));

static long futex(void *addr, int op, uint32_t val,
		  const struct timespec *timeout)
{
	return syscall(SYS_futex, addr, op, val, timeout, NULL, 0);
}

void wake_tracer(void)
{
	uint64_t one = 1;

	if (wake_fd >= 0 && write(wake_fd, &one, sizeof(one)) < 0)
		wake_fd = -1; /* closed by the program: mt-trace's timer */
}

static void ring_destructor(void *ring);
static void stacks_thread_done(void);

/* A ring of a thread of this process image that can write no more: one
 * that a thread of the same tid owned before an exec. */
static void release_stale_rings(uint32_t pid, uint32_t tid)
{
	uint32_t used = __atomic_load_n(&shm->rings_used, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < used && i < shm->nrings; i++) {
		struct mt_fast_ring *r = &rings[i];

		if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) ==
			MT_FAST_RING_OWNED &&
		    r->pid == pid && r->tid == tid)
			__atomic_store_n(&r->state, MT_FAST_RING_RELEASED,
					 __ATOMIC_RELEASE);
	}
}

static bool claim_ring(struct thread_state *t)
{
	uint32_t pid = getpid(), tid = syscall(SYS_gettid);

	release_stale_rings(pid, tid);
	for (uint32_t i = 0; i < shm->nrings; i++) {
		struct mt_fast_ring *r = &rings[i];
		uint32_t expect = MT_FAST_RING_FREE, used;

		if (__atomic_load_n(&r->state, __ATOMIC_RELAXED) !=
			MT_FAST_RING_FREE ||
		    !__atomic_compare_exchange_n(
			&r->state, &expect, MT_FAST_RING_OWNED, false,
			__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		r->pid = pid;
		r->tid = tid;
		r->claimed = now();
		t->ring = r;
		t->recs = records + (uint64_t)i * shm->ring_records;
		t->head = r->head;
		t->tail_seen = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		used = __atomic_load_n(&shm->rings_used, __ATOMIC_RELAXED);
		while (used <= i && !__atomic_compare_exchange_n(
					&shm->rings_used, &used, i + 1, false,
					__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		/* the thread's exit gives it back (a destructor runs only
		 * for a key with a value) */
		pthread_setspecific(ring_key, r);
		return true;
	}
	__atomic_fetch_add(&shm->no_ring, 1, __ATOMIC_RELAXED);
	t->claim_failed = true;
	return false;
}

static void ring_destructor(void *ring)
{
	struct mt_fast_ring *r = ring;

	if (self.ring == r) {
		self.ring = NULL;
		self.claim_failed = false;
		stacks_thread_done();
	}
	__atomic_store_n(&r->state, MT_FAST_RING_RELEASED, __ATOMIC_RELEASE);
	wake_tracer();
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * The ring has no room for n records: wait for mt-trace to drain it,
 * asleep on its tail.  False when the records must be dropped: tracing
 * ended, or mt-trace has not read for MT_FAST_GIVE_UP_NS (it is gone;
 * nobody waits again).
 */
static bool wait_for_room(struct thread_state *t, uint64_t n)
{
	struct mt_fast_ring *r = t->ring;
	uint64_t cap = ring_records, start = 0;
	struct timespec nap = {0, 2000000}; /* 2 ms */

	for (;;) {
		t->tail_seen = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (t->head + n - t->tail_seen <= cap)
			return true;
		if (!__atomic_load_n(&shm->enabled, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&shm->gone, __ATOMIC_RELAXED))
			return false;
		if (!start)
			start = monotonic_ns();
		else if (monotonic_ns() - start > MT_FAST_GIVE_UP_NS) {
			__atomic_store_n(&shm->gone, 1, __ATOMIC_RELAXED);
			return false;
		}
		__atomic_store_n(&r->waiting, 1, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&shm->waits, 1, __ATOMIC_RELAXED);
		wake_tracer();
		/* the tail may have moved before waiting was seen: sleep
		 * only on the value just read */
		futex(&r->tail, FUTEX_WAIT, (uint32_t)t->tail_seen, &nap);
	}
}

/* ---- call stacks (--stacks: stack_walk.c) -------------------------------- */

/* The thread's walk state, made at its first stack. */
static struct stack_state *thread_stacks(struct thread_state *t)
{
	if (likely(t->stacks) || t->stacks_failed)
		return t->stacks;
	t->stacks = stack_state_new();
	t->stacks_failed = !t->stacks;
	return t->stacks;
}

static void stacks_thread_done(void)
{
	if (self.stacks)
		stack_state_free(self.stacks);
	self.stacks = NULL;
	self.stacks_failed = false;
}

/* Room for n records in the thread's ring; false when they are dropped. */
static bool ring_room(struct thread_state *t, uint64_t n)
{
	if (unlikely(!t->ring) && (t->claim_failed || !claim_ring(t)))
		return false;
	if (unlikely(t->head + n - t->tail_seen > ring_records) &&
	    !wait_for_room(t, n)) {
		__atomic_fetch_add(&shm->lost, 1, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

bool have_prefetchw; /* x86-64: the CPU has PREFETCHW (own_ahead) */

static struct mt_fast_record *ring_slot(struct thread_state *t, uint64_t k)
{
	return &t->recs[(t->head + k) & ring_mask];
}

/* The n records written are mt-trace's. */
static void publish(struct thread_state *t, uint64_t n)
{
	uint64_t h = t->head, half = ring_mask >> 1;

	__atomic_store_n(&t->ring->head, h + n, __ATOMIC_RELEASE);
	t->head = h + n;
	for (uint64_t k = 0; k < n; k += 2)
		own_ahead(t, h + k);
	/* wake mt-trace each half ring: it drains before the ring is full */
	if (unlikely((h & ~half) != ((h + n) & ~half)))
		wake_tracer();
}

/* The CPython code objects the stack just taken met first, each a record
 * and its payload, before the stack (python.c). */
static void put_python_codes(struct thread_state *t, struct py_codes *codes)
{
	uint64_t when;
	const void *payload;
	uint64_t id, extra;
	size_t len;

	while (python_pending(codes, &id, &extra, &payload, &len)) {
		uint64_t n = (len + sizeof(struct mt_fast_record) - 1) /
			     sizeof(struct mt_fast_record);

		if (!ring_room(t, 1 + n))
			return;
		when = now(); /* as published (put_stacked: why) */
		*ring_slot(t, 0) = (struct mt_fast_record){
		    when << MT_FAST_KIND_BITS | MT_FAST_KIND_STACK, id, len,
		    extra};
		for (uint64_t k = 0; k < n; k++) {
			struct mt_fast_record *r = ring_slot(t, 1 + k);
			size_t part = len - k * sizeof(*r);

			if (part > sizeof(*r))
				part = sizeof(*r);
			__builtin_memset(r, 0, sizeof(*r));
			__builtin_memcpy(
			    r, (const char *)payload + k * sizeof(*r), part);
		}
		publish(t, 1 + n);
		python_sent(codes);
	}
}

/*
 * An allocation with its call stack: the stack's frames if this thread
 * has not sent them yet, its key, the event, all with one time and
 * published at once (mt-trace's drain never splits them).
 */
static __attribute__((noinline)) void put_stacked(unsigned kind, uint64_t when,
						  uint64_t addr, uint64_t size,
						  uint64_t extra)
{
	struct thread_state *t = &self;
	uint64_t frames[MT_STACK_DEPTH_MAX], key = 0, need = 1, k = 0;
	struct stack_state *s;
	unsigned n = 0, flags = 0;
	bool send = false;

	if (unlikely(!t->ring) && (t->claim_failed || !claim_ring(t)))
		return;
	s = thread_stacks(t);
	if (s)
		n = capture_stack(s, frames, &key, &flags);
	if (s && stack_python(s))
		put_python_codes(t, stack_python(s));
	if (n) {
		send = !sent_before(s, key);
		need += 1 + (send ? 1 + (n + MT_FAST_FRAMES_PER_RECORD - 1) /
					    MT_FAST_FRAMES_PER_RECORD
				  : 0);
	}
	if (!ring_room(t, need))
		return;
	/* stamped as published: the walk, a ring's claim or a wait for room
	 * took time in which the BPF side stamped this thread's page faults,
	 * and mt-trace may have written those already (per thread, the file
	 * is in time order) */
	when = now();
	if (send) {
		*ring_slot(t, k++) = (struct mt_fast_record){
		    when << MT_FAST_KIND_BITS | MT_FAST_KIND_STACK, key, n,
		    flags};
		for (unsigned i = 0; i < n; i += MT_FAST_FRAMES_PER_RECORD)
			__builtin_memcpy(ring_slot(t, k++), &frames[i],
					 (n - i < MT_FAST_FRAMES_PER_RECORD
					      ? n - i
					      : MT_FAST_FRAMES_PER_RECORD) *
					     sizeof(frames[0]));
	}
	if (n)
		*ring_slot(t, k++) = (struct mt_fast_record){
		    when << MT_FAST_KIND_BITS | MT_FAST_KIND_STACK_REF, key, 0,
		    0};
	*ring_slot(t, k++) = (struct mt_fast_record){
	    when << MT_FAST_KIND_BITS | kind, addr, size, extra};
	publish(t, k);
	if (send)
		remember_sent(s, key);
}

/* A record the fast path of put() cannot write: with --stacks an
 * allocation (its stack first), a thread without a ring yet, a ring that
 * looks full (its tail read again, or wait for mt-trace). */
__attribute__((noinline, cold)) void put_slow(unsigned kind, uint64_t when,
					      uint64_t addr, uint64_t size,
					      uint64_t extra)
{
	struct thread_state *t = &self;

	if (stk && kind != MT_EV_FREE) {
		put_stacked(kind, when, addr, size, extra);
		return;
	}
	if (!ring_room(t, 1))
		return;
	when = now(); /* as published (put_stacked: why) */
	*ring_slot(t, 0) = (struct mt_fast_record){
	    when << MT_FAST_KIND_BITS | kind, addr, size, extra};
	publish(t, 1);
}

/* ---- start-up ----------------------------------------------------------- */

/* dlsym may allocate before the next allocator is known: from here */
static _Alignas(64) unsigned char arena[8192];
static size_t arena_used;

static void *arena_alloc(size_t size, size_t align)
{
	size_t at = (arena_used + align - 1) & ~(align - 1);

	if (at + size > sizeof(arena))
		return NULL;
	arena_used = at + size;
	return arena + at;
}

static bool in_arena(const void *p)
{
	return (const unsigned char *)p >= arena &&
	       (const unsigned char *)p < arena + sizeof(arena);
}

/* Is the symbol at addr defined in the file whose name starts with soname
 * (libc.so.6, libstdc++.so.6)?  Asked of the loader's table of mapped
 * objects (_dl_find_object), not dladdr, which reads the whole of the
 * file's symbol table: ~128 KiB of the C library's pages made resident
 * in every process for the recorder alone. */
static bool defined_in(void *addr, const char *soname)
{
	struct dl_find_object found;
	const char *name, *base;

	if (!addr || _dl_find_object(addr, &found) || !found.dlfo_link_map ||
	    !(name = found.dlfo_link_map->l_name))
		return false;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	return strncmp(base, soname, strlen(soname)) == 0;
}

static void resolve_next(void)
{
	next.malloc = dlsym(RTLD_NEXT, "malloc");
	next.free = dlsym(RTLD_NEXT, "free");
	next.calloc = dlsym(RTLD_NEXT, "calloc");
	next.realloc = dlsym(RTLD_NEXT, "realloc");
	next.reallocarray = dlsym(RTLD_NEXT, "reallocarray");
	next.memalign = dlsym(RTLD_NEXT, "memalign");
	next.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	next.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	next.valloc = dlsym(RTLD_NEXT, "valloc");
	next.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	for (int i = 0; i < CXX_OPS; i++)
		next_cxx[i] = dlsym(RTLD_NEXT, cxx_names[i]);
}

/* "MEMFD,EVENTFD,INODE,TRACER_PID": map the memfd, by the inherited fd or
 * else through mt-trace's /proc (the program may have closed it). */
/*
 * getenv, also before libc has set environ: the recorder may be started
 * by a call from a function of the program's .preinit_array, which runs
 * before any library's initializer (AddressSanitizer's __asan_init
 * resolves its interceptors there, and dlsym's calloc is the recorder's).
 * The loader's __libc_stack_end is then the process's first stack
 * address: argc, argv[argc + 1], the environment.
 */
extern void *__libc_stack_end;

static const char *early_getenv(const char *name)
{
	size_t len = strlen(name);
	char **envp;
	long argc;

	if (environ || !__libc_stack_end)
		return getenv(name);
	argc = *(long *)__libc_stack_end;
	envp = (char **)__libc_stack_end + 1 + argc + 1;
	for (; *envp; envp++)
		if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

/* A decimal number at s ended by end: past end, or NULL.  By hand, not
 * sscanf: the scanner's code is pages of the C library the program may
 * never run (the recorder's resident cost). */
static const char *parse_number(const char *s, char end,
				unsigned long long *out)
{
	unsigned long long v = 0;
	const char *at = s;

	for (; *at >= '0' && *at <= '9'; at++) {
		if (v > (ULLONG_MAX - 9) / 10)
			return NULL;
		v = v * 10 + (unsigned)(*at - '0');
	}
	if (at == s || *at != end)
		return NULL;
	*out = v;
	return at + 1;
}

static struct mt_fast_header *map_shared(void)
{
	const char *env = early_getenv(MT_FAST_ENV);
	unsigned long long ino, n[4];
	int memfd, efd, tracer, fd;
	char path[64];
	struct stat st;
	void *p;

	if (!env || !(env = parse_number(env, ',', &n[0])) ||
	    !(env = parse_number(env, ',', &n[1])) ||
	    !(env = parse_number(env, ',', &n[2])) ||
	    !parse_number(env, '\0', &n[3]) || n[0] > INT_MAX ||
	    n[1] > INT_MAX || n[3] > INT_MAX)
		return NULL;
	memfd = n[0], efd = n[1], ino = n[2], tracer = n[3];
	fd = memfd;
	if (fstat(fd, &st) || st.st_ino != ino) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", tracer, memfd);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) || st.st_ino != ino) {
			if (fd >= 0)
				close(fd);
			return NULL;
		}
	}
	p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd != memfd)
		close(fd);
	if (p == MAP_FAILED)
		return NULL;
	if (((struct mt_fast_header *)p)->magic != MT_FAST_MAGIC ||
	    ((struct mt_fast_header *)p)->version != MT_FAST_VERSION) {
		munmap(p, st.st_size);
		return NULL;
	}
	if (fstat(efd, &st) == 0)
		wake_fd = efd;
	return p;
}

/* This process carries the recorder: in the table mt-trace reads, so that
 * it can tell a program that dropped LD_PRELOAD. */
static void register_process(void)
{
	uint32_t at = __atomic_fetch_add(&shm->npids, 1, __ATOMIC_RELAXED);
	struct mt_fast_pid *pids =
	    (struct mt_fast_pid *)((char *)shm + shm->pids_offset);

	__atomic_fetch_add(&shm->preloaded, 1, __ATOMIC_RELAXED);
	if (at >= shm->max_pids)
		return;
	pids[at].when = now();
	pids[at].flags =
	    (record_c ? MT_FAST_PID_RECORDS_C : 0) |
	    (record_cxx ? MT_FAST_PID_RECORDS_CXX : 0) |
	    (next_cxx[CXX_NEW] && !record_cxx ? MT_FAST_PID_OTHER_CXX : 0);
	__atomic_store_n(&pids[at].pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
}

/* fork: the child's only thread is a copy of this one, its ring is not */
static void after_fork_in_child(void)
{
	self.ring = NULL;
	self.claim_failed = false;
	if (shm)
		register_process();
}

static void lookup_python(void);

static bool cpu_has_prefetchw(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;

	return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & bit_PRFCHW);
#else
	return false;
#endif
}

void recorder_init(void)
{
	struct mt_fast_header *h;

	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2)
		return;
	/* one thread resolves; a nested call (dlsym's calloc) sees 1 */
	int expect = 0;
	if (!__atomic_compare_exchange_n(&init_state, &expect, 1, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	lookup_python(); /* first: its failures' messages from the arena */
	resolve_next();
	h = map_shared();
	if (h && next.malloc) {
		shm = h;
		rings = (struct mt_fast_ring *)((char *)h + h->rings_offset);
		records = (struct mt_fast_record *)((char *)h + h->data_offset);
		ring_records = h->ring_records;
		ring_mask = h->ring_records - 1;
		clock_tsc = h->clock == MT_FAST_CLOCK_TSC;
		have_prefetchw = cpu_has_prefetchw();
		pthread_key_create(&ring_key, ring_destructor);
		pthread_atfork(NULL, NULL, after_fork_in_child);
		record_c = defined_in((void *)next.malloc, "libc.so");
		record_cxx =
		    record_c && defined_in(next_cxx[CXX_NEW], "libstdc++.so");
		register_process();
		stacks_start(shm);
		/* the thread that loads the recorder, the program's main
		 * thread, gets its walk state now, before the program runs:
		 * its mapping is then no event amid the program's own */
		if (h->stack_depth && h->stacks_offset)
			thread_stacks(&self);
	}
	__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
}

/*
 * CPython's symbols the recorder uses (python.c, hook_pymalloc), looked
 * up by init() before the next allocator is known: a failed lookup (any
 * program without CPython) mallocs its error message, which then comes
 * from the start-up arena as dlsym's own calloc does, and leaves the
 * program's heap as it was.  One failed lookup for a program without it.
 */
static const char *const py_names[] = {
    "PyMem_GetAllocator", "PyMem_SetAllocator",
    "Py_Version",	  "PyGILState_GetThisThreadState",
    "PyCode_Type",	  "PyUnicode_Type",
    "PyBytes_Type",	  "_Py_NegativeRefcount",
};
static void *py_syms[sizeof(py_names) / sizeof(py_names[0])];

static void lookup_python(void)
{
	for (size_t i = 0; i < sizeof(py_names) / sizeof(py_names[0]); i++)
		if (!(py_syms[i] = dlsym(RTLD_DEFAULT, py_names[i])) && i == 0)
			return;
}

void *python_symbol(const char *name)
{
	for (size_t i = 0; i < sizeof(py_names) / sizeof(py_names[0]); i++)
		if (strcmp(name, py_names[i]) == 0)
			return py_syms[i];
	return NULL;
}

__attribute__((constructor)) static void preload_start(void)
{
	recorder_init();
	hook_pymalloc();
	if (stk)
		python_start(stk, python_symbol);
}

/*
 * A program built with -fsanitize=address (gcc: libasan.so in its
 * DT_NEEDED) refuses to start when its runtime is not the first library
 * loaded ("ASan runtime does not come first in initial library list"),
 * and LD_PRELOAD puts the recorder first.  The runtime asks this weak
 * hook for its default options; the recorder's definition comes before
 * the runtime's own (empty) one, so the check is off unless the program
 * defines the hook itself or ASAN_OPTIONS turns it on again.  The
 * recorder then only passes the calls on (the next malloc is the
 * runtime's, not glibc's), and the runtime's allocator carries uprobes.
 */
EXPORT const char *__asan_default_options(void)
{
	return "verify_asan_link_order=0";
}

/* ---- the interposed API ------------------------------------------------- */

EXPORT void *malloc(size_t size)
{
	if (unlikely(!next.malloc)) {
		if (init_state == 1)
			return arena_alloc(size, 16);
		recorder_init();
	}
	bool rec = enter(record_c);
	void *p = next.malloc(size);

	if (rec && p)
		put(MT_EV_MALLOC, now(), (uintptr_t)p, size, 0);
	leave();
	return p;
}

EXPORT void free(void *p)
{
	if (unlikely(!p || in_arena(p)))
		return;
	if (unlikely(!next.free))
		recorder_init();
	/* before the block is given back: another thread may get it */
	if (enter(record_c))
		put(MT_EV_FREE, now(), (uintptr_t)p, 0, 0);
	next.free(p);
	leave();
}

EXPORT void *calloc(size_t n, size_t size)
{
	if (unlikely(!next.calloc)) {
		if (init_state == 1) {
			void *p = arena_alloc(n * size, 16);

			if (p)
				memset(p, 0, n * size);
			return p;
		}
		recorder_init();
	}
	bool rec = enter(record_c);
	void *p = next.calloc(n, size);

	if (rec && p)
		put(MT_EV_CALLOC, now(), (uintptr_t)p, n * size, 0);
	leave();
	return p;
}

/* realloc's events: the block moved or grew, or realloc(p, 0) freed it */
static void put_realloc(void *p, void *old, size_t size)
{
	if (p)
		put(MT_EV_REALLOC, now(), (uintptr_t)p, size, (uintptr_t)old);
	else if (size == 0 && old)
		put(MT_EV_FREE, now(), (uintptr_t)old, 0, 0);
}

EXPORT void *realloc(void *old, size_t size)
{
	if (unlikely(in_arena(old))) {
		/* a block of the start-up arena: copy it out */
		void *p = malloc(size);

		if (p)
			memcpy(p, old,
			       size < sizeof(arena) -
					   ((unsigned char *)old - arena)
				   ? size
				   : sizeof(arena) -
					 ((unsigned char *)old - arena));
		return p;
	}
	if (unlikely(!next.realloc))
		recorder_init();
	bool rec = enter(record_c);
	void *p = next.realloc(old, size);

	if (rec)
		put_realloc(p, old, size);
	leave();
	return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	if (unlikely(!next.reallocarray))
		recorder_init();
	bool rec = enter(record_c);
	void *p = next.reallocarray(old, n, size);

	if (rec)
		put_realloc(p, old, n * size);
	leave();
	return p;
}

static void *aligned_call(void *(*fn)(size_t, size_t), size_t align,
			  size_t size)
{
	bool rec = enter(record_c);
	void *p = fn(align, size);

	if (rec && p)
		put(MT_EV_ALIGNED_ALLOC, now(), (uintptr_t)p, size, align);
	leave();
	return p;
}

EXPORT void *memalign(size_t align, size_t size)
{
	if (unlikely(!next.memalign))
		recorder_init();
	return aligned_call(next.memalign, align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (unlikely(!next.aligned_alloc))
		recorder_init();
	return aligned_call(next.aligned_alloc, align, size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (unlikely(!next.posix_memalign))
		recorder_init();
	bool rec = enter(record_c);
	int err = next.posix_memalign(out, align, size);

	if (rec && err == 0)
		put(MT_EV_ALIGNED_ALLOC, now(), (uintptr_t)*out, size, align);
	leave();
	return err;
}

static void *page_aligned(void *(*fn)(size_t), size_t size)
{
	bool rec = enter(record_c);
	void *p = fn(size);

	if (rec && p)
		put(MT_EV_ALIGNED_ALLOC, now(), (uintptr_t)p, size,
		    shm->page_size);
	leave();
	return p;
}

EXPORT void *valloc(size_t size)
{
	if (unlikely(!next.valloc))
		recorder_init();
	return page_aligned(next.valloc, size);
}

EXPORT void *pvalloc(size_t size)
{
	if (unlikely(!next.pvalloc))
		recorder_init();
	return page_aligned(next.pvalloc, size);
}

/* A library closed: the code ranges the threads cached may hold another
 * library soon (--stacks). */
EXPORT int dlclose(void *handle)
{
	static int (*next_dlclose)(void *);
	int rc;

	if (unlikely(!next_dlclose))
		next_dlclose = dlsym(RTLD_NEXT, "dlclose");
	rc = next_dlclose ? next_dlclose(handle) : -1;
	stacks_code_changed();
	return rc;
}

/* ---- for tests ------------------------------------------------------------
 */

/*
 * The function an interposed one passes its calls to (NULL for any other
 * address): which allocator really serves a program that carries the
 * recorder.  The allocator tests ask where malloc and operator new live
 * (tests/fixtures/alloc/alloc.h, fx_where).
 */
EXPORT const void *mt_preload_next(const void *fn)
{
	static const struct {
		const char *name;
		void *const *next;
	} c_api[] = {
	    {"malloc", (void *const *)&next.malloc},
	    {"free", (void *const *)&next.free},
	    {"calloc", (void *const *)&next.calloc},
	    {"realloc", (void *const *)&next.realloc},
	    {"reallocarray", (void *const *)&next.reallocarray},
	    {"memalign", (void *const *)&next.memalign},
	    {"aligned_alloc", (void *const *)&next.aligned_alloc},
	    {"posix_memalign", (void *const *)&next.posix_memalign},
	    {"valloc", (void *const *)&next.valloc},
	    {"pvalloc", (void *const *)&next.pvalloc},
	};
	Dl_info me, it;

	/* by the symbol's name in this file: taking &malloc here would give
	 * whichever malloc the lookup finds first (an executable's own) */
	if (!dladdr((const void *)mt_preload_next, &me) || !dladdr(fn, &it) ||
	    it.dli_fbase != me.dli_fbase || !it.dli_sname || it.dli_saddr != fn)
		return NULL;
	recorder_init();
	for (size_t i = 0; i < sizeof(c_api) / sizeof(c_api[0]); i++)
		if (strcmp(it.dli_sname, c_api[i].name) == 0)
			return *c_api[i].next;
	for (int i = 0; i < CXX_OPS; i++)
		if (strcmp(it.dli_sname, cxx_names[i]) == 0)
			return next_op(i);
	return NULL;
}
