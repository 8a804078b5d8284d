// SPDX-License-Identifier: MIT
/*
 * cfi.c - turn a code file's .eh_frame into the unwind rows the BPF side
 * walks (bpf/mt_stack.h), with libdw's CFI interpreter.
 *
 * Every function's FDE is found through .eh_frame_hdr's sorted table (the
 * one the C runtime's own unwinder uses); libdw answers, address range by
 * address range, where the CFA and the saved rbp are.  Only what x86-64
 * compilers emit for ordinary code is kept: CFA = rsp or rbp + offset, the
 * PLT's expression, rbp saved at CFA + offset, and "return address
 * undefined" for a thread's first frame.  Anything else (rare: 5 rows of
 * libc's 28 k) becomes a row where the walk stops.  Consecutive identical
 * rows are merged; the gap after each function gets a row of its own, so
 * a pc between functions never borrows a neighbour's rule.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_cfi.h"
#include "mt_xalloc.h"

enum { DWARF_REG_RBP = 6, DWARF_REG_RSP = 7, DWARF_REG_RA = 16 };

static int cfi_error(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

/* ---- .eh_frame_hdr: where each function's FDE starts ----------------- */

struct hdr_reader {
	const uint8_t *base, *p, *end;
	uint64_t section_addr;
};

/* One DW_EH_PE-encoded value; false when it runs past the section or uses
 * an encoding linkers do not write here. */
static bool read_encoded(struct hdr_reader *r, uint8_t enc, uint64_t *out)
{
	uint64_t at = r->section_addr + (uint64_t)(r->p - r->base);
	int64_t v;

	switch (enc & 0x0f) {
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4: {
		int32_t s;
		uint32_t u;

		if (r->end - r->p < 4)
			return false;
		memcpy(&u, r->p, 4);
		memcpy(&s, r->p, 4);
		v = (enc & 0x0f) == DW_EH_PE_sdata4 ? s : (int64_t)u;
		r->p += 4;
		break;
	}
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		if (r->end - r->p < 8)
			return false;
		memcpy(&v, r->p, 8);
		r->p += 8;
		break;
	default:
		return false;
	}
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		v += at;
		break;
	case DW_EH_PE_datarel: /* relative to .eh_frame_hdr itself */
		v += r->section_addr;
		break;
	default:
		return false;
	}
	*out = v;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The start addresses of every FDE, sorted. */
static int fde_starts(Elf *elf, uint64_t **starts, size_t *n, char *err,
		      size_t errlen)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf_Data *data = NULL;
	struct hdr_reader r;
	uint64_t ignored, count;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return cfi_error(err, errlen, -EINVAL, "no section names");
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && strcmp(name, ".eh_frame_hdr") == 0) {
			data = elf_getdata(scn, NULL);
			break;
		}
	}
	if (!data || data->d_size < 4)
		return cfi_error(err, errlen, -ENOENT, "no .eh_frame_hdr");
	r.base = data->d_buf;
	r.p = r.base + 4;
	r.end = r.base + data->d_size;
	r.section_addr = sh.sh_addr;
	/* version, eh_frame_ptr encoding, fde_count encoding, table
	 * encoding; then eh_frame_ptr, fde_count, the table */
	if (r.base[0] != 1 || r.base[3] == DW_EH_PE_omit ||
	    !read_encoded(&r, r.base[1], &ignored) ||
	    !read_encoded(&r, r.base[2], &count) || count > data->d_size)
		return cfi_error(err, errlen, -ENOENT,
				 ".eh_frame_hdr without a search table");
	*starts = mt_xreallocarray(NULL, count, sizeof(**starts));
	for (*n = 0; *n < count; (*n)++)
		if (!read_encoded(&r, r.base[3], &(*starts)[*n]) ||
		    !read_encoded(&r, r.base[3], &ignored))
			break;
	qsort(*starts, *n, sizeof(**starts), cmp_u64);
	return 0;
}

/* ---- rows --------------------------------------------------------------- */

static bool is_lit(const Dwarf_Op *op, unsigned *value)
{
	if (op->atom < DW_OP_lit0 || op->atom > DW_OP_lit31)
		return false;
	*value = op->atom - DW_OP_lit0;
	return true;
}

/* The PLT's CFA: rsp + 8, + 8 more past the push in each 16-byte entry:
 * breg7 8; breg16 0; lit15; and; litN; ge; lit3; shl; plus */
static bool plt_rule(const Dwarf_Op *ops, size_t nops, struct mt_cfi_row *row)
{
	unsigned mask, threshold, shift;

	if (nops != 9 || ops[0].atom != DW_OP_breg7 ||
	    ops[1].atom != DW_OP_breg16 || !is_lit(&ops[2], &mask) ||
	    mask != 15 || ops[3].atom != DW_OP_and ||
	    !is_lit(&ops[4], &threshold) || ops[5].atom != DW_OP_ge ||
	    !is_lit(&ops[6], &shift) || shift != 3 ||
	    ops[7].atom != DW_OP_shl || ops[8].atom != DW_OP_plus)
		return false;
	row->cfa_rule = MT_CFA_PLT;
	row->cfa_offset = (int32_t)ops[0].number;
	row->plt_threshold = threshold;
	return true;
}

static void cfa_rule(Dwarf_Frame *frame, struct mt_cfi_row *row)
{
	Dwarf_Op *ops;
	size_t nops;

	row->cfa_rule = MT_CFA_NONE;
	if (dwarf_frame_cfa(frame, &ops, &nops))
		return;
	if (nops == 1 && ops[0].atom == DW_OP_bregx &&
	    (ops[0].number == DWARF_REG_RSP ||
	     ops[0].number == DWARF_REG_RBP)) {
		row->cfa_rule =
		    ops[0].number == DWARF_REG_RSP ? MT_CFA_RSP : MT_CFA_RBP;
		row->cfa_offset = (int32_t)ops[0].number2;
		return;
	}
	plt_rule(ops, nops, row);
}

static void rbp_rule(Dwarf_Frame *frame, struct mt_cfi_row *row)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;

	row->rbp_rule = MT_RBP_LOST;
	if (dwarf_frame_register(frame, DWARF_REG_RBP, mem, &ops, &nops))
		return;
	if (nops == 0) { /* same value, or undefined (ops == mem) */
		row->rbp_rule = ops == NULL ? MT_RBP_SAME : MT_RBP_LOST;
		return;
	}
	/* saved at CFA + N: call_frame_cfa [; plus_uconst N] */
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return;
	if (nops == 1) {
		row->rbp_rule = MT_RBP_SAVED;
		row->rbp_offset = 0;
	} else if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		row->rbp_rule = MT_RBP_SAVED;
		row->rbp_offset = (int32_t)(int64_t)ops[1].number;
	}
}

static bool ra_undefined(Dwarf_Frame *frame)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;

	return dwarf_frame_register(frame, DWARF_REG_RA, mem, &ops, &nops) ==
		   0 &&
	       nops == 0 && ops == mem;
}

struct row_list {
	struct mt_cfi_row *rows;
	size_t n, cap;
};

static bool same_rules(const struct mt_cfi_row *a, const struct mt_cfi_row *b)
{
	return a->cfa_rule == b->cfa_rule && a->rbp_rule == b->rbp_rule &&
	       a->plt_threshold == b->plt_threshold &&
	       a->cfa_offset == b->cfa_offset && a->rbp_offset == b->rbp_offset;
}

static void room_for_row(struct row_list *list)
{
	size_t cap = list->cap ? list->cap * 2 : 4096;

	if (list->n < list->cap)
		return;
	list->rows = mt_xreallocarray(list->rows, cap, sizeof(*list->rows));
	list->cap = cap;
}

static void add_row(struct row_list *list, const struct mt_cfi_row *row)
{
	if (list->n && same_rules(&list->rows[list->n - 1], row))
		return;
	if (list->n && list->rows[list->n - 1].addr == row->addr) {
		list->rows[list->n - 1] = *row; /* a gap row met its end */
		return;
	}
	room_for_row(list);
	list->rows[list->n++] = *row;
}

/* The rows of one function [start, limit): libdw gives one frame state per
 * address range; a gap row follows where the FDE ends. */
static void function_rows(Dwarf_CFI *cfi, uint64_t start, uint64_t limit,
			  struct row_list *list, size_t *unsupported)
{
	uint64_t addr = start;
	struct mt_cfi_row gap = {0};

	while (addr < limit) {
		struct mt_cfi_row row = {.addr = (uint32_t)addr};
		Dwarf_Addr from, to;
		Dwarf_Frame *frame;
		bool signal;

		if (dwarf_cfi_addrframe(cfi, addr, &frame))
			break;
		if (dwarf_frame_info(frame, &from, &to, &signal) < 0 ||
		    to <= addr) {
			free(frame);
			break;
		}
		if (ra_undefined(frame)) {
			row.cfa_rule = MT_CFA_END;
		} else {
			cfa_rule(frame, &row);
			rbp_rule(frame, &row);
			*unsupported += row.cfa_rule == MT_CFA_NONE;
		}
		free(frame);
		add_row(list, &row);
		addr = to;
	}
	if (addr < limit && addr > start) {
		gap.addr = (uint32_t)addr;
		add_row(list, &gap);
	}
}

/* ELF virtual address minus file offset of the first executable segment. */
static int64_t code_vaddr_minus_offset(Elf *elf)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD &&
		    (ph.p_flags & PF_X))
			return (int64_t)ph.p_vaddr - (int64_t)ph.p_offset;
	}
	return 0;
}

/*
 * The entry point ends every walk that reaches it: the process's first
 * frame.  Programs' _start says so in its CFI (return address undefined),
 * the dynamic loader's has no CFI at all: give it that rule, up to the
 * next row.
 */
static void mark_entry(Elf *elf, struct row_list *list)
{
	struct mt_cfi_row end = {.cfa_rule = MT_CFA_END};
	GElf_Ehdr eh;
	size_t at = 0;

	if (!gelf_getehdr(elf, &eh) || eh.e_entry == 0 ||
	    eh.e_entry > UINT32_MAX)
		return;
	end.addr = (uint32_t)eh.e_entry;
	while (at < list->n && list->rows[at].addr <= end.addr)
		at++;
	/* rows[at - 1] is in effect at the entry */
	if (at > 0 && list->rows[at - 1].cfa_rule != MT_CFA_NONE)
		return;
	if (at > 0 && list->rows[at - 1].addr == end.addr) {
		list->rows[at - 1] = end;
		return;
	}
	room_for_row(list);
	memmove(&list->rows[at + 1], &list->rows[at],
		(list->n - at) * sizeof(*list->rows));
	list->rows[at] = end;
	list->n++;
}

static int build_rows(Elf *elf, struct mt_cfi_table *table, char *err,
		      size_t errlen)
{
	struct row_list list = {0};
	uint64_t *starts = NULL;
	size_t nstarts = 0;
	Dwarf_CFI *cfi;
	int rc;

	rc = fde_starts(elf, &starts, &nstarts, err, errlen);
	if (rc)
		return rc;
	cfi = dwarf_getcfi_elf(elf);
	if (!cfi) {
		free(starts);
		return cfi_error(err, errlen, -ENOENT, "no .eh_frame");
	}
	for (size_t i = 0; i < nstarts; i++) {
		if (starts[i] > UINT32_MAX)
			break; /* rows hold 32-bit addresses */
		function_rows(cfi, starts[i],
			      i + 1 < nstarts ? starts[i + 1] : UINT32_MAX,
			      &list, &table->unsupported);
	}
	dwarf_cfi_end(cfi);
	free(starts);
	mark_entry(elf, &list);
	table->rows = list.rows;
	table->nrows = list.n;
	return 0;
}

int mt_cfi_build(int fd, struct mt_cfi_table *table, char *err, size_t errlen)
{
	Elf *elf;
	int rc;

	memset(table, 0, sizeof(*table));
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		return cfi_error(err, errlen, -EINVAL, "not an ELF file");
	}
	table->vaddr_minus_offset = code_vaddr_minus_offset(elf);
	rc = build_rows(elf, table, err, errlen);
	elf_end(elf);
	return rc;
}

void mt_cfi_free(struct mt_cfi_table *table)
{
	free(table->rows);
	table->rows = NULL;
	table->nrows = 0;
}
