/* SPDX-License-Identifier: MIT */
/* mt_attach.h - allocator uprobes on ELF files (see attach.c). */
#ifndef MT_ATTACH_H
#define MT_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mt_allocators.h"

struct bpf_program;
struct bpf_link;

#define MT_MAX_LINKS 256

/* How allocator probes are attached, best first: each needs the
 * programs loaded for it (expected attach type). */
enum mt_probe_mode {
	MT_PROBES_SESSION, /* one uprobe session link per file (Linux 6.10) */
	MT_PROBES_MULTI,   /* uprobe_multi: entry and return links (6.6) */
	MT_PROBES_CLASSIC, /* one classic link per probe */
};

struct mt_attach {
	struct bpf_program *enter; /* entry program, or the session program
				      (cookie = mt_probe_fn) */
	struct bpf_program *ret;   /* return program; NULL with a session */
	enum mt_probe_mode mode;
	pid_t pid;	 /* links trap only this process; 0: every process */
	uint32_t serial; /* in the cookies (MT_COOKIE_LINK); 0: none */
	int verbose;
	size_t nprobes;
	size_t nlinks;
	struct bpf_link *links[MT_MAX_LINKS]; /* classic links */
	int link_fds[MT_MAX_LINKS];	      /* raw uprobe_multi link fds */
};

void mt_attach_init(struct mt_attach *a, enum mt_probe_mode mode,
		    struct bpf_program *enter, struct bpf_program *ret,
		    int verbose);
/*
 * Probes attached from now on trap only process pid (0: every process
 * mapping the file, the default; mt-trace confines those to the traced
 * tree with private copies, mt_confine.h).  The kernel filters by the
 * process's memory: a fork child inherits the breakpoints but not the
 * filter, so it needs links of its own before it runs (tests/fast.bats
 * shows it; docs/ARCHITECTURE.md).  For
 * --fast: a process that cannot carry the preload can be probed alone.
 */
void mt_attach_set_pid(struct mt_attach *a, pid_t pid);

/* Links made from now on carry serial in their cookies (MT_COOKIE_LINK,
 * bpf/mt_probe.h): the BPF side counts their calls only while its
 * `pid_links` table holds that serial for the process. */
void mt_attach_set_serial(struct mt_attach *a, uint32_t serial);

/* The BPF side's `internal_calls` table (bpf/mt_probe.h, MT_COOKIE_SITE),
 * which the probes attached from now on find their file's own direct
 * calls of free in. */
void mt_attach_internal_map(int fd);

/* The attach type the allocator programs are loaded with for a session or
 * multi mode, and their links made with (classic: the default). */
int mt_probe_attach_type(enum mt_probe_mode mode);

/* A uprobe_multi (or session) link of n probes on path, made with the
 * raw bpf(2) call (libbpf 1.1 predates these links): its fd, or -errno.
 * cookies may be NULL; pid 0: every process mapping the file. */
int mt_uprobe_multi_link(int prog_fd, int attach_type, const char *path,
			 const uint64_t *offsets, const uint64_t *cookies,
			 size_t n, bool retprobe, pid_t pid);

/* The attach type of a plain uprobe_multi link (Linux 6.6). */
#define MT_ATTACH_UPROBE_MULTI 48

/* The mode's name, for messages. */
const char *mt_probe_mode_name(enum mt_probe_mode mode);

/*
 * Probe every allocator function (mt_allocators.h) defined in the ELF file
 * at path.  Returns the number of probes placed (0: none there), or -errno
 * with a message in err (path not in it: the caller names the file as it
 * knows it; -ENOEXEC: not an ELF file); *family says which allocator the
 * file holds.
 */
int mt_attach_file(struct mt_attach *a, const char *path,
		   enum mt_alloc_family *family, char *err, size_t errlen);

/* The same, with the symbols read from another file: an unstripped copy of
 * a stripped binary (same build ID, same code). */
int mt_attach_file_as(struct mt_attach *a, const char *path,
		      const char *symbols, enum mt_alloc_family *family,
		      char *err, size_t errlen);

/*
 * The same in two steps, for a file probed again and again (one link per
 * process): where the probes go, read from the ELF file once, then placed
 * as many times as needed.  mt_attach_plan() returns the number of probes
 * (0: no allocator there) or -errno with a message in err.
 */
struct mt_probe_at {
	uint64_t offset; /* in the file */
	unsigned fn;	 /* enum mt_probe_fn */
	unsigned site;	 /* MT_COOKIE_SITE: 0, or the plan's site */
};

/* Direct calls of a free-like function by its own file (glibc 2.36: 2) */
#define MT_PLAN_INTERNAL_MAX 8

struct mt_attach_plan {
	enum mt_alloc_family family;
	size_t nenter, nret;
	struct mt_probe_at *enter, *ret; /* return probes: unless a session */
	/* glibc's free, called directly by libc.so.6 itself (its threads'
	 * tcaches at their exit): the probe with this site in its cookie
	 * ignores calls returning at these distances from it
	 * (bpf/mt_probe.h, MT_COOKIE_SITE) */
	unsigned site;
	size_t ninternal;
	int64_t internal[MT_PLAN_INTERNAL_MAX];
};

int mt_attach_plan(struct mt_attach *a, const char *path, const char *symbols,
		   struct mt_attach_plan *plan, char *err, size_t errlen);
int mt_attach_planned(struct mt_attach *a, const char *path,
		      const struct mt_attach_plan *plan, char *err,
		      size_t errlen);
void mt_attach_plan_free(struct mt_attach_plan *plan);

/* Work out path's probes once, ahead of attaching (from a thread while the
 * BPF side loads): the plan and what takes long in it (free()'s branch
 * scan, elf.c) are remembered by this process for the file's identity
 * (mt_file_id.h), and the plan made when attaching to it, or to the
 * tree's private copy of it, is then quick. */
void mt_attach_prepare(const char *path);

/* Each link's descriptor to take (which then owns it, and closes it
 * when it will: the last close of a link waits for grace periods), and
 * the links destroyed here (not their last reference any more). */
void mt_attach_hand_over(struct mt_attach *a, void (*take)(void *ctx, int fd),
			 void *ctx);

void mt_attach_destroy(struct mt_attach *a);

#endif /* MT_ATTACH_H */
