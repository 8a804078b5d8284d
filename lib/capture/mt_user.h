/* SPDX-License-Identifier: MIT */
/*
 * mt_user.h - the user mt-trace works for.
 *
 * Run as root under sudo(8) (SUDO_UID and SUDO_GID set), mt-trace needs
 * root for the eBPF side only: every file it creates or writes (the trace,
 * the command's stdout, the control FIFO) is opened with the invoking
 * user's rights and owned by them, and the command runs as that user with
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
	bool is_sudo; /* root acting for SUDO_UID; else for ourselves */
	uid_t uid;    /* who owns what mt-trace creates */
	gid_t gid;
	char *name; /* is_sudo only: from the passwd entry of uid */
	char *home;
	char *shell;
	gid_t *groups; /* is_sudo only: uid's supplementary groups */
	int ngroups;
};

/* Fill u from the process and the environment (SUDO_UID, SUDO_GID).  0, or
 * -1 with a message in why (no passwd entry, a malformed number). */
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
 * sudo.  Single-threaded callers only (the groups are per process).
 * 0 or -errno. */
int mt_user_fs_begin(const struct mt_user *u, struct mt_user_fs *saved);
void mt_user_fs_end(struct mt_user_fs *saved);

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
 * is empty (nothing was written).  Does not close out->fd. */
void mt_output_remove_if_unused(const struct mt_output *out, const char *path);

/* In the command's process, before exec: become u (groups, gid, uid) with
 * HOME, USER, LOGNAME and SHELL from its passwd entry.  Nothing when not
 * under sudo.  0 or -errno. */
int mt_user_become(const struct mt_user *u);

#endif /* MT_USER_H */
