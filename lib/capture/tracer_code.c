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

#include "mt_allocators.h"
#include "mt_attach.h"
#include "mt_clock.h"
#include "mt_elf.h"
#include "mt_grow.h"
#include "mt_program.h"
#include "mt_trace.skel.h"
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
	if (d.len <= 0 || !(d.path = strdup(path)))
		return;
	c->donors =
	    mt_grow(c->donors, &c->cap_donors, c->ndonors + 1, sizeof(d));
	c->donors[c->ndonors++] = d;
}

/* Who asked for a file to be inspected: a guess (a library the program
 * will need) is inspected only if that is all there is to it, no
 * allocator in it: a wrong guess then costs its stop, nothing else. */
enum inspection { MAPPED_BY_PROCESS, NAMED_BY_USER, GUESSED };

/* Whether the file at via holds no allocator function, of its own or
 * through a --scan copy.  (Those --fast's preload records, libc and
 * libstdc++, have theirs: host.covered is not asked, whose answer
 * registers the file for links.) */
static bool allocator_free(struct mt_code *c, const char *via)
{
	struct mt_attach_plan plan;
	char err[8];
	int n;

	if (c->ndonors)
		return false;
	n = mt_attach_plan(&c->attach, via, via, &plan, err, sizeof(err));
	if (n > 0)
		mt_attach_plan_free(&plan);
	return n == 0;
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
	if (why == GUESSED && c->host.probe_allocators &&
	    !allocator_free(c, via))
		return 0;
	if (!c->host.probe_allocators) { /* for its call stacks only */
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
			fprintf(stderr,
				"mt-trace: %s: %s, recorded by the "
				"preload (--fast)\n",
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
	if (n == -ENOEXEC && why != NAMED_BY_USER)
		n = 0;
	if (n < 0) {
		fprintf(stderr,
			"mt-trace: warning: %s: allocators not traced: %s\n",
			path, err);
		return 0;
	}
	if (n == 0 || family == MT_ALLOC_NONE)
		return 0;
	if (c->verbose)
		fprintf(stderr, "mt-trace: %s: %s, %d probes\n", path,
			mt_alloc_family_name(family), n);
	c->host.allocator_found(c->host.ctx, pid, path, family);
	return 0;
}

static int inspect_path(struct mt_code *c, const char *path, pid_t pid)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "mt-trace: %s: %s\n", path, strerror(errno));
		return -1;
	}
	inspect_file(c, fd, path, pid, NAMED_BY_USER, NULL);
	close(fd);
	add_donor(c, path);
	return 0;
}

/* path as the kernel names a file it maps (/proc/PID/exe, maps):
 * through every symbolic link, from the root */
static void canonical(const char *path, char *out)
{
	if (!realpath(path, out))
		snprintf(out, PATH_MAX, "%s", path);
}

/*
 * The dynamic loader the kernel maps with a program: described for the
 * call stacks, as mt_tracer_stacks_at_exec() would at the exec's stop
 * (no process maps it with mmap, so it is never inspected).
 */
static void describe_loader(struct mt_code *c, const char *interp, pid_t pid)
{
	char path[PATH_MAX];
	struct mt_code_key key;
	struct stat st;
	int fd = open(interp, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0) {
		key.dev = kernel_dev(st.st_dev);
		key.ino = st.st_ino;
		canonical(interp, path);
		c->host.code_file_found(c->host.ctx, fd, path, pid, &key);
	}
	close(fd);
}

/* The directory of path (absolute), for $ORIGIN. */
static void origin_of(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');

	snprintf(out, PATH_MAX, "%.*s", slash ? (int)(slash - path) : 0, path);
}

/* Libraries ld.so will load for a program, found and inspected at most. */
#define GUESSES_MAX 64

struct guesses {
	char *paths[GUESSES_MAX]; /* canonical; [0] the program */
	size_t n;
	char loader[PATH_MAX]; /* canonical: mapped by the kernel, not ld.so */
	struct mt_program_elf exe;
	char exe_origin[PATH_MAX];
};

static void guess_add(struct guesses *g, const char *path)
{
	if (strcmp(path, g->loader) == 0) /* libc needs it: loaded */
		return;
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->paths[i], path) == 0)
			return;
	if (g->n < GUESSES_MAX && (g->paths[g->n] = strdup(path)))
		g->n++;
}

/* The libraries obj (the file g->paths[i], read as elf) needs, where
 * ld.so will find them, added to g. */
static void guess_needed(struct guesses *g, size_t i,
			 const struct mt_program_elf *elf)
{
	const char *ld_path = getenv("LD_LIBRARY_PATH");
	char origin[PATH_MAX], found[PATH_MAX], path[PATH_MAX];

	origin_of(g->paths[i], origin);
	for (size_t k = 0; k < elf->nneeded; k++) {
		const char *name = mt_program_string(elf, elf->needed[k]);

		if (mt_program_find_library(name, elf, origin, &g->exe,
					    g->exe_origin, ld_path, found,
					    sizeof(found)) == 0) {
			canonical(found, path);
			guess_add(g, path);
		}
	}
}

static void guesses_free(struct guesses *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->paths[i]);
	mt_program_free(&g->exe);
}

/*
 * The libraries ld.so will load for the program open as fd (its
 * canonical path), breadth first, found as ld.so finds them: each is
 * inspected if it holds no allocator (GUESSED), so that its mapping does
 * not stop.  The loader is not among them: the kernel mapped it.  How
 * many were found.
 */
static size_t inspect_libraries(struct mt_code *c, int fd, const char *path,
				pid_t pid)
{
	struct guesses g = {0};
	size_t found;

	if (mt_program_read(fd, &g.exe) || !(g.paths[0] = strdup(path))) {
		guesses_free(&g);
		return 0;
	}
	g.n = 1;
	if (g.exe.interp[0])
		canonical(g.exe.interp, g.loader);
	origin_of(path, g.exe_origin);
	guess_needed(&g, 0, &g.exe);
	for (size_t i = 1; i < g.n; i++) {
		struct mt_program_elf elf;
		int lib = open(g.paths[i], O_RDONLY | O_CLOEXEC);

		if (lib < 0)
			continue;
		if (mt_program_read(lib, &elf) == 0) {
			size_t before = c->ninspected;

			inspect_file(c, lib, g.paths[i], pid, GUESSED, NULL);
			c->libraries_inspected += c->ninspected > before;
			guess_needed(&g, i, &elf);
		}
		mt_program_free(&elf);
		close(lib);
	}
	found = g.n - 1;
	guesses_free(&g);
	return found;
}

int mt_code_inspect_program(struct mt_code *c, const char *file, pid_t pid)
{
	struct mt_program_elf elf;
	char found[PATH_MAX], path[PATH_MAX];
	size_t libraries;
	int fd, rc;

	if (mt_program_resolve(file, getenv("PATH"), found, sizeof(found)))
		return 0;
	fd = open(found, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	rc = mt_program_read(fd, &elf);
	mt_program_free(&elf);
	if (rc) { /* a script: its interpreter runs, and stops */
		close(fd);
		return 0;
	}
	canonical(found, path);
	rc = inspect_file(c, fd, path, pid, MAPPED_BY_PROCESS, NULL);
	if (rc == 0) {
		if (elf.interp[0])
			describe_loader(c, elf.interp, pid);
		c->programs_inspected++;
		libraries = inspect_libraries(c, fd, path, pid);
		if (c->verbose > 1)
			fprintf(stderr,
				"mt-trace: %s inspected before its exec, and "
				"%zu libraries found for it\n",
				path, libraries);
	}
	close(fd);
	return rc;
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
		fprintf(stderr,
			"mt-trace: pid %u continued, stopped %.2f ms for new "
			"code\n",
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
				/* an exec: its libraries, while it waits */
				if (e.addr == 0)
					inspect_libraries(c, fd, path, e.pid);
				close(fd);
				if (e.addr == 0) /* an exec: its loader too */
					c->host.exec_inspected(c->host.ctx,
							       e.pid);
			} else if (c->verbose) {
				fprintf(stderr,
					"mt-trace: pid %u: code at %#llx: "
					"cannot open its file: %s\n",
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

static struct bpf_program *loaded_of(struct bpf_program *plain,
				     struct bpf_program *with_stacks)
{
	return bpf_program__autoload(with_stacks) ? with_stacks : plain;
}

void mt_code_alloc_programs(struct mt_trace *skel, enum mt_probe_mode mode,
			    struct bpf_program **enter,
			    struct bpf_program **ret)
{
	*enter = mode == MT_PROBES_SESSION
		     ? loaded_of(skel->progs.alloc_session,
				 skel->progs.session_stacks)
		     : skel->progs.alloc_enter;
	*ret = loaded_of(skel->progs.alloc_return, skel->progs.return_stacks);
}

void mt_code_use_bpf(struct mt_code *c, struct mt_trace *skel,
		     enum mt_probe_mode mode, const struct mt_code_host *host,
		     int verbose)
{
	struct bpf_program *enter, *ret;

	mt_code_alloc_programs(skel, mode, &enter, &ret);
	mt_attach_destroy(&c->attach);
	mt_attach_init(&c->attach, mode, enter, ret, verbose);
	c->code_files_fd = bpf_map__fd(skel->maps.code_files);
	c->resumed_fd = bpf_map__fd(skel->maps.resumed);
	c->host = *host;
	c->verbose = verbose;
	if (verbose)
		fprintf(stderr, "mt-trace: allocator probes: %s\n",
			mt_probe_mode_name(mode));
}

int mt_code_probe_first(struct mt_code *c, const char *path, pid_t pid)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		fprintf(stderr, "mt-trace: %s: %s\n", path, strerror(errno));
		return -1;
	}
	rc = inspect_file(c, fd, path, pid, NAMED_BY_USER, NULL);
	close(fd);
	return rc == MT_CODE_NO_SUCH_LINKS ? rc : rc < 0 ? -1 : 0;
}

void mt_code_free(struct mt_code *c)
{
	if (c->verbose)
		fprintf(stderr,
			"mt-trace: stops for new code: %zu; inspected ahead, "
			"programs: %zu, libraries: %zu\n",
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
