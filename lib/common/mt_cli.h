/* SPDX-License-Identifier: MIT */
/*
 * mt_cli.h - what the offline tools' mains share about their standard
 * streams: output errors are an exit status, never a signal; a person
 * staring at a silent terminal is told the tool waits for input.
 */
#ifndef MT_CLI_H
#define MT_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The exit statuses of every tool (man pages, EXIT STATUS). */
enum { MT_EXIT_OK = 0, MT_EXIT_GATE = 1, MT_EXIT_UNUSABLE = 2 };

/*
 * Usage errors, one style in every tool: "mt-X: what was wrong", then
 * "Try 'mt-X --help'." on stderr, exit status.  mt_cli_name() makes
 * argv[0] the tool's name, so getopt's own messages ("unrecognized
 * option") name the tool as err(3) does, never the path it was run by.
 */
void mt_cli_name(char **argv);
void mt_try_help(int status) __attribute__((noreturn));
void mt_usage_error(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/*
 * A closed pipe becomes a write error (EPIPE) instead of SIGPIPE, so that
 * mt_output_close() can exit with the documented status.
 */
void mt_output_init(void);

/*
 * Flush and close out (name: the file for messages, "<stdout>" for
 * stdout).  Returns 0, or exits 2: quietly when the reader went away
 * (EPIPE: `mt-report run | head` is a choice, not a failure worth a
 * message), with "PROG: NAME: reason" on any other error (a full disk).
 */
void mt_output_close(FILE *out, const char *name);

/*
 * The same for an error already seen on out (a writer returned -1 with
 * errno set): exits 2 as above.
 */
void mt_output_failed(FILE *out, const char *name) __attribute__((noreturn));

/*
 * When path names standard input ("-" or NULL) and that is a terminal,
 * say on stderr that the tool waits for a trace there.
 */
void mt_stdin_note(const char *path);

/*
 * A progress line on stderr, only when stderr is a terminal and only once
 * a run has taken a second: "mt-reconstruct: 12,345,678 events, 1.2 GiB
 * read, 3.5 s", rewritten in place a few times a second, erased at the
 * end.
 */
struct mt_progress {
	const char *prog;
	bool on, shown;
	double start, next;
};

void mt_progress_init(struct mt_progress *p, const char *prog);

/* Cheap enough to call every few thousand events: one clock read. */
void mt_progress_update(struct mt_progress *p, uint64_t events,
			uint64_t bytes_read);

/* Erase the line (before any other message or the output). */
void mt_progress_end(struct mt_progress *p);

#endif /* MT_CLI_H */
