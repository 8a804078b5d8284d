/* SPDX-License-Identifier: MIT */
/*
 * mt_cli.h - what the offline tools' mains share about their standard
 * streams: output errors are an exit status, never a signal; a person
 * staring at a silent terminal is told the tool waits for input.
 */
#ifndef MT_CLI_H
#define MT_CLI_H

#include <stdbool.h>
#include <stdio.h>

/* The exit statuses of every tool (man pages, EXIT STATUS). */
enum { MT_EXIT_OK = 0, MT_EXIT_GATE = 1, MT_EXIT_UNUSABLE = 2 };

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

#endif /* MT_CLI_H */
