/* SPDX-License-Identifier: MIT */
/*
 * kinds.c - the one table of event kind names.  The names of the kinds
 * CodSpeed's memtrack also has are memtrack's own, so artifacts move between
 * the two tools; the others are mt's.
 */
#include <string.h>

#include "mt_input.h"

static const char *const kind_names[MT_EV_KIND_MAX] = {
    [MT_EV_MALLOC] = "Malloc",
    [MT_EV_FREE] = "Free",
    [MT_EV_CALLOC] = "Calloc",
    [MT_EV_REALLOC] = "Realloc",
    [MT_EV_ALIGNED_ALLOC] = "AlignedAlloc",
    [MT_EV_MMAP] = "Mmap",
    [MT_EV_MUNMAP] = "Munmap",
    [MT_EV_MREMAP] = "Mremap",
    [MT_EV_BRK] = "Brk",
    [MT_EV_FORK] = "Fork",
    [MT_EV_EXEC] = "Exec",
    [MT_EV_EXIT] = "Exit",
    /* MT_EV_DATA is payload, never a record of its own: no name */
    [MT_EV_RSS] = "Rss",
    [MT_EV_PSS] = "Pss",
    [MT_EV_MARKER] = "Marker",
    [MT_EV_ENABLE] = "Enable",
    [MT_EV_DISABLE] = "Disable",
    [MT_EV_LOST] = "Lost",
    [MT_EV_ALLOCATOR] = "Allocator",
    /* MT_EV_STACK_REF is the next record's "stack" key: no name */
    [MT_EV_STACK] = "Stack",
    [MT_EV_CODE_FILE] = "CodeFile",
    [MT_EV_CODE_MAP] = "CodeMap",
};

const char *mt_kind_name(unsigned kind)
{
	if (kind >= MT_EV_KIND_MAX)
		return NULL;
	return kind_names[kind];
}

static size_t name_lengths[MT_EV_KIND_MAX];

/* Readers look a name up for every event: measure the names once. */
__attribute__((constructor)) static void measure_names(void)
{
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (kind_names[kind])
			name_lengths[kind] = strlen(kind_names[kind]);
}

unsigned mt_kind_from_name(const char *name, size_t len)
{
	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++)
		if (name_lengths[kind] == len && len &&
		    !memcmp(kind_names[kind], name, len))
			return kind;
	return MT_EV_NONE;
}
