/* SPDX-License-Identifier: MIT */
/*
 * tracer_code.h - inspecting the code files traced processes map, for
 * mt-trace's core (tracer.c).  The dependency goes one way: the core
 * calls this, and what an inspection finds reaches the core only through
 * struct mt_code_host.
 */
#ifndef MT_TRACER_CODE_H
#define MT_TRACER_CODE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "mt_allocators.h"
#include "mt_attach.h"
#include "mt_event.h"
#include "mt_probe.h"

struct mt_trace;

/* What the core offers the inspection. */
struct mt_code_host {
	void *ctx;
	/* path, probed for pid, holds an allocator of family: the core
	 * records it in the stream */
	int (*allocator_found)(void *ctx, pid_t pid, const char *path,
			       enum mt_alloc_family family);
	/* fd (path) holds code pid maps, first seen: the core describes it
	 * in the stream and gives it to the stack unwinder (key: its
	 * identity, as the BPF side reads it) */
	void (*code_file_found)(void *ctx, int fd, const char *path, pid_t pid,
				const struct mt_code_key *key);
	/* pid exec'ed and waits, its program inspected: the core looks at
	 * the rest of the code the kernel mapped (the dynamic loader) */
	void (*exec_inspected)(void *ctx, pid_t pid);
	/* look for allocators in each file (false: only report the files) */
	bool probe_allocators;
	/* --fast: fd is a file whose allocator calls the preloaded recorder
	 * makes events of (it stays unprobed; *family: what it holds), or
	 * NULL */
	bool (*covered)(void *ctx, int fd, enum mt_alloc_family *family);
	/* the process of a NEW_CODE record e, stopped for it, is inspected
	 * and about to go on (or NULL) */
	void (*before_resume)(void *ctx, const struct mt_event *e);
};

/* A code file's identity: device and inode, and the inode's generation,
 * which tells a new file on a deleted one's inode number from it (see
 * struct mt_code_seen). */
struct mt_code_id {
	struct mt_code_key key;
	uint32_t generation;
	bool generation_known; /* false: a file system that does not say */
};

struct mt_code_donor {
	uint8_t build_id[64];
	int len;
	char *path;
};

struct mt_code {
	struct mt_attach attach;
	struct mt_code_host host;
	int code_files_fd; /* the BPF side's table of inspected files */
	int resumed_fd;	   /* its table of the stops undone (watchdog.c) */
	int verbose;
	int links_refused; /* errno of MT_CODE_NO_SUCH_LINKS */
	/* files whose code was inspected for allocators (both the kernel's
	 * and stat's idea of their identity) */
	struct mt_code_id *inspected;
	size_t ninspected, cap_inspected;
	/* --scan files with a build ID: their symbols serve a stripped
	 * binary with the same ID */
	struct mt_code_donor *donors;
	size_t ndonors, cap_donors;
	/* NEW_CODE records of (stopped) processes, waiting for inspection */
	struct mt_event *queued;
	size_t nqueued, cap_queued;
	/* processes that exited since the last inspection: their entries in
	 * the resumed table go after it */
	pid_t *exited;
	size_t nexited, cap_exited;
	/* -v: the stops undone; the programs inspected before their exec
	 * (the command's), the libraries before their mapping (the
	 * program's, at its start or at its exec's stop) */
	size_t stops, programs_inspected, libraries_inspected;
};

/* The kernel has no links of the probe mode (uprobe sessions before 6.10,
 * uprobe_multi before 6.6): load the programs for the next mode, call
 * mt_code_use_bpf() and try again. */
#define MT_CODE_NO_SUCH_LINKS (-EOPNOTSUPP)

/* The allocator programs loaded for mode: the entry's (the session's, in
 * a session), and the return's.  Those that record stacks come with and
 * without the stack walk, and one of each pair is loaded (mt_trace.bpf.c). */
void mt_code_alloc_programs(struct mt_trace *skel, enum mt_probe_mode mode,
			    struct bpf_program **enter,
			    struct bpf_program **ret);

/* The same before the load: the pair for mode, with or without stacks
 * (the return's program is unused in a session). */
void mt_code_alloc_programs_for(struct mt_trace *skel, enum mt_probe_mode mode,
				bool stacks, struct bpf_program **enter,
				struct bpf_program **ret);

/* Start (or, after loading the programs again, restart) with the loaded
 * object skel, whose allocator programs are for mode.  c starts zeroed;
 * what was inspected is kept across restarts. */
void mt_code_use_bpf(struct mt_code *c, struct mt_trace *skel,
		     enum mt_probe_mode mode, const struct mt_code_host *host,
		     int verbose);

/* Probe the allocators of path (mt-trace's C library) for pid before the
 * command starts: 0, MT_CODE_NO_SUCH_LINKS, or -1 (message printed). */
int mt_code_probe_first(struct mt_code *c, const char *path, pid_t pid);

/* Probe paths (--scan, MT_SCAN) for pid; their build IDs serve stripped
 * copies later.  0, or -1 when one could not be opened (message printed). */
int mt_code_scan(struct mt_code *c, char *const *paths, size_t n, pid_t pid);

/* A file a program will map, found before it does. */
struct mt_code_guess {
	int fd;
	char *path;	     /* the kernel's name for it */
	struct stat st;	     /* its identity */
	bool known;	     /* inspected already (not read again) */
	bool allocator_free; /* its symbols name no allocator function */
};

/* The program a command will run and the libraries ld.so will load for
 * it (files[0]: the program; n == 0: none found), and its loader. */
struct mt_code_program {
	struct mt_code_guess *files;
	size_t n;
	int loader_fd; /* -1: none */
	char loader[PATH_MAX];
};

/*
 * Find the program the command (argv[0] file) will run, as execvp(3)
 * finds it, and the libraries ld.so will load for it, as ld.so finds them
 * (mt_program.h); read their symbols for allocators, but not libc's
 * (mt-trace's C library: probed first).  A script, a program of another
 * machine, a file that cannot be found: nothing.  Nothing of struct
 * mt_code is touched: a thread finds them beside the BPF load.
 */
void mt_code_find_program(struct mt_code_program *p, const char *file,
			  const char *libc);

/*
 * Inspect what mt_code_find_program() found, before the command runs: the
 * program, so that its exec does not stop; its loader described for the
 * call stacks; each library without an allocator, so that its mapping
 * does not stop either (one with an allocator is left to its stop).  The
 * trace is what the stops would have made.  A wrong guess costs its stop
 * only: the BPF side knows files by identity.  0, or
 * MT_CODE_NO_SUCH_LINKS (see mt_code_probe_first).
 */
int mt_code_inspect_program(struct mt_code *c, const struct mt_code_program *p,
			    pid_t pid);
void mt_code_program_free(struct mt_code_program *p);

/* A NEW_CODE record from the lifecycle ring: inspected at the next
 * mt_code_inspect_queued(), its process waiting till then. */
void mt_code_queue(struct mt_code *c, const struct mt_event *e);

/* Process pid exited (its Exit record was read). */
void mt_code_exited(struct mt_code *c, pid_t pid);

/* Inspect every queued file, attach its allocators' probes, and let the
 * processes that wait for it continue.  The libraries a file needs (a
 * program's at its exec, a dlopen'ed library's) are inspected as
 * mt_code_inspect_program() does, so that their mappings need not stop
 * the process again. */
void mt_code_inspect_queued(struct mt_code *c);

/* Let the waiting processes continue without inspecting anything (the
 * trace is over). */
void mt_code_resume_queued(struct mt_code *c);

void mt_code_free(struct mt_code *c);

#endif /* MT_TRACER_CODE_H */
