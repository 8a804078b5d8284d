/* SPDX-License-Identifier: MIT */
/*
 * tracer_fast.h - mt-trace --fast: the shared rings of the preloaded
 * recorder (mt_fast.h), drained into the same staged events as the BPF
 * rings.  Not an interface: the tracer's core (tracer.c, tracer_drain.c,
 * tracer_code.c) calls this.
 */
#ifndef MT_TRACER_FAST_H
#define MT_TRACER_FAST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mt_allocators.h"

struct tracer;
struct mt_fast;
struct mt_trace;
struct mt_code_key;
struct mt_stack_file;
struct mt_cfi_row;
struct mt_child_env;

/* Before the command is forked: the shared memory, the wake-up eventfd,
 * the preload's path; with stack_depth (--stacks), room for the unwind
 * rows the recorders walk stacks of up to that many frames with.  NULL
 * with a message on stderr. */
struct mt_fast *mt_fast_start(int verbose, unsigned stack_depth);

/* --stacks: the code file key was given to the BPF side as file, with
 * its rows (file->nrows of them; NULL: none) at file->first_row: the
 * recorders get the same (called before the file's code can run). */
void mt_fast_stack_file(struct mt_fast *f, const struct mt_code_key *key,
			const struct mt_stack_file *file,
			const struct mt_cfi_row *rows);

/* --stacks: the BPF side was loaded again (another way of attaching,
 * before the command runs): the files published so far are forgotten. */
void mt_fast_stacks_reset(struct mt_fast *f);

/* --stacks: the next CPython code id of the whole tree (the recorders'
 * count, shared), for code objects mt-trace reads itself; 0 when there
 * is no shared count (then the caller keeps its own). */
uint32_t mt_fast_next_code_id(struct mt_fast *f);

/* Before the command is forked by tracer (mt-trace's pid): LD_PRELOAD
 * (prepended) and the shared memory's description in its environment. */
void mt_fast_child_env(const struct mt_fast *f, pid_t tracer,
		       struct mt_child_env *env);

/* In the forked child, before exec: the shared memory's fds kept across
 * exec (system calls only: nothing that allocates). */
void mt_fast_child_fds(const struct mt_fast *f);

/* Before the BPF side loads: what an exec'd program that will load the
 * recorder finds (its exec then need not stop, bpf/mt_trace.bpf.c); and
 * the recorders' clock, decided (the command runs after this). */
void mt_fast_configure(struct mt_fast *f, struct mt_trace *skel);

/* The eventfd the recorders write when a ring is half full. */
int mt_fast_wake_fd(const struct mt_fast *f);

/* Read every ring into t->staged.ev (kept sorted by time), converting times;
 * when nothing else is staged and one thread's ring holds records, its
 * records up to until (the drain's watermark, ns) go straight into the
 * batch instead. */
int mt_fast_collect(struct tracer *t, uint64_t until);

/* Process pid exited: its rings go back to the pool once drained (and,
 * had it exec'd a dynamic program that never loaded the recorder, that is
 * said on stderr: its libc calls went unrecorded). */
void mt_fast_exited(struct mt_fast *f, pid_t pid);

/* Process pid exec'd (its Exec record was read, with the path the exec
 * named, len bytes): a dynamic program is expected to load the recorder
 * before it exits; -v says a static one is probed. */
void mt_fast_exec(struct mt_fast *f, pid_t pid, uint64_t when,
		  const char *named, size_t len);

/*
 * Process pid is stopped at its exec: will its new program run without the
 * recorder (dynamic, and LD_PRELOAD lacks it, or the loader ignores it for
 * a set-user-ID program, or the recorder cannot reach the shared memory)?
 * Then its calls into libc and libstdc++ need uprobe links of its own
 * (fast_links.h), and *why says why.  A static program: false (its own
 * allocator is probed as in the default mode).
 */
bool mt_fast_needs_links(struct mt_fast *f, pid_t pid, const char **why);

/* How many processes ran a dynamic program without the recorder. */
uint64_t mt_fast_uncovered(const struct mt_fast *f);

/* Allocator events on or off (--control), and off for good at the end
 * (descendants that outlive the trace record nothing more). */
void mt_fast_set_enabled(struct mt_fast *f, bool on);

/* Calls the recorders could not record, and records mt-trace dropped
 * with a ring it gave up on, for the trailer's lost count and messages
 * (the recorders' counters taken as they may be: never back, never past
 * any possible count). */
uint64_t mt_fast_lost(struct mt_fast *f);

/* Did the traced command write over the shared memory so that records
 * were dropped or counts could not be trusted?  Then the trace is
 * incomplete (its trailer says so). */
bool mt_fast_incomplete(const struct mt_fast *f);

/*
 * Is the ELF file fd one whose allocator functions the preload records
 * (glibc's libc.so.6, libstdc++.so.6, by DT_SONAME)?  Then --fast leaves
 * it unprobed; *family says which it is, for the stream's Allocator record.
 * The preload itself is covered too (MT_ALLOC_NONE: no Allocator record):
 * probing its interposers would record every call twice.
 */
bool mt_fast_covers(const struct mt_fast *f, int fd,
		    enum mt_alloc_family *family);

void mt_fast_free(struct mt_fast *f);

#endif /* MT_TRACER_FAST_H */
