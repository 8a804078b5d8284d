// SPDX-License-Identifier: MIT
/*
 * elf.c - symbol lookup with libelf, and safe uprobe placement.
 *
 * mt-trace runs this as root on every file a traced process maps as code,
 * so it trusts none of it (tests/fuzz/fuzz_elf.c fuzzes it) and keeps its
 * memory bounded whatever the file says: the file is mapped read-only and
 * libelf reads it in place (little-endian files only, the byte order of
 * the machines mt runs on, so libelf never converts a copy); files with
 * more than MT_ELF_MAX_SECTIONS sections are refused before libelf
 * allocates a descriptor for each; a symbol table is read up to
 * MT_ELF_MAX_SYMBOLS entries, a window at a time, the pages of each window
 * given back before the next.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Zydis/Zydis.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "mt_elf.h"
#include "mt_file_id.h"
#include "mt_xalloc.h"

/* Symbols read between two givings-back of the file's pages: a window
 * touches at most this many entries and as many pages of names. */
#define SYMBOL_WINDOW 16384

/* An ELF file open for reading: mapped, read in place by libelf. */
struct elf_file {
	int fd;
	char *image;
	size_t size;
	Elf *elf;
};

/* The section count the ELF header at image gives (extended numbering:
 * the first section header's sh_size), or SIZE_MAX when it cannot be
 * read. */
static size_t section_count(const char *image, size_t size)
{
	const unsigned char *id = (const unsigned char *)image;
	uint64_t shoff;
	size_t n;

	if (id[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr eh;

		memcpy(&eh, image, sizeof(eh));
		shoff = eh.e_shoff;
		n = eh.e_shnum;
		if (n == 0 && shoff) {
			Elf64_Shdr sh0;

			if (shoff > size || size - shoff < sizeof(sh0))
				return SIZE_MAX;
			memcpy(&sh0, image + shoff, sizeof(sh0));
			n = sh0.sh_size;
		}
	} else {
		Elf32_Ehdr eh;

		memcpy(&eh, image, sizeof(eh));
		shoff = eh.e_shoff;
		n = eh.e_shnum;
		if (n == 0 && shoff) {
			Elf32_Shdr sh0;

			if (shoff > size || size - shoff < sizeof(sh0))
				return SIZE_MAX;
			memcpy(&sh0, image + shoff, sizeof(sh0));
			n = sh0.sh_size;
		}
	}
	return n;
}

/* Why image cannot be read safely, or NULL when it can. */
static const char *refuse(const char *image, size_t size, int *errnum)
{
	const unsigned char *id = (const unsigned char *)image;
	size_t nsections;

	*errnum = ENOEXEC;
	if (size < sizeof(Elf64_Ehdr) || memcmp(id, ELFMAG, SELFMAG) ||
	    (id[EI_CLASS] != ELFCLASS64 && id[EI_CLASS] != ELFCLASS32))
		return "not an ELF file";
	if (id[EI_DATA] != ELFDATA2LSB)
		return "not a little-endian ELF file";
	nsections = section_count(image, size);
	if (nsections > MT_ELF_MAX_SECTIONS) {
		*errnum = E2BIG;
		return "more sections than mt-trace reads";
	}
	return NULL;
}

static void elf_file_close(struct elf_file *f)
{
	if (f->elf)
		elf_end(f->elf);
	if (f->image)
		munmap(f->image, f->size);
	if (f->fd >= 0)
		close(f->fd);
	f->elf = NULL;
	f->image = NULL;
	f->fd = -1;
}

/* Open path for libelf, or -errno with the reason in err (errlen > 0). */
static int elf_file_open(struct elf_file *f, const char *path, char *err,
			 size_t errlen)
{
	const char *why;
	struct stat st;
	int e;

	f->image = NULL;
	f->elf = NULL;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &st)) {
		e = errno;
		snprintf(err, errlen, "%s", strerror(e));
		elf_file_close(f);
		return -e;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		snprintf(err, errlen, "not an ELF file");
		elf_file_close(f);
		return -ENOEXEC;
	}
	f->size = st.st_size;
	f->image = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
	if (f->image == MAP_FAILED) {
		e = errno;
		f->image = NULL;
		snprintf(err, errlen, "mmap: %s", strerror(e));
		elf_file_close(f);
		return -e;
	}
	why = refuse(f->image, f->size, &e);
	if (!why && elf_version(EV_CURRENT) == EV_NONE) {
		why = "libelf is too old";
		e = EINVAL;
	}
	if (!why) {
		f->elf = elf_memory(f->image, f->size);
		if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
			why = "not an ELF file";
			e = ENOEXEC;
		}
	}
	if (why) {
		snprintf(err, errlen, "%s", why);
		elf_file_close(f);
		return -e;
	}
	return 0;
}

/* Give back the pages of the file read so far: the next read maps them
 * again from the page cache, so mt-trace's memory does not grow with the
 * size of a symbol table. */
static void forget_pages(const struct elf_file *f)
{
	madvise(f->image, f->size, MADV_DONTNEED);
}

/* The executable PT_LOAD segment holding at: a virtual address, or a file
 * offset when at_is_offset. */
static bool exec_segment(Elf *elf, uint64_t at, bool at_is_offset,
			 GElf_Phdr *ph)
{
	size_t nphdr;

	if (elf_getphdrnum(elf, &nphdr))
		return false;
	for (size_t i = 0; i < nphdr; i++) {
		uint64_t start;

		if (!gelf_getphdr(elf, i, ph) || ph->p_type != PT_LOAD ||
		    !(ph->p_flags & PF_X))
			continue;
		start = at_is_offset ? ph->p_offset : ph->p_vaddr;
		if (at >= start && at < start + ph->p_filesz)
			return true;
	}
	return false;
}

static uint64_t vaddr_to_offset(Elf *elf, uint64_t vaddr)
{
	GElf_Phdr ph;

	return exec_segment(elf, vaddr, false, &ph)
		   ? vaddr - ph.p_vaddr + ph.p_offset
		   : 0;
}

static uint64_t offset_to_vaddr(Elf *elf, uint64_t off)
{
	GElf_Phdr ph;

	return exec_segment(elf, off, true, &ph)
		   ? off - ph.p_offset + ph.p_vaddr
		   : 0;
}

/* funcs sorted by name, for bsearch: a library has up to ~10^5 symbols */
struct by_name {
	struct mt_elf_func *funcs;
	size_t *order;
	size_t n;
};

static int cmp_order(const void *a, const void *b, void *funcs)
{
	const struct mt_elf_func *f = funcs;

	return strcmp(f[*(const size_t *)a].name, f[*(const size_t *)b].name);
}

/* A caller looking up the same names in many files may sort them once. */
static bool sorted_by_name(const struct mt_elf_func *funcs, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (strcmp(funcs[i - 1].name, funcs[i].name) > 0)
			return false;
	return true;
}

static struct mt_elf_func *lookup(const struct by_name *idx, const char *name)
{
	size_t lo = 0, hi = idx->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		struct mt_elf_func *f = &idx->funcs[idx->order[mid]];
		int c = strcmp(name, f->name);

		if (c == 0)
			return f;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

static void match_symbols(const struct elf_file *file, Elf_Scn *scn,
			  GElf_Shdr *sh, const struct by_name *idx, int *found)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t nsyms = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	struct mt_elf_func *f;
	GElf_Sym sym;

	if (nsyms > MT_ELF_MAX_SYMBOLS)
		nsyms = MT_ELF_MAX_SYMBOLS;
	for (size_t i = 0; data && i < nsyms; i++) {
		const char *name;

		if (i % SYMBOL_WINDOW == SYMBOL_WINDOW - 1)
			forget_pages(file);
		if (!gelf_getsym(data, i, &sym) ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
			continue;
		name = elf_strptr(file->elf, sh->sh_link, sym.st_name);
		if (!name || !(f = lookup(idx, name)) || f->offset)
			continue;
		f->offset = vaddr_to_offset(file->elf, sym.st_value);
		f->size = sym.st_size;
		if (f->offset)
			(*found)++;
	}
}

int mt_elf_find_funcs(const char *path, struct mt_elf_func *funcs, size_t n,
		      char *err, size_t errlen)
{
	struct elf_file f;
	struct by_name idx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int found = 0, rc;
	size_t i;

	for (i = 0; i < n; i++)
		funcs[i].offset = funcs[i].size = 0;
	rc = elf_file_open(&f, path, err, errlen);
	if (rc)
		return rc;
	/* .symtab first: it also names local aliases .dynsym lacks */
	idx.funcs = funcs;
	idx.n = n;
	idx.order = mt_xreallocarray(NULL, n, sizeof(*idx.order));
	for (i = 0; i < n; i++)
		idx.order[i] = i;
	if (!sorted_by_name(funcs, n))
		qsort_r(idx.order, n, sizeof(*idx.order), cmp_order, funcs);
	for (int pass = 0; pass < 2; pass++) {
		Elf64_Word want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;

		scn = NULL;
		while ((scn = elf_nextscn(f.elf, scn)) != NULL) {
			if (gelf_getshdr(scn, &sh) && sh.sh_type == want)
				match_symbols(&f, scn, &sh, &idx, &found);
		}
	}
	free(idx.order);
	elf_file_close(&f);
	return found;
}

int mt_elf_find_symbols(const char *path, struct mt_elf_symbol *syms, size_t n,
			char *err, size_t errlen)
{
	struct elf_file f;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int found = 0, rc;

	for (size_t i = 0; i < n; i++)
		syms[i].vaddr = syms[i].size = 0;
	rc = elf_file_open(&f, path, err, errlen);
	if (rc)
		return rc;
	for (int pass = 0; pass < 2 && found < (int)n; pass++) {
		Elf64_Word want = pass == 0 ? SHT_DYNSYM : SHT_SYMTAB;

		scn = NULL;
		while ((scn = elf_nextscn(f.elf, scn)) != NULL) {
			Elf_Data *data;
			size_t nsyms;
			GElf_Sym sym;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want ||
			    !(data = elf_getdata(scn, NULL)))
				continue;
			nsyms = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
			if (nsyms > MT_ELF_MAX_SYMBOLS)
				nsyms = MT_ELF_MAX_SYMBOLS;
			for (size_t i = 0; i < nsyms; i++) {
				const char *name;

				if (i % SYMBOL_WINDOW == SYMBOL_WINDOW - 1)
					forget_pages(&f);
				if (!gelf_getsym(data, i, &sym) ||
				    sym.st_shndx == SHN_UNDEF ||
				    sym.st_value == 0 ||
				    !(name = elf_strptr(f.elf, sh.sh_link,
							sym.st_name)))
					continue;
				for (size_t k = 0; k < n; k++) {
					if (syms[k].vaddr ||
					    strcmp(name, syms[k].name))
						continue;
					syms[k].vaddr = sym.st_value;
					syms[k].size = sym.st_size;
					found++;
				}
			}
		}
	}
	elf_file_close(&f);
	return found;
}

int mt_elf_read_vaddr(const char *path, uint64_t vaddr, void *buf, size_t len)
{
	struct elf_file f;
	size_t nphdr;
	char err[128];
	int rc = -ENOENT;

	if (elf_file_open(&f, path, err, sizeof(err)))
		return -ENOEXEC;
	if (elf_getphdrnum(f.elf, &nphdr))
		nphdr = 0;
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(f.elf, i, &ph) || ph.p_type != PT_LOAD ||
		    vaddr < ph.p_vaddr || len > ph.p_filesz ||
		    vaddr - ph.p_vaddr > ph.p_filesz - len)
			continue;
		if (ph.p_offset > f.size ||
		    vaddr - ph.p_vaddr + len > f.size - ph.p_offset)
			break;
		memcpy(buf, f.image + ph.p_offset + (vaddr - ph.p_vaddr), len);
		rc = 0;
		break;
	}
	elf_file_close(&f);
	return rc;
}

/* The GNU build-id note's bytes (at most cap) into id: their count, or
 * -ENOENT. */
static int build_id_of(Elf *elf, uint8_t *id, size_t cap)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int len = -ENOENT;

	while (len < 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		while ((off = gelf_getnote(data, off, &nh, &name_off,
					   &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((char *)data->d_buf + name_off, "GNU", 4))
				continue;
			len = nh.n_descsz < cap ? nh.n_descsz : cap;
			memcpy(id, (char *)data->d_buf + desc_off, len);
			break;
		}
	}
	return len;
}

int mt_elf_build_id(const char *path, uint8_t *id, size_t cap)
{
	struct elf_file f;
	char err[1];
	int len, rc;

	rc = elf_file_open(&f, path, err, sizeof(err));
	if (rc)
		return rc;
	len = build_id_of(f.elf, id, cap);
	elf_file_close(&f);
	return len;
}

int mt_elf_read_code(const char *path, uint64_t off, uint8_t *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = pread(fd, buf, len, off);
	close(fd);
	return got < 0 ? -errno : (int)got;
}

/* Instructions the x86 uprobe code emulates rather than single-steps
 * (arch/x86/kernel/uprobes.c: push reg, jmp, jcc, call, nop). */
static int is_emulated(const uint8_t *c, size_t len)
{
	if (len >= 1 && ((c[0] >= 0x50 && c[0] <= 0x57) || c[0] == 0x90 ||
			 (c[0] >= 0x70 && c[0] <= 0x7f) || c[0] == 0xe8 ||
			 c[0] == 0xe9 || c[0] == 0xeb))
		return 1;
	if (len >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57)
		return 1; /* push r8..r15 */
	if (len >= 2 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f)
		return 1; /* jcc rel32 */
	return 0;
}

/*
 * Length of c's first instruction if it is one we know changes no
 * argument register and not rsp (so a probe after it sees the same
 * arguments and stack), else 0.  A whitelist of exact encodings: anything
 * else is refused, since a probe placed mid-instruction corrupts the
 * target (docs/ARCHITECTURE.md, "What is measured where").
 */
static size_t harmless_insn_len(const uint8_t *c, size_t len)
{
	static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};

	if (len >= 4 && memcmp(c, endbr64, 4) == 0)
		return 4;
	/* test %reg,%reg for rdi, rsi, rdx, rcx (REX.W 85 /r, mod=11, same
	 * reg): writes flags only */
	if (len >= 3 && c[0] == 0x48 && c[1] == 0x85 &&
	    (c[2] == 0xff || c[2] == 0xf6 || c[2] == 0xd2 || c[2] == 0xc9))
		return 3;
	/* cmpb $imm8, disp32(%rip): 80 3d d32 ib, flags only */
	if (len >= 7 && c[0] == 0x80 && c[1] == 0x3d)
		return 7;
	/* cmpq $imm8, disp32(%rip): 48 83 3d d32 ib */
	if (len >= 8 && c[0] == 0x48 && c[1] == 0x83 && c[2] == 0x3d)
		return 8;
	return 0;
}

size_t mt_probe_skip(const uint8_t *code, size_t len)
{
	size_t skip = 0, n;

	/* at most three harmless instructions; stop at the first emulated one
	 */
	for (int i = 0; i < 3 && !is_emulated(code + skip, len - skip); i++) {
		n = harmless_insn_len(code + skip, len - skip);
		if (!n)
			return 0;
		skip += n;
	}
	return is_emulated(code + skip, len - skip) ? skip : 0;
}

/* ---- probing free() past its NULL test ----------------------------------- */

/*
 * Is there a rel32 branch (call, jmp, jcc) whose displacement is at
 * buf[p], starting at one of buf's first `starts` bytes and landing on
 * buf[off]?  Its opcode is e8 or e9 at p - 1, or 0f 80-8f at p - 2; a
 * branch to itself does not count.
 */
static bool rel32_lands(const uint8_t *buf, size_t got, size_t starts, size_t p,
			int64_t off)
{
	int32_t d;

	if (p + 4 > got)
		return false;
	memcpy(&d, buf + p, 4);
	if ((int64_t)p + 4 + d != off)
		return false;
	if (p >= 1 && p - 1 < starts &&
	    (buf[p - 1] == 0xe8 || buf[p - 1] == 0xe9))
		return (int64_t)(p - 1) != off;
	return p >= 2 && p - 2 < starts && buf[p - 2] == 0x0f &&
	       buf[p - 1] >= 0x80 && buf[p - 1] <= 0x8f &&
	       (int64_t)(p - 2) != off;
}

/*
 * The rel32 branches of buf landing on buf[off]: a displacement at p lands
 * there only if it equals off - 4 - p, so its first byte must be
 * (off - 4 - p) & 0xff, a test one byte in 256 passes by chance.  That
 * test runs 16 bytes at a time (SSE2, which every x86-64 has), and only
 * the bytes that pass are read as a branch.  Testing every byte as an
 * opcode instead made free()'s answer for libc 2.4 ms of every start
 * (the whole of mt_probe_skip_null, a thread's CPU beside the BPF load);
 * 0.7 ms this way, most of it reading the file.
 */
static bool rel32_branches_to(const uint8_t *buf, size_t got, size_t starts,
			      int64_t off)
{
	/* displacements at 1 .. starts + 1 (a jcc's opcode is 2 bytes) */
	size_t end = starts + 1 < got ? starts + 2 : got, p = 1;

#ifdef __SSE2__
	const __m128i lanes =
	    _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);

	for (; p + 16 <= end; p += 16) {
		__m128i want = _mm_sub_epi8(
		    _mm_set1_epi8((char)(uint8_t)(off - 4 - (int64_t)p)),
		    lanes);
		__m128i bytes = _mm_loadu_si128((const __m128i *)(buf + p));
		unsigned hits = _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, want));

		for (; hits; hits &= hits - 1)
			if (rel32_lands(buf, got, starts,
					p + __builtin_ctz(hits), off))
				return true;
	}
#endif
	for (; p < end; p++)
		if (buf[p] == (uint8_t)(off - 4 - (int64_t)p) &&
		    rel32_lands(buf, got, starts, p, off))
			return true;
	return false;
}

/*
 * Does a branch starting at one of buf's first `starts` bytes (buf holds
 * got bytes at virtual address at) land on target?  The same question as
 * "is there a relative branch (jmp, jcc, call, loop, jrcxz) at
 * this byte, landing there?" at every byte, asked the other way round
 * because this runs over the whole of libc's code at every start of
 * mt-trace: the rel32 branches by their displacement (above); a rel8
 * branch reaches at most 129 bytes back and 126 forward, so only that
 * window is decoded.  A branch to itself does not count.
 */
static bool chunk_branches_to(const uint8_t *buf, size_t got, size_t starts,
			      uint64_t at, uint64_t target)
{
	int64_t off = (int64_t)(target - at); /* target's index in buf */
	int64_t lo, hi;

	if (rel32_branches_to(buf, got, starts, off))
		return true;
	lo = off - 129 > 0 ? off - 129 : 0;
	hi = off + 127 < (int64_t)starts ? off + 127 : (int64_t)starts;
	for (int64_t i = lo; i < hi; i++) {
		uint8_t op = buf[i];

		if ((size_t)i + 2 <= got &&
		    (op == 0xeb || (op >= 0x70 && op <= 0x7f) ||
		     (op >= 0xe0 && op <= 0xe3)) &&
		    i + 2 + (int8_t)buf[i + 1] == off && i != off)
			return true;
	}
	return false;
}

/*
 * Might any direct branch in the executable segment ph of fd land on the
 * virtual address target?  Every byte is read as the start of a branch, so
 * a yes may be a coincidence of bytes (the caller then keeps its safe
 * placement), and a no is certain.
 */
static int segment_branches_to(int fd, const GElf_Phdr *ph, uint64_t target)
{
	enum { CHUNK = 1 << 16, TAIL = 5 }; /* a branch is at most 6 bytes */
	static uint8_t buf[CHUNK + TAIL];
	uint64_t done = 0;

	while (done < ph->p_filesz) {
		size_t want = ph->p_filesz - done > CHUNK + TAIL
				  ? CHUNK + TAIL
				  : ph->p_filesz - done;
		ssize_t got = pread(fd, buf, want, ph->p_offset + done);
		size_t starts;

		if (got <= 0)
			return -EIO;
		/* a branch starting in the tail is read with the next chunk */
		starts = (size_t)got == CHUNK + TAIL ? CHUNK : (size_t)got;
		if (chunk_branches_to(buf, got, starts, ph->p_vaddr + done,
				      target))
			return 1;
		done += starts;
	}
	return 0;
}

static int branches_to(Elf *elf, int fd, uint64_t target)
{
	size_t nphdr;
	GElf_Phdr ph;
	int rc;

	if (elf_getphdrnum(elf, &nphdr))
		return -EINVAL;
	for (size_t i = 0; i < nphdr; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X))
			continue;
		rc = segment_branches_to(fd, &ph, target);
		if (rc)
			return rc;
	}
	return 0;
}

/* Where a branch or call goes: its absolute target when it is direct, 0
 * when indirect, 1 (no address) when it is no branch at all. */
static uint64_t branch_goes(const ZydisDecodedInstruction *insn,
			    const ZydisDecodedOperand *ops, uint64_t at)
{
	ZyanU64 target;

	if (insn->meta.category != ZYDIS_CATEGORY_COND_BR &&
	    insn->meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
	    insn->meta.category != ZYDIS_CATEGORY_CALL)
		return 1;
	if (insn->operand_count_visible >= 1 &&
	    ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
	    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(insn, &ops[0], at, &target)))
		return target;
	return insn->meta.category == ZYDIS_CATEGORY_CALL ? 1 : 0;
}

/*
 * Decode the whole function (Zydis, a real x86 decoder): is vaddr + past
 * an instruction boundary, and does nothing in the function branch there
 * or jump indirectly (a jump table could reach it)?  Bytes that do not
 * decode are a no.
 */
static bool body_avoids(const uint8_t *code, size_t size, uint64_t vaddr,
			size_t past)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction insn;
	ZydisDecoder decoder;
	bool boundary = false;
	size_t at = 0;

	if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)))
		return false;
	while (at < size) {
		uint64_t goes;

		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(
			&decoder, code + at, size - at, &insn, ops)))
			return false;
		boundary |= at == past;
		goes = branch_goes(&insn, ops, vaddr + at);
		if (goes == 0 || goes == vaddr + past)
			return false;
		at += insn.length;
	}
	return boundary;
}

/* The start of code is [endbr64] test %rdi,%rdi; je: the length up to
 * the je's end, else 0. */
static size_t null_test_len(const uint8_t *c, size_t len)
{
	static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
	size_t at = len >= 4 && memcmp(c, endbr64, 4) == 0 ? 4 : 0;

	if (len < at + 5 || c[at] != 0x48 || c[at + 1] != 0x85 ||
	    c[at + 2] != 0xff)
		return 0;
	at += 3;
	if (c[at] == 0x74)
		return at + 2;
	if (len >= at + 6 && c[at] == 0x0f && c[at + 1] == 0x84)
		return at + 6;
	return 0;
}

static size_t skip_null_test(Elf *elf, int fd, uint64_t off, uint64_t size)
{
	uint8_t code[4096];
	size_t past;
	uint64_t vaddr;

	if (size == 0 || size > sizeof(code) ||
	    pread(fd, code, size, off) != (ssize_t)size)
		return 0;
	past = null_test_len(code, size);
	if (!past || !is_emulated(code + past, size - past))
		return 0;
	vaddr = offset_to_vaddr(elf, off);
	/* inside the function, decoded; from anywhere else in the file's
	 * code, any byte that could be a branch there */
	if (!vaddr || !body_avoids(code, size, vaddr, past) ||
	    branches_to(elf, fd, vaddr + past) != 0)
		return 0;
	return past;
}

/*
 * Answers already found by this process, by file identity (mt_file_id.h:
 * not a build-id, which anyone can forge) and function: the scan of a
 * whole C library for branches takes ~2 ms, and mt-trace asks it of the
 * same libc at every start, once from a thread beside the BPF load
 * (mt_attach_prepare) and again when it attaches, on the tree's private
 * copy (which stands for the file it was copied from).
 */
struct skip_answer {
	struct mt_file_id id;
	uint64_t off, size;
	size_t past;
};

#define SKIP_ANSWERS 16
static struct skip_answer skip_answers[SKIP_ANSWERS];
static size_t nskip_answers, skip_next;
static pthread_mutex_t skip_lock = PTHREAD_MUTEX_INITIALIZER;

static bool skip_answer_find(const struct mt_file_id *id, uint64_t off,
			     uint64_t size, size_t *past)
{
	bool found = false;

	pthread_mutex_lock(&skip_lock);
	for (size_t i = 0; i < nskip_answers && !found; i++) {
		const struct skip_answer *a = &skip_answers[i];

		found = a->off == off && a->size == size &&
			mt_file_id_equal(&a->id, id);
		if (found)
			*past = a->past;
	}
	pthread_mutex_unlock(&skip_lock);
	return found;
}

static void skip_answer_keep(const struct mt_file_id *id, uint64_t off,
			     uint64_t size, size_t past)
{
	struct skip_answer *a;

	pthread_mutex_lock(&skip_lock);
	/* a ring: the oldest answer gives way */
	a = &skip_answers[skip_next++ % SKIP_ANSWERS];
	if (nskip_answers < SKIP_ANSWERS)
		nskip_answers++;
	a->id = *id;
	a->off = off;
	a->size = size;
	a->past = past;
	pthread_mutex_unlock(&skip_lock);
}

size_t mt_probe_skip_null(const char *path, uint64_t off, uint64_t size)
{
	struct elf_file f;
	struct mt_file_id id;
	bool known;
	size_t past;
	char err[1];

	if (elf_file_open(&f, path, err, sizeof(err)))
		return 0;
	known = mt_file_id_of(f.fd, &id) == 0;
	if (!known || !skip_answer_find(&id, off, size, &past)) {
		past = skip_null_test(f.elf, f.fd, off, size);
		if (known)
			skip_answer_keep(&id, off, size, past);
	}
	elf_file_close(&f);
	return past;
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	if (base && strncmp(base + 1, "libc.so", 7) == 0) {
		snprintf(data, 4096, "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

const char *mt_self_libc(void)
{
	static char path[4096];

	if (!path[0])
		dl_iterate_phdr(find_libc, path);
	return path;
}

/* ---- a function's direct calls from its own file ---------------------- */

/* The DT_SONAME of elf into out (len bytes); false when it has none. */
static bool elf_soname(Elf *elf, char *out, size_t len)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Dyn dyn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC ||
		    !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize;
		     i++) {
			const char *name;

			if (!gelf_getdyn(data, i, &dyn) ||
			    dyn.d_tag != DT_SONAME)
				continue;
			name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
			if (!name)
				return false;
			snprintf(out, len, "%s", name);
			return true;
		}
	}
	return false;
}

/* Is the DT_SONAME of elf want? */
static bool soname_is(Elf *elf, const char *want)
{
	char name[256];

	return elf_soname(elf, name, sizeof(name)) && strcmp(name, want) == 0;
}

bool mt_elf_fd_soname(int fd, char *out, size_t len)
{
	bool found = false;
	Elf *elf;

	if (len)
		out[0] = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return false;
	if (elf_kind(elf) == ELF_K_ELF)
		found = elf_soname(elf, out, len);
	elf_end(elf);
	return found;
}

/* The return addresses (vaddr) of the direct calls in segment ph (its
 * bytes at code) that land on target, into ret[n..max); the new n (past
 * max: counted, not kept).  x86-64: e8 rel32, every byte read as a
 * possible call (a coincidence of bytes only adds an address no call
 * returns to); aarch64: bl imm26, at each 4-byte instruction. */
static size_t segment_calls_to(const uint8_t *code, const GElf_Phdr *ph,
			       uint64_t target, uint64_t *ret, size_t n,
			       size_t max)
{
	size_t size = ph->p_filesz;

#if defined(__x86_64__)
	const uint8_t *p = code, *end = code + size;

	while (end - p >= 5 && (p = memchr(p, 0xe8, end - p - 4))) {
		int32_t d;
		uint64_t after = ph->p_vaddr + (p - code) + 5;

		memcpy(&d, p + 1, 4);
		if (after + (int64_t)d == target) {
			if (n < max)
				ret[n] = after;
			n++;
		}
		p++;
	}
#elif defined(__aarch64__)
	for (size_t i = 0; i + 4 <= size; i += 4) {
		uint32_t insn;
		int64_t imm;

		memcpy(&insn, code + i, 4);
		if ((insn & 0xfc000000u) != 0x94000000u)
			continue;
		imm = (int64_t)((int32_t)(insn << 6) >> 6) * 4;
		if (ph->p_vaddr + i + imm == target) {
			if (n < max)
				ret[n] = ph->p_vaddr + i + 4;
			n++;
		}
	}
#else
	(void)code;
	(void)size;
	(void)target;
	(void)ret;
	(void)max;
#endif
	return n;
}

/*
 * A program linked with glibc statically calls free directly, the
 * program's own calls too: only those inside glibc's thread-exit function
 * (its tcache freed, tcache_thread_shutdown, inlined into
 * __malloc_arena_thread_freeres in glibc 2.36) are glibc's own.  Found by
 * .symtab (a stripped program has none: all its frees are recorded).
 */
static const char *const static_glibc_internal[] = {
    "__malloc_arena_thread_freeres",
    "tcache_thread_shutdown",
};
#define NSTATIC_INTERNAL                                                       \
	(sizeof(static_glibc_internal) / sizeof(static_glibc_internal[0]))

static size_t static_internal_calls(const char *path, struct elf_file *f,
				    uint64_t target, uint64_t *ret, size_t max)
{
	struct mt_elf_func funcs[NSTATIC_INTERNAL];
	size_t n = 0;
	char err[1];

	for (size_t i = 0; i < NSTATIC_INTERNAL; i++)
		funcs[i].name = static_glibc_internal[i];
	if (mt_elf_find_funcs(path, funcs, NSTATIC_INTERNAL, err,
			      sizeof(err)) <= 0)
		return 0;
	for (size_t i = 0; i < NSTATIC_INTERNAL; i++) {
		GElf_Phdr fn = {.p_vaddr =
				    offset_to_vaddr(f->elf, funcs[i].offset),
				.p_filesz = funcs[i].size};

		if (!funcs[i].offset || !fn.p_vaddr ||
		    funcs[i].offset > f->size ||
		    funcs[i].size > f->size - funcs[i].offset)
			continue;
		n = segment_calls_to((const uint8_t *)f->image +
					 funcs[i].offset,
				     &fn, target, ret, n, max);
	}
	return n;
}

int mt_elf_internal_calls(const char *path, const char *soname, uint64_t off,
			  uint64_t probe_off, int64_t *deltas, size_t max)
{
	struct elf_file f;
	uint64_t target, probe, *ret = NULL;
	size_t nphdr, n = 0;
	GElf_Phdr ph;
	char err[1];

	if (elf_file_open(&f, path, err, sizeof(err)))
		return 0;
	target = offset_to_vaddr(f.elf, off);
	probe = offset_to_vaddr(f.elf, probe_off);
	if (!target || !probe || elf_getphdrnum(f.elf, &nphdr)) {
		elf_file_close(&f);
		return 0;
	}
	ret = mt_xcalloc(max + 1, 8);
	if (!soname_is(f.elf, soname)) {
		/* not glibc's library: a program with glibc linked in? */
		n = static_internal_calls(path, &f, target, ret, max);
		nphdr = 0;
	}
	for (size_t i = 0; i < nphdr; i++) {
		if (!gelf_getphdr(f.elf, i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || ph.p_offset > f.size ||
		    ph.p_filesz > f.size - ph.p_offset)
			continue;
		n = segment_calls_to((const uint8_t *)f.image + ph.p_offset,
				     &ph, target, ret, n, max);
	}
	forget_pages(&f);
	elf_file_close(&f);
	for (size_t i = 0; i < n && i < max; i++)
		deltas[i] = (int64_t)(ret[i] - probe);
	free(ret);
	/* too many to be the allocator's own few: none at all, the program's
	 * calls could be among them */
	return n <= max ? (int)n : 0;
}
