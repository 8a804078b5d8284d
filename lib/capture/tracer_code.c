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
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_allocators.h"
#include "mt_attach.h"
#include "mt_elf.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

/* The kernel's dev_t (major << 20 | minor), as the BPF side reads it. */
static uint64_t kernel_dev(dev_t dev)
{
	return ((uint64_t)major(dev) << 20) | minor(dev);
}

static bool inspected(const struct tracer *t, const struct mt_code_key *key)
{
	for (size_t i = 0; i < t->ninspected; i++)
		if (t->inspected[i].dev == key->dev &&
		    t->inspected[i].ino == key->ino)
			return true;
	return false;
}

/* Remember key as inspected, here and in the BPF side's table (so no
 * process is stopped for it again). */
static void mark_inspected(struct tracer *t, const struct mt_code_key *key)
{
	__u32 done = MT_CODE_DONE;

	if (inspected(t, key))
		return;
	t->inspected = mt_tracer_grow(t->inspected, &t->cap_inspected,
				      t->ninspected + 1, sizeof(*key));
	t->inspected[t->ninspected++] = *key;
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.code_files), key, &done,
			    BPF_ANY);
}

static struct mt_code_key stat_key(const struct stat *st)
{
	return (struct mt_code_key){.dev = kernel_dev(st->st_dev),
				    .ino = st->st_ino};
}

/*
 * A file without allocator symbols (stripped) may have an unstripped copy
 * named with --scan: same build ID, same code, so the copy's symbols tell
 * where this file's allocator functions are.
 */
static int attach_with_donor(struct tracer *t, const char *via,
			     enum mt_alloc_family *family, char *err,
			     size_t errlen)
{
	uint8_t id[64];
	int len = mt_elf_build_id(via, id, sizeof(id));

	for (size_t i = 0; len > 0 && i < t->ndonors; i++) {
		const struct symbol_donor *d = &t->donors[i];

		if (d->len == len && memcmp(d->build_id, id, len) == 0)
			return mt_attach_file_as(&t->attach, via, d->path,
						 family, err, errlen);
	}
	return 0;
}

static void add_donor(struct tracer *t, const char *path)
{
	struct symbol_donor d = {0};

	d.len = mt_elf_build_id(path, d.build_id, sizeof(d.build_id));
	if (d.len <= 0 || !(d.path = strdup(path)))
		return;
	t->donors = mt_tracer_grow(t->donors, &t->cap_donors, t->ndonors + 1,
				   sizeof(d));
	t->donors[t->ndonors++] = d;
}

/*
 * Attach the allocator probes of the open file fd (named path in
 * messages), once per file: a file reached under two identities (an
 * overlay and its lower layer) is still probed once, since a second set
 * of probes would report every call twice.
 */
static int inspect_file(struct tracer *t, int fd, const char *path, pid_t pid)
{
	enum mt_alloc_family family;
	char via[64], err[512];
	struct mt_event fields = {0};
	struct mt_code_key key;
	struct stat st;
	int n;

	if (fstat(fd, &st))
		return -errno;
	key = stat_key(&st);
	if (inspected(t, &key))
		return 0;
	/* the path of the open file works in any mount namespace */
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	n = mt_attach_file(&t->attach, via, &family, err, sizeof(err));
	if (n == 0 && t->ndonors)
		n = attach_with_donor(t, via, &family, err, sizeof(err));
	if (n < 0 && t->attach.nprobes == 0 &&
	    t->attach.mode != MT_PROBES_CLASSIC &&
	    (n == -EINVAL || n == -EOPNOTSUPP || n == -ENOSYS))
		return n; /* maybe no such links: the caller retries */
	mark_inspected(t, &key);
	if (n < 0) {
		fprintf(stderr,
			"mt-trace: warning: %s: its allocator cannot be "
			"traced: %s\n",
			path, err);
		return 0;
	}
	if (n == 0 || family == MT_ALLOC_NONE)
		return 0;
	if (t->opts->verbose)
		fprintf(stderr, "mt-trace: %s: %s, %d probes\n", path,
			mt_alloc_family_name(family), n);
	fields.flags = family;
	mt_tracer_own_event(t, MT_EV_ALLOCATOR, pid, path, strlen(path),
			    &fields);
	return 0;
}

static int inspect_path(struct tracer *t, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "mt-trace: %s: %s\n", path, strerror(errno));
		return -1;
	}
	inspect_file(t, fd, path, t->child);
	close(fd);
	add_donor(t, path);
	return 0;
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

void mt_tracer_inspect_new_code(struct tracer *t)
{
	for (size_t i = 0; i < t->nnew_code; i++) {
		const struct mt_event *e = &t->new_code[i];
		struct mt_code_key key = {.dev = e->old_addr,
					  .ino = e->old_size};
		char path[PATH_MAX];
		int fd;

		if (!inspected(t, &key)) {
			fd = open_new_code(e, path, sizeof(path));
			if (fd >= 0) {
				inspect_file(t, fd, path, e->pid);
				close(fd);
			} else if (t->opts->verbose) {
				fprintf(stderr,
					"mt-trace: pid %u: code at %#llx: "
					"cannot open its file: %s\n",
					e->pid, (unsigned long long)e->addr,
					strerror(errno));
			}
			mark_inspected(t, &key);
		}
		/* the BPF side stopped it for this; it is traced now */
		if (!t->opts->no_stop)
			kill(e->pid, SIGCONT);
	}
	t->nnew_code = 0;
}

/* --scan FILE and MT_SCAN=FILE:FILE... */
static int inspect_extra(struct tracer *t)
{
	const char *env = getenv("MT_SCAN");
	int rc = 0;

	for (size_t i = 0; i < t->opts->nscan; i++)
		rc |= inspect_path(t, t->opts->scan[i]);
	if (env && *env) {
		char *list = strdup(env), *save = NULL, *p;

		for (p = strtok_r(list, ":", &save); p;
		     p = strtok_r(NULL, ":", &save))
			rc |= inspect_path(t, p);
		free(list);
	}
	return rc;
}

static void init_attach(struct tracer *t)
{
	struct mt_trace *skel = t->skel;

	mt_attach_init(&t->attach, t->probe_mode,
		       t->probe_mode == MT_PROBES_SESSION
			   ? skel->progs.alloc_session
			   : skel->progs.alloc_enter,
		       skel->progs.alloc_return, t->opts->verbose);
	if (t->opts->verbose)
		fprintf(stderr, "mt-trace: allocator probes: %s\n",
			mt_probe_mode_name(t->probe_mode));
}

/* The kernel refused the links of the current mode (no uprobe sessions
 * before 6.10, no uprobe_multi before 6.6): the next mode needs the
 * programs loaded for it, so load again. */
static int fall_back(struct tracer *t, int why)
{
	enum mt_probe_mode next = t->probe_mode + 1;

	if (t->opts->verbose)
		fprintf(stderr, "mt-trace: no %s (%s); using %s\n",
			mt_probe_mode_name(t->probe_mode), strerror(-why),
			mt_probe_mode_name(next));
	mt_attach_destroy(&t->attach);
	mt_trace__destroy(t->skel);
	t->skel = NULL;
	if (mt_tracer_load_bpf(t, next) || mt_tracer_make_rings(t))
		return -1;
	init_attach(t);
	return 0;
}

int mt_tracer_attach_initial(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();
	int fd, rc;

	init_attach(t);
	if (libc[0]) {
		fd = open(libc, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "mt-trace: %s: %s\n", libc,
				strerror(errno));
			return -1;
		}
		/* probed before the command starts: reported as its own */
		rc = inspect_file(t, fd, libc, t->child);
		while (rc < 0 && t->probe_mode != MT_PROBES_CLASSIC &&
		       fall_back(t, rc) == 0)
			rc = inspect_file(t, fd, libc, t->child);
		close(fd);
		if (rc < 0)
			return -1;
	}
	return inspect_extra(t);
}

void mt_tracer_code_free(struct tracer *t)
{
	for (size_t i = 0; i < t->ndonors; i++)
		free(t->donors[i].path);
	free(t->donors);
	free(t->inspected);
	free(t->new_code);
	t->inspected = NULL;
	t->new_code = NULL;
}
