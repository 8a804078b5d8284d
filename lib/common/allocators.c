// SPDX-License-Identifier: MIT
/*
 * allocators.c - the allocator functions mt-trace recognises in ELF files,
 * what each one means, and which allocator a file holds.
 *
 * Names are matched exactly against the defined function symbols of an
 * executable or library (.symtab and .dynsym), so allocators linked
 * statically into a program are found as well as shared ones.
 */
#include <stddef.h>
#include <string.h>

#include "mt_allocators.h"
#include "mt_probe.h"

#define GLIBC_API(prefix, family)                                              \
	{prefix "malloc", MT_FN_MALLOC, family},                               \
	    {prefix "calloc", MT_FN_CALLOC, family},                           \
	    {prefix "realloc", MT_FN_REALLOC, family},                         \
	    {prefix "reallocarray", MT_FN_REALLOCARRAY, family},               \
	    {prefix "aligned_alloc", MT_FN_MEMALIGN, family},                  \
	    {prefix "memalign", MT_FN_MEMALIGN, family},                       \
	    {prefix "posix_memalign", MT_FN_POSIX_MEMALIGN, family},           \
	    {prefix "valloc", MT_FN_VALLOC, family},                           \
	    {prefix "pvalloc", MT_FN_VALLOC, family},                          \
	    {prefix "free", MT_FN_FREE, family},                               \
	{                                                                      \
		prefix "cfree", MT_FN_FREE, family                             \
	}

#define JEMALLOC_EXT(prefix)                                                   \
	{prefix "mallocx", MT_FN_MALLOC, MT_ALLOC_JEMALLOC},                   \
	    {prefix "rallocx", MT_FN_REALLOC, MT_ALLOC_JEMALLOC},              \
	    {prefix "xallocx", MT_FN_XALLOCX, MT_ALLOC_JEMALLOC},              \
	    {prefix "dallocx", MT_FN_FREE, MT_ALLOC_JEMALLOC},                 \
	{                                                                      \
		prefix "sdallocx", MT_FN_FREE, MT_ALLOC_JEMALLOC               \
	}

static const struct mt_alloc_func funcs[] = {
    /* the C library API, and any allocator that replaces it under the
     * same names (jemalloc, tcmalloc, mimalloc's override) */
    GLIBC_API("", MT_ALLOC_LIBC),
    /* jemalloc: its own API, unprefixed or with the usual prefixes */
    JEMALLOC_EXT(""),
    GLIBC_API("je_", MT_ALLOC_JEMALLOC),
    JEMALLOC_EXT("je_"),
    GLIBC_API("_rjem_", MT_ALLOC_JEMALLOC),
    JEMALLOC_EXT("_rjem_"),
    /* mimalloc */
    {"mi_malloc", MT_FN_MALLOC, MT_ALLOC_MIMALLOC},
    {"mi_zalloc", MT_FN_MALLOC, MT_ALLOC_MIMALLOC},
    {"mi_malloc_small", MT_FN_MALLOC, MT_ALLOC_MIMALLOC},
    {"mi_zalloc_small", MT_FN_MALLOC, MT_ALLOC_MIMALLOC},
    {"mi_new", MT_FN_MALLOC, MT_ALLOC_MIMALLOC},
    {"mi_new_nothrow", MT_FN_MALLOC, MT_ALLOC_MIMALLOC},
    {"mi_calloc", MT_FN_CALLOC, MT_ALLOC_MIMALLOC},
    {"mi_mallocn", MT_FN_MALLOC_N, MT_ALLOC_MIMALLOC},
    {"mi_new_n", MT_FN_MALLOC_N, MT_ALLOC_MIMALLOC},
    {"mi_realloc", MT_FN_REALLOC, MT_ALLOC_MIMALLOC},
    {"mi_rezalloc", MT_FN_REALLOC, MT_ALLOC_MIMALLOC},
    {"mi_expand", MT_FN_REALLOC, MT_ALLOC_MIMALLOC},
    {"mi_new_realloc", MT_FN_REALLOC, MT_ALLOC_MIMALLOC},
    {"mi_reallocn", MT_FN_REALLOCARRAY, MT_ALLOC_MIMALLOC},
    {"mi_reallocarray", MT_FN_REALLOCARRAY, MT_ALLOC_MIMALLOC},
    {"mi_recalloc", MT_FN_REALLOCARRAY, MT_ALLOC_MIMALLOC},
    {"mi_new_reallocn", MT_FN_REALLOCARRAY, MT_ALLOC_MIMALLOC},
    {"mi_malloc_aligned", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_MIMALLOC},
    {"mi_zalloc_aligned", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_MIMALLOC},
    {"mi_new_aligned", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_MIMALLOC},
    {"mi_new_aligned_nothrow", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_MIMALLOC},
    {"mi_aligned_alloc", MT_FN_MEMALIGN, MT_ALLOC_MIMALLOC},
    {"mi_memalign", MT_FN_MEMALIGN, MT_ALLOC_MIMALLOC},
    {"mi_posix_memalign", MT_FN_POSIX_MEMALIGN, MT_ALLOC_MIMALLOC},
    {"mi_valloc", MT_FN_VALLOC, MT_ALLOC_MIMALLOC},
    {"mi_pvalloc", MT_FN_VALLOC, MT_ALLOC_MIMALLOC},
    {"mi_calloc_aligned", MT_FN_CALLOC_ALIGNED, MT_ALLOC_MIMALLOC},
    {"mi_realloc_aligned", MT_FN_REALLOC_ALIGNED, MT_ALLOC_MIMALLOC},
    {"mi_rezalloc_aligned", MT_FN_REALLOC_ALIGNED, MT_ALLOC_MIMALLOC},
    {"mi_free", MT_FN_FREE, MT_ALLOC_MIMALLOC},
    {"mi_cfree", MT_FN_FREE, MT_ALLOC_MIMALLOC},
    {"mi_free_size", MT_FN_FREE, MT_ALLOC_MIMALLOC},
    {"mi_free_aligned", MT_FN_FREE, MT_ALLOC_MIMALLOC},
    {"mi_free_size_aligned", MT_FN_FREE, MT_ALLOC_MIMALLOC},
    /* tcmalloc (gperftools) */
    {"tc_malloc", MT_FN_MALLOC, MT_ALLOC_TCMALLOC},
    {"tc_malloc_skip_new_handler", MT_FN_MALLOC, MT_ALLOC_TCMALLOC},
    {"tc_new", MT_FN_MALLOC, MT_ALLOC_TCMALLOC},
    {"tc_newarray", MT_FN_MALLOC, MT_ALLOC_TCMALLOC},
    {"tc_new_nothrow", MT_FN_MALLOC, MT_ALLOC_TCMALLOC},
    {"tc_newarray_nothrow", MT_FN_MALLOC, MT_ALLOC_TCMALLOC},
    {"tc_calloc", MT_FN_CALLOC, MT_ALLOC_TCMALLOC},
    {"tc_realloc", MT_FN_REALLOC, MT_ALLOC_TCMALLOC},
    {"tc_memalign", MT_FN_MEMALIGN, MT_ALLOC_TCMALLOC},
    {"tc_posix_memalign", MT_FN_POSIX_MEMALIGN, MT_ALLOC_TCMALLOC},
    {"tc_valloc", MT_FN_VALLOC, MT_ALLOC_TCMALLOC},
    {"tc_pvalloc", MT_FN_VALLOC, MT_ALLOC_TCMALLOC},
    {"tc_new_aligned", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_TCMALLOC},
    {"tc_newarray_aligned", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_TCMALLOC},
    {"tc_new_aligned_nothrow", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_TCMALLOC},
    {"tc_newarray_aligned_nothrow", MT_FN_ALIGNED_SIZE_FIRST,
     MT_ALLOC_TCMALLOC},
    {"tc_free", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_cfree", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_free_sized", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_delete", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_deletearray", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_delete_nothrow", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_deletearray_nothrow", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_delete_sized", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_deletearray_sized", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_delete_aligned", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_deletearray_aligned", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_delete_sized_aligned", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_deletearray_sized_aligned", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_delete_aligned_nothrow", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    {"tc_deletearray_aligned_nothrow", MT_FN_FREE, MT_ALLOC_TCMALLOC},
    /* C++ operator new and delete (Itanium ABI, 64-bit size_t) */
    {"_Znwm", MT_FN_MALLOC, MT_ALLOC_CXX},
    {"_Znam", MT_FN_MALLOC, MT_ALLOC_CXX},
    {"_ZnwmRKSt9nothrow_t", MT_FN_MALLOC, MT_ALLOC_CXX},
    {"_ZnamRKSt9nothrow_t", MT_FN_MALLOC, MT_ALLOC_CXX},
    {"_ZnwmSt11align_val_t", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_CXX},
    {"_ZnamSt11align_val_t", MT_FN_ALIGNED_SIZE_FIRST, MT_ALLOC_CXX},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", MT_FN_ALIGNED_SIZE_FIRST,
     MT_ALLOC_CXX},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", MT_FN_ALIGNED_SIZE_FIRST,
     MT_ALLOC_CXX},
    {"_ZdlPv", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdaPv", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdlPvm", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdaPvm", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdlPvRKSt9nothrow_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdaPvRKSt9nothrow_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdlPvSt11align_val_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdaPvSt11align_val_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdlPvmSt11align_val_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdaPvmSt11align_val_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", MT_FN_FREE, MT_ALLOC_CXX},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", MT_FN_FREE, MT_ALLOC_CXX},
};

const struct mt_alloc_func *mt_alloc_funcs(size_t *n)
{
	*n = sizeof(funcs) / sizeof(funcs[0]);
	return funcs;
}

const char *mt_alloc_family_name(enum mt_alloc_family family)
{
	switch (family) {
	case MT_ALLOC_LIBC:
		return "libc";
	case MT_ALLOC_CXX:
		return "libstdc++";
	case MT_ALLOC_JEMALLOC:
		return "jemalloc";
	case MT_ALLOC_MIMALLOC:
		return "mimalloc";
	case MT_ALLOC_TCMALLOC:
		return "tcmalloc";
	case MT_ALLOC_NONE:
	case MT_ALLOC_FAMILIES:
		break;
	}
	return "none";
}

enum mt_alloc_family mt_alloc_family_from_name(const char *name, size_t len)
{
	for (int f = MT_ALLOC_LIBC; f < MT_ALLOC_FAMILIES; f++) {
		const char *known = mt_alloc_family_name(f);

		if (strlen(known) == len && memcmp(known, name, len) == 0)
			return f;
	}
	return MT_ALLOC_NONE;
}

/* The most specific family wins: a tcmalloc library also defines malloc
 * and operator new, and is tcmalloc. */
enum mt_alloc_family mt_alloc_family_of(const unsigned *found_per_family)
{
	static const enum mt_alloc_family order[] = {
	    MT_ALLOC_MIMALLOC, MT_ALLOC_TCMALLOC, MT_ALLOC_JEMALLOC,
	    MT_ALLOC_LIBC, MT_ALLOC_CXX};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (found_per_family[order[i]])
			return order[i];
	return MT_ALLOC_NONE;
}
