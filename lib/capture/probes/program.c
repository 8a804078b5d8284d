// SPDX-License-Identifier: MIT
/*
 * program.c - the program a command line will run, found before it runs:
 * execvp(3)'s search (glibc's posix/execvpe.c), and the ELF headers that
 * say whether the kernel runs the file itself and with which loader.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_program.h"
#include "mt_xalloc.h"

/* glibc's CS_PATH: execvp's search when PATH is not set */
#define DEFAULT_SEARCH "/bin:/usr/bin"

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#else
#define NATIVE_MACHINE EM_NONE /* no guess: every exec stops */
#endif

/* Whether execve(path) would get as far as reading the file: a regular
 * file the caller may execute (not a directory, not on a noexec mount). */
static bool executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

int mt_program_resolve(const char *file, const char *search, char *out,
		       size_t outlen)
{
	size_t flen = strlen(file);
	const char *p = search ? search : DEFAULT_SEARCH, *end;

	if (flen == 0 || flen > NAME_MAX)
		return -1;
	if (strchr(file, '/')) {
		if ((size_t)snprintf(out, outlen, "%s", file) >= outlen)
			return -1;
		return executable(out) ? 0 : -1;
	}
	for (;; p = end + 1) {
		int dlen;

		end = strchrnul(p, ':');
		dlen = (int)(end - p);
		/* an empty entry: the current directory, the name alone */
		if ((size_t)snprintf(out, outlen, "%.*s%s%s", dlen, p,
				     dlen ? "/" : "", file) < outlen &&
		    executable(out))
			return 0;
		if (*end == '\0')
			return -1;
	}
}

/* The file's bytes at off, exactly len of them. */
static bool read_at(int fd, void *buf, size_t len, off_t off)
{
	return pread(fd, buf, len, off) == (ssize_t)len;
}

/* The file offset of virtual address vaddr: in which PT_LOAD it lies. */
static bool vaddr_offset(const Elf64_Phdr *loads, size_t nloads, uint64_t vaddr,
			 uint64_t *off)
{
	for (size_t i = 0; i < nloads; i++)
		if (vaddr >= loads[i].p_vaddr &&
		    vaddr < loads[i].p_vaddr + loads[i].p_filesz) {
			*off = vaddr - loads[i].p_vaddr + loads[i].p_offset;
			return true;
		}
	return false;
}

/* The dynamic section's strings and what they name; false when it is not
 * what ld.so would read (then nothing of it is guessed). */
static bool read_dynamic(int fd, const Elf64_Phdr *dyn, const Elf64_Phdr *loads,
			 size_t nloads, struct mt_program_elf *elf)
{
	uint64_t strtab = 0, strsz = 0, off;
	size_t n = dyn->p_filesz / sizeof(Elf64_Dyn);
	Elf64_Dyn *d;
	bool ok = false;

	if (n == 0 || n > 65536)
		return false;
	d = mt_xreallocarray(NULL, n, sizeof(*d));
	if (!read_at(fd, d, n * sizeof(*d), dyn->p_offset))
		goto out;
	for (size_t i = 0; i < n && d[i].d_tag != DT_NULL; i++) {
		switch (d[i].d_tag) {
		case DT_STRTAB:
			strtab = d[i].d_un.d_ptr;
			break;
		case DT_STRSZ:
			strsz = d[i].d_un.d_val;
			break;
		case DT_NEEDED:
			if (elf->nneeded == MT_PROGRAM_NEEDED_MAX)
				goto out;
			elf->needed[elf->nneeded++] = (long)d[i].d_un.d_val;
			break;
		case DT_RUNPATH:
			elf->runpath = (long)d[i].d_un.d_val;
			break;
		case DT_RPATH:
			elf->rpath = (long)d[i].d_un.d_val;
			break;
		case DT_FLAGS_1:
			elf->nodeflib = d[i].d_un.d_val & DF_1_NODEFLIB;
			break;
		}
	}
	if (strsz == 0 || strsz > (1 << 20) ||
	    !vaddr_offset(loads, nloads, strtab, &off))
		goto out;
	elf->strings = mt_xmalloc(strsz + 1);
	elf->nstrings = strsz;
	elf->strings[strsz] = '\0';
	ok = read_at(fd, elf->strings, strsz, off);
out:
	free(d);
	return ok;
}

/* The program's PT_INTERP: false when the kernel would refuse it. */
static bool read_interp(int fd, const Elf64_Phdr *ph,
			struct mt_program_elf *elf)
{
	return ph->p_filesz > 0 && ph->p_filesz <= sizeof(elf->interp) &&
	       read_at(fd, elf->interp, ph->p_filesz, ph->p_offset) &&
	       elf->interp[ph->p_filesz - 1] == '\0';
}

int mt_program_read(int fd, struct mt_program_elf *elf)
{
	Elf64_Phdr loads[16], dyn = {0};
	size_t nloads = 0;
	Elf64_Ehdr eh;

	memset(elf, 0, sizeof(*elf));
	elf->runpath = elf->rpath = -1;
	if (!read_at(fd, &eh, sizeof(eh), 0) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != NATIVE_MACHINE ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return -1;
	elf->native = true;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (!read_at(fd, &ph, sizeof(ph),
			     eh.e_phoff + (off_t)i * sizeof(ph)))
			return -1;
		if (ph.p_type == PT_INTERP && !read_interp(fd, &ph, elf))
			return -1;
		if (ph.p_type == PT_DYNAMIC)
			dyn = ph;
		if (ph.p_type == PT_LOAD && nloads < 16)
			loads[nloads++] = ph;
	}
	/* what cannot be read is not guessed: its stops find it */
	if (dyn.p_type == PT_DYNAMIC &&
	    !read_dynamic(fd, &dyn, loads, nloads, elf)) {
		mt_program_free(elf);
		elf->runpath = elf->rpath = -1;
		elf->native = true;
	}
	return 0;
}

void mt_program_free(struct mt_program_elf *elf)
{
	free(elf->strings);
	elf->strings = NULL;
	elf->nstrings = 0;
	elf->nneeded = 0;
}

const char *mt_program_string(const struct mt_program_elf *elf, long off)
{
	if (off < 0 || !elf->strings || (size_t)off >= elf->nstrings)
		return NULL;
	return elf->strings + off;
}

/* A candidate ld.so would take: a regular file of this machine's ELF
 * class (it passes over others and searches on). */
static bool loadable(const char *path)
{
	struct mt_program_elf elf;
	struct stat st;
	int fd;
	bool ok;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = mt_program_read(fd, &elf) == 0;
	mt_program_free(&elf);
	close(fd);
	return ok;
}

/*
 * Look for name in the directories of list (':' or ';' apart, ld.so's
 * separators), $ORIGIN in them being origin: true with the path in out.
 * A directory with another dynamic string token ($LIB, $PLATFORM) makes
 * the answer unsure: *unsure is set and the search stops.
 */
static bool search_in(const char *list, const char *origin, const char *name,
		      char *out, size_t outlen, bool *unsure)
{
	const char *p = list, *end;

	for (; list && !*unsure; p = end + 1) {
		char dir[PATH_MAX];
		int dlen;

		end = p + strcspn(p, ":;");
		dlen = (int)(end - p);
		if (dlen >= (int)sizeof(dir))
			dlen = sizeof(dir) - 1;
		memcpy(dir, p, dlen);
		dir[dlen] = '\0';
		if (strncmp(dir, "$ORIGIN", 7) == 0 && origin)
			snprintf(dir, sizeof(dir), "%s%.*s", origin, dlen - 7,
				 p + 7);
		else if (strncmp(dir, "${ORIGIN}", 9) == 0 && origin)
			snprintf(dir, sizeof(dir), "%s%.*s", origin, dlen - 9,
				 p + 9);
		if (strchr(dir, '$')) {
			*unsure = true;
			break;
		}
		if (dlen &&
		    (size_t)snprintf(out, outlen, "%s/%s", dir, name) <
			outlen &&
		    loadable(out))
			return true;
		if (*end == '\0')
			break;
	}
	return false;
}

/* The directories ld.so searches last, and its cache names files in, on a
 * Debian system (multiarch first). */
static const char SYSTEM_DIRS[] =
#if defined(__x86_64__)
    "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:"
#elif defined(__aarch64__)
    "/lib/aarch64-linux-gnu:/usr/lib/aarch64-linux-gnu:"
#endif
    "/lib64:/usr/lib64:/lib:/usr/lib";

int mt_program_find_library(const char *name, const struct mt_program_elf *obj,
			    const char *origin,
			    const struct mt_program_elf *exe,
			    const char *exe_origin, const char *ld_library_path,
			    char *out, size_t outlen)
{
	bool unsure = false;

	if (!name || !name[0] || strchr(name, '/') || strchr(name, '$'))
		return -1;
	if (obj->runpath < 0 &&
	    (search_in(mt_program_string(obj, obj->rpath), origin, name, out,
		       outlen, &unsure) ||
	     (exe != obj && exe->runpath < 0 &&
	      search_in(mt_program_string(exe, exe->rpath), exe_origin, name,
			out, outlen, &unsure))))
		return 0;
	if (search_in(ld_library_path, NULL, name, out, outlen, &unsure) ||
	    search_in(mt_program_string(obj, obj->runpath), origin, name, out,
		      outlen, &unsure))
		return 0;
	if (unsure || obj->nodeflib)
		return -1;
	return search_in(SYSTEM_DIRS, NULL, name, out, outlen, &unsure) ? 0
									: -1;
}
