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
 * Nothing is shared with another session or left on the host: the ramfs
 * is mounted nowhere, or on a directory of mt-trace's namespace alone and
 * detached once the copies are bound, and the copies go with the last
 * process of the namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_log.h"
#include "mt_confine.h"
#include "mt_file_id.h"
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
	struct stat from_st, to_st;
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
	/* the copy stands for the file it was made from in the caches of
	 * work done on a file (file_id.c): the same bytes, as copied */
	if (!err && fstat(from, &from_st) == 0 && fstat(to, &to_st) == 0 &&
	    from_st.st_size == s->st.st_size)
		mt_file_id_copied(&to_st, &from_st);
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

int mt_confine_enter(struct mt_confine *c)
{
	memset(c, 0, sizeof(*c));
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
	err = bind_first(c, &place, &src[0]);
	for (size_t i = 1; i < n && err == 0; i++) {
		struct mt_confine other = {0};

		if (!src[i].real[0])
			continue;
		if (copy_and_bind(&other, &place, i, &src[i]) == 0) {
			c->ncopies++;
			c->copy_bytes += src[i].st.st_size;
		} else if (verbose) {
			mt_verbose("%s: probed for everyone: %s", paths[i],
				   other.why);
		}
	}
	place_drop(&place);
	c->confined = err == 0;
	return err;
}
