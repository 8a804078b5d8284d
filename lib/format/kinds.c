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
    [MT_EV_PYCODE] = "PyCode",
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

int mt_pycode_parse(const struct mt_record *rec, struct mt_pycode *code)
{
	uint32_t n[4];
	uint64_t sum = 16;
	const char *p = rec->str;

	if (rec->ev.kind != MT_EV_PYCODE || !p || rec->str_len < 16)
		return -1;
	memcpy(n, p, sizeof(n)); /* little-endian, as the stream */
	for (int i = 0; i < 4; i++)
		sum += n[i];
	if (sum != rec->str_len)
		return -1;
	p += 16;
	code->name = p;
	code->name_len = n[0];
	code->qualname = p += n[0];
	code->qualname_len = n[1];
	code->file = p += n[1];
	code->file_len = n[2];
	code->linetable = (const uint8_t *)(p += n[2]);
	code->linetable_len = n[3];
	return 0;
}
