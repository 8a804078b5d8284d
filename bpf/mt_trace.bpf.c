// SPDX-License-Identifier: GPL-2.0
/*
 * mt_trace.bpf.c - the kernel side of mt-trace.
 *
 * Three kinds of hooks feed two ring buffers:
 *   - allocator uprobes/uretprobes (one program each, the function told
 *     apart by the attach cookie) -> events ring;
 *   - mmap/munmap/mremap/brk syscall tracepoints -> events ring;
 *   - fork/exec/exit (raw tracepoints, no tracefs needed) -> lifecycle
 *     ring, which a flood of allocator events cannot fill.
 * Raw tracepoints rather than tp_btf: libbpf needs no vmlinux BTF to attach
 * them, and CO-RE reads against the small BTF mt-trace carries, which
 * saves parsing the kernel's 5 MB BTF at every start (RSS and time).
 * Only processes in `traced` produce events; fork adds the child, exit
 * removes the process, so a reused pid is never mistaken for a traced one.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "mt_event.h"
#include "mt_probe.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by mt-trace before load. */
const volatile __u64 page_size = 4096;
/* Wake the consumer only once this much is waiting: a wakeup per event
 * costs more than the event (docs/ARCHITECTURE.md); a timer in mt-trace
 * drains the rest. */
const volatile __u64 wakeup_bytes = 1 << 20;
/* RSS updates share the lifecycle ring; they wake the consumer only at
 * this fill level, fork/exec/exit always do */
const volatile __u64 lifecycle_wakeup_bytes = 1 << 18;

/* Inspect code mapped by traced processes for allocators (on when
 * allocators are tracked; off once mt-trace stops reading, so that it never
 * leaves a process stopped). */
volatile __u32 discover_code = 0;
/*
 * The tracepoint programs (fork, exec, exit, signal_generate, sys_exit,
 * rss_stat) serve a session: set by mt-trace once its tracepoints are
 * attached, cleared when it stops reading.  Its links are closed after
 * that, by its background detacher (tracer_detach.c), and this keeps them
 * from acting meanwhile: a process the session left running is neither
 * followed nor stopped by programs nobody reads, and every syscall on the
 * machine pays one test until the links are gone.
 */
volatile __u32 session_live = 0;
/* Stop a process that maps new code until it is inspected (lossless; the
 * default) or let it run on while mt-trace attaches (--no-stop). */
const volatile bool stop_for_new_code = true;
/*
 * mt-trace --fast: libc and libstdc++ carry no probes for the tree; a
 * process whose program does not load the preloaded recorder gets links
 * of its own instead (lib/capture/recorder/fast_links.c).  Whether a program
 * will load it is known only once it is exec'd, so every exec stops for
 * mt-trace to look (not only those of programs never seen), and a fork
 * child of a process with its own links stops before it runs, to get its
 * own: it inherits the breakpoints, not the link.
 */
const volatile bool fast_links = false;
/*
 * mt-trace acts for another user (sudo): a process of the tree that execs
 * a program with more rights than theirs (set-user-ID, set-group-ID, file
 * capabilities: the kernel's secureexec, AT_SECURE) is not theirs to look
 * into: its addresses, sizes and stacks would show them a privileged
 * process's layout, which the kernel hides from them (/proc/PID/maps,
 * ptrace).  From that exec on none of its events is recorded but its exit,
 * and no process it forks is followed.
 */
const volatile bool privileged_unseen = false;
/* --fast: what a program that will load the recorder finds at its exec:
 * LD_PRELOAD starting with the recorder's path (the same for every session
 * of a build: a constant), MT_FAST_SHM naming this session's memfd, which
 * it still holds as fd fast_memfd (inode fast_memfd_ino).  Such an exec
 * need not stop. */
const volatile char fast_preload[256] = {};
const volatile __u32 fast_preload_len = 0;
const volatile char fast_shm[64] = {};
const volatile __u32 fast_shm_len = 0;
volatile __s32 fast_memfd = -1;
volatile __u64 fast_memfd_ino = 0;
/* --fast: the recorder's own file (libmt-preload.so), by the kernel's
 * device number (major << 20 | minor) and inode: its mappings are the
 * tracer's (MT_MMAP_TRACER) */
volatile __u64 fast_preload_dev = 0;
volatile __u64 fast_preload_ino = 0;

/*
 * Backpressure (the default; off with --no-backpressure or --no-stop): a
 * traced process whose record finds its ring past the ring's high-water
 * mark is stopped until mt-trace has drained the ring, instead of losing
 * what it would make next.  The marks are set by mt-trace (0: never); the
 * switch goes off once mt-trace stops reading, so that it never leaves a
 * process stopped.  Every stop bumps `throttles`, which mt-trace reads
 * through the mapped .bss: the stops on record in `traced` are looked
 * at only when it moved.
 */
const volatile __u64 events_high_water = 0;
const volatile __u64 lifecycle_high_water = 0;
volatile __u32 backpressure = 0;
volatile __u64 throttles = 0;

/* Flipped at run time by mt-trace (enable/disable, --start-disabled). */
volatile __u32 allocs_enabled = 1;
volatile __u32 syscalls_enabled = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20); /* resized by mt-trace (--ring-size) */
} events SEC(".maps");

/* fork/exec/exit and RSS updates: one per page fault at worst (touching
 * 1 GiB makes 262 k).  1 MiB (18,700 events, 2 MiB of RSS) loses none of
 * those; 512 KiB lost 2% under load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} lifecycle SEC(".maps");

/* Processes (thread-group ids) being traced.  Not preallocated: making
 * 65,536 entries up front took 1.7 ms of every start, for a tree that
 * usually has a handful (and its size: mt_probe.h, MT_PROCESS_SLOTS). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_PROCESS_SLOTS);
	__type(key, __u32);
	__type(value, struct mt_traced);
} traced SEC(".maps");

/* Files whose mapped code mt-trace has inspected or is inspecting (not
 * preallocated either). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_CODE_FILE_SLOTS);
	__type(key, struct mt_code_key);
	__type(value, struct mt_code_seen);
} code_files SEC(".maps");

/* A table of processes (tgid) -> a timestamp: the stops mt-trace undid,
 * written by mt-trace alone (the BPF side's are in `traced`'s values). */
#define TGID_TIMES(name)                                                       \
	struct {                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__uint(max_entries, MT_PROCESS_SLOTS);                         \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} name SEC(".maps")

/* A stop for new code is on record in its process's `traced` entry
 * (struct mt_traced: stopped), written before the stop, gone at exit;
 * `resumed` holds the latest such stop mt-trace has undone.  Together
 * they tell mt-trace's watchdog (lib/capture/session/watchdog.c) who is still
 * waiting, should mt-trace die. */
TGID_TIMES(resumed);

/* Backpressure's stops (mt_traced: throttled, written after the stop,
 * and stopped_by_other, a stop someone else made after it, which mt-trace
 * leaves in place): `unthrottled` holds the stop mt-trace undid last, the
 * same pair as stopped/resumed, watched by the watchdog the same way. */
TGID_TIMES(unthrottled);

/* --fast: processes with links of their own: tgid -> the serial number
 * in those links' cookies (MT_COOKIE_LINK).  Written by mt-trace alone,
 * while the process is stopped. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_PROCESS_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} pid_links SEC(".maps");

/* --fast: new processes forked by one in pid_links, not yet stopped for
 * links of their own: tgid -> its parent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_PROCESS_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} fork_stops SEC(".maps");

/* Events that could not be delivered, by enum mt_lost_reason. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MT_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/*
 * Per-thread state between a call's entry and its return.  sp is the stack
 * pointer at the entry of the outermost traced call: a traced call entered
 * with a lower sp is nested inside it (realloc(NULL, n) -> malloc) and is
 * not the program's own call; the return seen with sp above it is the
 * outermost one's (a tail call's return is shared with its caller's, and the
 * first handler to run reports the caller's call).  A stale state (a return
 * never seen) is recognised the same way once a call enters above its sp.
 */
struct call_state {
	__u64 sp;
	__u64 arg0, arg1, arg2;
	__u32 fn;
	__u32 active;
	/* the last entry-only free-like call (free, delete): a free-like
	 * call it makes next with the same pointer is its own, not the
	 * program's (C++ delete calls free) */
	__u64 freed_ptr;
	__u64 freed_sp;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call_state);
} calls SEC(".maps");

/* The direct calls of a free-like function from inside its own file
 * (bpf/mt_probe.h, MT_COOKIE_SITE): written by mt-trace before the
 * command runs, read here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MT_INTERNAL_CALLS_MAX);
	__type(key, __u64);
	__type(value, __u8);
} internal_calls SEC(".maps");

static __always_inline void count_lost(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &reason);

	if (n)
		*n += 1;
}

/* The traced process tgid's entry; NULL when its events are not
 * recorded. */
static __always_inline struct mt_traced *traced_entry(__u32 tgid)
{
	struct mt_traced *entry = bpf_map_lookup_elem(&traced, &tgid);

	return entry && entry->state == MT_TRACED ? entry : NULL;
}

static __always_inline bool is_traced(__u32 tgid)
{
	return traced_entry(tgid) != NULL;
}

#define SIGSTOP_ 19
#define SIGTSTP_ 20
#define SIGTTIN_ 21
#define SIGTTOU_ 22

/*
 * Backpressure: stop the current process, a traced one, until mt-trace
 * has drained the rings.  Stop first, then put the stop on record: mt-trace
 * continues only recorded stops, so its SIGCONT always comes after the
 * SIGSTOP (a SIGCONT cancels a stop still pending; one sent before would
 * leave the process stopped for good).  The signal goes to the current
 * thread, not to the process: a SIGSTOP sent to the process wakes only the
 * thread that sent it, and a second one while it is pending is a no-op, so
 * the group stop began only once that thread got back to user space; were
 * it preempted first (by mt-trace, woken by this very submit), the other
 * threads ran on and filled the ring (seen: 346 events lost, 64 threads on a
 * 64 KiB ring beside a CPU hog, one CI run).  Sent to each thread past the
 * mark, each stops on its own way back to user space (a stop signal stops
 * the whole group whichever thread takes it; the SIGCONT clears those still
 * pending in every thread), so what lands above the mark is at most a record
 * or two per thread.  A global function, so the verifier checks it once per
 * program rather than at each of the ring reservations it is inlined into: that
 * halved the time the kernel takes to load the programs (BPF_PROG_LOAD 22 -> 11
 * ms a session, strace -T), a fixed cost of every mt-trace run.
 */
__noinline int mt_throttle(void)
{
	struct mt_traced *entry;

	if (!backpressure)
		return 0;
	entry = traced_entry(bpf_get_current_pid_tgid() >> 32);
	if (!entry)
		return 0;
	if (bpf_send_signal_thread(SIGSTOP_))
		return 0; /* an exiting task: no stop */
	entry->throttled = bpf_ktime_get_ns();
	__sync_fetch_and_add(&throttles, 1);
	return 1;
}

/* The ring's fill level after a record went in: the wake-up flag for the
 * consumer, and a stop past the high-water mark. */
static __always_inline __u64 ring_pressure(void *ring, __u64 wakeup_at,
					   __u64 high_water)
{
	__u64 filled = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);

	if (filled < wakeup_at)
		return BPF_RB_NO_WAKEUP;
	if (high_water && filled >= high_water)
		mt_throttle();
	return BPF_RB_FORCE_WAKEUP;
}

/* A record did not fit: counted as lost, and its maker waits for the next
 * ones (the event itself is reserved before anything is decided). */
static __always_inline void ring_full(__u32 reason, __u64 high_water)
{
	count_lost(reason);
	if (high_water)
		mt_throttle();
}

static __always_inline struct mt_event *reserve_event(void)
{
	struct mt_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		ring_full(MT_LOST_EVENTS_RING, events_high_water);
	return e;
}

static __always_inline struct mt_event *reserve_lifecycle(__u64 bytes)
{
	struct mt_event *e = bpf_ringbuf_reserve(&lifecycle, bytes, 0);

	if (!e)
		ring_full(MT_LOST_LIFECYCLE_RING, lifecycle_high_water);
	return e;
}

static __always_inline void submit_event(struct mt_event *e)
{
	bpf_ringbuf_submit(
	    e, ring_pressure(&events, wakeup_bytes, events_high_water));
}

/* A fork or exec record (the ring's own wake-up rule: a consumer waiting
 * is woken). */
static __always_inline void submit_lifecycle(void *e)
{
	ring_pressure(&lifecycle, 0, lifecycle_high_water);
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void fill_event(struct mt_event *e, __u16 kind,
				       __u64 pid_tgid)
{
	e->timestamp = bpf_ktime_get_ns();
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->kind = kind;
	e->flags = 0;
	e->aux = 0;
	e->addr = 0;
	e->size = 0;
	e->old_addr = 0;
	e->old_size = 0;
}

#include "mt_stack.bpf.h"

/* An event; with a call stack when stack_key is not 0 (mt_stack.bpf.h). */
static __always_inline void emit_stacked(__u16 kind, __u64 pid_tgid, __u64 addr,
					 __u64 size, __u64 old_addr,
					 __u64 old_size, struct stack_keys keys)
{
	struct mt_event *e = reserve_stacked(keys);

	if (!e)
		return;
	fill_event(e, kind, pid_tgid);
	e->addr = addr;
	e->size = size;
	e->old_addr = old_addr;
	e->old_size = old_size;
	submit_event(e);
}

static __always_inline void emit(__u16 kind, __u64 pid_tgid, __u64 addr,
				 __u64 size, __u64 old_addr, __u64 old_size)
{
	struct stack_keys none = {};

	emit_stacked(kind, pid_tgid, addr, size, old_addr, old_size, none);
}

static __always_inline struct call_state *call_state(bool create)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct call_state *st;

	st = bpf_task_storage_get(&calls, task, 0,
				  create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!st && create)
		count_lost(MT_LOST_CALL_STATE);
	return st;
}

/* ---- allocator calls ---------------------------------------------------- */

/* Where this process's uretprobes return to ([uprobes] page), or 0. */
static __always_inline __u64 uretprobe_trampoline(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
}

/*
 * Is a call entering at sp made by the outermost traced call in flight (and
 * so not the program's own)?  Nested calls enter below its sp.  A tail call
 * (glibc's realloc(NULL, n) jumps to malloc) enters at the same sp, and its
 * return address slot then holds the uretprobe trampoline the outer call's
 * return probe put there; a new call after a return we never saw (an
 * exception out of operator new) finds a real return address there, and
 * is the program's.  Only that rare case reads user memory.
 */
static __always_inline bool nested_call(struct call_state *st, __u64 sp)
{
	__u64 ret_addr = 0;

	if (!st->active || sp > st->sp)
		return false;
	if (sp < st->sp)
		return true;
	bpf_probe_read_user(&ret_addr, sizeof(ret_addr), (void *)sp);
	return ret_addr == uretprobe_trampoline();
}

/*
 * The call state of a thread of a traced process.  A thread has one only
 * once its process was found traced, and a process stops being traced only
 * by exiting (or by a privileged exec, which drops it: on_exec), so having
 * one answers "traced?" without the pid table: every allocator return and
 * every call after a thread's first.
 */
static __always_inline struct call_state *traced_call_state(__u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct call_state *st = bpf_task_storage_get(&calls, task, 0, 0);

	if (st || !is_traced(tgid))
		return st;
	return call_state(true);
}

/* Is serial the current links of process tgid (not links being closed)?
 * Only --fast makes such links. */
static __always_inline bool current_link(__u32 tgid, __u32 serial)
{
	__u32 *current = bpf_map_lookup_elem(&pid_links, &tgid);

	return current && *current == serial;
}

/*
 * Is this call of a free-like function one its own file made directly, not
 * through the dynamic symbol a program calls (MT_COOKIE_SITE)?  Its return
 * address, on top of the stack at the probe (no push before it), is then
 * one of the calls mt-trace found in the file, by its distance from the
 * probed address (the same in every process, wherever the file is mapped).
 */
static __always_inline bool internal_call(struct pt_regs *ctx, __u64 cookie,
					  __u64 sp)
{
	__u32 site = MT_COOKIE_SITE(cookie);
	__u64 ret = 0, key;

	if (!site || bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
		return false;
	key = MT_INTERNAL_KEY(site, ret - bpf_get_func_ip(ctx));
	return bpf_map_lookup_elem(&internal_calls, &key) != NULL;
}

/* An entry-only free-like call (no return probe): report it unless it is
 * made by a traced call in flight or by the free-like call just before
 * (sized operator delete tail-calls operator delete, which calls free), or
 * directly by the allocator's own file. */
static __always_inline void enter_free(struct pt_regs *ctx, __u64 cookie,
				       struct call_state *st, __u64 pid_tgid,
				       __u64 ptr, __u64 sp)
{
	bool nested =
	    nested_call(st, sp) || (st->freed_ptr == ptr && sp <= st->freed_sp);

	if (nested)
		return; /* keep freed_ptr: delete[] -> delete -> free */
	if (internal_call(ctx, cookie, sp)) {
		count_lost(MT_DROP_INTERNAL_FREE);
		return;
	}
	st->freed_ptr = ptr;
	st->freed_sp = sp;
	emit(MT_EV_FREE, pid_tgid, ptr, 0, 0, 0);
}

/*
 * An allocator call enters.  True when its return must be seen: the
 * outermost call of a traced thread, recorded in its call state; free-like
 * calls, nested calls and everyone else's need none.
 */
static __always_inline bool enter_call(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 fn = MT_COOKIE_FN(cookie);
	__u64 sp = PT_REGS_SP(ctx);
	struct call_state *st;

	if (!allocs_enabled)
		return false;
	if (fn == MT_FN_FREE && PT_REGS_PARM1(ctx) == 0)
		return false; /* free(NULL) is no event */
	if (MT_COOKIE_LINK(cookie) &&
	    !current_link(pid_tgid >> 32, MT_COOKIE_LINK(cookie)))
		return false; /* a process's links being retired */
	st = traced_call_state(pid_tgid >> 32);
	if (!st)
		return false;
	if (fn == MT_FN_FREE) {
		enter_free(ctx, cookie, st, pid_tgid, PT_REGS_PARM1(ctx), sp);
		return false;
	}
	st->freed_ptr = 0;
	if (nested_call(st, sp))
		return false;
	st->active = 1;
	st->sp = sp;
	st->fn = fn;
	st->arg0 = PT_REGS_PARM1(ctx);
	st->arg1 = PT_REGS_PARM2(ctx);
	st->arg2 = PT_REGS_PARM3(ctx);
	return true;
}

SEC("uprobe")
int alloc_enter(struct pt_regs *ctx)
{
	enter_call(ctx);
	return 0;
}

/*
 * What an allocator call's return records, worked out per function first
 * and then made by one record site: each site inlines the ring's reserve,
 * fill and submit and the throttle's call, and a site per function made
 * alloc_session three times the size, its verification (a fixed cost of
 * every start) with it.
 */
struct call_event {
	__u64 addr, size, old_addr, old_size;
	__u16 kind;	/* 0: the call made nothing to record */
	bool unstacked; /* recorded without the call's stack */
};

static __always_inline void returned_block(struct call_event *ev, __u16 kind,
					   __u64 ret, __u64 size, __u64 align)
{
	if (!ret)
		return;
	ev->kind = kind;
	ev->addr = ret;
	ev->size = size;
	ev->old_size = align;
}

static __always_inline void returned_realloc(struct call_event *ev, __u64 ret,
					     __u64 old, __u64 size)
{
	if (ret) {
		ev->kind = MT_EV_REALLOC;
		ev->addr = ret;
		ev->size = size;
		ev->old_addr = old;
	} else if (size == 0 && old) {
		/* realloc(p, 0) freed p and returned NULL */
		ev->kind = MT_EV_FREE;
		ev->addr = old;
		ev->unstacked = true;
	}
}

static __always_inline void
call_returned(struct call_event *ev, const struct call_state *st, __u64 ret)
{
	__u64 a0 = st->arg0, a1 = st->arg1, a2 = st->arg2, addr = 0;

	switch (st->fn) {
	case MT_FN_MALLOC:
		returned_block(ev, MT_EV_MALLOC, ret, a0, 0);
		break;
	case MT_FN_MALLOC_N:
		returned_block(ev, MT_EV_MALLOC, ret, a0 * a1, 0);
		break;
	case MT_FN_CALLOC:
	case MT_FN_CALLOC_ALIGNED:
		returned_block(ev, MT_EV_CALLOC, ret, a0 * a1, 0);
		break;
	case MT_FN_REALLOC:
	case MT_FN_REALLOC_ALIGNED:
		returned_realloc(ev, ret, a0, a1);
		break;
	case MT_FN_REALLOCARRAY:
		returned_realloc(ev, ret, a0, a1 * a2);
		break;
	case MT_FN_MEMALIGN:
		returned_block(ev, MT_EV_ALIGNED_ALLOC, ret, a1, a0);
		break;
	case MT_FN_ALIGNED_SIZE_FIRST:
		returned_block(ev, MT_EV_ALIGNED_ALLOC, ret, a0, a1);
		break;
	case MT_FN_VALLOC:
		returned_block(ev, MT_EV_ALIGNED_ALLOC, ret, a0, page_size);
		break;
	case MT_FN_POSIX_MEMALIGN:
		if (ret != 0)
			break; /* an error number: nothing allocated */
		if (bpf_probe_read_user(&addr, sizeof(addr), (void *)a0) == 0)
			returned_block(ev, MT_EV_ALIGNED_ALLOC, addr, a2, a1);
		break;
	case MT_FN_XALLOCX:
		/* in place or not at all: the block keeps its address */
		if (a0 && ret >= a1) {
			ev->kind = MT_EV_REALLOC;
			ev->addr = a0;
			ev->size = a1;
			ev->old_addr = a0;
		}
		break;
	}
}

static __always_inline void emit_return(struct call_state *st, __u64 pid_tgid,
					__u64 ret, struct stack_keys stack)
{
	struct stack_keys none = {};
	struct call_event ev = {};

	call_returned(&ev, st, ret);
	if (ev.kind)
		emit_stacked(ev.kind, pid_tgid, ev.addr, ev.size, ev.old_addr,
			     ev.old_size, ev.unstacked ? none : stack);
}

/* with_stacks: a constant of each program, so that a program made without
 * them holds no call to the stack walk (see session_stacks) */
static __always_inline void return_call(struct pt_regs *ctx, bool with_stacks)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct call_state *st = call_state(false);

	/* a state is only made for a traced thread (traced_call_state) */
	if (!st || !st->active || PT_REGS_SP(ctx) <= st->sp)
		return; /* not the outermost call's return */
	st->active = 0;
	struct stack_keys none = {};

	if (allocs_enabled)
		emit_return(st, pid_tgid, PT_REGS_RC(ctx),
			    with_stacks ? call_stack(ctx, pid_tgid) : none);
}

SEC("uretprobe")
int alloc_return(struct pt_regs *ctx)
{
	return_call(ctx, false);
	return 0;
}

/*
 * Both ends of a call in one program, for a uprobe session link (Linux
 * 6.10): the entry's answer says whether the kernel should catch the
 * return at all, so a process nobody traces, a nested call or a free pays
 * one trap instead of two.  Entry or return?  At the entry the registers'
 * ip is the probed address (bpf_get_func_ip); at the return it is the
 * caller's return address.  (bpf_session_is_return() says the same, but a
 * kfunc would make libbpf load the kernel's whole BTF.)
 */
static __always_inline int session_call(struct pt_regs *ctx, bool with_stacks)
{
	if (PT_REGS_IP(ctx) != bpf_get_func_ip(ctx)) {
		return_call(ctx, with_stacks);
		return 0;
	}
	return enter_call(ctx) ? 0 : 1; /* 1: no return probe this time */
}

SEC("uprobe")
int alloc_session(struct pt_regs *ctx)
{
	return session_call(ctx, false);
}

/*
 * The programs that record call stacks come twice, without the stack walk
 * and with it (--stacks), and mt-trace loads one of each pair: the walk is
 * ~1,600 instructions the kernel would examine at every start (its checks
 * of the whole program run before the dead branches are cut), ~0.5 ms a
 * program, for sessions that never take a stack.  Kernel names are 15
 * characters at most.
 */
SEC("uprobe")
int session_stacks(struct pt_regs *ctx)
{
	return session_call(ctx, true);
}

SEC("uretprobe")
int return_stacks(struct pt_regs *ctx)
{
	return_call(ctx, true);
	return 0;
}

/* ---- code mapped by traced processes ------------------------------------ */

#define PROT_EXEC_     0x4
#define MAP_ANONYMOUS_ 0x20
#define MAP_FIXED_     0x10

/*
 * A traced process maps code of a file mt-trace has not inspected (an exec,
 * a library loaded by ld.so or dlopen): stop the process before it can run
 * that code and tell mt-trace, which inspects the file, attaches the probes
 * of any allocator in it, then lets the process continue.  Nothing it
 * allocates through that allocator is missed.
 */
/*
 * Stop the current process (tgid) and tell mt-trace with record e.  Stop
 * first, then tell: mt-trace's SIGCONT must come after the SIGSTOP, or the
 * process would stop for good; and only a stop on record in its `traced`
 * entry, which the watchdog can undo.
 */
static __always_inline void stop_and_tell(struct mt_event *e, __u32 tgid)
{
	struct mt_traced *entry = stop_for_new_code ? traced_entry(tgid) : NULL;

	if (entry) {
		entry->stopped = e->timestamp;
		e->flags |= MT_NEW_CODE_STOPPED;
		bpf_send_signal(SIGSTOP_);
	}
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* always: stop even for a file already inspected (an exec under --fast:
 * mt-trace decides whether the new program needs links of its own). */
static __always_inline void new_code(struct file *file, __u64 pid_tgid,
				     __u64 addr, __u64 len, bool always)
{
	struct mt_code_key key = {};
	struct mt_code_seen *seen, pending = {MT_CODE_PENDING, 0};
	struct inode *inode;
	struct mt_event *e;

	if (!discover_code || !file)
		return;
	inode = BPF_CORE_READ(file, f_inode);
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	pending.generation = BPF_CORE_READ(inode, i_generation);
	seen = bpf_map_lookup_elem(&code_files, &key);
	if (seen && (seen->state == MT_CODE_DONE_ANY_GENERATION ||
		     (seen->state == MT_CODE_DONE &&
		      seen->generation == pending.generation))) {
		if (!always)
			return;
	} else if (!seen || seen->generation != pending.generation) {
		/* a file never seen, or a new one on a deleted file's inode */
		bpf_map_update_elem(&code_files, &key, &pending, BPF_ANY);
	}
	e = reserve_lifecycle(sizeof(*e));
	if (!e)
		return;
	fill_event(e, MT_EV_NEW_CODE, pid_tgid);
	e->addr = addr;
	e->size = len;
	e->old_addr = key.dev;
	e->old_size = key.ino;
	e->aux = pending.generation;
	stop_and_tell(e, pid_tgid >> 32);
}

/* x86-64's system calls that make a process (or a thread) */
#define NR_CLONE  56
#define NR_FORK	  57
#define NR_VFORK  58
#define NR_CLONE3 435

/*
 * --fast: the current task returns from the call that made it; if it is a
 * new process whose parent has links of its own (on_fork put it in
 * fork_stops), stop it for mt-trace to give it its own before it runs a
 * single instruction of its program.  (tp_btf/sched_process_fork could
 * stop it from the parent with the bpf_send_signal_task kfunc, but a
 * kfunc makes libbpf load the kernel's whole BTF at every start.)
 */
static __always_inline void stop_forked_child(__u64 pid_tgid, long id)
{
	__u32 tgid = pid_tgid >> 32, *parent;
	struct mt_event *e;

	if (id != NR_CLONE && id != NR_CLONE3 && id != NR_FORK &&
	    id != NR_VFORK)
		return;
	if ((__u32)pid_tgid != tgid)
		return; /* a new thread */
	parent = bpf_map_lookup_elem(&fork_stops, &tgid);
	if (!parent)
		return;
	e = reserve_lifecycle(sizeof(*e));
	if (e) {
		fill_event(e, MT_EV_NEW_CODE, pid_tgid);
		e->flags = MT_NEW_CODE_FORKED;
		e->old_addr = *parent;
	}
	bpf_map_delete_elem(&fork_stops, &tgid);
	if (e)
		stop_and_tell(e, tgid);
}

static __always_inline struct file *fd_file(int fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds, *file = NULL;

	if (fd < 0 || (unsigned)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

/* ---- address-space system calls ---------------------------------------- */

static __always_inline __u64 page_align(__u64 len)
{
	return (len + page_size - 1) & ~(page_size - 1);
}

static __always_inline bool syscall_failed(long ret)
{
	return (unsigned long)ret >= (unsigned long)-4095;
}

/*
 * The syscalls are hooked with raw_tp/sys_exit rather than the per-syscall
 * tracepoints: those need tracefs and, worse, each costs ~40 ms to detach,
 * serialised in the kernel (8 of them made `mt-trace -- true` take 0.35 s).
 * The price is a BPF call on every syscall while tracing; the syscall
 * number is tested first so that is all most syscalls pay.  No sys_enter:
 * on x86-64 a syscall's arguments are still in the registers the entry
 * saved (pt_regs) when it returns, and the one thing the entry had to
 * read, brk's old break, is kept in the process's `traced` entry (each
 * tracepoint attached cost ~1 ms of every start here, its text pokes and
 * their IPIs, and sys_enter ran on every syscall of the machine).
 */
#define NR_MMAP	  9
#define NR_MUNMAP 11
#define NR_BRK	  12
#define NR_MREMAP 25

static __always_inline bool is_memory_syscall(long id)
{
	return id == NR_MMAP || id == NR_MUNMAP || id == NR_BRK ||
	       id == NR_MREMAP;
}

static __always_inline __u64 current_brk(void)
{
	return BPF_CORE_READ(bpf_get_current_task_btf(), mm, brk);
}

/* What a memory syscall's return records (kind 0: nothing): worked out
 * per syscall, then made by one record site in sys_exit(), which inlines
 * the ring's reserve (and the stack's) once rather than once a syscall:
 * a fixed cost of every start, in verified instructions (as for the
 * allocator calls' struct call_event). */
struct syscall_event {
	__u64 addr, size, old_addr, old_size, flags, aux;
	__u16 kind;
};

static __always_inline void brk_event(struct syscall_event *ev, __u64 old_brk,
				      __u64 new_brk)
{
	/* brk returns the old break when it fails, so an unchanged break is
	 * a query or a failure: no event */
	if (new_brk == old_brk || old_brk == 0)
		return;
	ev->kind = MT_EV_BRK;
	ev->addr = new_brk;
	ev->size = new_brk > old_brk ? new_brk - old_brk : old_brk - new_brk;
	ev->old_addr = old_brk;
}

/* A brk of a traced process returned: the break it had before is the one
 * the last brk left (or exec or fork set), the one now goes in its place
 * (an exchange: two threads' brks, each taking what the other left, still
 * add up to the break's whole change); also while syscalls are not
 * recorded, so that the first event after --start-disabled starts from
 * the right break.  0: not a traced process. */
static __always_inline __u64 brk_before(__u32 tgid)
{
	struct mt_traced *entry = traced_entry(tgid);

	if (!entry)
		return 0;
	return __sync_lock_test_and_set(&entry->brk, current_brk());
}

/* Is the file mapping ev of fd the session's shared memory (--fast: the
 * recorder's rings: MT_TRACER_SHM) or the recorder's own library
 * (MT_TRACER_CODE)?  Memory the tracer adds, not the program's.  -1:
 * neither. */
static __always_inline int tracer_mapping(const struct syscall_event *ev,
					  int fd)
{
	struct inode *inode;
	struct file *file;
	__u64 ino;

	if (!fast_memfd_ino || (ev->aux & MAP_ANONYMOUS_))
		return -1;
	file = fd_file(fd);
	if (!file)
		return -1;
	inode = BPF_CORE_READ(file, f_inode);
	ino = BPF_CORE_READ(inode, i_ino);
	if (ino == fast_memfd_ino)
		return MT_TRACER_SHM;
	if (ino == fast_preload_ino &&
	    BPF_CORE_READ(inode, i_sb, s_dev) == fast_preload_dev)
		return MT_TRACER_CODE;
	return -1;
}

static __always_inline bool in_range(__u64 x, __u64 lo, __u64 hi)
{
	return x >= lo && x < hi;
}

/* Is ip an instruction of the recorder's library in process entry? */
static __always_inline bool tracer_code(const struct mt_traced *entry, __u64 ip)
{
	return in_range(ip, entry->tracer_lo[MT_TRACER_CODE],
			entry->tracer_hi[MT_TRACER_CODE]);
}

/*
 * A successful mmap of a traced process: is the mapping the tracer's?
 * The session's shared memory and the recorder's library are (their
 * ranges kept: the library's span is its first mapping, the loader maps
 * its segments over it with MAP_FIXED), and so is any mapping the
 * recorder's own code asked for (its stack walk's state: it makes that
 * system call itself, lib/preload/own_mmap.h).  Also while system calls
 * are not recorded (--start-disabled): the ranges are needed later.  A
 * global function, verified once: inlined, its paths multiplied those of
 * sys_exit (on_sys_exit 2,072 -> 1,730 instructions walked, 2.4 -> 1.6 ms
 * of every start-up, mt-trace -vvv).
 */
__noinline int tracer_mmap(__u64 regs_ptr, long ret, __u32 tgid)
{
	struct pt_regs *regs = (struct pt_regs *)regs_ptr;
	struct syscall_event ev = {};
	struct mt_traced *entry;
	int which;

	if (!fast_memfd_ino || syscall_failed(ret) ||
	    !(entry = traced_entry(tgid)))
		return false;
	ev.aux = BPF_CORE_READ(regs, r10); /* flags */
	which = tracer_mapping(&ev, BPF_CORE_READ(regs, r8));
	if (which == MT_TRACER_SHM ||
	    (which == MT_TRACER_CODE && !(ev.aux & MAP_FIXED_))) {
		entry->tracer_lo[which & 1] = ret;
		entry->tracer_hi[which & 1] =
		    ret + page_align(BPF_CORE_READ(regs, si));
	}
	return which >= 0 || tracer_code(entry, BPF_CORE_READ(regs, ip));
}

static __always_inline int sys_exit(struct pt_regs *regs, long ret,
				    bool with_stacks)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	long id = BPF_CORE_READ(regs, orig_ax);
	struct syscall_event ev = {};
	struct stack_keys stack = {}, none = {};
	__u64 old_brk = 0;
	struct mt_event *e;

	bool tracer = false;

	if (!session_live)
		return 0;
	if (fast_links && ret == 0)
		stop_forked_child(pid_tgid, id);
	if (!is_memory_syscall(id))
		return 0;
	if (id == NR_MMAP)
		tracer = tracer_mmap((__u64)regs, ret, pid_tgid >> 32);
	if (id == NR_BRK && !(old_brk = brk_before(pid_tgid >> 32)))
		return 0;
	if (!syscalls_enabled || (id != NR_BRK && !is_traced(pid_tgid >> 32)))
		return 0;
	switch (id) {
	case NR_MMAP:
		if (syscall_failed(ret))
			break;
		ev.kind = MT_EV_MMAP;
		ev.addr = ret;
		ev.size = page_align(BPF_CORE_READ(regs, si));
		ev.flags = BPF_CORE_READ(regs, dx); /* prot */
		ev.aux = BPF_CORE_READ(regs, r10);  /* flags */
		if (tracer)
			ev.flags |= MT_MMAP_TRACER;
		break;
	case NR_MUNMAP:
		if (ret != 0)
			break;
		ev.kind = MT_EV_MUNMAP;
		ev.addr = BPF_CORE_READ(regs, di);
		ev.size = page_align(BPF_CORE_READ(regs, si));
		break;
	case NR_MREMAP:
		if (syscall_failed(ret))
			break;
		ev.kind = MT_EV_MREMAP;
		ev.addr = ret;
		ev.size = page_align(BPF_CORE_READ(regs, dx));
		ev.old_addr = BPF_CORE_READ(regs, di);
		ev.old_size = page_align(BPF_CORE_READ(regs, si));
		break;
	case NR_BRK:
		brk_event(&ev, old_brk, ret);
		break;
	}
	if (!ev.kind)
		return 0;
	stack = with_stacks ? syscall_stack(regs, pid_tgid) : none;
	e = reserve_stacked(stack);
	if (e) {
		fill_event(e, ev.kind, pid_tgid);
		e->addr = ev.addr;
		e->size = ev.size;
		e->old_addr = ev.old_addr;
		e->old_size = ev.old_size;
		e->flags = ev.flags;
		e->aux = ev.aux;
		submit_event(e);
	}
	if (ev.kind == MT_EV_MMAP && (ev.flags & PROT_EXEC_) &&
	    !(ev.aux & MAP_ANONYMOUS_)) {
		new_code(fd_file(BPF_CORE_READ(regs, r8)), pid_tgid, ev.addr,
			 ev.size, false);
		if (with_stacks && stacks_enabled)
			emit_code_map(pid_tgid, ev.addr);
	}
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	return sys_exit(regs, ret, false);
}

/* on_sys_exit with --stacks (see session_stacks) */
SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_stacks, struct pt_regs *regs, long ret)
{
	return sys_exit(regs, ret, true);
}

/* ---- resident memory ---------------------------------------------------- */

/*
 * kmem:rss_stat fires on every change of an mm's RSS counter.  Only the
 * classic tracepoint carries the exact size (it sums the per-CPU counter);
 * only the raw tracepoint carries the mm itself, whose owner says which
 * process the memory belongs to -- also when another task caused the change
 * (reclaim, a parent reading the child's memory).  Both fire for the same
 * update, on the same CPU with preemption off, one right after the other,
 * so the two halves meet in a per-CPU slot; whichever comes second emits
 * the event, so the order the kernel runs them in does not matter.
 */
enum rss_half { RSS_EMPTY = 0, RSS_HAVE_OWNER, RSS_HAVE_SIZE };

struct rss_slot {
	__u32 state; /* enum rss_half */
	__s32 member;
	__u32 owner_tgid;   /* 0: not a traced process's memory */
	__u32 unattributed; /* traced, but the mm is not the owner's */
	__u32 tracer;	    /* the tracer's pages (in_tracer_fault) */
	__u32 pad;
	__u64 size;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rss_slot);
} rss_slots SEC(".maps");

static __always_inline struct rss_slot *rss_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&rss_slots, &zero);
}

static __always_inline void emit_rss(struct rss_slot *slot)
{
	struct mt_event *e;
	__u64 flags;

	slot->state = RSS_EMPTY;
	if (slot->unattributed) {
		count_lost(MT_DROP_RSS_UNATTRIBUTED);
		return;
	}
	if (!slot->owner_tgid)
		return;
	e = reserve_lifecycle(sizeof(*e));
	if (!e)
		return;
	fill_event(e, MT_EV_RSS, bpf_get_current_pid_tgid());
	e->pid = slot->owner_tgid; /* the tid stays the task that caused it */
	e->aux = slot->member;
	e->size = slot->size;
	e->flags = slot->tracer ? MT_RSS_TRACER : 0;
	flags = ring_pressure(&lifecycle, lifecycle_wakeup_bytes,
			      lifecycle_high_water);
	bpf_ringbuf_submit(e, flags);
}

/*
 * The tracer's own resident memory (--fast).  A traced process's page
 * fault is the tracer's when it touches memory the tracer added (the
 * recorder's shared memory, its library: struct mt_traced's ranges) or
 * when the instruction that faulted is the recorder's (its stack walk's
 * state, its data, the stack its calls use).  The kernel counts a fault's
 * pages from inside the fault; the fault's user registers, kept here, are
 * how that RSS update knows it is in a tracer's fault: they are the
 * task's saved registers until it next enters the kernel (a system call's
 * ip is past its syscall instruction, never an instruction that faulted).
 */
struct tracer_fault {
	__u64 ip, sp; /* ip 0: the task's latest fault was the program's */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tracer_fault);
} tracer_faults SEC(".maps");

/* Loaded under --fast with RSS on, where the kernel has the tracepoint
 * (x86-64): elsewhere no RSS update is marked the tracer's. */
SEC("raw_tp/page_fault_user")
int BPF_PROG(on_page_fault, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	struct mt_traced *entry;
	struct tracer_fault *f;
	__u64 ip;
	bool mine;

	if (!session_live || !fast_memfd_ino)
		return 0;
	entry = traced_entry(bpf_get_current_pid_tgid() >> 32);
	if (!entry)
		return 0;
	ip = BPF_CORE_READ(regs, ip);
	mine = in_range(address, entry->tracer_lo[MT_TRACER_SHM],
			entry->tracer_hi[MT_TRACER_SHM]) ||
	       in_range(address, entry->tracer_lo[MT_TRACER_CODE],
			entry->tracer_hi[MT_TRACER_CODE]) ||
	       tracer_code(entry, ip);
	f = bpf_task_storage_get(&tracer_faults, bpf_get_current_task_btf(), 0,
				 mine ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!f)
		return 0;
	f->ip = mine ? ip : 0;
	f->sp = BPF_CORE_READ(regs, sp);
	return 0;
}

/* Is the current task inside a fault on_page_fault found the tracer's? */
static __always_inline bool in_tracer_fault(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct tracer_fault *f;
	struct pt_regs *regs;

	if (!fast_memfd_ino)
		return false;
	f = bpf_task_storage_get(&tracer_faults, task, 0, 0);
	if (!f || !f->ip)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	return BPF_CORE_READ(regs, ip) == f->ip &&
	       BPF_CORE_READ(regs, sp) == f->sp;
}

SEC("raw_tp/rss_stat")
int BPF_PROG(on_rss_owner, struct mm_struct *mm, int member)
{
	struct rss_slot *slot = rss_slot();
	struct task_struct *owner;
	__u32 tgid = 0, unattributed = 0, tracer = 0;

	if (!slot || !session_live)
		return 0;
	owner = BPF_CORE_READ(mm, owner);
	if (owner) {
		tgid = BPF_CORE_READ(owner, tgid);
		if (!is_traced(tgid))
			tgid = 0;
		else if (BPF_CORE_READ(owner, mm) != mm)
			unattributed = 1; /* a new mm at fork/exec, or exit */
		else if (tgid == bpf_get_current_pid_tgid() >> 32)
			tracer = in_tracer_fault();
	}
	if (slot->state == RSS_HAVE_SIZE && slot->member == member) {
		slot->owner_tgid = tgid;
		slot->unattributed = unattributed;
		slot->tracer = tracer;
		emit_rss(slot);
		return 0;
	}
	slot->state = RSS_HAVE_OWNER;
	slot->member = member;
	slot->owner_tgid = tgid;
	slot->unattributed = unattributed;
	slot->tracer = tracer;
	return 0;
}

SEC("tracepoint/kmem/rss_stat")
int on_rss_size(struct trace_event_raw_rss_stat *ctx)
{
	struct rss_slot *slot = rss_slot();

	if (!slot || !session_live)
		return 0;
	if (slot->state == RSS_HAVE_OWNER && slot->member == ctx->member) {
		slot->size = ctx->size;
		emit_rss(slot);
		return 0;
	}
	slot->state = RSS_HAVE_SIZE;
	slot->member = ctx->member;
	slot->size = ctx->size;
	return 0;
}

/* ---- process life -------------------------------------------------------- */

/* A forked child has its parent's mappings: the tracer's too. */
static __always_inline void copy_tracer_ranges(struct mt_traced *child,
					       __u32 parent_tgid)
{
	struct mt_traced *parent = traced_entry(parent_tgid);

	if (!parent)
		return;
	child->tracer_lo[0] = parent->tracer_lo[0];
	child->tracer_hi[0] = parent->tracer_hi[0];
	child->tracer_lo[1] = parent->tracer_lo[1];
	child->tracer_hi[1] = parent->tracer_hi[1];
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	struct mt_traced traced_state = {.state = MT_TRACED};
	struct mt_event *e;

	if (!session_live)
		return 0;
	if (BPF_CORE_READ(child, pid) != child_tgid)
		return 0; /* a new thread, not a new process */
	if (!is_traced(parent_tgid))
		return 0;
	traced_state.brk = BPF_CORE_READ(child, mm, brk); /* its parent's */
	copy_tracer_ranges(&traced_state, parent_tgid);
	if (bpf_map_update_elem(&traced, &child_tgid, &traced_state, BPF_ANY)) {
		count_lost(MT_LOST_PID_TABLE);
		return 0;
	}
	/* before the child can run: it stops at its first return */
	if (fast_links && bpf_map_lookup_elem(&pid_links, &parent_tgid))
		bpf_map_update_elem(&fork_stops, &child_tgid, &parent_tgid,
				    BPF_ANY);
	e = reserve_lifecycle(sizeof(*e));
	if (!e)
		return 0;
	fill_event(e, MT_EV_FORK, bpf_get_current_pid_tgid());
	e->pid = child_tgid;
	e->tid = child_tgid;
	e->old_addr = parent_tgid;
	submit_lifecycle(e);
	return 0;
}

/* ---- --fast: will an exec'd program carry the recorder? ----------------- */

/* the longest environment string read, and how many are read */
#define ENV_STRING_MAX 4096
#define ENV_VARS_MAX   1024

struct env_scan {
	__u64 at, end; /* the environment strings, in the new program */
	int preload;   /* the last LD_PRELOAD (the loader's): 1 starts with
			* the recorder, 0 not, -1 none */
	int shm;       /* the first MT_FAST_SHM (getenv's): 1 this session's,
			* 0 another, -1 none */
	bool unsure;   /* a string not read whole: mt-trace looks */
};

/*
 * The scan's state lives in a map value, not on the caller's stack: the
 * verifier follows a bpf_loop callback's writes to the caller's stack
 * precisely, and verified scan_env_string again for each combination of
 * the tri-states it had seen (on_exec: 0.7 -> 3.4 ms of verification
 * under --fast).  A map value's contents are unknown to it: one pass.
 * It is this CPU's; busy guards it against a second exec's scan on the
 * same CPU (a preempted tracepoint program, as the stack walk's guard in
 * mt_stack.bpf.h): that one does not scan and stops for mt-trace.
 */
struct env_string {
	__u64 busy;
	struct env_scan scan;
	char s[ENV_STRING_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct env_string);
} env_strings SEC(".maps");

/* bpf_strncmp compares with strings in read-only maps: .rodata */
const char ld_preload_eq[] = "LD_PRELOAD=";
const char mt_fast_shm_eq[] = "MT_FAST_SHM=";

/* bpf_loop callback: one environment string. */
static long scan_env_string(__u64 i, void *unused)
{
	__u32 zero = 0, n = fast_preload_len;
	struct env_string *buf = bpf_map_lookup_elem(&env_strings, &zero);
	struct env_scan *scan;
	long len;
	char next;

	if (!buf)
		return 1;
	scan = &buf->scan;
	if (scan->at >= scan->end)
		return 1;
	len = bpf_probe_read_user_str(buf->s, sizeof(buf->s), (void *)scan->at);
	if (len <= 0 || len >= (long)sizeof(buf->s)) {
		scan->unsure = true;
		return 1;
	}
	scan->at += len;
	if (bpf_strncmp(buf->s, sizeof(ld_preload_eq) - 1, ld_preload_eq) ==
	    0) {
		if (n == 0 || n >= sizeof(fast_preload)) {
			scan->unsure = true;
			return 1;
		}
		next = buf->s[(sizeof(ld_preload_eq) - 1 + n) &
			      (ENV_STRING_MAX - 1)];
		scan->preload =
		    bpf_strncmp(buf->s + sizeof(ld_preload_eq) - 1, n,
				(const char *)fast_preload) == 0 &&
		    (next == ':' || next == ' ' || next == '\0');
	} else if (scan->shm < 0 &&
		   bpf_strncmp(buf->s, sizeof(mt_fast_shm_eq) - 1,
			       mt_fast_shm_eq) == 0) {
		n = fast_shm_len + 1; /* with the NUL: all of it */
		if (n < 2 || n > sizeof(fast_shm)) {
			scan->unsure = true;
			return 1;
		}
		/* n counts the NUL: the value is fast_shm, not longer (a
		 * loop by hand here was walked 64 times by the verifier,
		 * half of on_exec's load) */
		scan->shm = bpf_strncmp(buf->s + sizeof(mt_fast_shm_eq) - 1, n,
					(const char *)fast_shm) == 0;
	}
	return 0;
}

/* The environment the process exec'd with names the recorder first in
 * LD_PRELOAD and this session's MT_FAST_SHM, every string read whole. */
static __always_inline bool env_keeps_recorder(struct env_string *buf)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct env_scan *scan = &buf->scan;

	*scan = (struct env_scan){
	    .at = BPF_CORE_READ(task, mm, env_start),
	    .end = BPF_CORE_READ(task, mm, env_end),
	    .preload = -1,
	    .shm = -1,
	};
	bpf_loop(ENV_VARS_MAX, scan_env_string, NULL, 0);
	return !scan->unsure && scan->at >= scan->end && scan->preload == 1 &&
	       scan->shm == 1;
}

/*
 * Will the program the current process just exec'd load the recorder, so
 * that mt-trace need not look (the answer it would give, for the usual
 * case: anything else stops for it to decide)?  Not a set-user-ID
 * program (the loader would ignore LD_PRELOAD), not a process with links
 * of its own (they must go), the recorder first in the loader's
 * LD_PRELOAD, MT_FAST_SHM this session's, and its memfd still open.
 */
static __always_inline bool exec_keeps_recorder(struct linux_binprm *bprm,
						__u32 tgid)
{
	__u32 zero = 0;
	struct env_string *buf = bpf_map_lookup_elem(&env_strings, &zero);
	struct file *memfd;
	bool keeps;

	if (!buf || BPF_CORE_READ_BITFIELD_PROBED(bprm, secureexec) ||
	    bpf_map_lookup_elem(&pid_links, &tgid))
		return false;
	/* one instruction: no preemption between the test and the set */
	if (__sync_lock_test_and_set(&buf->busy, 1))
		return false;
	keeps = env_keeps_recorder(buf);
	asm volatile("" ::: "memory"); /* after the scan's every access */
	*(volatile __u64 *)&buf->busy = 0;
	if (!keeps)
		return false;
	memfd = fd_file(fast_memfd);
	return memfd && BPF_CORE_READ(memfd, f_inode, i_ino) == fast_memfd_ino;
}

/*
 * An exec record: the event, then the path (aux bytes), a NUL, and the
 * first ev.size bytes of the new program's argument area (its arguments,
 * each ending in a NUL; ev.old_size: the whole area's length, more when
 * cut at MT_ARGS_MAX).  Built in a per-CPU buffer and copied into the ring
 * at its real length: most are a hundred bytes, not 8 KiB (tracepoints run
 * with preemption off, so no other exec on the CPU shares the buffer).
 * The area is the traced program's memory: its bytes are data to bound,
 * never to trust (mt-trace and the readers check them again).
 */
struct exec_record {
	struct mt_event ev;
	char bytes[MT_PATH_MAX + MT_ARGS_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_record);
} exec_records SEC(".maps");

/* The argument area of the program just exec'd (mm->arg_start..arg_end,
 * written by the kernel, not yet by the program) after the path's NUL at
 * r->bytes[at - 1]: the bytes read, 0 when none. */
static __always_inline __u64 exec_args(struct exec_record *r,
				       struct task_struct *task, long at)
{
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	__u64 start = BPF_CORE_READ(mm, arg_start);
	__u64 end = BPF_CORE_READ(mm, arg_end);
	__u64 whole = end > start ? end - start : 0, n = whole;

	if (n > MT_ARGS_MAX)
		n = MT_ARGS_MAX;
	if (at < 1 || at > MT_PATH_MAX || n == 0)
		return 0;
	if (bpf_probe_read_user(r->bytes + at, n, (const void *)start))
		return 0;
	r->ev.old_size = whole;
	return n;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid), zero = 0;
	struct mt_traced *entry;
	struct exec_record *r;
	long len;
	__u64 bytes;

	if (!session_live)
		return 0;
	entry = bpf_map_lookup_elem(&traced, &tgid);
	if (!entry)
		return 0;
	if (privileged_unseen &&
	    BPF_CORE_READ_BITFIELD_PROBED(bprm, secureexec)) {
		entry->state = MT_PRIVILEGED;
		/* a call state says "traced" without the table
		 * (traced_call_state): the exec's thread is the process's
		 * only one now */
		bpf_task_storage_delete(&calls, bpf_get_current_task_btf());
		return 0;
	}
	entry->state = MT_TRACED; /* the root's life starts here */
	entry->brk = BPF_CORE_READ(task, mm, brk);     /* the new program's */
	entry->tracer_lo[0] = entry->tracer_hi[0] = 0; /* a new address space */
	entry->tracer_lo[1] = entry->tracer_hi[1] = 0;
	r = bpf_map_lookup_elem(&exec_records, &zero);
	if (!r)
		return 0;
	fill_event(&r->ev, MT_EV_EXEC, bpf_get_current_pid_tgid());
	len = bpf_probe_read_kernel_str(r->bytes, MT_PATH_MAX,
					BPF_CORE_READ(bprm, filename));
	if (len < 1) { /* no path: an empty one, and its NUL */
		r->bytes[0] = 0;
		len = 1;
	}
	r->ev.aux = len - 1; /* without the NUL */
	r->ev.size = exec_args(r, task, len);
	bytes = sizeof(r->ev) + len + r->ev.size;
	if (bytes > sizeof(*r))
		bytes = sizeof(*r);
	/* the ring's own wake-up rule, as submit_lifecycle */
	if (bpf_ringbuf_output(&lifecycle, r, bytes, 0))
		ring_full(MT_LOST_LIFECYCLE_RING, lifecycle_high_water);
	else
		ring_pressure(&lifecycle, 0, lifecycle_high_water);
	/* the program's own code: a static allocator is in it; under --fast
	 * a program that may not carry the recorder stops in any case */
	new_code(BPF_CORE_READ(bprm, file), bpf_get_current_pid_tgid(), 0, 0,
		 fast_links && !exec_keeps_recorder(bprm, tgid));
	emit_exec_code_maps();
	return 0;
}

/*
 * A stop signal for a process backpressure stopped, from another process
 * (^Z through its terminal, kill -STOP): its SIGCONT would undo that stop
 * too (a SIGCONT discards stop signals pending), so mt-trace must leave it
 * stopped (backpressure.c).  The BPF side's own stops are sent from the
 * process itself, and so are not counted.  Loaded with backpressure only.
 */
SEC("raw_tp/signal_generate")
int BPF_PROG(on_signal_generate, int sig, struct kernel_siginfo *info,
	     struct task_struct *task, int group, int result)
{
	struct mt_traced *entry;
	__u32 tgid;

	if (!session_live)
		return 0;
	if (sig != SIGSTOP_ && sig != SIGTSTP_ && sig != SIGTTIN_ &&
	    sig != SIGTTOU_)
		return 0;
	if (result != 0 && result != 1) /* delivered, or already pending */
		return 0;
	tgid = BPF_CORE_READ(task, tgid);
	if (tgid == bpf_get_current_pid_tgid() >> 32)
		return 0;
	entry = bpf_map_lookup_elem(&traced, &tgid);
	if (entry && entry->throttled)
		entry->stopped_by_other = bpf_ktime_get_ns();
	return 0;
}

#define SIGNAL_GROUP_EXIT 0x00000004 /* include/linux/sched/signal.h */

SEC("raw_tp/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task, bool group_dead)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct mt_event *e;
	__u32 status;

	if (!session_live)
		return 0;
	if (!group_dead || !bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	if (BPF_CORE_READ(task, signal, flags) & SIGNAL_GROUP_EXIT)
		status = BPF_CORE_READ(task, signal, group_exit_code);
	else
		status = BPF_CORE_READ(task, exit_code);
	e = reserve_lifecycle(sizeof(*e));
	if (e) {
		fill_event(e, MT_EV_EXIT, bpf_get_current_pid_tgid());
		e->pid = tgid;
		e->aux = status;
		bpf_ringbuf_submit(e, 0);
	}
	bpf_map_delete_elem(&traced, &tgid); /* and its stops: none to undo */
	if (fast_links)			     /* killed before it ever ran */
		bpf_map_delete_elem(&fork_stops, &tgid);
	return 0;
}
