// SPDX-License-Identifier: MIT
/*
 * confine.c - give the traced tree private copies of the allocator files,
 * so that the probes placed on them trap no process outside the tree.
 *
 * Why copies in a mount namespace rather than per-process links (both were
 * measured end to end on this kind of machine; man/mt-trace.1, NOTES):
 * uprobe_multi links filtered by pid do spare other processes, but a fork
 * child inherits the parent's int3 bytes without the link, so every new
 * process must be stopped in the fork hook until its own link exists
 * (a stop its parent can see: job-control shells notice), every link
 * adds ~28 ns to every trap of every other linked process, and each costs
 * 31-59 ms to close.  A private inode needs none of that: one link per
 * file as before, nothing at fork, and every process of the tree -- fork
 * children from their first instruction, threads, vfork, exec'd and
 * setuid programs, shells, python -- maps the copy because it resolves the
 * same path in the same namespace.  The price: a few ms and the copies'
 * size in memory while the tree lives, CAP_SYS_ADMIN, and a tree that
 * leaves the namespace (nsenter, setns) leaves the probes behind.
 *
 * The steps (the ramfs is never mounted where anyone sees it, and the
 * copies live as long as a bind mount uses them):
 *   unshare(CLONE_NEWNS); make / a slave (host mounts still come in, ours
 *   never go out); make a ramfs (struct place); copy each file into it;
 *   bind each copy over its path (read-only); let go of the ramfs.
 * ramfs, not tmpfs: the kernel counts a tmpfs page a process maps as
 * shared memory (RssShmem), a ramfs page as a file page, like the
 * original's, so the tree's RSS by member reads as it would untraced.
 * (ramfs has no size limit: only mt-trace writes to it, before the binds,
 * which are read-only.)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "mt_confine.h"
#include "mt_user.h"

/* The known allocator libraries, by the names programs link against. */
static const char *const known_libraries[] = {
    "libstdc++.so.6",		"libjemalloc.so.2", "libtcmalloc.so.4",
    "libtcmalloc_minimal.so.4", "libmimalloc.so.2",
};

size_t mt_confine_known_files(const char *libc, char (*paths)[4096])
{
	const char *slash = strrchr(libc, '/');
	int dirlen = slash ? (int)(slash - libc) : 0;
	size_t n = 0;

	snprintf(paths[n++], PATH_MAX, "%s", libc);
	if (!slash)
		return n;
	for (size_t i = 0; i < sizeof(known_libraries) / sizeof(char *); i++) {
		snprintf(paths[n], PATH_MAX, "%.*s/%s", dirlen, libc,
			 known_libraries[i]);
		if (access(paths[n], R_OK) == 0)
			n++;
	}
	return n;
}

static int fail(struct mt_confine *c, int err, const char *what,
		const char *path)
{
	snprintf(c->why, sizeof(c->why), "%s%s%s: %s", what, path ? " " : "",
		 path ? path : "", strerror(err));
	return -err;
}

static int copy_fd(int from, int to, off_t size)
{
	off_t done = 0;

	while (done < size) {
		ssize_t n = sendfile(to, from, NULL, size - done);

		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += n;
	}
	return 0;
}

/* A file to copy: where it really is (the bind target) and its size. */
struct source {
	char real[PATH_MAX];
	struct stat st;
};

static int find_source(const char *path, struct source *s)
{
	if (!realpath(path, s->real) || stat(s->real, &s->st))
		return -errno;
	return S_ISREG(s->st.st_mode) ? 0 : -EINVAL;
}

/*
 * Where the copies are made: a ramfs mounted nowhere (fsmount(2): no
 * directory to make and remove, nothing to unmount, which costs an RCU
 * grace period), or, where the kernel binds only from mounts in the
 * namespace (before Linux 6.15 or so), one mounted on a fresh directory
 * in mt-trace's namespace and detached once the copies are bound.
 */
struct place {
	int fd;		    /* the ramfs's root directory */
	char dir[PATH_MAX]; /* where it is mounted; "" when nowhere */
};

static int place_detached(struct place *p)
{
	int fs = fsopen("ramfs", FSOPEN_CLOEXEC), err = 0;

	p->dir[0] = '\0';
	p->fd = -1;
	if (fs < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		p->fd = fsmount(fs, FSMOUNT_CLOEXEC,
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (p->fd < 0)
		err = -errno;
	close(fs);
	return err;
}

static int place_on_directory(struct mt_confine *c, struct place *p)
{
	/* a user's TMPDIR (sudo -E) is theirs to rename under root's mount:
	 * /tmp, sticky, keeps root's directory root's */
	const char *tmp = mt_user_acting() ? NULL : getenv("TMPDIR");
	int err;

	snprintf(p->dir, sizeof(p->dir), "%s/mt-trace.XXXXXX",
		 tmp && *tmp == '/' ? tmp : "/tmp");
	p->fd = -1;
	if (!mkdtemp(p->dir)) {
		err = fail(c, errno, "creating", p->dir);
		p->dir[0] = '\0';
		return err;
	}
	if (mount("mt-trace-copies", p->dir, "ramfs", MS_NOSUID | MS_NODEV,
		  "mode=0700")) {
		err = fail(c, errno, "mounting a ramfs on", p->dir);
		rmdir(p->dir);
		p->dir[0] = '\0';
		return err;
	}
	p->fd = open(p->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return p->fd < 0 ? fail(c, errno, "opening", p->dir) : 0;
}

static void place_drop(struct place *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	if (!p->dir[0])
		return;
	umount2(p->dir, MNT_DETACH); /* the binds keep the copies */
	rmdir(p->dir);
	p->dir[0] = '\0';
}

/* Bind the file name in place p over target (the path of the open file
 * works wherever the place is). */
static int bind_over(const struct place *p, const char *name,
		     const char *target)
{
	char via[64];
	int fd = openat(p->fd, name, O_PATH | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	if (mount(via, target, NULL, MS_BIND, NULL))
		err = -errno;
	close(fd);
	return err;
}

/* Copy s into p's directory as name (created: it must not exist). */
static int copy_into(struct mt_confine *c, int dir, const char *name,
		     const struct source *s)
{
	int from, to, err;

	from = open(s->real, O_RDONLY | O_CLOEXEC);
	if (from < 0)
		return fail(c, errno, "opening", s->real);
	to = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    s->st.st_mode & 07777);
	if (to < 0) {
		err = errno;
		close(from);
		return fail(c, err, "creating a copy of", s->real);
	}
	err = copy_fd(from, to, s->st.st_size);
	close(from);
	close(to);
	return err ? fail(c, -err, "copying", s->real) : 0;
}

/* Bind the copy named name in p over s->real, read-only. */
static int bind_copy(struct mt_confine *c, const struct place *p,
		     const char *name, const struct source *s)
{
	struct stat now;
	int err = bind_over(p, name, s->real);

	if (err) {
		fail(c, -err, "binding a copy over", s->real);
		return err;
	}
	/* nobody in the tree writes to it (a write would not reach the
	 * host's file anyway) */
	mount(NULL, s->real, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
	if (stat(s->real, &now) || now.st_ino == s->st.st_ino)
		return fail(c, EXDEV, "the copy did not replace", s->real);
	c->ncopies++;
	c->copy_bytes += s->st.st_size;
	return 0;
}

/* Copy s into p (as copy number i) and bind the copy over s->real. */
static int copy_and_bind(struct mt_confine *c, const struct place *p, size_t i,
			 const struct source *s)
{
	char name[32];
	int err;

	snprintf(name, sizeof(name), "%zu", i);
	err = copy_into(c, p->fd, name, s);
	return err ? err : bind_copy(c, p, name, s);
}

/* The C library's copy, bound: in a detached ramfs where the kernel
 * allows binding from one, else in one mounted on a directory. */
static int bind_first(struct mt_confine *c, struct place *p,
		      const struct source *libc)
{
	int err = place_detached(p);

	if (err == 0) {
		err = copy_and_bind(c, p, 0, libc);
		if (err != -EINVAL) /* EINVAL: not from a detached mount */
			return err;
		place_drop(p);
	}
	err = place_on_directory(c, p);
	return err ? err : copy_and_bind(c, p, 0, libc);
}

/*
 * Copies kept for later sessions.  Copying (5.4 MB: 4-9 ms of CPU, and as
 * much again to free the pages when the namespace goes) was the largest
 * part of confining the probes.  So the copies live in a ramfs mounted on
 * CACHE_ROOT (root's alone, 0700, in the host's namespace: made by the
 * first session, kept until unmounted or the machine restarts), in
 * CACHE_SLOTS slots, and a later session binds them again.  A copy serves
 * one session at a time, and only a file nobody maps:
 *  - a session holds its slot's flock(2) from before its binds until its
 *    probes are gone (the background detacher inherits the descriptor);
 *    a concurrent session takes another slot, or copies as before;
 *  - the detacher unbinds the copies in the session's namespace once
 *    the probes are gone, so that a process the tree left running opens
 *    the host's file from then on, and only then marks the slot released;
 *    a slot not marked (mt-trace killed) is emptied, not reused;
 *  - a copy still open or mapped by anyone (a process the tree left
 *    running) refuses a write lease (F_SETLEASE counts mappings): it is
 *    unlinked (the process keeps its inode) and copied again.
 * A copy is named after its source's identity (device, inode, size,
 * modification and change times), so a changed file is copied again;
 * a slot drops the copies a session did not use once it copies anew.
 * Not covered: a process of the tree that made a mount namespace of its
 * own keeps that namespace's binds after the session.
 */
#define CACHE_ROOT	"/run/mt-trace"
#define CACHE_SLOTS	4
#define CACHE_RELEASED	".released"
#define CACHE_NAME_SIZE 128
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

/* Is fd a directory of root's alone, on a ramfs when ramfs? */
static bool root_only_dir(int fd, bool ramfs)
{
	struct statfs fs;
	struct stat st;

	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077))
		return false;
	return !ramfs || (fstatfs(fd, &fs) == 0 && fs.f_type == RAMFS_MAGIC);
}

bool mt_confine_cache_root(void)
{
	int fd =
	    open(CACHE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	bool ok = fd >= 0 && root_only_dir(fd, true);

	if (fd >= 0)
		close(fd);
	if (ok)
		return true;
	if (fd < 0 && mkdir(CACHE_ROOT, 0700) && errno != EEXIST)
		return false;
	fd = open(CACHE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	ok = fd >= 0 && root_only_dir(fd, false);
	if (fd >= 0)
		close(fd);
	if (!ok || mount("mt-trace-copies", CACHE_ROOT, "ramfs",
			 MS_NOSUID | MS_NODEV, "mode=0700"))
		return false;
	fd = open(CACHE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	ok = fd >= 0 && root_only_dir(fd, true);
	if (fd >= 0)
		close(fd);
	return ok;
}

int mt_confine_cache_dir(const char *name)
{
	int root, fd;

	if (!mt_confine_cache_root())
		return -1;
	root =
	    open(CACHE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return -1;
	if (mkdirat(root, name, 0700) && errno != EEXIST) {
		close(root);
		return -1;
	}
	fd =
	    openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(root);
	if (fd >= 0 && !root_only_dir(fd, true)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Remove every entry of dir but the names in keep[0..n). */
static void sweep(int dir, char (*keep)[CACHE_NAME_SIZE], size_t n)
{
	int fd = dup(dir);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d); /* the descriptor's position is shared with dir's */
	while ((e = readdir(d))) {
		bool kept = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");

		for (size_t i = 0; i < n && !kept; i++)
			kept = !strcmp(e->d_name, keep[i]);
		if (!kept)
			unlinkat(dir, e->d_name, 0);
	}
	closedir(d);
}

/* Slot i locked (its descriptor), emptied unless its last session
 * released it; -1 when taken, -2 when it cannot be made. */
static int claim_slot_at(int i)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), CACHE_ROOT "/%d", i);
	if (mkdir(path, 0700) && errno != EEXIST)
		return -2;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -2;
	if (!root_only_dir(fd, true) || flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		return -1;
	}
	if (unlinkat(fd, CACHE_RELEASED, 0))
		sweep(fd, NULL, 0);
	return fd;
}

/* A free slot, preferred first (the BPF side kept in the slot of that
 * number holds links on its copies: tracer_kept.c), locked (its
 * descriptor), its number in *slot; -1 when every slot is taken. */
static int claim_slot(int preferred, int *slot)
{
	int fd = -1;

	if (preferred >= 0 && preferred < CACHE_SLOTS &&
	    (fd = claim_slot_at(preferred)) >= 0) {
		*slot = preferred;
		return fd;
	}
	for (int i = 0; i < CACHE_SLOTS && fd != -2; i++) {
		if (i == preferred)
			continue;
		fd = claim_slot_at(i);
		if (fd >= 0) {
			*slot = i;
			return fd;
		}
	}
	return -1;
}

static void cache_name(const struct source *s, char *name)
{
	snprintf(name, CACHE_NAME_SIZE, "%llx-%llx-%llx-%lld.%09ld-%lld.%09ld",
		 (unsigned long long)s->st.st_dev,
		 (unsigned long long)s->st.st_ino,
		 (unsigned long long)s->st.st_size,
		 (long long)s->st.st_mtim.tv_sec, s->st.st_mtim.tv_nsec,
		 (long long)s->st.st_ctim.tv_sec, s->st.st_ctim.tv_nsec);
}

/* Is the copy name in dir whole, and open or mapped by nobody? */
static bool copy_reusable(int dir, const char *name, const struct source *s)
{
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	bool ok;

	if (fd < 0)
		return false;
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	     st.st_nlink == 1 && st.st_size == s->st.st_size &&
	     fcntl(fd, F_SETLEASE, F_WRLCK) == 0;
	if (ok)
		fcntl(fd, F_SETLEASE, F_UNLCK);
	close(fd);
	return ok;
}

/* The copy of s in the slot, kept or made (under a temporary name first:
 * a name is only ever a whole copy). */
static int cached_copy(struct mt_confine *c, int dir, const char *name,
		       const struct source *s, bool *made)
{
	int err;

	*made = false;
	if (copy_reusable(dir, name, s)) {
		c->nreused++;
		return 0;
	}
	unlinkat(dir, name, 0); /* a mapping keeps its inode */
	unlinkat(dir, "copying", 0);
	err = copy_into(c, dir, "copying", s);
	if (err)
		return err;
	if (renameat(dir, "copying", dir, name))
		return fail(c, errno, "naming the copy of", s->real);
	*made = true;
	return 0;
}

/* Note where a copy is bound, for mt_confine_release(). */
static void note_bound(struct mt_confine *c, const char *real)
{
	if (c->nbound < MT_CONFINE_MAX_FILES)
		snprintf(c->bound[c->nbound++], PATH_MAX, "%s", real);
}

/* The copies from the cache: 0, or -errno with nothing bound (the caller
 * copies as before). */
static int copy_from_cache(struct mt_confine *c, const struct source *src,
			   size_t n, int verbose)
{
	char names[MT_CONFINE_MAX_FILES][CACHE_NAME_SIZE];
	struct place p = {.fd = claim_slot(c->preferred_slot, &c->slot),
			  .dir = ""};
	bool made, any_made = false;
	int err;

	if (p.fd < 0)
		return -EBUSY;
	c->bound = calloc(MT_CONFINE_MAX_FILES, sizeof(*c->bound));
	if (!c->bound) {
		close(p.fd);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		cache_name(&src[i], names[i]);
	err = cached_copy(c, p.fd, names[0], &src[0], &made);
	any_made |= made;
	if (!err)
		err = bind_copy(c, &p, names[0], &src[0]);
	if (err) { /* nothing bound, the slot not released: emptied next */
		free(c->bound);
		c->bound = NULL;
		c->ncopies = c->nreused = c->copy_bytes = 0;
		c->slot = -1;
		close(p.fd);
		return err;
	}
	note_bound(c, src[0].real);
	for (size_t i = 1; i < n; i++) {
		struct mt_confine other = {0};

		if (!src[i].real[0])
			continue;
		if (cached_copy(&other, p.fd, names[i], &src[i], &made) == 0 &&
		    bind_copy(&other, &p, names[i], &src[i]) == 0) {
			any_made |= made;
			c->ncopies++;
			c->nreused += other.nreused;
			c->copy_bytes += src[i].st.st_size;
			note_bound(c, src[i].real);
		} else if (verbose) {
			fprintf(stderr,
				"mt-trace: %s: probed for everyone: %s\n",
				src[i].real, other.why);
		}
	}
	if (any_made) /* copies of files since changed, or not used now */
		sweep(p.fd, names, n);
	c->slot_fd = p.fd;
	return 0;
}

void mt_confine_forget(struct mt_confine *c)
{
	if (c->slot_fd >= 0 && c->bound)
		close(c->slot_fd);
	c->slot_fd = -1;
	free(c->bound);
	c->bound = NULL;
	c->nbound = 0;
}

void mt_confine_release(struct mt_confine *c)
{
	bool unbound = true;

	if (!c->bound) /* no slot held (slot_fd may be a zeroed 0) */
		return;
	for (size_t i = 0; i < c->nbound; i++)
		unbound &= umount2(c->bound[i], MNT_DETACH) == 0;
	if (unbound) {
		int fd = openat(c->slot_fd, CACHE_RELEASED,
				O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

		if (fd >= 0)
			close(fd);
	}
	mt_confine_forget(c);
}

int mt_confine_enter(struct mt_confine *c, bool keep_copies)
{
	memset(c, 0, sizeof(*c));
	c->slot_fd = -1;
	c->slot = c->preferred_slot = -1;
	/* in the host's namespace, where it stays */
	c->cache_ready = keep_copies && mt_confine_cache_root();
	/* from here on a failure leaves mt-trace (and the command it forks
	 * after) in a namespace of its own that looks like the host's:
	 * harmless */
	if (unshare(CLONE_NEWNS))
		return fail(c, errno, "unshare(CLONE_NEWNS)", NULL);
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL))
		return fail(c, errno, "making / a slave mount", NULL);
	c->entered = true;
	return 0;
}

int mt_confine_copy(struct mt_confine *c, const char *const *paths, size_t n,
		    int verbose)
{
	struct source src[MT_CONFINE_MAX_FILES];
	struct place place;
	int err;

	if (!c->entered)
		return fail(c, EINVAL, "no mount namespace of its own", NULL);
	if (n == 0 || n > MT_CONFINE_MAX_FILES)
		return fail(c, EINVAL, "files to copy", NULL);
	err = find_source(paths[0], &src[0]);
	if (err)
		return fail(c, -err, "finding", paths[0]);
	for (size_t i = 1; i < n; i++)
		if (find_source(paths[i], &src[i]))
			src[i].real[0] = '\0';
	if (c->cache_ready && copy_from_cache(c, src, n, verbose) == 0) {
		c->confined = true;
		return 0;
	}
	err = bind_first(c, &place, &src[0]);
	for (size_t i = 1; i < n && err == 0; i++) {
		struct mt_confine other = {0};

		if (!src[i].real[0])
			continue;
		if (copy_and_bind(&other, &place, i, &src[i]) == 0) {
			c->ncopies++;
			c->copy_bytes += src[i].st.st_size;
		} else if (verbose) {
			fprintf(stderr,
				"mt-trace: %s: probed for everyone: %s\n",
				paths[i], other.why);
		}
	}
	place_drop(&place);
	c->confined = err == 0;
	return err;
}
