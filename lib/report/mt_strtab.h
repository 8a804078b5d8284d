/* SPDX-License-Identifier: MIT */
/*
 * mt_strtab.h - distinct strings numbered in order of first appearance:
 * the string tables and frame tables of the profile writers (pprof.c,
 * dhat.c), where each name, function and location is written once and
 * referred to by its number.
 */
#ifndef MT_STRTAB_H
#define MT_STRTAB_H

#include <stddef.h>
#include <stdint.h>

struct mt_strtab {
	char **strs;	  /* by number, each a copy */
	size_t n, cap;	  /* strings, room in strs */
	uint32_t *slot;	  /* hash table: number + 1, 0 = empty */
	size_t slot_mask; /* slots - 1 */
};

/* An empty table (zero it first, or use {0}). */

/* s's number (its first appearance numbered n, from 0); *added says
 * whether it is new.  -1 on out-of-memory. */
int64_t mt_strtab_add(struct mt_strtab *t, const char *s, int *added);

void mt_strtab_free(struct mt_strtab *t);

#endif /* MT_STRTAB_H */
