/* SPDX-License-Identifier: MIT */
/*
 * mt_control.h - mt-trace's control FIFO: a traced program (or a shell)
 * writes newline-separated commands, mt-trace applies them in order and
 * answers "ok" on PATH.ack, so a writer that waits for the answer knows
 * everything it did before is on one side of the command and everything
 * after on the other.
 *
 *   enable          allocator and syscall events on
 *   disable         allocator and syscall events off
 *   marker NAME     a named point in time
 */
#ifndef MT_CONTROL_H
#define MT_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "mt_user.h"

enum mt_control_cmd {
	MT_CTL_INVALID = 0,
	MT_CTL_ENABLE,
	MT_CTL_DISABLE,
	MT_CTL_MARKER,
};

/* Longest marker name kept; longer names are refused. */
#define MT_MARKER_MAX 256

/* Parse one line (without its newline).  For MARKER, arg and arglen give the
 * name.  Returns the command, MT_CTL_INVALID for anything else. */
enum mt_control_cmd mt_control_parse(const char *line, size_t len,
				     const char **arg, size_t *arglen);

/* A FIFO this run made: only it is ever removed. */
struct mt_control_fifo {
	bool made;
	dev_t dev;
	ino_t ino;
};

struct mt_control {
	const struct mt_user *user; /* whose the FIFOs are: opened as them */
	char *path;
	char *ack_path;
	int fd; /* read (and write: no EOF) end, non-blocking */
	struct mt_control_fifo fifo, ack;
	char buf[4096];
	size_t len;
};

/* Create PATH and PATH.ack as new FIFOs of u's, mode 0600 (failing if
 * anything is there already, a symbolic link included), and open PATH.
 * 0, or -1 with a message naming the path in why. */
int mt_control_open(struct mt_control *c, const char *path,
		    const struct mt_user *u, char *why, size_t whylen);

typedef void (*mt_control_fn)(void *ctx, enum mt_control_cmd cmd,
			      const char *arg, size_t arglen, const char *line);

/* Read what is there and call fn for each complete line. */
void mt_control_read(struct mt_control *c, mt_control_fn fn, void *ctx);

/* Tell a writer waiting on PATH.ack that its command was applied. */
void mt_control_ack(struct mt_control *c);

/* Close, and remove the FIFOs this run made (still the same files). */
void mt_control_close(struct mt_control *c);

#endif /* MT_CONTROL_H */
