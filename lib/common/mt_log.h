/* SPDX-License-Identifier: MIT */
/*
 * mt_log.h - how library code says something: one sink, installed by the
 * tool (log.c).  No lib/ file prints; the tool decides where the words go
 * and how they are prefixed ("mt-trace: ").
 *
 * Errors carry their context: the step under way (mt_log_step(), set by
 * a plan such as mt-trace's start-up) beside the text, which names the
 * file and says the errno's words.  Without a sink, nothing is said.
 */
#ifndef MT_LOG_H
#define MT_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum mt_log_level {
	MT_LOG_ERROR,	/* what failed: the tool's exit says the rest */
	MT_LOG_WARNING, /* the work goes on, with less than asked for */
	MT_LOG_NOTE,	/* said always, not a warning (--physical's method) */
	MT_LOG_VERBOSE, /* -v: what was done */
	MT_LOG_DETAIL,	/* -vv: timings, what was done beside */
};

struct mt_log_msg {
	enum mt_log_level level;
	const char *step; /* the step under way, or NULL */
	const char *text; /* one line or more, without the final newline */
	/* another library's words (libbpf's), to be shown as they are: no
	 * prefix, their own newlines */
	bool verbatim;
};

typedef void (*mt_log_sink)(const struct mt_log_msg *m, void *arg);

/* Where messages go from now on (NULL: nowhere). */
void mt_log_set_sink(mt_log_sink sink, void *arg);

/* The step under way (a static string, or NULL once it is over). */
void mt_log_step(const char *step);

void mt_log(enum mt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void mt_logv(enum mt_log_level level, const char *fmt, va_list ap);
void mt_log_verbatim(enum mt_log_level level, const char *fmt, va_list ap);

/*
 * Out of memory, lib/'s one policy (lib/README.md): say so through the
 * sink and exit with the status the tool gave (mt-trace: 125; 1 when none
 * was given).  Never returns.
 */
void mt_out_of_memory(void) __attribute__((noreturn));
void mt_log_set_oom_status(int status);

#define mt_error(...)	mt_log(MT_LOG_ERROR, __VA_ARGS__)
#define mt_warning(...) mt_log(MT_LOG_WARNING, __VA_ARGS__)
#define mt_note(...)	mt_log(MT_LOG_NOTE, __VA_ARGS__)
#define mt_verbose(...) mt_log(MT_LOG_VERBOSE, __VA_ARGS__)
#define mt_detail(...)	mt_log(MT_LOG_DETAIL, __VA_ARGS__)

#endif /* MT_LOG_H */
