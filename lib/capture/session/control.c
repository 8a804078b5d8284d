// SPDX-License-Identifier: MIT
/* control.c - the control FIFO of mt-trace (see mt_control.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_control.h"
#include "mt_xalloc.h"

static int is_word(const char *line, size_t len, const char *word)
{
	size_t n = strlen(word);

	return len == n && memcmp(line, word, n) == 0;
}

enum mt_control_cmd mt_control_parse(const char *line, size_t len,
				     const char **arg, size_t *arglen)
{
	while (len && (line[len - 1] == ' ' || line[len - 1] == '\r' ||
		       line[len - 1] == '\t'))
		len--;
	*arg = NULL;
	*arglen = 0;
	if (is_word(line, len, "enable"))
		return MT_CTL_ENABLE;
	if (is_word(line, len, "disable"))
		return MT_CTL_DISABLE;
	if (len > 7 && memcmp(line, "marker ", 7) == 0) {
		const char *name = line + 7;
		size_t n = len - 7;

		while (n && *name == ' ') {
			name++;
			n--;
		}
		if (n == 0 || n > MT_MARKER_MAX || memchr(name, '\0', n))
			return MT_CTL_INVALID;
		*arg = name;
		*arglen = n;
		return MT_CTL_MARKER;
	}
	return MT_CTL_INVALID;
}

/*
 * Make path a new FIFO of the user's, mode 0600, and check that what is
 * opened is that FIFO: never one that was there before (anyone may have
 * made it, and would then command the trace), never through a symbolic
 * link.  The FIFO's identity is kept so that only it is removed at the end.
 */
static int make_fifo(struct mt_control_fifo *f, const char *path, uid_t owner,
		     int *fdp, char *why, size_t whylen)
{
	struct stat st;
	int fd;

	if (mkfifo(path, 0600)) {
		if (errno == EEXIST)
			snprintf(why, whylen,
				 "%s already exists: --control makes a new "
				 "FIFO and never uses one it did not make "
				 "(remove it, or choose another path)",
				 path);
		else
			snprintf(why, whylen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* what to remove at the end, even should the rest fail */
	if (lstat(path, &st) == 0 && S_ISFIFO(st.st_mode)) {
		f->made = true;
		f->dev = st.st_dev;
		f->ino = st.st_ino;
	}
	/* read and write: no EOF when writers come and go, and an open that
	 * does not wait for a writer */
	fd = open(path, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || fchmod(fd, 0600)) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!f->made || st.st_dev != f->dev || st.st_ino != f->ino ||
	    !S_ISFIFO(st.st_mode) || st.st_uid != owner) {
		snprintf(why, whylen,
			 "%s: not the FIFO just made (replaced meanwhile)",
			 path);
		close(fd);
		return -1;
	}
	*fdp = fd;
	return 0;
}

int mt_control_open(struct mt_control *c, const char *path,
		    const struct mt_user *u, char *why, size_t whylen)
{
	struct mt_user_fs saved;
	int rc, ack_fd = -1;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->user = u;
	c->path = mt_xstrdup(path);
	c->ack_path = mt_xasprintf("%s.ack", path);
	rc = mt_user_fs_begin(u, &saved);
	if (rc) {
		snprintf(why, whylen, "becoming uid %u: %s", (unsigned)u->uid,
			 strerror(-rc));
		return -1;
	}
	rc = make_fifo(&c->fifo, c->path, u->uid, &c->fd, why, whylen);
	if (!rc)
		rc = make_fifo(&c->ack, c->ack_path, u->uid, &ack_fd, why,
			       whylen);
	mt_user_fs_end(&saved);
	/* answers are opened afresh for each: one nobody waits for must not
	 * stay in the pipe for the next writer */
	if (ack_fd >= 0)
		close(ack_fd);
	return rc;
}

void mt_control_read(struct mt_control *c, mt_control_fn fn, void *ctx)
{
	ssize_t got;

	while ((got = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len)) >
	       0) {
		char *start = c->buf, *nl;

		c->len += got;
		while ((nl = memchr(start, '\n', c->len - (start - c->buf)))) {
			const char *arg;
			size_t arglen, n = nl - start;
			enum mt_control_cmd cmd;

			*nl = '\0';
			cmd = mt_control_parse(start, n, &arg, &arglen);
			fn(ctx, cmd, arg, arglen, start);
			start = nl + 1;
		}
		c->len -= start - c->buf;
		memmove(c->buf, start, c->len);
		if (c->len == sizeof(c->buf)) {
			/* a line longer than the buffer: not a command */
			c->buf[sizeof(c->buf) - 1] = '\0';
			fn(ctx, MT_CTL_INVALID, NULL, 0, c->buf);
			c->len = 0;
		}
	}
}

void mt_control_ack(struct mt_control *c)
{
	struct mt_user_fs saved;
	struct stat st;
	int fd;

	/* by name, so as the user: a directory of the path replaced by a
	 * link must not make root open what is there (a device) */
	if (mt_user_fs_begin(c->user, &saved))
		return;
	/* non-blocking: ENXIO when nobody waits for the answer, fine */
	fd = open(c->ack_path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	mt_user_fs_end(&saved);
	if (fd < 0)
		return;
	/* only to the FIFO made at the start */
	if (fstat(fd, &st) == 0 && st.st_dev == c->ack.dev &&
	    st.st_ino == c->ack.ino && write(fd, "ok\n", 3) < 0) {
		/* the writer stopped waiting: nothing to do */
	}
	close(fd);
}

/* Remove path if it is still the FIFO this run made. */
static void remove_made(const struct mt_control_fifo *f, const char *path)
{
	struct stat st;

	if (path && f->made && lstat(path, &st) == 0 && st.st_dev == f->dev &&
	    st.st_ino == f->ino)
		unlink(path);
}

void mt_control_close(struct mt_control *c)
{
	struct mt_user_fs saved;

	if (c->fd >= 0)
		close(c->fd);
	/* as the user, as they were made: by name */
	if (c->user && mt_user_fs_begin(c->user, &saved) == 0) {
		remove_made(&c->fifo, c->path);
		remove_made(&c->ack, c->ack_path);
		mt_user_fs_end(&saved);
	}
	free(c->path);
	free(c->ack_path);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}
