// SPDX-License-Identifier: MIT
/* control.c - the control FIFO of mt-trace (see mt_control.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_control.h"

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

static int make_fifo(const char *path, uid_t owner, gid_t group)
{
	struct stat st;

	if (mkfifo(path, 0600) == 0) {
		if (owner != (uid_t)-1 && chown(path, owner, group))
			return -errno;
		return 0;
	}
	if (errno != EEXIST)
		return -errno;
	if (stat(path, &st) || !S_ISFIFO(st.st_mode))
		return -EEXIST; /* something else is there: leave it alone */
	return 0;
}

int mt_control_open(struct mt_control *c, const char *path, uid_t owner,
		    gid_t group)
{
	int err;

	memset(c, 0, sizeof(*c));
	c->fd = c->keep_fd = -1;
	c->path = strdup(path);
	if (!c->path || asprintf(&c->ack_path, "%s.ack", path) < 0)
		return -ENOMEM;
	err = make_fifo(c->path, owner, group);
	if (!err)
		err = make_fifo(c->ack_path, owner, group);
	if (err)
		return err;
	c->fd = open(c->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	c->keep_fd = open(c->path, O_WRONLY | O_CLOEXEC);
	return c->keep_fd < 0 ? -errno : 0;
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
	/* non-blocking: ENXIO when nobody waits for the answer, fine */
	int fd = open(c->ack_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "ok\n", 3) < 0) {
		/* the writer stopped waiting: nothing to do */
	}
	close(fd);
}

void mt_control_close(struct mt_control *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->keep_fd >= 0)
		close(c->keep_fd);
	if (c->path)
		unlink(c->path);
	if (c->ack_path)
		unlink(c->ack_path);
	free(c->path);
	free(c->ack_path);
	c->path = c->ack_path = NULL;
	c->fd = c->keep_fd = -1;
}
