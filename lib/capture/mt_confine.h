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
	bool entered;	    /* in a mount namespace of its own */
	bool confined;	    /* paths[0] is a private copy for the tree */
	size_t ncopies;	    /* files bound over by private copies */
	size_t nreused;	    /* of which kept from an earlier session */
	int slot;	    /* the cache slot they are in, or -1 */
	int preferred_slot; /* the slot to try first (set after enter), or -1 */
	size_t copy_bytes;  /* their size: the memory the tree keeps */
	bool cache_ready;   /* copies may be kept for later sessions */
	int slot_fd;	    /* the cache slot held (locked), if bound */
	char (*bound)[4096]; /* where its copies are bound; NULL: none */
	size_t nbound;
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
 * keep_copies: take copies kept by earlier sessions and keep this one's
 * (confine.c, "Copies kept for later sessions"); false: copy afresh.
 */
int mt_confine_enter(struct mt_confine *c, bool keep_copies);
int mt_confine_copy(struct mt_confine *c, const char *const *paths, size_t n,
		    int verbose);

/*
 * The copies come from a cache kept for later sessions where it can be
 * (confine.c: a ramfs on /run/mt-trace, one slot a session).  A session
 * holds its slot while c (a copy of it in a forked process included)
 * holds slot_fd.  mt_confine_release(), once the probes are gone, unbinds
 * the copies in this namespace and releases the slot for reuse; without
 * it the slot is emptied before its next use.
 */
void mt_confine_release(struct mt_confine *c);
/* The cache's root (/run/mt-trace), a ramfs of root's alone, mounted
 * where it was not (in the caller's mount namespace); false where it
 * cannot be (no /run, not root, a file of another's there).  The BPF
 * side kept for later sessions lives under it too (tracer_kept.c). */
bool mt_confine_cache_root(void);
/* A directory of root's alone in the cache root, made if need be (the
 * cache root mounted too: in the host's mount namespace), or -1. */
int mt_confine_cache_dir(const char *name);

/* What c holds in this process, given up (memory, its descriptor of the
 * slot) where a forked process releases the slot: the lock stays with
 * that process's descriptor. */
void mt_confine_forget(struct mt_confine *c);

/* The allocator libraries besides the C library that most programs load
 * (libstdc++ for operator new; jemalloc, tcmalloc, mimalloc), as paths in
 * the C library's directory, libc first: n of them written to paths (each
 * PATH_MAX bytes), which must hold MT_CONFINE_MAX_FILES. */
size_t mt_confine_known_files(const char *libc, char (*paths)[4096]);

#endif /* MT_CONFINE_H */
