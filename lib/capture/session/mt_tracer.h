/* SPDX-License-Identifier: MIT */
/* mt_tracer.h - run a command under the eBPF tracer, writing the raw stream. */
#ifndef MT_TRACER_H
#define MT_TRACER_H

#include <stdbool.h>
#include <stdint.h>

struct mt_user;

/* mt-trace's own exit statuses (like timeout(1) and env(1)). */
#define MT_EXIT_TRACER_FAILED 125 /* mt-trace could not trace */
#define MT_EXIT_CANNOT_EXEC   126 /* CMD found but not executable */
#define MT_EXIT_NOT_FOUND     127 /* CMD not found */

struct mt_tracer_opts {
	char **argv;	      /* CMD and its arguments */
	int out_fd;	      /* where the raw stream goes */
	const char *out_name; /* for messages */
	int child_stdout_fd;  /* CMD's stdout (--child-stdout), or -1 */
	bool child_stdout_to_stderr;
	uint64_t ring_bytes; /* events ring size, power of two */
	bool track_allocators;
	bool rss;		  /* kmem:rss_stat events (needs tracefs) */
	const char *libc_path;	  /* C library to probe; NULL: mt-trace's own */
	const char *control_path; /* --control FIFO, or NULL */
	char **scan;		  /* --scan: more ELF files to probe at start */
	size_t nscan;
	bool no_stop;	      /* --no-stop: new code is not waited for */
	bool no_backpressure; /* --no-backpressure: a full ring drops */
	bool start_disabled;  /* allocator and syscall events off at first */
	bool physical;	      /* --physical: PSS of the tree */
	uint64_t interval_ns; /* --interval for PSS sampling */
	bool wait_detach;     /* remove the probes before exiting */
	bool global_probes;   /* --global-probes: not confined to the tree */
	bool stacks;	      /* call stacks of allocations (--stacks) */
	bool fast; /* allocator calls recorded in-process (preload) where
		    * the recorder loads, probes elsewhere: the default;
		    * false: --no-fast, probes alone */
	uint32_t stack_depth; /* deepest stack kept, <= MT_STACK_DEPTH_MAX */
	const struct mt_user *user; /* who CMD runs as (mt_user.h) */
	int verbose;
};

/* Whether the session follows every code file the tree maps: allocator
 * probes are placed in them and stacks are unwound through them. */
static inline bool mt_tracer_follows_code(const struct mt_tracer_opts *o)
{
	return o->track_allocators || o->stacks;
}

/*
 * Trace opts->argv until it exits.  Returns mt-trace's exit status: the
 * command's (128 + N when killed by signal N), or MT_EXIT_* above; writes
 * messages to stderr.
 */
int mt_trace_run(const struct mt_tracer_opts *opts);

/* Whether this process may load and attach mt-trace's eBPF programs
 * (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN); when not, says on stderr
 * which capabilities are missing, once. */
bool mt_tracer_has_privileges(void);

/* Is there a recorder to preload (libmt-preload.so beside mt-trace, or
 * MT_PRELOAD set: a bad one is then said by the run)?  Without one, the
 * default mode records by probes alone. */
bool mt_fast_available(void);

/* How --physical is measured, in words, for stderr; with probe, also
 * whether this kernel would allow the exact method (costly: -v only). */
const char *mt_physical_method_note(bool probe);

#endif /* MT_TRACER_H */
