/* SPDX-License-Identifier: MIT */
/*
 * mt_program.h - the program a command line will run, known before it runs
 * (program.c): the file execvp(3) will execute, and what its ELF headers
 * say the kernel maps with it.  mt-trace inspects that file before the
 * command is released, so that its exec need not stop (tracer_code.c).
 * Every answer here is a guess a wrong one of which costs only a stop:
 * the BPF side knows inspected files by identity, not by name.
 */
#ifndef MT_PROGRAM_H
#define MT_PROGRAM_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * The file execvp(3) runs for file: file itself when it names a path (has
 * a '/'), else the first entry of search (a PATH value; NULL: execvp's
 * default, "/bin:/usr/bin"; an empty entry is the current directory) that
 * is a regular file the caller may execute, as execvp skips the entries
 * its execve() refuses with EACCES or ENOENT.  0 with the path in out, or
 * -1 (none, or too long).
 */
int mt_program_resolve(const char *file, const char *search, char *out,
		       size_t outlen);

/* Of a file's dynamic section, the libraries it needs at most: more are
 * left to their stops. */
#define MT_PROGRAM_NEEDED_MAX 64

/* What the kernel's ELF loader and ld.so do with a file. */
struct mt_program_elf {
	bool native;	       /* an ELF file of mt-trace's own machine and
				  class: the kernel runs it itself */
	char interp[PATH_MAX]; /* its PT_INTERP (the dynamic loader), or ""
				  (a static program) */
	/* its dynamic section: the libraries it needs (DT_NEEDED) and where
	 * it says to look (DT_RUNPATH, DT_RPATH), as offsets into strings
	 * (-1: none) */
	char *strings;
	size_t nstrings;
	long needed[MT_PROGRAM_NEEDED_MAX];
	size_t nneeded;
	long runpath, rpath;
	bool nodeflib; /* DF_1_NODEFLIB: not from the default directories */
};

/* Read fd's ELF headers: 0, or -1 when it is not an ELF file this machine
 * runs as it is (a script, another machine's program: binfmt_script and
 * binfmt_misc run an interpreter in its place).  mt_program_free() after
 * either. */
int mt_program_read(int fd, struct mt_program_elf *elf);
void mt_program_free(struct mt_program_elf *elf);

/* The string at offset off of elf's dynamic strings, or NULL. */
const char *mt_program_string(const struct mt_program_elf *elf, long off);

/*
 * Where ld.so will find the library name that obj (found in directory
 * origin) needs, loaded for a program exe (in exe_origin): obj's DT_RPATH
 * unless it has a DT_RUNPATH, then the program's, ld_library_path (a
 * LD_LIBRARY_PATH value, or NULL), obj's DT_RUNPATH, then the system's
 * directories (ld.so.cache names files in those on a Debian system; a
 * library found elsewhere through the cache is missed: its stop finds
 * it).  The first regular file of this machine's ELF class there: 0 with
 * its path in out, or -1.
 */
int mt_program_find_library(const char *name, const struct mt_program_elf *obj,
			    const char *origin,
			    const struct mt_program_elf *exe,
			    const char *exe_origin, const char *ld_library_path,
			    char *out, size_t outlen);

#endif /* MT_PROGRAM_H */
