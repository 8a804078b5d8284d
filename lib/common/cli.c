// SPDX-License-Identifier: MIT
/* cli.c - output errors as exit statuses, the waiting-for-stdin note. */
#include <err.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_cli.h"

void mt_output_init(void)
{
	signal(SIGPIPE, SIG_IGN);
}

/* A pipe whose reader has gone: the kernel says POLLERR on its write end
 * (and errno may be stale by the time stdio reports the failure). */
static bool reader_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

__attribute__((noreturn)) static void output_failed(int fd, const char *name)
{
	if (errno == EPIPE || reader_gone(fd))
		exit(MT_EXIT_UNUSABLE);
	if (errno == 0)
		errno = EIO;
	err(MT_EXIT_UNUSABLE, "%s", name);
}

void mt_output_failed(FILE *out, const char *name)
{
	output_failed(fileno(out), name);
}

void mt_output_close(FILE *out, const char *name)
{
	int fd = fileno(out);

	errno = 0;
	/* ferror: an earlier write failed and stdio went on */
	if (fflush(out) == EOF || ferror(out))
		output_failed(fd, name);
	if (out != stdout && fclose(out) == EOF)
		output_failed(fd, name);
}

void mt_stdin_note(const char *path)
{
	if ((!path || !strcmp(path, "-")) && isatty(STDIN_FILENO))
		warnx("reading a trace from standard input (a terminal): "
		      "pipe one in or name a FILE; --help for more");
}
