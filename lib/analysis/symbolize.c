// SPDX-License-Identifier: MIT
/*
 * symbolize.c - code locations to function names, source lines and the
 * inlined frames there, offline, with libdw (see mt_symbolize.h).
 *
 * Each code file gets its own Dwfl session, opened on the first lookup in
 * it: later lookups in the same file reuse its parsed symbol table and
 * DWARF.  A session holds a descriptor or two (the ELF, its separate debug
 * info), and a trace may name thousands of files: at most a quarter of
 * the descriptor limit's worth stay open, the least recently used closed
 * first (and opened again if needed).  So the names and source files the
 * cache hands out are copies, interned, never pointers into a session.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_symbolize.h"

#define BUILD_ID_MAX 64

struct sym_file {
	char *path; /* as traced; NULL: never declared */
	uint8_t build_id[BUILD_ID_MAX];
	size_t build_id_len;
	bool tried; /* opened, or tried to (and not closed since) */
	Dwfl *dwfl; /* NULL: not found, or closed */
	Dwfl_Module *mod;
	uint64_t used_at; /* the symbolizer's clock at its last lookup */
};

struct loc_slot {
	uint32_t file;
	bool used;
	uint64_t addr;
	struct mt_sym_loc loc;
};

struct mt_symbolizer {
	char *sysroot;	   /* "" for / */
	char **debug_dirs; /* the user's, then SYSROOT/usr/lib/debug */
	size_t ndebug_dirs;
	char *debuginfo_path; /* the same for libdwfl's finder */
	Dwfl_Callbacks callbacks;
	struct sym_file *files;
	size_t nfiles;
	size_t nopen, max_open; /* files with an open Dwfl session */
	uint64_t clock;
	struct loc_slot *slots; /* open addressing, at most half full */
	size_t mask, used;
	char **strings; /* what we formatted ourselves */
	size_t nstrings, cap_strings;
	char **interned; /* open addressing, at most half full */
	size_t interned_mask, ninterned;
};

static const struct mt_sym_frame unknown_frame = {"?", NULL, 0, false, false};
static const struct mt_sym_loc unknown_loc = {&unknown_frame, 1};

/* ------------------------------------------------------------------ */
/* Set-up                                                               */

static char *join_path(const char *dir, const char *rest)
{
	char *s;

	if (asprintf(&s, "%s%s%s", dir,
		     *rest == '/' || !*dir || dir[strlen(dir) - 1] == '/' ? ""
									  : "/",
		     rest) < 0)
		return NULL;
	return s;
}

/* libdwfl's search list: the main file's directory and its .debug, then
 * every debug directory (searched by build-id and by debuglink name). */
static char *debuginfo_path_of(char *const *dirs, size_t n)
{
	size_t len = sizeof(":.debug");
	char *s, *at;

	for (size_t i = 0; i < n; i++)
		len += strlen(dirs[i]) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	at = stpcpy(s, ":.debug");
	for (size_t i = 0; i < n; i++) {
		*at++ = ':';
		at = stpcpy(at, dirs[i]);
	}
	return s;
}

/* Dwfl sessions open at once: each may hold two descriptors, and half
 * the limit stays for everything else. */
static size_t sessions_max(void)
{
	struct rlimit rl;
	rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;

	if (n == RLIM_INFINITY || n / 4 > 256)
		return 256;
	return n / 4 ? n / 4 : 1;
}

struct mt_symbolizer *mt_sym_new(const struct mt_sym_opts *opts)
{
	struct mt_symbolizer *s = calloc(1, sizeof(*s));
	size_t n = opts ? opts->ndebug_dirs : 0;
	const char *root = opts && opts->sysroot ? opts->sysroot : "";

	if (!s)
		return NULL;
	elf_version(EV_CURRENT); /* before any elf_begin */
	s->sysroot = strdup(strcmp(root, "/") ? root : "");
	s->debug_dirs = calloc(n + 1, sizeof(*s->debug_dirs));
	s->mask = 255;
	s->slots = calloc(s->mask + 1, sizeof(*s->slots));
	s->interned_mask = 255;
	s->interned = calloc(s->interned_mask + 1, sizeof(*s->interned));
	s->max_open = sessions_max();
	if (!s->sysroot || !s->debug_dirs || !s->slots || !s->interned)
		goto fail;
	for (size_t i = 0; i < n; i++)
		if (!(s->debug_dirs[s->ndebug_dirs++] =
			  strdup(opts->debug_dirs[i])))
			goto fail;
	if (!(s->debug_dirs[s->ndebug_dirs++] =
		  join_path(s->sysroot, "/usr/lib/debug")))
		goto fail;
	s->debuginfo_path = debuginfo_path_of(s->debug_dirs, s->ndebug_dirs);
	if (!s->debuginfo_path)
		goto fail;
	s->callbacks = (Dwfl_Callbacks){
	    .find_elf = dwfl_build_id_find_elf,
	    .find_debuginfo = dwfl_standard_find_debuginfo,
	    .section_address = dwfl_offline_section_address,
	    .debuginfo_path = &s->debuginfo_path,
	};
	return s;
fail:
	mt_sym_free(s);
	return NULL;
}

void mt_sym_free(struct mt_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		free(s->files[i].path);
		if (s->files[i].dwfl)
			dwfl_end(s->files[i].dwfl);
	}
	free(s->files);
	for (size_t i = 0; s->slots && i <= s->mask; i++)
		if (s->slots[i].used)
			free((void *)s->slots[i].loc.frames);
	free(s->slots);
	for (size_t i = 0; i < s->nstrings; i++)
		free(s->strings[i]);
	free(s->strings);
	for (size_t i = 0; s->interned && i <= s->interned_mask; i++)
		free(s->interned[i]);
	free(s->interned);
	for (size_t i = 0; i < s->ndebug_dirs; i++)
		free(s->debug_dirs[i]);
	free(s->debug_dirs);
	free(s->debuginfo_path);
	free(s->sysroot);
	free(s);
}

int mt_sym_add_file(struct mt_symbolizer *s, uint32_t file, const char *path,
		    const uint8_t *build_id, size_t build_id_len)
{
	struct sym_file *f;
	char *copy;

	if (build_id_len > BUILD_ID_MAX || file == 0)
		return -1;
	if (file >= s->nfiles) {
		size_t n = s->nfiles ? s->nfiles : 16;
		struct sym_file *grown;

		while (n <= file)
			n *= 2;
		grown = realloc(s->files, n * sizeof(*grown));
		if (!grown)
			return -1;
		memset(grown + s->nfiles, 0, (n - s->nfiles) * sizeof(*grown));
		s->files = grown;
		s->nfiles = n;
	}
	f = &s->files[file];
	if (f->tried)
		return 0; /* its locations are cached under the first one */
	if (!(copy = strdup(path ? path : "")))
		return -1;
	free(f->path);
	f->path = copy;
	if (build_id_len)
		memcpy(f->build_id, build_id, build_id_len);
	f->build_id_len = build_id_len;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Finding a file's ELF                                                 */

/* Whether the ELF at fd carries the build-id f was traced with. */
static bool build_id_matches(const struct sym_file *f, int fd)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id;
	ssize_t len;
	bool same;

	if (!elf)
		return false;
	len = dwelf_elf_gnu_build_id(elf, &id);
	if (f->build_id_len == 0)
		same = elf_kind(elf) == ELF_K_ELF; /* nothing to compare */
	else
		same = len == (ssize_t)f->build_id_len &&
		       memcmp(id, f->build_id, f->build_id_len) == 0;
	elf_end(elf);
	return same;
}

/* fd of candidate if it is f's ELF, else -1.  Regular files only: the
 * path comes from the trace, and a FIFO or device there must not block or
 * feed us forever. */
static int open_if_same(const struct sym_file *f, const char *candidate)
{
	int fd =
	    candidate ? open(candidate, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    build_id_matches(f, fd))
		return fd;
	close(fd);
	return -1;
}

/* DIR/.build-id/xx/rest with suffix ("" or ".debug"). */
static char *build_id_path(const struct sym_file *f, const char *dir,
			   const char *suffix)
{
	char hex[2 * BUILD_ID_MAX + 2], *at = hex;
	char *s;

	for (size_t i = 0; i < f->build_id_len; i++) {
		at += sprintf(at, "%02x", f->build_id[i]);
		if (i == 0)
			*at++ = '/';
	}
	*at = '\0';
	if (asprintf(&s, "%s/.build-id/%s%s", dir, hex, suffix) < 0)
		return NULL;
	return s;
}

/* The traced file's ELF (its path in the sysroot, else by build-id):
 * an open fd and its name in *found, or -1. */
static int find_elf(const struct mt_symbolizer *s, const struct sym_file *f,
		    char **found)
{
	static const char *const suffixes[] = {"", ".debug"};
	char *candidate = *f->path ? join_path(s->sysroot, f->path) : NULL;
	int fd = open_if_same(f, candidate);

	if (fd >= 0) {
		*found = candidate;
		return fd;
	}
	free(candidate);
	if (!f->build_id_len)
		return -1;
	for (size_t d = 0; d < s->ndebug_dirs; d++) {
		for (size_t k = 0; k < 2; k++) {
			candidate =
			    build_id_path(f, s->debug_dirs[d], suffixes[k]);
			fd = open_if_same(f, candidate);
			if (fd >= 0) {
				*found = candidate;
				return fd;
			}
			free(candidate);
		}
	}
	return -1;
}

static void close_file(struct mt_symbolizer *s, struct sym_file *f)
{
	dwfl_end(f->dwfl);
	f->dwfl = NULL;
	f->mod = NULL;
	f->tried = false; /* opened again at its next lookup */
	s->nopen--;
}

/* Room for one more session: the least recently used one closes. */
static void make_room(struct mt_symbolizer *s)
{
	struct sym_file *lru = NULL;

	if (s->nopen < s->max_open)
		return;
	for (size_t i = 0; i < s->nfiles; i++)
		if (s->files[i].dwfl &&
		    (!lru || s->files[i].used_at < lru->used_at))
			lru = &s->files[i];
	if (lru)
		close_file(s, lru);
}

static void open_file(struct mt_symbolizer *s, struct sym_file *f)
{
	char *found = NULL;
	int fd;

	f->tried = true;
	make_room(s);
	fd = find_elf(s, f, &found);
	if (fd < 0)
		return;
	f->dwfl = dwfl_begin(&s->callbacks);
	if (!f->dwfl) {
		close(fd);
		free(found);
		return;
	}
	/* base 0: module addresses are the ELF's own plus libdwfl's bias */
	f->mod = dwfl_report_elf(f->dwfl, f->path, found, fd, 0, false);
	free(found);
	if (!f->mod || dwfl_report_end(f->dwfl, NULL, NULL) != 0) {
		if (!f->mod)
			close(fd);
		dwfl_end(f->dwfl);
		f->dwfl = NULL;
		f->mod = NULL;
		return;
	}
	s->nopen++;
}

static struct sym_file *file_of(struct mt_symbolizer *s, uint32_t file)
{
	struct sym_file *f;

	if (file == 0 || file >= s->nfiles || !s->files[file].path)
		return NULL;
	f = &s->files[file];
	f->used_at = ++s->clock;
	if (!f->tried)
		open_file(s, f);
	return f;
}

bool mt_sym_file_found(struct mt_symbolizer *s, uint32_t file)
{
	struct sym_file *f = file_of(s, file);

	return f && f->mod;
}

/* ------------------------------------------------------------------ */
/* One location                                                         */

/* The module address of an address in the file's ELF: libdwfl may have
 * placed the module elsewhere (bias). */
static Dwarf_Addr module_addr(Dwfl_Module *mod, uint64_t elf_addr)
{
	GElf_Addr bias = 0;

	dwfl_module_getelf(mod, &bias);
	return elf_addr + bias;
}

static const char *remember(struct mt_symbolizer *s, char *str);

/* libstdc++'s demangler (the C++ ABI's, in every g++ program's runtime) */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

/* A C++ (Itanium ABI) name as people read it, as addr2line -C and gdb
 * print it: "ns::f(int)"; any other name as it is. */
static const char *demangled(struct mt_symbolizer *s, const char *name)
{
	int status = -1;
	char *d;

	if (!name || strncmp(name, "_Z", 2) != 0)
		return name;
	d = __cxa_demangle(name, NULL, NULL, &status);
	if (status != 0 || !d) {
		free(d);
		return name;
	}
	return remember(s, d) ? d : name;
}

/* A symbol's name without its version: the symbol table names the
 * default version's function "__libc_start_main@@GLIBC_2.34" (and an
 * older one "memcpy@GLIBC_2.2.5"); every output names it as the code
 * calls it, once. */
static const char *unversioned(struct mt_symbolizer *s, const char *name)
{
	const char *at = name ? strchr(name, '@') : NULL;
	char *d;

	if (!at || at == name)
		return name;
	d = strndup(name, (size_t)(at - name));
	return remember(s, d) ? d : name;
}

/* A function's name: its linkage name demangled where it has one (C++:
 * qualified, with its parameters), else its plain name; both through
 * DW_AT_abstract_origin / DW_AT_specification. */
static const char *die_name(struct mt_symbolizer *s, Dwarf_Die *die,
			    bool *linkage)
{
	Dwarf_Attribute mem, *a;

	a = dwarf_attr_integrate(die, DW_AT_linkage_name, &mem);
	if (!a)
		a = dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &mem);
	*linkage = a && dwarf_formstring(a);
	if (*linkage)
		return demangled(s, dwarf_formstring(a));
	a = dwarf_attr_integrate(die, DW_AT_name, &mem);
	return a ? dwarf_formstring(a) : NULL;
}

/* Where an inlined subroutine was called: its DW_AT_call_file/line. */
static void call_site(Dwarf_Die *inlined, Dwarf_Die *cudie, const char **file,
		      unsigned *line)
{
	Dwarf_Attribute mem;
	Dwarf_Word idx, ln;
	Dwarf_Files *files;
	size_t nfiles;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &mem), &ln) ==
	    0)
		*line = (unsigned)ln;
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &mem), &idx) ==
		0 &&
	    dwarf_getsrcfiles(cudie, &files, &nfiles) == 0 && idx < nfiles)
		*file = dwarf_filesrc(files, idx, NULL, NULL);
}

static const char *remember(struct mt_symbolizer *s, char *str)
{
	if (!str)
		return NULL;
	if (s->nstrings == s->cap_strings) {
		size_t cap = s->cap_strings ? 2 * s->cap_strings : 64;
		char **grown = realloc(s->strings, cap * sizeof(*grown));

		if (!grown) {
			free(str);
			return NULL;
		}
		s->strings = grown;
		s->cap_strings = cap;
	}
	s->strings[s->nstrings++] = str;
	return str;
}

static size_t string_hash(const char *str)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *str; str++)
		h = (h ^ (unsigned char)*str) * 0x100000001b3ull;
	return (size_t)h;
}

static bool grow_interned(struct mt_symbolizer *s)
{
	size_t mask = 2 * s->interned_mask + 1;
	char **v = calloc(mask + 1, sizeof(*v));

	if (!v)
		return false;
	for (size_t i = 0; i <= s->interned_mask; i++) {
		char *str = s->interned[i];
		size_t j;

		if (!str)
			continue;
		for (j = string_hash(str) & mask; v[j]; j = (j + 1) & mask)
			;
		v[j] = str;
	}
	free(s->interned);
	s->interned = v;
	s->interned_mask = mask;
	return true;
}

/* The symbolizer's own copy of str, one per distinct string: what a
 * cached location names outlives the session it came from. */
static const char *intern(struct mt_symbolizer *s, const char *str)
{
	size_t i;

	if (!str)
		return NULL;
	if ((s->ninterned + 1) * 2 > s->interned_mask + 1 && !grow_interned(s))
		return "?";
	for (i = string_hash(str) & s->interned_mask; s->interned[i];
	     i = (i + 1) & s->interned_mask)
		if (!strcmp(s->interned[i], str))
			return s->interned[i];
	if (!(s->interned[i] = strdup(str)))
		return "?";
	s->ninterned++;
	return s->interned[i];
}

/* "path+0xaddress", or "0xaddress" for no file. */
static const char *fallback_name(struct mt_symbolizer *s, uint32_t file,
				 uint64_t addr)
{
	const char *path = file && file < s->nfiles && s->files[file].path
			       ? s->files[file].path
			       : NULL;
	char *str;
	int n = path ? asprintf(&str, "%s+0x%" PRIx64, path, addr)
		     : asprintf(&str, "0x%" PRIx64, addr);

	return n < 0 ? "?" : remember(s, str) ? str : "?";
}

/*
 * The frames at addr, innermost first, into frames (room for max): one
 * per DW_TAG_inlined_subroutine around addr and the subprogram holding
 * them, each with the line it is at (the line table's for the innermost,
 * the inlined call's call_line for the others).  0 without DWARF there.
 */
static unsigned dwarf_frames(struct mt_symbolizer *s, Dwfl_Module *mod,
			     Dwarf_Addr addr, bool *outer_linkage,
			     struct mt_sym_frame *frames, unsigned max)
{
	Dwarf_Addr cubias;
	Dwarf_Die *cudie = dwfl_module_addrdie(mod, addr, &cubias);
	Dwarf_Die *scopes = NULL;
	int nscopes;
	unsigned n = 0;

	if (!cudie)
		return 0;
	/* in an inlined body dwarf_getscopes goes on into the abstract
	 * definition; the concrete chain (inlined call sites up to the
	 * subprogram) comes from the innermost scope's own parents */
	nscopes = dwarf_getscopes(cudie, addr - cubias, &scopes);
	if (nscopes > 0) {
		Dwarf_Die innermost = scopes[0];

		free(scopes);
		scopes = NULL;
		nscopes = dwarf_getscopes_die(&innermost, &scopes);
	}
	for (int i = 0; i < nscopes && n < max; i++) {
		int tag = dwarf_tag(&scopes[i]);
		const char *name;

		if (tag != DW_TAG_inlined_subroutine &&
		    tag != DW_TAG_subprogram)
			continue;
		/* file and line were set by the inlined frame before */
		name = die_name(s, &scopes[i], outer_linkage);
		frames[n].function = name;
		frames[n].inlined = tag == DW_TAG_inlined_subroutine;
		frames[n].resolved = name != NULL;
		/* the caller's line is where this one was inlined */
		if (n + 1 < max && frames[n].inlined)
			call_site(&scopes[i], cudie, &frames[n + 1].file,
				  &frames[n + 1].line);
		n++;
		if (tag == DW_TAG_subprogram)
			break;
	}
	free(scopes);
	return n;
}

#define MAX_INLINED 64

/* Fill loc for (file, elf_addr); frames malloc'ed. */
static void symbolize(struct mt_symbolizer *s, uint32_t file, uint64_t elf_addr,
		      struct mt_sym_loc *loc)
{
	struct mt_sym_frame frames[MAX_INLINED] = {{0}};
	struct sym_file *f = file_of(s, file);
	unsigned n = 0;

	if (f && f->mod && elf_addr > 0) {
		/* the call instruction, not the one it returns to */
		Dwarf_Addr addr = module_addr(f->mod, elf_addr - 1);
		GElf_Off symoff;
		GElf_Sym sym;
		const char *symname =
		    demangled(s, unversioned(s, dwfl_module_addrinfo(
						    f->mod, addr, &symoff, &sym,
						    NULL, NULL, NULL)));
		Dwfl_Line *line = dwfl_module_getsrc(f->mod, addr);
		int lineno = 0;
		const char *src =
		    line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL)
			 : NULL;

		bool outer_linkage = false;

		n = dwarf_frames(s, f->mod, addr, &outer_linkage, frames,
				 MAX_INLINED);
		if (n == 0 && symname) /* symbols, no DWARF here */
			frames[n++] = (struct mt_sym_frame){.function = symname,
							    .resolved = true};
		/* the function the code is in: its symbol (demangled) unless
		 * DWARF has its full linkage name; DWARF's plain name lacks
		 * C++'s scope and parameters and may be missing (artificial).
		 * This is what addr2line -f -C prints. */
		if (n && !frames[n - 1].inlined && !outer_linkage && symname) {
			frames[n - 1].function = symname;
			frames[n - 1].resolved = true;
		}
		if (n && src) {
			frames[0].file = src;
			frames[0].line = (unsigned)lineno;
		}
	}
	if (n == 0)
		frames[n++] = (struct mt_sym_frame){0};
	for (unsigned i = 0; i < n; i++) {
		if (!frames[i].function)
			frames[i].function = fallback_name(s, file, elf_addr);
		/* the session may be closed before the cache is read */
		frames[i].function = intern(s, frames[i].function);
		frames[i].file = intern(s, frames[i].file);
	}
	loc->frames = malloc(n * sizeof(*loc->frames));
	if (!loc->frames) {
		*loc = unknown_loc;
		return;
	}
	memcpy((void *)loc->frames, frames, n * sizeof(*loc->frames));
	loc->nframes = n;
}

/* ------------------------------------------------------------------ */
/* The cache                                                            */

static size_t slot_home(const struct mt_symbolizer *s, uint32_t file,
			uint64_t addr)
{
	uint64_t h = (addr ^ ((uint64_t)file << 40)) * 0x9E3779B97F4A7C15ull;

	return (size_t)(h >> 32) & s->mask;
}

static struct loc_slot *slot_for(struct mt_symbolizer *s, uint32_t file,
				 uint64_t addr)
{
	size_t i = slot_home(s, file, addr);

	while (s->slots[i].used &&
	       (s->slots[i].file != file || s->slots[i].addr != addr))
		i = (i + 1) & s->mask;
	return &s->slots[i];
}

static int grow_cache(struct mt_symbolizer *s)
{
	struct loc_slot *old = s->slots;
	size_t old_mask = s->mask;

	s->slots = calloc(2 * (old_mask + 1), sizeof(*s->slots));
	if (!s->slots) {
		s->slots = old;
		return -1;
	}
	s->mask = 2 * old_mask + 1;
	for (size_t i = 0; i <= old_mask; i++)
		if (old[i].used)
			*slot_for(s, old[i].file, old[i].addr) = old[i];
	free(old);
	return 0;
}

const struct mt_sym_loc *mt_sym_lookup(struct mt_symbolizer *s, uint32_t file,
				       uint64_t addr)
{
	struct loc_slot *slot;

	if ((s->used + 1) * 2 > s->mask + 1 && grow_cache(s) < 0)
		return &unknown_loc;
	slot = slot_for(s, file, addr);
	if (slot->used)
		return &slot->loc;
	symbolize(s, file, addr, &slot->loc);
	if (slot->loc.frames == unknown_loc.frames)
		return &unknown_loc; /* not cached: retried next time */
	/* symbolize may not touch the table: slot is still ours */
	slot->used = true;
	slot->file = file;
	slot->addr = addr;
	s->used++;
	return &slot->loc;
}

size_t mt_sym_locations(const struct mt_symbolizer *s)
{
	return s->used;
}
