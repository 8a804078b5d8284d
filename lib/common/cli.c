// SPDX-License-Identifier: MIT
/* cli.c - output errors as exit statuses, the waiting-for-stdin note. */
#include <err.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mt_cli.h"
#include "mt_human.h"

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

#define PROGRESS_AFTER 1.0  /* s: short runs stay silent */
#define PROGRESS_STEP  0.25 /* s between two updates */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void mt_progress_init(struct mt_progress *p, const char *prog)
{
	p->prog = prog;
	p->on = isatty(STDERR_FILENO);
	p->shown = false;
	p->start = now_s();
	p->next = p->start + PROGRESS_AFTER;
}

void mt_progress_update(struct mt_progress *p, uint64_t events,
			uint64_t bytes_read)
{
	char count[32], bytes[32];
	double t;

	if (!p->on)
		return;
	t = now_s();
	if (t < p->next)
		return;
	p->next = t + PROGRESS_STEP;
	fprintf(stderr, "\r%s: %s events, %s read, %.1f s\033[K", p->prog,
		mt_fmt_count(count, sizeof(count), events),
		mt_fmt_bytes(bytes, sizeof(bytes), bytes_read), t - p->start);
	p->shown = true;
}

void mt_progress_end(struct mt_progress *p)
{
	if (p->shown)
		fprintf(stderr, "\r\033[K");
	p->shown = false;
}

void mt_cli_name(char **argv)
{
	argv[0] = program_invocation_short_name;
}

void mt_try_help(int status)
{
	fprintf(stderr, "Try '%s --help'.\n", program_invocation_short_name);
	exit(status);
}

void mt_usage_error(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
	mt_try_help(status);
}
