/* SPDX-License-Identifier: MIT */
/*
 * mt_xalloc.h - allocation that does not fail: on no memory, the one
 * out-of-memory policy (mt_out_of_memory(), lib/README.md): say so
 * through the sink and exit with the tool's status (mt-trace: 125).
 * Every allocation of lib/capture goes through these; a size whose bytes
 * pass what a size_t holds is no memory too, never a wrapped small
 * buffer.  Never NULL, even for 0 bytes.
 */
#ifndef MT_XALLOC_H
#define MT_XALLOC_H

#include <stddef.h>

void *mt_xmalloc(size_t size) __attribute__((malloc, returns_nonnull));
void *mt_xcalloc(size_t n, size_t size)
    __attribute__((malloc, returns_nonnull));
/* realloc of n elements of size bytes each (p may be NULL) */
void *mt_xreallocarray(void *p, size_t n, size_t size)
    __attribute__((returns_nonnull));
char *mt_xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
char *mt_xasprintf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), malloc, returns_nonnull));

#endif /* MT_XALLOC_H */
