// SPDX-License-Identifier: MIT
/* human.c - formatting and parsing of sizes, counts and durations. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mt_human.h"

char *mt_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = {"B",   "KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB"};
	unsigned u = 0;
	double v = (double)bytes;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	if (v < 9.995)
		snprintf(buf, len, "%.2f %s", v, units[u]);
	else if (v < 99.95)
		snprintf(buf, len, "%.1f %s", v, units[u]);
	else
		snprintf(buf, len, "%.0f %s", v, units[u]);
	return buf;
}

char *mt_fmt_count(char *buf, size_t len, uint64_t n)
{
	char digits[32];
	int nd =
	    snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);
	size_t o = 0;

	for (int i = 0; i < nd && o + 1 < len; i++) {
		if (i > 0 && (nd - i) % 3 == 0 && o + 2 < len)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	if (len)
		buf[o < len ? o : len - 1] = '\0';
	return buf;
}

char *mt_fmt_duration(char *buf, size_t len, uint64_t ns)
{
	static const struct {
		double ns;
		const char *name;
	} units[] = {{1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};

	if (ns < 1000) {
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
		return buf;
	}
	/* three significant digits in every unit (999.7 us is 1 ms, never
	 * "1e+03 us"); whole seconds past 999 s */
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		double v = (double)ns / units[u].ns;

		if (v < 999.5) {
			snprintf(buf, len, "%.3g %s", v, units[u].name);
			return buf;
		}
	}
	snprintf(buf, len, "%.0f s", (double)ns / 1e9);
	return buf;
}

/* Parses the number part of "1.5MiB"; *end points at the unit. */
static int parse_number(const char *s, double *v, const char **end)
{
	char *e;

	if (!s || !isdigit((unsigned char)*s))
		if (!(s && *s == '.' && isdigit((unsigned char)s[1])))
			return -1;
	errno = 0;
	*v = strtod(s, &e);
	if (errno || e == s || !isfinite(*v) || *v < 0)
		return -1;
	*end = e;
	return 0;
}

struct unit {
	const char *name;
	double scale;
};

static int scale_by_unit(double v, const char *u, const struct unit *units,
			 size_t n, double *out)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(u, units[i].name) == 0) {
			*out = v * units[i].scale;
			return 0;
		}
	}
	return -1;
}

int mt_parse_size(const char *s, uint64_t *bytes)
{
	static const struct unit units[] = {
	    {"", 1},	   {"B", 1},	    {"K", 0x1p10}, {"KiB", 0x1p10},
	    {"M", 0x1p20}, {"MiB", 0x1p20}, {"G", 0x1p30}, {"GiB", 0x1p30},
	    {"T", 0x1p40}, {"TiB", 0x1p40}, {"k", 0x1p10}, {"kB", 1e3},
	    {"KB", 1e3},   {"MB", 1e6},	    {"GB", 1e9},   {"TB", 1e12},
	};
	const char *u;
	double v, b;

	if (parse_number(s, &v, &u) < 0)
		return -1;
	while (*u == ' ')
		u++;
	if (scale_by_unit(v, u, units, sizeof(units) / sizeof(units[0]), &b))
		return -1;
	if (b >= 0x1p64)
		return -1;
	*bytes = (uint64_t)llround(b);
	return 0;
}

int mt_parse_duration(const char *s, uint64_t *ns)
{
	static const struct unit units[] = {
	    {"ns", 1},	{"us", 1e3}, {"ms", 1e6},
	    {"s", 1e9}, {"m", 60e9}, {"h", 3600e9},
	};
	const char *u;
	double v, t;

	if (parse_number(s, &v, &u) < 0)
		return -1;
	while (*u == ' ')
		u++;
	if (*u == '\0') {
		/* a bare number is ambiguous, except zero */
		if (v != 0)
			return -1;
		*ns = 0;
		return 0;
	}
	if (scale_by_unit(v, u, units, sizeof(units) / sizeof(units[0]), &t))
		return -1;
	if (t >= 0x1p64)
		return -1;
	*ns = (uint64_t)llround(t);
	return 0;
}

int mt_parse_count(const char *s, uint64_t *n)
{
	char *e;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &e, 10);
	if (errno || *e)
		return -1;
	*n = v;
	return 0;
}

int mt_parse_percent(const char *s, double *pct)
{
	const char *u;
	double v;

	if (parse_number(s, &v, &u) < 0)
		return -1;
	if (*u == '%')
		u++;
	if (*u)
		return -1;
	*pct = v;
	return 0;
}

/* The code point of the UTF-8 sequence at s (its length in *len), or the
 * byte itself (*len 1) when it is not one (the input should be UTF-8). */
static uint32_t code_point(const unsigned char *s, size_t left, size_t *len)
{
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	uint32_t c;

	if (n > left || s[0] < 0xc0) {
		*len = 1;
		return s[0];
	}
	c = n == 1 ? s[0] : s[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			*len = 1;
			return s[0];
		}
		c = c << 6 | (s[i] & 0x3f);
	}
	*len = n;
	return c;
}

/* Shown escaped: C0 and C1 controls, DEL, and the characters that change
 * the order text is shown in (Unicode's bidirectional marks, embeddings,
 * overrides and isolates), and the line and paragraph separators. */
static bool must_escape(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x200e ||
	       c == 0x200f || (c >= 0x2028 && c <= 0x202e) ||
	       (c >= 0x2066 && c <= 0x2069);
}

static bool shell_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("_@%+=:,./-", c);
}

/* One argument, quoted as needed, at o (room for 10 bytes a byte + 3). */
static char *quote_one(char *o, const char *s, size_t len)
{
	bool plain = len > 0, escape = false;

	for (size_t i = 0, k; i < len; i += k) {
		uint32_t c =
		    code_point((const unsigned char *)s + i, len - i, &k);

		plain &= k == 1 && c && shell_plain((unsigned char)c);
		escape |= must_escape(c);
	}
	if (plain) {
		memcpy(o, s, len);
		return o + len;
	}
	if (!escape) { /* '...', each ' as '\'' */
		*o++ = '\'';
		for (size_t i = 0; i < len; i++) {
			if (s[i] == '\'') {
				memcpy(o, "'\\''", 4);
				o += 4;
			} else {
				*o++ = s[i];
			}
		}
		*o++ = '\'';
		return o;
	}
	*o++ = '$';
	*o++ = '\'';
	for (size_t i = 0, k; i < len; i += k) {
		uint32_t c =
		    code_point((const unsigned char *)s + i, len - i, &k);

		if (c == '\n' || c == '\t' || c == '\r') {
			*o++ = '\\';
			*o++ = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
		} else if (c == '\\' || c == '\'') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (must_escape(c)) {
			o += sprintf(o, c < 0x80 ? "\\x%02x" : "\\u%04x",
				     (unsigned)c);
		} else {
			memcpy(o, s + i, k);
			o += k;
		}
	}
	*o++ = '\'';
	return o;
}

char *mt_shell_quote(const char *const *argv, const size_t *lens, size_t n)
{
	size_t room = 1;
	char *out, *o;

	for (size_t i = 0; i < n; i++)
		room += 10 * lens[i] + 4;
	out = malloc(room);
	if (!out)
		return NULL;
	o = out;
	for (size_t i = 0; i < n; i++) {
		if (i)
			*o++ = ' ';
		o = quote_one(o, argv[i], lens[i]);
	}
	*o = '\0';
	return out;
}
