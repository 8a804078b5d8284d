/* SPDX-License-Identifier: MIT */
/*
 * mt_symbolize.h - code locations (a code file, its build-id, an address in
 * it) to function names and, where DWARF line tables exist, file:line,
 * with the frames inlined there; offline, with libdw (elfutils).
 *
 * The ELF is looked for, in order, at SYSROOT/PATH, then by build-id in
 * each debug directory (DIR/.build-id/xx/rest and .../rest.debug, Debian's
 * -dbgsym layout) and last in SYSROOT/usr/lib/debug.  Its DWARF comes from
 * the file itself, or from a separate debug file found the same way or by
 * .gnu_debuglink.  A file whose build-id differs from the traced one is
 * never used: a location that cannot be symbolized prints as
 * "path+0xaddr", never under a wrong name.  (A traced file recorded
 * without a build-id is taken by its path.)
 *
 * Each distinct location is symbolized once and cached; each code file is
 * opened once, when one of its locations is first asked for.
 */
#ifndef MT_SYMBOLIZE_H
#define MT_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mt_sym_opts {
	const char *const *debug_dirs; /* searched first, in order */
	size_t ndebug_dirs;
	const char *sysroot; /* NULL or "": / */
	/* the sites' stacks (mt_sites.h) without the native frames between
	 * Python ones (mt-report --python-only); the symbolizer ignores it */
	bool python_only;
};

/* One function at a location: the innermost inlined call comes first,
 * the function the code was compiled in last. */
struct mt_sym_frame {
	const char *function; /* never NULL: "path+0xaddr" if unknown */
	const char *file;     /* source file, NULL without line tables */
	unsigned line;	      /* 0 without line tables */
	bool inlined;	      /* inlined into the next frame */
	bool resolved;	      /* function is a name from the file */
};

struct mt_sym_loc {
	const struct mt_sym_frame *frames;
	unsigned nframes; /* >= 1 */
};

struct mt_symbolizer;

/* NULL on out-of-memory.  The strings in opts must outlive it. */
struct mt_symbolizer *mt_sym_new(const struct mt_sym_opts *opts);
void mt_sym_free(struct mt_symbolizer *s);

/*
 * Declare code file id: its path in the traced machine and its build-id
 * bytes (len 0 when none was recorded).  Ids are small integers; id 0 is
 * "no file" (its addresses are the process's own).  A later declaration of
 * the same id is ignored once one of its locations was looked up.  0, or
 * -1 on out-of-memory or a build-id longer than 64 bytes.
 */
int mt_sym_add_file(struct mt_symbolizer *s, uint32_t file, const char *path,
		    const uint8_t *build_id, size_t build_id_len);

/*
 * The code at a return address in file: addr is an address in the file's
 * ELF (its virtual addresses, as a stack frame records it, see
 * man/mt-format.5) of the instruction after a call; it is looked up at
 * addr - 1, so the call's own line and inlined frames are found, not the
 * next statement's.  Never NULL (out of memory: a static "?" frame); valid
 * until mt_sym_free.
 */
const struct mt_sym_loc *mt_sym_lookup(struct mt_symbolizer *s, uint32_t file,
				       uint64_t addr);

/* Whether file's ELF was found with a matching build-id (opens it). */
bool mt_sym_file_found(struct mt_symbolizer *s, uint32_t file);

/* Distinct locations symbolized so far (each at most once). */
size_t mt_sym_locations(const struct mt_symbolizer *s);

#endif /* MT_SYMBOLIZE_H */
