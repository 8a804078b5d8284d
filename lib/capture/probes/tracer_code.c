// SPDX-License-Identifier: MIT
/*
 * tracer_code.c - find the allocators of the code traced processes run.
 *
 * At start mt-trace probes its own C library (the one most programs share)
 * and any file named with --scan or MT_SCAN.  After that, every file a
 * traced process maps as code -- its executable at exec, each library ld.so
 * or dlopen() loads -- is inspected once: the BPF side stops the process
 * and reports the file (MT_EV_NEW_CODE); here its symbols are searched for
 * allocator functions (static jemalloc in a program, mimalloc in a
 * library, libstdc++'s operator new), their probes are attached, and the
 * process continues.  It cannot call an allocator before that allocator is
 * traced.
 *
 * Most of those stops are avoided by knowing the files first: the
 * command's program, found as execvp(3) will find it, and the libraries
 * ld.so will load for it are found beside the BPF load and inspected
 * before the command is released; a program exec'd later stops, and its
 * libraries are found while it waits.  Only what holds no allocator is
 * inspected on such a guess, and the BPF side knows files by identity:
 * a wrong guess costs the stop it meant to save, nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "mt_allocators.h"
#include "mt_attach.h"
#include "mt_clock.h"
#include "mt_elf.h"
#include "mt_grow.h"
#include "mt_program.h"
#include "mt_trace.skel.h"
#include "mt_user.h"
#include "mt_xalloc.h"
#include "tracer_code.h"

/* The kernel's dev_t (major << 20 | minor), as the BPF side reads it. */
static uint64_t kernel_dev(dev_t dev)
{
	return ((uint64_t)major(dev) << 20) | minor(dev);
}

/* Whether a and b may be the same file: same device and inode, and the
 * same generation unless one is unknown. */
static bool same_file(const struct mt_code_id *a, const struct mt_code_id *b)
{
	return a->key.dev == b->key.dev && a->key.ino == b->key.ino &&
	       (!a->generation_known || !b->generation_known ||
		a->generation == b->generation);
}

/* The entry for id's device and inode, whatever its generation. */
static struct mt_code_id *find_inode(const struct mt_code *c,
				     const struct mt_code_id *id)
{
	for (size_t i = 0; i < c->ninspected; i++)
		if (c->inspected[i].key.dev == id->key.dev &&
		    c->inspected[i].key.ino == id->key.ino)
			return &c->inspected[i];
	return NULL;
}

static bool inspected(const struct mt_code *c, const struct mt_code_id *id)
{
	const struct mt_code_id *known = find_inode(c, id);

	return known && same_file(known, id);
}

/* Remember id as inspected, here and in the BPF side's table (so no
 * process is stopped for it again).  A device and inode name one file at
 * a time: a new generation replaces the deleted file's entry. */
static void mark_inspected(struct mt_code *c, const struct mt_code_id *id)
{
	struct mt_code_seen done = {
	    id->generation_known ? MT_CODE_DONE : MT_CODE_DONE_ANY_GENERATION,
	    id->generation};
	struct mt_code_id *known = find_inode(c, id);

	if (known && same_file(known, id))
		return;
	if (!known) {
		c->inspected = mt_grow(c->inspected, &c->cap_inspected,
				       c->ninspected + 1, sizeof(*id));
		known = &c->inspected[c->ninspected++];
	}
	*known = *id;
	bpf_map_update_elem(c->code_files_fd, &id->key, &done, BPF_ANY);
}

/*
 * The identity of the open file fd: stat's device and inode, and the
 * generation from the file system (ext4, xfs, btrfs answer
 * FS_IOC_GETVERSION; tmpfs does not), else from the BPF side's record of
 * the same inode (seen, NULL if none).
 */
static struct mt_code_id file_id(int fd, const struct stat *st,
				 const struct mt_code_id *seen)
{
	struct mt_code_id id = {
	    .key = {.dev = kernel_dev(st->st_dev), .ino = st->st_ino}};
	long generation = 0; /* some file systems write an int */

	if (ioctl(fd, FS_IOC_GETVERSION, &generation) == 0) {
		id.generation = (uint32_t)generation;
		id.generation_known = true;
	} else if (seen && seen->key.dev == id.key.dev &&
		   seen->key.ino == id.key.ino) {
		id.generation = seen->generation;
		id.generation_known = seen->generation_known;
	}
	return id;
}

/*
 * A file without allocator symbols (stripped) may have an unstripped copy
 * named with --scan: same build ID, same code, so the copy's symbols tell
 * where this file's allocator functions are.
 */
static int attach_with_donor(struct mt_code *c, const char *via,
			     enum mt_alloc_family *family, char *err,
			     size_t errlen)
{
	uint8_t id[64];
	int len = mt_elf_build_id(via, id, sizeof(id));

	for (size_t i = 0; len > 0 && i < c->ndonors; i++) {
		const struct mt_code_donor *d = &c->donors[i];

		if (d->len == len && memcmp(d->build_id, id, len) == 0)
			return mt_attach_file_as(&c->attach, via, d->path,
						 family, err, errlen);
	}
	return 0;
}

static void add_donor(struct mt_code *c, const char *path)
{
	struct mt_code_donor d = {0};

	d.len = mt_elf_build_id(path, d.build_id, sizeof(d.build_id));
	if (d.len <= 0)
		return;
	d.path = mt_xstrdup(path);
	c->donors =
	    mt_grow(c->donors, &c->cap_donors, c->ndonors + 1, sizeof(d));
	c->donors[c->ndonors++] = d;
}

/* Who asked for a file to be inspected.  ALLOCATOR_FREE: a file found
 * before any process maps it (a library the program will need), whose
 * symbols were found to hold no allocator: inspected as it would be at
 * its stop, without reading them again. */
enum inspection { MAPPED_BY_PROCESS, NAMED_BY_USER, ALLOCATOR_FREE };

/*
 * -v, without the recorder: a CPython interpreter's own allocator
 * (pymalloc) is not recorded.  Debian's python3.11 inlines
 * PyObject_Malloc into ~190 callers, and even _PyObject_Malloc, which
 * its allocator table points to, into each (GCC's speculative
 * devirtualization): uprobes on the two saw 103 and 760 of the ~320,000
 * calls the recorder records for seabird.py tuples.  Only what reaches
 * malloc is recorded.
 */
static void say_pymalloc(const char *via, const char *path)
{
	struct mt_elf_func f = {.name = "PyObject_Malloc"};
	char err[128];

	if (mt_elf_find_funcs(via, &f, 1, err, sizeof(err)) == 1)
		mt_verbose("%s: CPython's own allocator (pymalloc) is not "
			   "recorded without the recorder (its calls are "
			   "inlined into their callers): only what reaches "
			   "malloc is",
			   path);
}

/*
 * Attach the allocator probes of the open file fd (named path in
 * messages), once per file: a file reached under two identities (an
 * overlay and its lower layer) is still probed once, since a second set
 * of probes would report every call twice.
 */
static int inspect_file(struct mt_code *c, int fd, const char *path, pid_t pid,
			enum inspection why, const struct mt_code_id *seen)
{
	enum mt_alloc_family family;
	char via[64], err[512];
	struct mt_code_id id;
	struct stat st;
	int n;

	if (fstat(fd, &st))
		return -errno;
	id = file_id(fd, &st, seen);
	if (inspected(c, &id))
		return 0;
	/* the path of the open file works in any mount namespace */
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	if (c->verbose && !c->host.covered && c->host.probe_allocators)
		say_pymalloc(via, path);
	/* for its call stacks only */
	if (!c->host.probe_allocators || why == ALLOCATOR_FREE) {
		c->host.code_file_found(c->host.ctx, fd, path, pid, &id.key);
		mark_inspected(c, &id);
		return 0;
	}
	if (c->host.covered && c->host.covered(c->host.ctx, fd, &family)) {
		c->host.code_file_found(c->host.ctx, fd, path, pid, &id.key);
		mark_inspected(c, &id);
		if (family == MT_ALLOC_NONE) /* the preload itself */
			return 0;
		if (c->verbose)
			mt_verbose("%s: %s, recorded by the "
				   "preload (--fast)",
				   path, mt_alloc_family_name(family));
		c->host.allocator_found(c->host.ctx, pid, path, family);
		return 0;
	}
	n = mt_attach_file(&c->attach, via, &family, err, sizeof(err));
	if (n == 0 && c->ndonors)
		n = attach_with_donor(c, via, &family, err, sizeof(err));
	if (n < 0 && c->attach.nprobes == 0 &&
	    c->attach.mode != MT_PROBES_CLASSIC &&
	    (n == -EINVAL || n == -EOPNOTSUPP || n == -ENOSYS)) {
		c->links_refused = -n;
		return MT_CODE_NO_SUCH_LINKS; /* maybe: the caller retries */
	}
	c->host.code_file_found(c->host.ctx, fd, path, pid, &id.key);
	mark_inspected(c, &id);
	/* a process may map any file executable (a JIT's, data): one that
	 * is not ELF has no allocator in it, nothing to warn about unless the
	 * user named it */
	if (n == -ENOEXEC && why == MAPPED_BY_PROCESS)
		n = 0;
	if (n < 0) {
		mt_warning("%s: allocators not traced: %s", path, err);
		return 0;
	}
	if (n == 0 || family == MT_ALLOC_NONE)
		return 0;
	if (c->verbose)
		mt_verbose("%s: %s, %d probes", path,
			   mt_alloc_family_name(family), n);
	c->host.allocator_found(c->host.ctx, pid, path, family);
	return 0;
}

static int inspect_path(struct mt_code *c, const char *path, pid_t pid)
{
	/* a file opened as the user (mt_user.h): named as they named it */
	const char *name = mt_user_input_name(path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		mt_error("%s: %s", name, strerror(errno));
		return -1;
	}
	inspect_file(c, fd, name, pid, NAMED_BY_USER, NULL);
	close(fd);
	add_donor(c, path);
	return 0;
}

/* The kernel's name for the open file fd, as /proc/PID/maps and
 * /proc/PID/exe give it: what a stop would have read. */
static bool kernel_name(int fd, char *out, size_t len)
{
	char via[64];
	ssize_t n;

	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	n = readlink(via, out, len - 1);
	if (n <= 0)
		return false;
	out[n] = '\0';
	return true;
}

/*
 * Whether the symbols of the open file fd name no allocator function: the
 * symbol lookup alone (mt_attach_plan's first step, whose 0 is its 0),
 * not the plan, whose checks of free()'s code share a buffer: a thread
 * asks this beside the attach of libc.
 */
static bool symbols_allocator_free(int fd)
{
	size_t nfuncs;
	const struct mt_alloc_func *table = mt_alloc_funcs(&nfuncs);
	struct mt_elf_func funcs[nfuncs];
	char via[64], err[8];

	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	for (size_t i = 0; i < nfuncs; i++)
		funcs[i].name = table[i].name;
	return mt_elf_find_funcs(via, funcs, nfuncs, err, sizeof(err)) == 0;
}

/* The directory of path (absolute), for $ORIGIN. */
static void origin_of(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');

	snprintf(out, PATH_MAX, "%.*s", slash ? (int)(slash - path) : 0, path);
}

/* Files found for one program, at most. */
#define PROGRAM_FILES_MAX 64

/* The search for a program's files: what it found, the program's ELF
 * headers, and the files already known (their symbols are not read). */
struct finding {
	struct mt_code_program *p;
	struct mt_program_elf exe;
	char exe_origin[PATH_MAX];
	struct stat loader;
	bool (*known)(void *ctx, const struct stat *st);
	void *ctx;
};

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Take the open file fd into what was found (else it is closed): not
 * the loader, once each, its symbols read unless known. */
static void take_file(struct finding *f, int fd)
{
	struct mt_code_program *p = f->p;
	struct mt_code_guess g = {.fd = fd};
	char name[PATH_MAX];

	if (fstat(fd, &g.st) || p->n == PROGRAM_FILES_MAX ||
	    same_inode(&g.st, &f->loader) ||
	    !kernel_name(fd, name, sizeof(name)))
		goto drop;
	for (size_t i = 0; i < p->n; i++)
		if (same_inode(&p->files[i].st, &g.st))
			goto drop;
	g.path = mt_xstrdup(name);
	g.known = f->known && f->known(f->ctx, &g.st);
	g.allocator_free = !g.known && symbols_allocator_free(fd);
	p->files[p->n++] = g;
	return;
drop:
	close(fd);
}

/* The libraries file i of what was found (read as elf) needs, where
 * ld.so will find them. */
static void find_needed(struct finding *f, size_t i,
			const struct mt_program_elf *elf)
{
	const char *ld_path = getenv("LD_LIBRARY_PATH");
	char origin[PATH_MAX], found[PATH_MAX];

	origin_of(f->p->files[i].path, origin);
	for (size_t k = 0; k < elf->nneeded; k++) {
		const char *name = mt_program_string(elf, elf->needed[k]);
		int fd;

		if (mt_program_find_library(name, elf, origin, &f->exe,
					    f->exe_origin, ld_path, found,
					    sizeof(found)) == 0 &&
		    (fd = open(found, O_RDONLY | O_CLOEXEC)) >= 0)
			take_file(f, fd);
	}
}

/* From the program (f->p->files[0], read as f->exe): its loader, then
 * the libraries ld.so will load, breadth first. */
static void find_from_program(struct finding *f)
{
	struct mt_code_program *p = f->p;
	int fd;

	if (f->exe.interp[0] &&
	    (fd = open(f->exe.interp, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (fstat(fd, &f->loader) == 0 &&
		    kernel_name(fd, p->loader, sizeof(p->loader)))
			p->loader_fd = fd;
		else
			close(fd);
	}
	origin_of(p->files[0].path, f->exe_origin);
	find_needed(f, 0, &f->exe);
	/* not through a file known already: its own were looked for when
	 * it was inspected (libc: ld.so alone) */
	for (size_t i = 1; i < p->n; i++) {
		struct mt_program_elf elf;

		if (p->files[i].known)
			continue;
		if (mt_program_read(p->files[i].fd, &elf) == 0)
			find_needed(f, i, &elf);
		mt_program_free(&elf);
	}
}

/* Start with the program open as fd (taken), its ELF headers read:
 * false if it is not one the kernel runs itself. */
static bool find_start(struct finding *f, struct mt_code_program *p, int fd,
		       bool (*known)(void *ctx, const struct stat *st),
		       void *ctx)
{
	memset(f, 0, sizeof(*f));
	memset(p, 0, sizeof(*p));
	f->p = p;
	f->known = known;
	f->ctx = ctx;
	f->loader.st_ino = (ino_t)-1; /* none yet */
	p->loader_fd = -1;
	p->files = mt_xcalloc(PROGRAM_FILES_MAX, sizeof(*p->files));
	if (mt_program_read(fd, &f->exe)) {
		close(fd);
		return false;
	}
	take_file(f, fd);
	return p->n == 1;
}

/* The files of mt-trace's C library are known: probed first. */
static bool is_libc(void *ctx, const struct stat *st)
{
	return same_inode(ctx, st);
}

void mt_code_find_program(struct mt_code_program *p, const char *file,
			  const char *libc)
{
	struct finding f;
	struct stat libc_st = {.st_ino = (ino_t)-1};
	char found[PATH_MAX];
	int fd = -1;

	if (libc && libc[0])
		stat(libc, &libc_st);
	if (mt_program_resolve(file, getenv("PATH"), found, sizeof(found)) == 0)
		fd = open(found, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		memset(p, 0, sizeof(*p));
		p->loader_fd = -1;
		return;
	}
	/* not an ELF program of this machine (a script): its interpreter
	 * runs, and stops */
	if (find_start(&f, p, fd, is_libc, &libc_st))
		find_from_program(&f);
	mt_program_free(&f.exe);
}

void mt_code_program_free(struct mt_code_program *p)
{
	for (size_t i = 0; i < p->n; i++) {
		close(p->files[i].fd);
		free(p->files[i].path);
	}
	free(p->files);
	if (p->loader_fd >= 0)
		close(p->loader_fd);
	memset(p, 0, sizeof(*p));
	p->loader_fd = -1;
}

/*
 * The libraries found, before their process maps them: each whose symbols
 * hold no allocator is inspected as at its stop (a wrong guess is another
 * file to the BPF side, and costs that stop).  With --scan's copies
 * about, a stripped library may have an allocator after all: none is.
 */
static void inspect_found_libraries(struct mt_code *c,
				    const struct mt_code_program *p, pid_t pid)
{
	if (c->ndonors)
		return;
	for (size_t i = 1; i < p->n; i++) {
		const struct mt_code_guess *g = &p->files[i];
		size_t before = c->ninspected;

		if (!g->allocator_free)
			continue;
		inspect_file(c, g->fd, g->path, pid, ALLOCATOR_FREE, NULL);
		c->libraries_inspected += c->ninspected > before;
	}
}

/* The kernel maps the loader with the program, no mmap call does: it
 * is described for the call stacks, as mt_tracer_stacks_at_exec() would
 * at the exec's stop, and never inspected for allocators. */
static void describe_loader(struct mt_code *c, const struct mt_code_program *p,
			    pid_t pid)
{
	struct stat st;
	struct mt_code_key key;

	if (p->loader_fd < 0 || fstat(p->loader_fd, &st))
		return;
	key.dev = kernel_dev(st.st_dev);
	key.ino = st.st_ino;
	c->host.code_file_found(c->host.ctx, p->loader_fd, p->loader, pid,
				&key);
}

int mt_code_inspect_program(struct mt_code *c, const struct mt_code_program *p,
			    pid_t pid)
{
	const struct mt_code_guess *g = p->n ? &p->files[0] : NULL;
	size_t before = c->libraries_inspected;
	int rc;

	if (!g)
		return 0;
	rc = inspect_file(c, g->fd, g->path, pid,
			  g->allocator_free && !c->ndonors ? ALLOCATOR_FREE
							   : MAPPED_BY_PROCESS,
			  NULL);
	if (rc)
		return rc;
	c->programs_inspected++;
	describe_loader(c, p, pid);
	inspect_found_libraries(c, p, pid);
	if (c->verbose > 1)
		mt_detail("%s inspected before its exec, and %zu "
			  "libraries of the %zu found for it",
			  g->path, c->libraries_inspected - before, p->n - 1);
	return 0;
}

static bool is_inspected(void *ctx, const struct stat *st)
{
	struct mt_code_id id = {
	    .key = {.dev = kernel_dev(st->st_dev), .ino = st->st_ino}};

	return find_inode(ctx, &id) != NULL;
}

/* A process stopped for the program it exec'd or a library it mapped
 * (dlopen), open as fd: the libraries that needs, inspected while the
 * process waits (their mappings then need not stop it again). */
static void inspect_libraries_of(struct mt_code *c, int fd, pid_t pid)
{
	struct mt_code_program p;
	struct finding f;
	int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (own < 0)
		return;
	if (find_start(&f, &p, own, is_inspected, c)) {
		find_from_program(&f);
		inspect_found_libraries(c, &p, pid);
	}
	mt_program_free(&f.exe);
	mt_code_program_free(&p);
}

/* Where pid maps addr: the mapping's bounds and file name, from maps. */
static int find_mapping(pid_t pid, uint64_t addr, char *range, size_t rlen,
			char *path, size_t plen)
{
	char maps[64], line[PATH_MAX + 128];
	int found = -1;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "re");
	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		uint64_t start, end;
		int name_at = 0;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %n",
			   &start, &end, &name_at) < 2 ||
		    addr < start || addr >= end)
			continue;
		snprintf(range, rlen, "%" PRIx64 "-%" PRIx64, start, end);
		snprintf(path, plen, "%s", line + name_at);
		path[strcspn(path, "\n")] = '\0';
		found = 0;
	}
	fclose(f);
	return found;
}

/* Open the file a NEW_CODE event is about, as the process sees it. */
static int open_new_code(const struct mt_event *e, char *path, size_t plen)
{
	char proc[PATH_MAX + 64], range[64];
	ssize_t n;

	if (e->addr == 0) { /* an exec: the program itself */
		snprintf(proc, sizeof(proc), "/proc/%d/exe", (int)e->pid);
		n = readlink(proc, path, plen - 1);
		path[n > 0 ? n : 0] = '\0';
		return open(proc, O_RDONLY | O_CLOEXEC);
	}
	if (find_mapping(e->pid, e->addr, range, sizeof(range), path, plen))
		return -1;
	snprintf(proc, sizeof(proc), "/proc/%d/map_files/%s", (int)e->pid,
		 range);
	return open(proc, O_RDONLY | O_CLOEXEC);
}

/*
 * Undo the stop the BPF side made for e, if it made one, then say so in
 * the resumed table, in that order: should mt-trace die between the two,
 * its watchdog continues the process once more (harmless), never not at
 * all.
 */
static void resume(struct mt_code *c, const struct mt_event *e)
{
	__u32 pid = e->pid;
	__u64 stop = e->timestamp;

	if (!(e->flags & MT_NEW_CODE_STOPPED))
		return;
	kill(e->pid, SIGCONT);
	bpf_map_update_elem(c->resumed_fd, &pid, &stop, BPF_ANY);
	c->stops++;
	if (c->verbose > 1) /* the stop's time: the BPF side's clock */
		mt_detail("pid %u continued, stopped %.2f ms for new "
			  "code",
			  e->pid, (mt_clock_ns(CLOCK_MONOTONIC) - stop) / 1e6);
}

void mt_code_exited(struct mt_code *c, pid_t pid)
{
	c->exited =
	    mt_grow(c->exited, &c->cap_exited, c->nexited + 1, sizeof(pid));
	c->exited[c->nexited++] = pid;
}

/* An exited process is stopped no more: its resumed entry goes (after
 * the inspection, which may resume a stop it made before exiting). */
static void forget_exited(struct mt_code *c)
{
	for (size_t i = 0; i < c->nexited; i++) {
		__u32 pid = c->exited[i];

		bpf_map_delete_elem(c->resumed_fd, &pid);
	}
	c->nexited = 0;
}

void mt_code_queue(struct mt_code *c, const struct mt_event *e)
{
	c->queued =
	    mt_grow(c->queued, &c->cap_queued, c->nqueued + 1, sizeof(*e));
	c->queued[c->nqueued++] = *e;
}

void mt_code_inspect_queued(struct mt_code *c)
{
	/* a record at a time, copied: an inspection reports what it found,
	 * and the core may queue more records meanwhile */
	for (size_t i = 0; i < c->nqueued; i++) {
		const struct mt_event e = c->queued[i];
		const struct mt_code_id id = {
		    .key = {.dev = e.old_addr, .ino = e.old_size},
		    .generation = e.aux,
		    .generation_known = true};
		char path[PATH_MAX];
		int fd;

		/* a fork child's record names no file */
		if (!(e.flags & MT_NEW_CODE_FORKED) && !inspected(c, &id)) {
			fd = open_new_code(&e, path, sizeof(path));
			if (fd >= 0) {
				inspect_file(c, fd, path, e.pid,
					     MAPPED_BY_PROCESS, &id);
				/* the libraries it needs, while it waits */
				inspect_libraries_of(c, fd, e.pid);
				close(fd);
				if (e.addr == 0) /* an exec: its loader too */
					c->host.exec_inspected(c->host.ctx,
							       e.pid);
			} else if (c->verbose) {
				mt_verbose("pid %u: code at %#llx: "
					   "cannot open its file: %s",
					   e.pid, (unsigned long long)e.addr,
					   strerror(errno));
			}
			mark_inspected(c, &id);
		}
		if (c->host.before_resume)
			c->host.before_resume(c->host.ctx, &e);
		resume(c, &e); /* it is traced now */
	}
	c->nqueued = 0;
	forget_exited(c);
}

void mt_code_resume_queued(struct mt_code *c)
{
	for (size_t i = 0; i < c->nqueued; i++)
		resume(c, &c->queued[i]);
	c->nqueued = 0;
	forget_exited(c);
}

int mt_code_scan(struct mt_code *c, char *const *paths, size_t n, pid_t pid)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		rc |= inspect_path(c, paths[i], pid);
	return rc;
}

void mt_code_alloc_programs_for(struct mt_trace *skel, enum mt_probe_mode mode,
				bool stacks, struct bpf_program **enter,
				struct bpf_program **ret)
{
	if (mode != MT_PROBES_SESSION)
		*enter = skel->progs.alloc_enter;
	else if (stacks)
		*enter = skel->progs.session_stacks;
	else
		*enter = skel->progs.alloc_session;
	*ret = stacks ? skel->progs.return_stacks : skel->progs.alloc_return;
}

/* sys_exit's program, loaded in every mode, says which kind was loaded */
void mt_code_alloc_programs(struct mt_trace *skel, enum mt_probe_mode mode,
			    struct bpf_program **enter,
			    struct bpf_program **ret)
{
	mt_code_alloc_programs_for(
	    skel, mode, bpf_program__autoload(skel->progs.sys_exit_stacks),
	    enter, ret);
}

void mt_code_use_bpf(struct mt_code *c, struct mt_trace *skel,
		     enum mt_probe_mode mode, const struct mt_code_host *host,
		     int verbose)
{
	struct bpf_program *enter, *ret;

	mt_code_alloc_programs(skel, mode, &enter, &ret);
	mt_attach_destroy(&c->attach);
	mt_attach_init(&c->attach, mode, enter, ret, verbose);
	mt_attach_internal_map(bpf_map__fd(skel->maps.internal_calls));
	c->code_files_fd = bpf_map__fd(skel->maps.code_files);
	c->resumed_fd = bpf_map__fd(skel->maps.resumed);
	c->host = *host;
	c->verbose = verbose;
	if (verbose)
		mt_verbose("allocator probes: %s", mt_probe_mode_name(mode));
}

int mt_code_probe_first(struct mt_code *c, const char *path, pid_t pid)
{
	const char *name = mt_user_input_name(path); /* as inspect_path */
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		mt_error("%s: %s", name, strerror(errno));
		return -1;
	}
	rc = inspect_file(c, fd, name, pid, NAMED_BY_USER, NULL);
	close(fd);
	return rc == MT_CODE_NO_SUCH_LINKS ? rc : rc < 0 ? -1 : 0;
}

void mt_code_free(struct mt_code *c)
{
	if (c->verbose)
		mt_verbose("stops for new code: %zu; inspected ahead, "
			   "programs: %zu, libraries: %zu",
			   c->stops, c->programs_inspected,
			   c->libraries_inspected);
	mt_attach_destroy(&c->attach);
	for (size_t i = 0; i < c->ndonors; i++)
		free(c->donors[i].path);
	free(c->donors);
	free(c->inspected);
	free(c->queued);
	free(c->exited);
	c->donors = NULL;
	c->inspected = NULL;
	c->queued = NULL;
	c->exited = NULL;
	c->ndonors = c->ninspected = c->nqueued = c->nexited = 0;
}
