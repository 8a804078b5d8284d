/* SPDX-License-Identifier: MIT */
/*
 * fast_links.h - mt-trace --fast: uprobe links of their own for the
 * processes whose program does not carry the preloaded recorder (see
 * fast_links.c).  Not an interface: the tracer's core calls this.
 */
#ifndef MT_FAST_LINKS_H
#define MT_FAST_LINKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mt_attach.h"
#include "mt_closer.h"

struct mt_trace;
struct mt_fast;
struct mt_event;

/* A file whose allocator calls the recorder records (libc.so.6,
 * libstdc++.so.6), kept open: links are made on the inode processes map. */
struct fast_file {
	int fd;
	char *path; /* for messages */
	struct mt_attach_plan plan;
};

/* A process with links of its own. */
struct fast_linked {
	pid_t pid;
	uint32_t serial; /* in its links' cookies and in pid_links */
	struct mt_attach *attach;
};

struct mt_fast_links {
	enum mt_probe_mode mode;
	struct bpf_program *enter, *ret;
	int pid_links_fd; /* the BPF side's tgid -> serial table */
	int verbose;
	struct fast_file *files;
	size_t nfiles, cap_files;
	struct fast_linked *procs;
	size_t nprocs, cap_procs;
	uint32_t last_serial;
	struct mt_closer closer;
	/* for -v: processes given links, links made, execs stopped for
	 * mt-trace to look at (the BPF side could not tell that the new
	 * program carries the recorder, or its file was new) */
	uint64_t processes_linked, links_made, execs_stopped;
};

void mt_fast_links_init(struct mt_fast_links *l, int verbose);

/* After each load of the BPF object: the programs links are made with. */
void mt_fast_links_use_bpf(struct mt_fast_links *l, struct mt_trace *skel,
			   enum mt_probe_mode mode);

/* fd is a file the recorder covers, first seen: processes with links get
 * them on it too, and so will every later one. */
void mt_fast_links_file(struct mt_fast_links *l, int fd);

/* A stopped process (a NEW_CODE record e) is about to be continued: an
 * exec gets links if its new program will not carry the recorder (and
 * loses them if it will), a fork child of a process with links gets its
 * own. */
void mt_fast_links_stopped(struct mt_fast_links *l, struct mt_fast *f,
			   const struct mt_event *e);

/* Process pid exited: its links go. */
void mt_fast_links_exited(struct mt_fast_links *l, pid_t pid);

/* The links that went since the last flush are handed to the closing
 * process (after the stopped processes were continued: not on their
 * way). */
void mt_fast_links_flush(struct mt_fast_links *l);

/* The end: every link is closed off mt-trace's path. */
void mt_fast_links_free(struct mt_fast_links *l);

#endif /* MT_FAST_LINKS_H */
