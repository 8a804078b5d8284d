// SPDX-License-Identifier: MIT
/* log.c - the one sink library messages go to (mt_log.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_log.h"

static mt_log_sink log_sink;
static void *log_arg;
static const char *log_step;
static int oom_status = 1;

void mt_log_set_sink(mt_log_sink sink, void *arg)
{
	log_sink = sink;
	log_arg = arg;
}

void mt_log_step(const char *step)
{
	log_step = step;
}

void mt_logv(enum mt_log_level level, const char *fmt, va_list ap)
{
	/* a message longer than this is cut: two paths and an errno fit */
	char text[8192];
	struct mt_log_msg m = {.level = level, .step = log_step, .text = text};
	size_t n;

	if (!log_sink)
		return;
	vsnprintf(text, sizeof(text), fmt, ap);
	n = strlen(text);
	if (n && text[n - 1] == '\n') /* the sink ends the line */
		text[n - 1] = '\0';
	log_sink(&m, log_arg);
}

void mt_log_verbatim(enum mt_log_level level, const char *fmt, va_list ap)
{
	char text[8192];
	struct mt_log_msg m = {
	    .level = level, .step = log_step, .text = text, .verbatim = true};

	if (!log_sink)
		return;
	vsnprintf(text, sizeof(text), fmt, ap);
	log_sink(&m, log_arg);
}

void mt_log(enum mt_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mt_logv(level, fmt, ap);
	va_end(ap);
}

void mt_log_set_oom_status(int status)
{
	oom_status = status;
}

void mt_out_of_memory(void)
{
	mt_error("out of memory");
	exit(oom_status);
}
