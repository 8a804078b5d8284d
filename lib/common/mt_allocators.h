/* SPDX-License-Identifier: MIT */
/* mt_allocators.h - allocator functions mt-trace recognises (allocators.c). */
#ifndef MT_ALLOCATORS_H
#define MT_ALLOCATORS_H

#include <stddef.h>

enum mt_alloc_family {
	MT_ALLOC_NONE = 0,
	MT_ALLOC_LIBC, /* the C API under its own names (glibc, overrides) */
	MT_ALLOC_CXX,  /* C++ operator new and delete */
	MT_ALLOC_JEMALLOC,
	MT_ALLOC_MIMALLOC,
	MT_ALLOC_TCMALLOC,
	MT_ALLOC_FAMILIES
};

struct mt_alloc_func {
	const char *name;
	unsigned fn; /* enum mt_probe_fn */
	enum mt_alloc_family family;
};

/* Every recognised function. */
const struct mt_alloc_func *mt_alloc_funcs(size_t *n);

const char *mt_alloc_family_name(enum mt_alloc_family family);
enum mt_alloc_family mt_alloc_family_from_name(const char *name, size_t len);

/* The family a file belongs to, from how many functions of each it has. */
enum mt_alloc_family mt_alloc_family_of(const unsigned *found_per_family);

#endif /* MT_ALLOCATORS_H */
