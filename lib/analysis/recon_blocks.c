// SPDX-License-Identifier: MIT
/*
 * recon_blocks.c - the table of a process's live heap blocks (address ->
 * size, first seen): open addressing, linear probing, backward-shift
 * deletion, so probes stay short after many frees.  Lookup, insertion and
 * removal run for every allocator event and are inline in recon_int.h;
 * here is what runs seldom: growing and clearing.
 */
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

int blocks_rehash(struct blocks *b, unsigned bits)
{
	struct blocks nb = {.bits = bits, .mask = (1ull << bits) - 1};

	nb.slot = calloc(nb.mask + 1, sizeof(*nb.slot));
	if (!nb.slot)
		return -1;
	for (size_t i = 0; b->slot && i <= b->mask; i++) {
		if (!b->slot[i].addr)
			continue;
		size_t j = block_home(&nb, b->slot[i].addr);

		while (nb.slot[j].addr)
			j = (j + 1) & nb.mask;
		nb.slot[j] = b->slot[i];
		nb.used++;
	}
	free(b->slot);
	*b = nb;
	return 0;
}

void blocks_clear(struct blocks *b)
{
	free(b->slot);
	memset(b, 0, sizeof(*b));
}
