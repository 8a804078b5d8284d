/* SPDX-License-Identifier: MIT */
/*
 * mt_user.h - the user mt-trace works for.
 *
 * Run as root under sudo(8) (SUDO_UID and SUDO_GID set), or set-user-ID
 * root by another user (the real uid), mt-trace needs root for the eBPF
 * side only: every file a user names (the trace, the command's stdout, the
 * control FIFO, --scan's and --libc's files, MT_SCAN's, MT_PRELOAD) is
 * opened with the invoking user's rights, what it creates is owned by
 * them, and a file read is used through that open descriptor alone, never
 * opened again by its name as root; the command runs as that user with
 * the environment `sudo -u USER` gives (HOME, USER, LOGNAME, SHELL from the
 * passwd entry, the user's supplementary groups).
 *
 * Whoever it runs as, mt-trace never follows a symbolic link, nor writes
 * into a file, that another user planted in a sticky directory anyone may
 * write to (/tmp): the kernel's fs.protected_symlinks and
 * fs.protected_regular are not relied on (they can be off).
 */
#ifndef MT_USER_H
#define MT_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct mt_user {
	/* root acting for another user: SUDO_UID's, or the real uid of a
	 * set-user-ID run; else for ourselves */
	bool is_sudo;
	uid_t uid; /* who owns what mt-trace creates */
	gid_t gid;
	char *name; /* is_sudo only: from the passwd entry of uid */
	char *home;
	char *shell;
	gid_t *groups; /* is_sudo only: uid's supplementary groups */
	int ngroups;
};

/* Fill u from the process and the environment (SUDO_UID, SUDO_GID, believed
 * only when the real uid is root's).  0, or -1 with a message in why (no
 * passwd entry, a malformed number). */
int mt_user_from_env(struct mt_user *u, char *why, size_t whylen);

void mt_user_free(struct mt_user *u);

/* Filesystem rights saved by mt_user_fs_begin. */
struct mt_user_fs {
	bool switched;
	uid_t fsuid;
	gid_t fsgid;
	gid_t *groups;
	int ngroups;
};

/* Until mt_user_fs_end, the filesystem sees u (fsuid, fsgid, groups): what
 * is created is u's, what u may not touch fails.  Nothing when not under
 * sudo.  The calling thread's credentials alone change (the groups with
 * the system call, not glibc's every-thread setgroups): other threads stay
 * root meanwhile.  0 or -errno. */
int mt_user_fs_begin(const struct mt_user *u, struct mt_user_fs *saved);
void mt_user_fs_end(struct mt_user_fs *saved);

/* The user mt_user_open and mt_user_input act for from now on (u stays
 * valid until mt-trace exits); until then, and when u is not is_sudo,
 * they open as mt-trace itself. */
void mt_user_act_for(const struct mt_user *u);

/* Whether mt-trace acts for another user (mt_user_act_for, is_sudo). */
bool mt_user_acting(void);

/* open(2) (O_CLOEXEC added) with the rights of the user acted for, on the
 * calling thread.  The descriptor, or -1 with the user's errno. */
int mt_user_open(const char *path, int flags, mode_t mode);

/*
 * A file the user named to be read (what: "--scan", "MT_SCAN"...).  When
 * acting for another user, it is opened now with their rights, must be a
 * regular file, stays open, and the path returned, /proc/self/fd/N, reaches
 * that open file whatever happens to path meanwhile: code that opens it by
 * that name reads what the user could read, never a file swapped in.  Else
 * path itself.  NULL after a message on stderr naming what, path and the
 * user's errno ("mt-trace: --scan /root/lib.so: Permission denied"), which
 * says nothing about a file the user may not reach.
 */
const char *mt_user_input(const char *what, const char *path);

/* The user's name for a path mt_user_input returned; path itself for any
 * other. */
const char *mt_user_input_name(const char *path);

/* An output file mt-trace opened; what to remove if the run fails. */
struct mt_output {
	int fd;
	bool created; /* this run made the file */
	dev_t dev;
	ino_t ino;
};

/*
 * Open path for writing as u, truncating a regular file, creating it
 * (mode 0666 less the umask) owned by u when it does not exist.  In a
 * sticky directory others may write to, refuses a symbolic link or a file
 * owned neither by u nor by the directory's owner.  0, or -1 with a message
 * (without the path) in why.
 */
int mt_output_open(struct mt_output *out, const struct mt_user *u,
		   const char *path, char *why, size_t whylen);

/* Remove path if this run created it, it is still the file opened, and it
 * is empty (nothing was written); as u, the path being theirs.  Does not
 * close out->fd. */
void mt_output_remove_if_unused(const struct mt_output *out,
				const struct mt_user *u, const char *path);

struct mt_child_env;

/* Before the command is forked: HOME, USER, LOGNAME and SHELL from u's
 * passwd entry in its environment.  Nothing when not under sudo. */
void mt_user_env(const struct mt_user *u, struct mt_child_env *env);

/* In the command's process, before exec: become u (groups, gid, uid).
 * Nothing when not under sudo.  0 or -errno. */
int mt_user_become(const struct mt_user *u);

#endif /* MT_USER_H */
