/* SPDX-License-Identifier: MIT */
/*
 * mt_confine.h - allocator probes that only the traced tree hits
 * (confine.c).
 *
 * A uprobe belongs to a file's inode: every process mapping that inode
 * traps, traced or not.  mt_confine_enter() and mt_confine_copy() give the
 * traced tree inodes of its own: mt-trace moves into a private mount namespace
 * in which each named file (the C library, the known allocator libraries) is a
 * private copy bind-mounted over its path; the command, forked after, inherits
 * the namespace, maps the copies, and probes attached on them (any mode, pid 0)
 * trap nobody else.
 *
 * For --fast (the LD_PRELOAD recorder): a tree whose processes carry the
 * preload leaves the C library out of the list (its processes then map the
 * host's libc, which nothing probes); a single process that cannot carry
 * it can still be probed alone with mt_attach_set_pid() (mt_attach.h).
 */
#ifndef MT_CONFINE_H
#define MT_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

#define MT_CONFINE_MAX_FILES 16

struct mt_confine {
	bool entered;	      /* in a mount namespace of its own */
	bool confined;	      /* paths[0] is a private copy for the tree */
	size_t ncopies;	      /* files bound over by private copies */
	size_t copy_bytes;    /* their size: the memory the tree keeps */
	char why[4096 + 160]; /* not confined: what failed */
};

/*
 * In two steps, so that the copying can overlap other work (mt-trace
 * copies while the BPF side loads):
 *
 * mt_confine_enter() moves this process into a mount namespace of its own
 * (host mounts still propagate in, none of its own go out).  Processes
 * forked afterwards share it: the command can be forked right after.
 *
 * mt_confine_copy() then makes each of paths that exists a private copy
 * bound over its path (symlinks followed), visible at once to every
 * process of the namespace.  paths[0] is required: when it cannot be
 * copied, nothing is confined (-errno, why says what failed).  The others
 * are best effort.  The copies go with the namespace's last process.
 * Both need CAP_SYS_ADMIN; the copy may run in a thread of its own.
 * Nothing is kept between sessions: each copies afresh.
 */
int mt_confine_enter(struct mt_confine *c);
int mt_confine_copy(struct mt_confine *c, const char *const *paths, size_t n,
		    int verbose);

/* The allocator libraries besides the C library that most programs load
 * (libstdc++ for operator new; jemalloc, tcmalloc, mimalloc), as paths in
 * the C library's directory, libc first: n of them written to paths (each
 * PATH_MAX bytes), which must hold MT_CONFINE_MAX_FILES. */
size_t mt_confine_known_files(const char *libc, char (*paths)[4096]);

#endif /* MT_CONFINE_H */
