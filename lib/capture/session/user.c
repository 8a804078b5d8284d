// SPDX-License-Identifier: MIT
/* user.c - the user mt-trace works for, and files opened as them (see
 * mt_user.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt_log.h"
#include "mt_child_env.h"
#include "mt_user.h"
#include "mt_xalloc.h"

static int parse_id(const char *s, unsigned long *id)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	*id = strtoul(s, &end, 10);
	return errno || *end || *id >= (unsigned long)(uid_t)-1 ? -1 : 0;
}

/* The user's supplementary groups, as initgroups(3) would set them. */
static int load_groups(struct mt_user *u)
{
	int n = 16;

	for (;;) {
		int want = n;

		u->groups = mt_xreallocarray(u->groups, n, sizeof(*u->groups));
		if (getgrouplist(u->name, u->gid, u->groups, &want) >= 0) {
			u->ngroups = want;
			return 0;
		}
		if (want <= n)
			return -1;
		n = want;
	}
}

/* who: where the uid came from, for messages ("SUDO_UID") */
static int from_passwd(struct mt_user *u, const char *who, char *why,
		       size_t whylen)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwuid(u->uid);
	if (!pw) {
		snprintf(why, whylen,
			 "%s=%u: no such user in the passwd database", who,
			 (unsigned)u->uid);
		return -1;
	}
	u->name = mt_xstrdup(pw->pw_name);
	u->home = mt_xstrdup(pw->pw_dir);
	/* an empty shell field means /bin/sh, as for login(1) */
	u->shell = mt_xstrdup(pw->pw_shell && *pw->pw_shell ? pw->pw_shell
							    : "/bin/sh");
	if (load_groups(u)) {
		snprintf(why, whylen, "%s=%u: reading its groups: %s", who,
			 (unsigned)u->uid, strerror(errno ? errno : ENOMEM));
		return -1;
	}
	return 0;
}

int mt_user_from_env(struct mt_user *u, char *why, size_t whylen)
{
	const char *uid_s = getenv("SUDO_UID"), *gid_s = getenv("SUDO_GID");
	unsigned long uid, gid;

	memset(u, 0, sizeof(*u));
	u->uid = geteuid();
	u->gid = getegid();
	if (getuid() != 0 && geteuid() == 0) {
		/* set-user-ID root: run by the real user, whose environment
		 * this is (SUDO_UID included: never believed here) */
		u->is_sudo = true;
		u->uid = getuid();
		u->gid = getgid();
		return from_passwd(u, "real uid", why, whylen);
	}
	if (getuid() != 0 || !uid_s || !gid_s)
		return 0;
	if (parse_id(uid_s, &uid) || parse_id(gid_s, &gid)) {
		snprintf(why, whylen,
			 "SUDO_UID='%.32s', SUDO_GID='%.32s': expected a "
			 "user and a group id",
			 uid_s, gid_s);
		return -1;
	}
	if (uid == 0)
		return 0; /* sudo from root: there is no one else to be */
	u->is_sudo = true;
	u->uid = uid;
	u->gid = gid;
	return from_passwd(u, "SUDO_UID", why, whylen);
}

void mt_user_free(struct mt_user *u)
{
	free(u->name);
	free(u->home);
	free(u->shell);
	free(u->groups);
	memset(u, 0, sizeof(*u));
}

/*
 * setgroups(2) itself, for the calling thread alone: glibc's setgroups()
 * sets every thread's (as POSIX wants), which would hand the user's groups
 * to threads of mt-trace working as root meanwhile, and make a switch on
 * one thread visible on another.  setfsuid and setfsgid are per thread
 * already.
 */
static int thread_setgroups(int n, const gid_t *groups)
{
	return (int)syscall(SYS_setgroups, (size_t)n, groups);
}

int mt_user_fs_begin(const struct mt_user *u, struct mt_user_fs *saved)
{
	int n, err;

	memset(saved, 0, sizeof(*saved));
	if (!u->is_sudo)
		return 0;
	n = getgroups(0, NULL);
	if (n < 0)
		return -errno;
	saved->groups = mt_xreallocarray(NULL, n, sizeof(gid_t));
	if ((saved->ngroups = getgroups(n, saved->groups)) < 0) {
		err = -errno;
		free(saved->groups);
		return err;
	}
	if (thread_setgroups(u->ngroups, u->groups)) {
		err = -errno;
		free(saved->groups);
		return err;
	}
	saved->switched = true;
	saved->fsgid = setfsgid(u->gid);
	saved->fsuid = setfsuid(u->uid);
	/* setfsuid(-1) changes nothing and says what is in force */
	if ((uid_t)setfsuid(-1) != u->uid || (gid_t)setfsgid(-1) != u->gid) {
		mt_user_fs_end(saved);
		return -EPERM;
	}
	return 0;
}

void mt_user_fs_end(struct mt_user_fs *saved)
{
	if (!saved->switched)
		return;
	setfsuid(saved->fsuid);
	setfsgid(saved->fsgid);
	if (thread_setgroups(saved->ngroups, saved->groups)) {
		/* root restoring its own list: cannot fail */
	}
	free(saved->groups);
	memset(saved, 0, sizeof(*saved));
}

/* ---- opening as the user, from anywhere ---------------------------------- */

/* mt_user_act_for's user: NULL, or one not is_sudo, opens as mt-trace */
static const struct mt_user *acting_for;

void mt_user_act_for(const struct mt_user *u)
{
	acting_for = u;
}

bool mt_user_acting(void)
{
	return acting_for && acting_for->is_sudo;
}

int mt_user_open(const char *path, int flags, mode_t mode)
{
	struct mt_user_fs saved;
	int fd, err;

	if (!mt_user_acting())
		return open(path, flags | O_CLOEXEC, mode);
	err = mt_user_fs_begin(acting_for, &saved);
	if (err) {
		errno = -err;
		return -1;
	}
	fd = open(path, flags | O_CLOEXEC, mode);
	err = errno;
	mt_user_fs_end(&saved);
	errno = err;
	return fd;
}

/* The files mt_user_input opened: the user's name for each, by the path
 * of its descriptor.  Open until mt-trace exits. */
struct user_input {
	char *via; /* apart from the array: returned, and the array grows */
	char *name;
};
static struct user_input *inputs;
static size_t ninputs;

const char *mt_user_input(const char *what, const char *path)
{
	struct stat st;
	int fd;

	if (!mt_user_acting())
		return path;
	/* O_NONBLOCK: a FIFO named here must not stop mt-trace */
	fd = mt_user_open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		mt_error(what[0] == '-' ? "%s %s: %s" : "%s: %s: %s", what,
			 path, fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	inputs = mt_xreallocarray(inputs, ninputs + 1, sizeof(*inputs));
	inputs[ninputs].name = mt_xstrdup(path);
	inputs[ninputs].via = mt_xasprintf("/proc/self/fd/%d", fd);
	return inputs[ninputs++].via;
}

const char *mt_user_input_name(const char *path)
{
	for (size_t i = 0; i < ninputs; i++)
		if (!strcmp(path, inputs[i].via))
			return inputs[i].name;
	return path;
}

/* The directory path's last component is in, stat'ed. */
static int stat_parent(const char *path, struct stat *st)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 1;

	if (len >= sizeof(dir))
		return -1;
	if (!slash)
		memcpy(dir, ".", 1);
	else if (len == 0)
		memcpy(dir, "/", (len = 1));
	else
		memcpy(dir, path, len);
	dir[len] = '\0';
	return stat(dir, st);
}

static bool is_shared_sticky(const struct stat *dir)
{
	return (dir->st_mode & S_ISVTX) && (dir->st_mode & (S_IWOTH | S_IWGRP));
}

/*
 * In a sticky directory others write to, only its owner and the owner of
 * an entry can remove or replace that entry: one of theirs is trusted as
 * the kernel's protected_symlinks and protected_regular would trust it.
 */
static int check_planted(const struct stat *entry, const struct stat *dir,
			 uid_t us, char *why, size_t whylen)
{
	if (!is_shared_sticky(dir) || entry->st_uid == us ||
	    entry->st_uid == dir->st_uid)
		return 0;
	snprintf(why, whylen,
		 "%s owned by uid %u in a sticky directory others can write "
		 "to: refusing to %s (remove it, or choose another path)",
		 S_ISLNK(entry->st_mode) ? "a symbolic link" : "a file",
		 (unsigned)entry->st_uid,
		 S_ISLNK(entry->st_mode) ? "follow it"
					 : "write into another user's file");
	return -1;
}

/* Open an existing path after checking what it is; -2: it changed under
 * us, try again. */
static int open_existing(struct mt_output *out, const char *path, uid_t us,
			 char *why, size_t whylen)
{
	struct stat entry, dir, opened;
	int fd;

	if (lstat(path, &entry))
		return errno == ENOENT ? -2 : -1;
	if (stat_parent(path, &dir))
		return -1;
	if (check_planted(&entry, &dir, us, why, whylen))
		return -1;
	/* a link that passed is trusted, and may name a file to create, as
	 * with the shell's '>'; anything else must not turn into a link
	 * between the check and the open */
	fd = open(path,
		  O_WRONLY | O_CLOEXEC |
		      (S_ISLNK(entry.st_mode) ? O_CREAT : O_NOFOLLOW),
		  0666);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? -2 : -1;
	if (fstat(fd, &opened) ||
	    (!S_ISLNK(entry.st_mode) && (opened.st_dev != entry.st_dev ||
					 opened.st_ino != entry.st_ino))) {
		close(fd);
		return -2;
	}
	if (S_ISREG(opened.st_mode) && ftruncate(fd, 0)) {
		close(fd);
		return -1;
	}
	out->fd = fd;
	out->dev = opened.st_dev;
	out->ino = opened.st_ino;
	return 0;
}

static int open_as_user(struct mt_output *out, const char *path, uid_t us,
			char *why, size_t whylen)
{
	struct stat st;

	for (int attempt = 0; attempt < 8; attempt++) {
		int rc;

		/* O_EXCL: a new file of ours, and never through a link */
		out->fd =
		    open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (out->fd >= 0) {
			out->created = true;
			if (fstat(out->fd, &st))
				return -1;
			out->dev = st.st_dev;
			out->ino = st.st_ino;
			return 0;
		}
		if (errno != EEXIST)
			return -1;
		rc = open_existing(out, path, us, why, whylen);
		if (rc != -2)
			return rc;
	}
	errno = EAGAIN; /* someone keeps replacing it */
	return -1;
}

int mt_output_open(struct mt_output *out, const struct mt_user *u,
		   const char *path, char *why, size_t whylen)
{
	struct mt_user_fs saved;
	int rc, err;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	why[0] = '\0';
	err = mt_user_fs_begin(u, &saved);
	if (err) {
		snprintf(why, whylen, "becoming uid %u: %s", (unsigned)u->uid,
			 strerror(-err));
		return -1;
	}
	rc = open_as_user(out, path, u->uid, why, whylen);
	err = errno;
	mt_user_fs_end(&saved);
	if (rc && !why[0])
		snprintf(why, whylen, "%s", strerror(err));
	return rc;
}

void mt_output_remove_if_unused(const struct mt_output *out,
				const struct mt_user *u, const char *path)
{
	struct mt_user_fs saved;
	struct stat now, opened;

	if (!out->created || out->fd < 0 || fstat(out->fd, &opened) ||
	    opened.st_size != 0)
		return;
	/* by name, so as the user: a directory of the path replaced since
	 * (by a link elsewhere) leads root nowhere */
	if (mt_user_fs_begin(u, &saved))
		return;
	if (lstat(path, &now) == 0 && now.st_dev == out->dev &&
	    now.st_ino == out->ino)
		unlink(path);
	mt_user_fs_end(&saved);
}

void mt_user_env(const struct mt_user *u, struct mt_child_env *env)
{
	if (!u->is_sudo)
		return;
	/* what `sudo -u USER` (env_reset) sets from the passwd entry */
	mt_child_env_set(env, "HOME", u->home);
	mt_child_env_set(env, "USER", u->name);
	mt_child_env_set(env, "LOGNAME", u->name);
	mt_child_env_set(env, "SHELL", u->shell);
}

int mt_user_become(const struct mt_user *u)
{
	if (!u->is_sudo)
		return 0;
	if (setgroups(u->ngroups, u->groups) || setgid(u->gid) ||
	    setuid(u->uid))
		return -errno;
	return 0;
}
