// SPDX-License-Identifier: MIT
/*
 * xalloc.c - allocation that ends the tool when there is no memory
 * (mt_xalloc.h).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_log.h"
#include "mt_xalloc.h"

void *mt_xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		mt_out_of_memory();
	return p;
}

void *mt_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		mt_out_of_memory();
	return p;
}

void *mt_xreallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		mt_out_of_memory();
	n *= size;
	p = realloc(p, n ? n : 1);
	if (!p)
		mt_out_of_memory();
	return p;
}

char *mt_xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		mt_out_of_memory();
	return d;
}

char *mt_xasprintf(const char *fmt, ...)
{
	char *s;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		mt_out_of_memory();
	return s;
}
