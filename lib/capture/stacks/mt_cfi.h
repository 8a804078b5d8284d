/* SPDX-License-Identifier: MIT */
/*
 * mt_cfi.h - a code file's DWARF call frame information (.eh_frame)
 * reduced to the sorted unwind rows the BPF side walks (bpf/mt_stack.h).
 */
#ifndef MT_CFI_H
#define MT_CFI_H

#include <stddef.h>
#include <stdint.h>

#include "mt_stack.h"

struct mt_cfi_table {
	struct mt_cfi_row *rows; /* sorted by addr; malloc'ed */
	size_t nrows;
	/* ELF virtual address minus file offset of the executable segment */
	int64_t vaddr_minus_offset;
	/* rows whose rules mt cannot follow (registers other than rsp/rbp,
	 * DWARF expressions): MT_CFA_NONE, the walk stops there */
	size_t unsupported;
};

/*
 * Build the table of the ELF file open on fd (not closed).  0, or -errno
 * with a message in err: -ENOENT when the file has no .eh_frame_hdr (no
 * rows; its frames are still named), -EINVAL when it is no ELF file.
 */
int mt_cfi_build(int fd, struct mt_cfi_table *table, char *err,
		 size_t errlen);

void mt_cfi_free(struct mt_cfi_table *table);

#endif /* MT_CFI_H */
