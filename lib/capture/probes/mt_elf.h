/* SPDX-License-Identifier: MIT */
/* mt_elf.h - find functions in ELF files and where to place uprobes. */
#ifndef MT_ELF_H
#define MT_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mt_elf_func {
	const char *name; /* in: symbol name, without @VERSION */
	uint64_t offset;  /* out: file offset of the entry, 0 = not found */
	uint64_t size;	  /* out: st_size */
};

/* Files with more sections are refused (-E2BIG): libelf allocates a
 * descriptor for each before anything is read.  Linked programs and
 * libraries have a few dozen. */
#define MT_ELF_MAX_SECTIONS 65536
/* Symbols read of each table (.symtab, .dynsym); the rest are not: 100 MB
 * of entries, twice what the largest real programs have. */
#define MT_ELF_MAX_SYMBOLS (1u << 22)

/*
 * Look up every funcs[i].name among the defined function symbols of path
 * (.symtab and .dynsym, GNU ifuncs excluded since their address is the
 * resolver's) and fill offset/size.  Returns the number found, or -errno
 * with the reason in err when path is not a readable ELF file (-ENOEXEC:
 * not an ELF file, or not a little-endian one).  Memory stays bounded
 * whatever the file holds (elf.c).
 */
int mt_elf_find_funcs(const char *path, struct mt_elf_func *funcs, size_t n,
		      char *err, size_t errlen);

/* A symbol of any type (function, object) by name: its ELF virtual
 * address (0: not found) and st_size. */
struct mt_elf_symbol {
	const char *name;
	uint64_t vaddr;
	uint64_t size;
};

/* Look up each syms[i].name among the defined symbols of path (.dynsym,
 * then .symtab), whatever their type; the number found, or -errno (err
 * says why) as mt_elf_find_funcs. */
int mt_elf_find_symbols(const char *path, struct mt_elf_symbol *syms, size_t n,
			char *err, size_t errlen);

/* Read len bytes of path's loaded image at ELF virtual address vaddr
 * (within one PT_LOAD segment's file bytes): 0, or -errno. */
int mt_elf_read_vaddr(const char *path, uint64_t vaddr, void *buf, size_t len);

/* The GNU build ID of path (up to cap bytes): its length, or -errno
 * (-ENOENT: the file has none). */
int mt_elf_build_id(const char *path, uint8_t *id, size_t cap);

/* Read len bytes at file offset off of path; returns bytes read or -errno. */
int mt_elf_read_code(const char *path, uint64_t off, uint8_t *buf, size_t len);

/*
 * How many bytes a uprobe may be moved past the start of code (x86-64) so
 * that it lands on an instruction the kernel emulates instead of
 * single-stepping, which costs many times more (docs/ARCHITECTURE.md,
 * "What is measured where").  Only whitelisted
 * instructions that change neither the argument registers (rdi, rsi, rdx,
 * rcx, r8, r9) nor rsp are skipped; 0 when nothing can be gained safely.
 * Entry-only probes may use it; a return probe must stay at the entry.
 */
size_t mt_probe_skip(const uint8_t *code, size_t len);

/*
 * For free-like functions of path (entry at file offset off, st_size
 * size): when the function starts with [endbr64] test %rdi,%rdi; je, and
 * nothing else can reach the instruction after the je -- no direct branch
 * in the file's code lands there (every byte read as a possible branch),
 * no indirect jmp in the function -- and the kernel emulates that
 * instruction: the distance to it, so free(NULL) does not hit the probe
 * (two thirds of tar's frees).  0 otherwise.
 */
size_t mt_probe_skip_null(const char *path, uint64_t off, uint64_t size);

/*
 * The direct calls (not through the PLT) that the shared library path,
 * when its DT_SONAME is soname, makes of its own function at file offset
 * off: each one's return address minus the address of the function's
 * probe (file offset probe_off), into deltas (at most max).  Their number;
 * 0 when the file is another, or has none, or more than max.  glibc's
 * libc.so.6 calls free so at a thread's exit (its tcache), and an
 * interposer never sees those calls.  Another file (a program with glibc
 * linked in statically): only the calls inside glibc's thread-exit
 * function, by its .symtab name.
 */
int mt_elf_internal_calls(const char *path, const char *soname, uint64_t off,
			  uint64_t probe_off, int64_t *deltas, size_t max);

/* The DT_SONAME of the ELF file open on fd into out (len bytes, "" when
 * none); false when it is not an ELF file or has no SONAME. */
bool mt_elf_fd_soname(int fd, char *out, size_t len);

/* The path of the C library this process runs with ("" if unknown). */
const char *mt_self_libc(void);

#endif /* MT_ELF_H */
