/* SPDX-License-Identifier: MIT */
/*
 * mt_section.h - let a program traced by `mt-trace --control FIFO` mark
 * the part of its run that matters.  Header only; copy it into your tree.
 *
 *     mt_marker("parse-start");
 *     mt_enable();              // allocator and syscall events on
 *     run_benchmark();
 *     mt_disable();
 *     mt_marker("parse-end");
 *
 * mt-trace puts the FIFO's path in the environment (MT_CONTROL); without it
 * (not traced, or traced without --control) every call does nothing.  Each
 * call waits until mt-trace has applied the command (it answers on
 * FIFO.ack), so everything before the call is on one side of it and
 * everything after on the other.  Calls from several threads at once should
 * be serialised by the caller.
 */
#ifndef MT_SECTION_H
#define MT_SECTION_H

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Send one command line; 0 when applied (or not traced), -1 on error. */
static inline int mt_control_send(const char *command)
{
	const char *fifo = getenv("MT_CONTROL");
	char ack_path[PATH_MAX], line[512], answer[16];
	struct pollfd ack;
	int fd, n;

	if (!fifo || !*fifo)
		return 0;
	n = snprintf(line, sizeof(line), "%s\n", command);
	if (n < 0 || (size_t)n >= sizeof(line) ||
	    snprintf(ack_path, sizeof(ack_path), "%s.ack", fifo) < 0)
		return -1;
	/*
	 * Open the answer channel first, so the answer cannot be missed, and
	 * read-write: a reader-only FIFO reports hang-up at once when
	 * mt-trace's previous answer is still being closed, and we would not
	 * wait.  (Linux allows O_RDWR on a FIFO.)
	 */
	ack.fd = open(ack_path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	ack.events = POLLIN;
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, line, n) != n) {
		if (fd >= 0)
			close(fd);
		if (ack.fd >= 0)
			close(ack.fd);
		return -1;
	}
	close(fd);
	if (ack.fd >= 0) {
		if (poll(&ack, 1, 10000) == 1 &&
		    read(ack.fd, answer, sizeof(answer)) < 0)
			n = -1;
		close(ack.fd);
	}
	return n < 0 ? -1 : 0;
}

static inline int mt_enable(void)
{
	return mt_control_send("enable");
}

static inline int mt_disable(void)
{
	return mt_control_send("disable");
}

static inline int mt_marker(const char *name)
{
	char command[300];

	if (snprintf(command, sizeof(command), "marker %s", name) >=
	    (int)sizeof(command))
		return -1;
	return mt_control_send(command);
}

#endif /* MT_SECTION_H */
