// SPDX-License-Identifier: MIT
/*
 * strtab.c - distinct strings numbered in order of first appearance (see
 * mt_strtab.h): an open-addressing hash of FNV-1a, doubled at half full.
 */
#include <stdlib.h>
#include <string.h>

#include "mt_strtab.h"

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static void place(uint32_t *slot, size_t mask, const char *s, uint32_t num)
{
	size_t i = fnv1a(s) & mask;

	while (slot[i])
		i = (i + 1) & mask;
	slot[i] = num + 1;
}

/* room for one more string: 0, or -1 on out-of-memory */
static int grow(struct mt_strtab *t)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **strs = realloc(t->strs, cap * sizeof(*strs));

		if (!strs)
			return -1;
		t->strs = strs;
		t->cap = cap;
	}
	if (!t->slot || 2 * (t->n + 1) > t->slot_mask + 1) {
		size_t slots = t->slot ? 2 * (t->slot_mask + 1) : 128;
		uint32_t *slot = calloc(slots, sizeof(*slot));

		if (!slot)
			return -1;
		for (size_t i = 0; i < t->n; i++)
			place(slot, slots - 1, t->strs[i], (uint32_t)i);
		free(t->slot);
		t->slot = slot;
		t->slot_mask = slots - 1;
	}
	return 0;
}

int64_t mt_strtab_add(struct mt_strtab *t, const char *s, int *added)
{
	size_t i;
	char *copy;

	*added = 0;
	if (t->n >= UINT32_MAX - 1 || grow(t) < 0)
		return -1;
	for (i = fnv1a(s) & t->slot_mask; t->slot[i];
	     i = (i + 1) & t->slot_mask)
		if (!strcmp(t->strs[t->slot[i] - 1], s))
			return t->slot[i] - 1;
	copy = strdup(s);
	if (!copy)
		return -1;
	t->strs[t->n] = copy;
	t->slot[i] = (uint32_t)t->n + 1;
	*added = 1;
	return (int64_t)t->n++;
}

void mt_strtab_free(struct mt_strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->slot);
	*t = (struct mt_strtab){0};
}
