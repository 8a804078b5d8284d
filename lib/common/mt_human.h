/* SPDX-License-Identifier: MIT */
/*
 * mt_human.h - numbers for people: sizes in binary units, counts with
 * thousands separators, durations; and the parsers for the SIZE, DURATION,
 * COUNT and PCT arguments every tool accepts.
 */
#ifndef MT_HUMAN_H
#define MT_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* "512 B", "1.50 KiB", "10.0 MiB", "2.25 GiB", up to "16.0 EiB" for
 * 2^64 - 1: three significant digits.  Returns buf. */
char *mt_fmt_bytes(char *buf, size_t len, uint64_t bytes);

/* "1,234,567".  Returns buf. */
char *mt_fmt_count(char *buf, size_t len, uint64_t n);

/* "s" unless n is one: "1 call", "2 calls", "0 calls". */
static inline const char *mt_plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/* "812 ns", "12.3 us", "4.5 ms", "1.23 s", "1234 s": one style, three
 * significant digits, whole seconds past 999 s.  Returns buf. */
char *mt_fmt_duration(char *buf, size_t len, uint64_t ns);

/*
 * SIZE: a number (decimal point allowed) and an optional unit: B, K/KiB,
 * M/MiB, G/GiB, T/TiB (powers of 1024), kB/KB, MB, GB, TB (powers of 1000).
 * 0 on success, -1 on a malformed value or overflow.
 */
int mt_parse_size(const char *s, uint64_t *bytes);

/* DURATION: a number and a unit ns, us, ms, s, m, h; "0" alone is allowed.
 * 0 on success, -1 otherwise. */
int mt_parse_duration(const char *s, uint64_t *ns);

/* COUNT: a non-negative decimal integer.  0 on success, -1 otherwise. */
int mt_parse_count(const char *s, uint64_t *n);

/* PCT: a non-negative number with an optional '%'.  0 or -1. */
int mt_parse_percent(const char *s, double *pct);

/*
 * A command line for people, from its arguments (n strings of valid
 * UTF-8): joined by spaces, each quoted as a POSIX shell would need it
 * ('a b', '' for an empty one), and one holding a control character,
 * C1 control or bidirectional format character as $'a\nb' with escapes,
 * so that the text can neither move a terminal's cursor nor reorder what
 * is shown.  A new string (free it), NULL when out of memory.
 */
char *mt_shell_quote(const char *const *argv, const size_t *lens, size_t n);

#endif /* MT_HUMAN_H */
