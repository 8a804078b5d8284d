// SPDX-License-Identifier: MIT
/*
 * tracer_kept.c - the BPF side (programs and maps) kept for later sessions.
 *
 * Loading the BPF object costs every session 8-10 ms here, most of it in the
 * kernel's verifier (bpf_prog_load) and in making maps.  A session that
 * finds the very object it would load, kept by an earlier session, uses it
 * instead: its programs and maps are pinned in a BPF file system of root's
 * alone mounted on KEPT_ROOT (in the host's mount namespace, like the kept
 * copies of confine.c: made by the first session, kept until unmounted or
 * the machine restarts), in KEPT_SLOTS slots:
 *  - a session holds its slot's flock(2) from before its load until its
 *    links are gone and its stops undone (the background detacher
 *    inherits the descriptor), so a slot's programs run for one session
 *    at a time;
 *  - a slot holds one object, in a directory named after its key: a hash
 *    of the object's bytes, of every map's shape and of the constants
 *    (.rodata) and programs the session chose.  Another key empties the
 *    slot, and the new object is pinned under a temporary name first, so
 *    a key's directory is only ever whole;
 *  - a reused object is reset to what a load would make: its hash tables
 *    emptied, its arrays zeroed, its global data (.bss, .data) written
 *    with this session's values, its rings' unread records (a killed
 *    session's) skipped.  Task storage (`calls`) needs nothing: it belongs
 *    to tasks, and a session traces only tasks it started;
 *  - the default kind of session is kept, and --fast (what names its
 *    session is global data, not constants; it starts at slot 1, the
 *    default at slot 0, so that both kinds in turn each find theirs);
 *    not --stacks (its tables hold 40 MB), nor classic uprobes (they
 *    attach through libbpf's program objects, which a reused object does
 *    not load).
 * The links of the process-life tracepoints (fork, exec, exit,
 * signal_generate: rare events) are kept, idle between sessions; those of
 * sys_exit and rss_stat (every system call and page fault on the machine)
 * for LINGER_MS after a session only: see "tracepoints kept attached"
 * below.  The allocator
 * probes' links on the tree's private copies
 * (confine.c) are kept, since only the tree maps those inodes: registering
 * a session's first uprobe waits an RCU grace period (rcu_sync_enter() of
 * uprobe_register(): 12-22 ms here), the largest part of `mt-trace --
 * true` once the load is gone.  See "links on the copies" below.
 * --no-keep-copies neither keeps nor reuses anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/perf_event.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_confine.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

#define KEPT_ROOT  "/run/mt-trace/bpf"
#define KEPT_SLOTS 4
/* How long sys_exit's and rss_stat's links stay attached after a session
 * for the next one to take (see "tracepoints kept attached") */
#define LINGER_MS 1000
#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

/* ---- the slots ----------------------------------------------------------- */

/* Is fd a directory of root's alone on a BPF file system? */
static bool root_only_bpffs(int fd)
{
	struct statfs fs;
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	       !(st.st_mode & 077) && fstatfs(fd, &fs) == 0 &&
	       fs.f_type == BPF_FS_MAGIC;
}

/* KEPT_ROOT's descriptor, mounted where it was not (in the host's mount
 * namespace: mt-trace has not left it yet), or -1. */
static int open_root(void)
{
	int fd;

	if (!mt_confine_cache_root())
		return -1;
	if (mkdir(KEPT_ROOT, 0700) && errno != EEXIST)
		return -1;
	fd = open(KEPT_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && root_only_bpffs(fd))
		return fd;
	if (fd >= 0)
		close(fd);
	if (mount("mt-trace-bpf", KEPT_ROOT, "bpf", MS_NOSUID | MS_NODEV,
		  "mode=0700"))
		return -1;
	fd = open(KEPT_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !root_only_bpffs(fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A stream of directory fd's entries from its start, fd left open (a dup:
 * its position is shared with fd's, hence the rewind), or NULL. */
static DIR *read_dir(int fd)
{
	int dup_fd = dup(fd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;

	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return NULL;
	}
	rewinddir(d);
	return d;
}

/* Does directory fd hold anything (a name starting with prefix)? */
static bool holds_anything(int fd, const char *prefix)
{
	DIR *d = read_dir(fd);
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while (!any && (e = readdir(d)))
		any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		      (!prefix || !strncmp(e->d_name, prefix, strlen(prefix)));
	closedir(d);
	return any;
}

/* Does an object kept in slot directory fd hold links (l-...)? */
static bool holds_links(int slot_fd)
{
	DIR *d = read_dir(slot_fd);
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while (!any && (e = readdir(d))) {
		int fd;

		if (e->d_name[0] == '.')
			continue;
		fd = openat(slot_fd, e->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			any = holds_anything(fd, "l-");
			close(fd);
		}
	}
	closedir(d);
	return any;
}

void mt_tracer_kept_begin(struct tracer *t)
{
	struct mt_kept *k = &t->kept;
	const struct mt_tracer_opts *o = t->opts;
	int root;

	k->slot = k->slot_fd = k->key_dir = -1;
	for (size_t i = 0; i < MT_KEPT_MAX_PROGS; i++)
		k->prog_fds[i] = -1;
	if (o->no_keep_copies || o->stacks || geteuid() != 0)
		return;
	root = open_root();
	if (root < 0)
		return;
	/* --fast's object is another: it starts at another slot, so that
	 * sessions of both kinds in turn do not load afresh each time */
	for (int j = 0, first = o->fast ? 1 : 0;
	     j < KEPT_SLOTS && k->slot_fd < 0; j++) {
		int i = (first + j) % KEPT_SLOTS;
		char name[16];
		int fd;

		snprintf(name, sizeof(name), "%d", i);
		if (mkdirat(root, name, 0700) && errno != EEXIST)
			break;
		fd = openat(root, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			break;
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			close(fd);
			continue;
		}
		k->slot = i;
		k->slot_fd = fd;
	}
	close(root);
	k->expected = k->slot_fd >= 0 && holds_anything(k->slot_fd, NULL);
	k->links_expected = k->expected && holds_links(k->slot_fd);
}

/* ---- the key ------------------------------------------------------------- */

/* Two lanes of 64 bits, eight bytes a step (the object is 228 KB: a byte a
 * step, FNV-1a took 0.26 ms of every start), each step multiplied and
 * folded so that every input bit reaches every bit of the lane. */
static uint64_t mix(uint64_t h, uint64_t w, uint64_t k)
{
	h = (h ^ w) * k;
	return h ^ (h >> 29);
}

static void hash_bytes(uint64_t h[2], const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t w;

	for (; n >= sizeof(w); p += sizeof(w), n -= sizeof(w)) {
		memcpy(&w, p, sizeof(w));
		h[0] = mix(h[0], w, 0x100000001b3ull);
		h[1] = mix(h[1], w, 0x9e3779b97f4a7c15ull);
	}
	w = 0; /* the tail (under 8 bytes), and its length in the top byte */
	memcpy(&w, p, n);
	w ^= (uint64_t)n << 56;
	h[0] = mix(h[0], w, 0x100000001b3ull);
	h[1] = mix(h[1], w, 0x9e3779b97f4a7c15ull);
}

static void hash_u64(uint64_t h[2], uint64_t v)
{
	hash_bytes(h, &v, sizeof(v));
}

static void hash_str(uint64_t h[2], const char *s)
{
	hash_bytes(h, s, strlen(s) + 1);
}

static bool is_rodata(const struct bpf_map *map)
{
	const char *name = bpf_map__name(map);
	size_t n = strlen(name);

	return bpf_map__is_internal(map) && n >= 7 &&
	       strcmp(name + n - 7, ".rodata") == 0;
}

/* What a load of skel as configured would make, as a name. */
static void object_key(const struct mt_trace *skel, char *key, size_t size)
{
	uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
	size_t elf_size;
	const void *elf = mt_trace__elf_bytes(&elf_size);
	struct bpf_map *map;
	struct bpf_program *prog;

	hash_bytes(h, elf, elf_size);
	bpf_object__for_each_map(map, skel->obj)
	{
		hash_str(h, bpf_map__name(map));
		hash_u64(h, bpf_map__type(map));
		hash_u64(h, bpf_map__key_size(map));
		hash_u64(h, bpf_map__value_size(map));
		hash_u64(h, bpf_map__max_entries(map));
		hash_u64(h, bpf_map__map_flags(map));
		if (is_rodata(map)) {
			size_t n;
			const void *v = bpf_map__initial_value(map, &n);

			hash_bytes(h, v, n);
		}
	}
	bpf_object__for_each_program(prog, skel->obj)
	{
		hash_str(h, bpf_program__name(prog));
		hash_u64(h, bpf_program__autoload(prog));
		hash_u64(h, bpf_program__type(prog));
		hash_u64(h, bpf_program__expected_attach_type(prog));
	}
	snprintf(key, size, "%016llx%016llx", (unsigned long long)h[0],
		 (unsigned long long)h[1]);
}

/* ---- pins ---------------------------------------------------------------- */

/* A BPF file system refuses names with dots (mt_trace.rodata). */
static void pin_name(char kind, const char *object, char *name, size_t size)
{
	snprintf(name, size, "%c-%s", kind, object);
	for (char *p = name; *p; p++)
		if (*p == '.')
			*p = '_';
}

static void map_pin_name(const struct bpf_map *map, char *name, size_t size)
{
	pin_name('m', bpf_map__name(map), name, size);
}

static void prog_pin_name(const struct bpf_program *prog, char *name,
			  size_t size)
{
	pin_name('p', bpf_program__name(prog), name, size);
}

/* The pin name in directory dir, as a descriptor (/proc/self/fd: the
 * kernel resolves it), or -errno. */
static int get_pin(int dir, const char *name)
{
	char path[64 + 64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dir, name);
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

static int put_pin(int dir, const char *name, int fd)
{
	char path[64 + 64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dir, name);
	return bpf_obj_pin(fd, path) ? -errno : 0;
}

/* Remove directory name in dir and the pins in it. */
static void remove_dir(int dir, const char *name)
{
	int fd =
	    openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		unlinkat(dir, name, 0);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	unlinkat(dir, name, AT_REMOVEDIR);
}

/* Empty the slot but for directory keep (NULL: all): whatever object it
 * kept is not this one. */
static void empty_slot(int slot_fd, const char *keep)
{
	int fd = dup(slot_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d); /* the descriptor's position is shared with slot_fd's */
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (!keep || strcmp(e->d_name, keep)))
			remove_dir(slot_fd, e->d_name);
	closedir(d);
}

/* Pin every map and loaded program of skel in the slot, as key. */
static int keep_object(struct mt_kept *k, const struct mt_trace *skel,
		       const char *key)
{
	static const char temp[] = "pinning";
	struct bpf_map *map;
	struct bpf_program *prog;
	char name[64];
	int dir, err = 0;

	empty_slot(k->slot_fd, NULL);
	if (mkdirat(k->slot_fd, temp, 0700))
		return -errno;
	dir = openat(k->slot_fd, temp,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	bpf_object__for_each_map(map, skel->obj)
	{
		map_pin_name(map, name, sizeof(name));
		if (!err)
			err = put_pin(dir, name, bpf_map__fd(map));
	}
	bpf_object__for_each_program(prog, skel->obj)
	{
		if (err || !bpf_program__autoload(prog))
			continue;
		prog_pin_name(prog, name, sizeof(name));
		err = put_pin(dir, name, bpf_program__fd(prog));
	}
	if (!err && renameat(k->slot_fd, temp, k->slot_fd, key))
		err = -errno;
	if (err) {
		close(dir);
		remove_dir(k->slot_fd, temp);
		return err;
	}
	k->key_dir = dir; /* for the links on copies (renamed, the same) */
	return 0;
}

/* ---- reuse --------------------------------------------------------------- */

/* Empty a hash table: its keys, then each deleted. */
static int empty_table(int fd, const struct bpf_map *map)
{
	size_t key_size = bpf_map__key_size(map);
	unsigned char key[key_size];

	while (bpf_map_get_next_key(fd, NULL, key) == 0)
		if (bpf_map_delete_elem(fd, key))
			return -errno;
	return errno == ENOENT ? 0 : -errno;
}

/* Zero every element of an array (a per-CPU one: every CPU's). */
static int zero_array(int fd, const struct bpf_map *map, int ncpus)
{
	bool per_cpu = bpf_map__type(map) == BPF_MAP_TYPE_PERCPU_ARRAY;
	size_t value_size = bpf_map__value_size(map);
	size_t size =
	    per_cpu ? ((value_size + 7) & ~(size_t)7) * ncpus : value_size;
	void *zero = calloc(1, size);
	int err = 0;

	if (!zero)
		return -ENOMEM;
	for (__u32 i = 0; i < bpf_map__max_entries(map) && !err; i++)
		if (bpf_map_update_elem(fd, &i, zero, BPF_ANY))
			err = -errno;
	free(zero);
	return err;
}

/* Skip what a ring holds unread: its consumer position set to its
 * producer's (the consumer page is the one user space may write). */
static int skip_unread(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long *consumer, *producer;
	int err = 0;

	consumer = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (consumer == MAP_FAILED)
		return -errno;
	producer = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, page);
	if (producer == MAP_FAILED)
		err = -errno;
	else
		__atomic_store_n(consumer,
				 __atomic_load_n(producer, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	if (producer != MAP_FAILED)
		munmap(producer, page);
	munmap(consumer, page);
	return err;
}

/* The skeleton's view of global data (skel->bss, ...: libbpf's copy of the
 * initial values until a load maps the kernel's) made the kept map's, with
 * this session's values written into it; .rodata read-only (frozen, and
 * equal: it is in the key). */
static int map_global_data(struct bpf_map *map, int fd)
{
	size_t size;
	/* libbpf's own buffer, where skel->bss (...) points */
	void *image = (void *)bpf_map__initial_value(map, &size);
	long page = sysconf(_SC_PAGESIZE);
	size_t mapped = (size + page - 1) & ~(size_t)(page - 1);
	bool ro = is_rodata(map);
	void *saved = malloc(size);
	void *p;

	if (!image || !saved) {
		free(saved);
		return -ENOMEM;
	}
	memcpy(saved, image, size);
	p = mmap(image, mapped, ro ? PROT_READ : PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		free(saved);
		return -errno;
	}
	if (!ro)
		memcpy(image, saved, size);
	free(saved);
	return 0;
}

static int reset_map(struct bpf_map *map, int fd, int ncpus)
{
	switch (bpf_map__type(map)) {
	case BPF_MAP_TYPE_HASH:
	case BPF_MAP_TYPE_LRU_HASH:
	case BPF_MAP_TYPE_PERCPU_HASH:
		return empty_table(fd, map);
	case BPF_MAP_TYPE_ARRAY:
		if (bpf_map__is_internal(map))
			return map_global_data(map, fd);
		return zero_array(fd, map, ncpus);
	case BPF_MAP_TYPE_PERCPU_ARRAY:
		return zero_array(fd, map, ncpus);
	case BPF_MAP_TYPE_RINGBUF:
		return skip_unread(fd);
	case BPF_MAP_TYPE_TASK_STORAGE:
		return 0;
	default:
		return -EOPNOTSUPP; /* a kind of map this file does not know */
	}
}

/* The kept object key in the slot, for skel: every pin opened, or -errno
 * with nothing of skel changed. */
static int open_kept(struct mt_kept *k, struct mt_trace *skel, const char *key,
		     int *map_fds, size_t nmaps)
{
	struct bpf_map *map;
	struct bpf_program *prog;
	char name[64];
	size_t m = 0, p = 0;
	int dir = openat(k->slot_fd, key,
			 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int err = 0;

	if (dir < 0)
		return -errno;
	bpf_object__for_each_map(map, skel->obj)
	{
		map_pin_name(map, name, sizeof(name));
		if (m >= nmaps) {
			err = err ? err : -E2BIG;
			break;
		}
		map_fds[m] = err ? -1 : get_pin(dir, name);
		if (map_fds[m] < 0 && !err)
			err = map_fds[m];
		m++;
	}
	bpf_object__for_each_program(prog, skel->obj)
	{
		if (p >= MT_KEPT_MAX_PROGS) {
			err = err ? err : -E2BIG;
			break;
		}
		if (!err && bpf_program__autoload(prog)) {
			prog_pin_name(prog, name, sizeof(name));
			k->prog_fds[p] = get_pin(dir, name);
			if (k->prog_fds[p] < 0)
				err = k->prog_fds[p];
		}
		p++;
	}
	if (err)
		close(dir);
	else
		k->key_dir = dir;
	return err;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* Make skel the kept object's: 0; -ENOENT (or another -errno from a pin)
 * with skel unchanged: no such object kept; -EAGAIN: skel half changed,
 * to be opened again. */
static int reuse(struct tracer *t, struct mt_trace *skel, const char *key)
{
	struct mt_kept *k = &t->kept;
	enum { MAX_MAPS = 64 };
	int map_fds[MAX_MAPS];
	struct bpf_map *map;
	size_t m = 0;
	int err;

	for (size_t i = 0; i < MAX_MAPS; i++)
		map_fds[i] = -1; /* closed on failure: only what was opened */
	err = open_kept(k, skel, key, map_fds, MAX_MAPS);
	if (err) {
		close_fds(map_fds, MAX_MAPS);
		close_fds(k->prog_fds, MT_KEPT_MAX_PROGS);
		return err;
	}
	bpf_object__for_each_map(map, skel->obj)
	{
		if (!err && bpf_map__reuse_fd(map, map_fds[m]))
			err = -errno;
		if (!err)
			err = reset_map(map, bpf_map__fd(map), t->ncpus);
		m++;
	}
	close_fds(map_fds, m); /* the object holds its own (reuse_fd dups) */
	if (err) {
		if (t->opts->verbose)
			fprintf(stderr,
				"mt-trace: the BPF side kept in slot %d: %s; "
				"loading it anew\n",
				k->slot, strerror(-err));
		close_fds(k->prog_fds, MT_KEPT_MAX_PROGS);
		close_fds(&k->key_dir, 1);
		empty_slot(k->slot_fd, NULL);
		return -EAGAIN;
	}
	return 0;
}

bool mt_tracer_kept_expected(const struct tracer *t)
{
	return t->kept.expected;
}

int mt_tracer_kept_load(struct tracer *t, struct mt_trace *skel)
{
	struct mt_kept *k = &t->kept;
	char key[40];
	int err;

	k->reused = false;
	if (k->slot_fd < 0 || t->probe_mode == MT_PROBES_CLASSIC)
		return mt_trace__load(skel);
	object_key(skel, key, sizeof(key));
	err = reuse(t, skel, key);
	if (err == 0) {
		k->reused = true;
		empty_slot(k->slot_fd,
			   key); /* another key's, a killed pinning */
		if (t->opts->verbose)
			fprintf(stderr,
				"mt-trace: BPF programs and maps kept by an "
				"earlier session (slot %d)\n",
				k->slot);
		return 0;
	}
	if (err == -EAGAIN)
		return err;
	err = mt_trace__load(skel);
	if (err)
		return err;
	err = keep_object(k, skel, key);
	if (err && t->opts->verbose)
		fprintf(stderr,
			"mt-trace: keeping the BPF programs in slot %d: %s\n",
			k->slot, strerror(-err));
	else if (t->opts->verbose)
		fprintf(stderr,
			"mt-trace: BPF programs and maps kept in slot %d for "
			"later sessions\n",
			k->slot);
	return 0;
}

void mt_tracer_kept_unload(struct tracer *t)
{
	if (t->kept.reused)
		close_fds(t->kept.prog_fds, MT_KEPT_MAX_PROGS);
	t->kept.reused = false;
	if (t->kept.key_dir >= 0)
		close_fds(&t->kept.key_dir, 1);
	t->kept.keeping_links = false;
}

/* ---- programs and links -------------------------------------------------- */

int mt_tracer_prog_fd(const struct tracer *t, const struct bpf_program *prog)
{
	struct bpf_program *p;
	size_t i = 0;

	if (!t->kept.reused)
		return bpf_program__fd(prog);
	bpf_object__for_each_program(p, t->skel->obj)
	{
		if (p == prog)
			return i < MT_KEPT_MAX_PROGS ? t->kept.prog_fds[i]
						     : -EINVAL;
		i++;
	}
	return -ENOENT;
}

static int keep_link_fd(struct mt_kept *k, int fd)
{
	if (fd < 0)
		return -errno;
	if (k->nlinks == MT_KEPT_MAX_LINKS) {
		close(fd);
		return -ENOSPC;
	}
	k->link_fds[k->nlinks++] = fd;
	return 0;
}

/* A classic tracepoint's perf event, as libbpf's attach opens it. */
static int open_tracepoint(const char *group, const char *name)
{
	struct perf_event_attr attr = {.size = sizeof(attr),
				       .type = PERF_TYPE_TRACEPOINT};
	long id = mt_tracer_tracepoint_id(group, name);
	int fd;

	if (id < 0)
		return -ENOENT;
	attr.config = id;
	fd = syscall(__NR_perf_event_open, &attr, -1, 0, -1,
		     PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* ---- tracepoints kept attached ------------------------------------------
 *
 * Attaching a raw tracepoint nobody else uses patches kernel text (its
 * static key and static call, each a few IPIs: with the detach, about a
 * third of mt-trace's samples in `mt-trace -- true`), and detaching it
 * again too.  So the links of a kept object's tracepoints stay attached
 * between its sessions, pinned in its directory as t-<program> like the
 * copies' links: taken (unpinned) by the session that reuses the object,
 * so that should mt-trace die the kernel closes them with it; pinned again
 * by its detacher.  Meanwhile the BPF side's session_live is 0 and the
 * programs return at once (a process a session left running is not
 * followed).
 *  - The process-life ones (fork, exec, exit, signal_generate) run only on
 *    those events, rare beside system calls: kept until the next session.
 *  - sys_exit's (every system call on the machine: 180 -> 330 ns a
 *    getppid() here, idle) and rss_stat's (every RSS change) linger: the
 *    detacher removes their pins LINGER_MS after the session unless a
 *    session took them meanwhile (a test suite's or a benchmark's next
 *    session does: 2-5 ms of its start and end).  --wait-detach closes
 *    them at once.
 */

static bool lingers(const struct tracer *t, const struct bpf_program *prog)
{
	const struct mt_trace *skel = t->skel;

	return prog == skel->progs.on_sys_exit ||
	       prog == skel->progs.on_rss_owner ||
	       prog == skel->progs.on_rss_size;
}

static bool keeps_attached(const struct tracer *t,
			   const struct bpf_program *prog)
{
	const struct mt_trace *skel = t->skel;

	return prog == skel->progs.on_fork || prog == skel->progs.on_exec ||
	       prog == skel->progs.on_exit ||
	       prog == skel->progs.on_signal_generate || lingers(t, prog);
}

static void tracepoint_pin_name(const struct bpf_program *prog, char *name,
				size_t size)
{
	pin_name('t', bpf_program__name(prog), name, size);
}

/* prog's kept link, unpinned (the session's until its end), or -1 */
static int take_tracepoint(struct tracer *t, const struct bpf_program *prog)
{
	char name[64];
	int fd;

	if (t->kept.key_dir < 0 || !keeps_attached(t, prog))
		return -1;
	tracepoint_pin_name(prog, name, sizeof(name));
	fd = get_pin(t->kept.key_dir, name);
	if (fd < 0)
		return -1;
	unlinkat(t->kept.key_dir, name, 0);
	t->kept.life_links_taken++;
	return fd;
}

/* A reused object's process-life link fd, noted to be pinned at the end */
static int note_life_link(struct tracer *t, const struct bpf_program *prog,
			  int fd)
{
	struct mt_kept *k = &t->kept;

	if (fd >= 0 && keeps_attached(t, prog) &&
	    k->nlife_links < MT_KEPT_MAX_LIFE_LINKS) {
		k->life_links[k->nlife_links].prog = prog;
		k->life_links[k->nlife_links++].fd = fd;
	}
	return fd;
}

/* The descriptor of prog's link in this session, or -1: one this file
 * made, or (a fresh object's tracepoints) the skeleton's.  Not a perf
 * event's the skeleton made: libbpf turns the event off at its detach. */
static int life_link_fd(const struct tracer *t, const struct bpf_program *prog)
{
	const struct bpf_object_skeleton *s = t->skel->skeleton;

	for (size_t i = 0; i < t->kept.nlife_links; i++)
		if (t->kept.life_links[i].prog == prog)
			return t->kept.life_links[i].fd;
	if (t->kept.reused || prog == t->skel->progs.on_rss_size)
		return -1;
	for (int i = 0; i < s->prog_cnt; i++)
		if (*s->progs[i].prog == prog && *s->progs[i].link)
			return bpf_link__fd(*s->progs[i].link);
	return -1;
}

int mt_tracer_kept_take(struct tracer *t, const struct bpf_program *prog)
{
	int fd = take_tracepoint(t, prog);

	if (fd < 0)
		return -1;
	return keep_link_fd(&t->kept, note_life_link(t, prog, fd)) ? -1 : 0;
}

/* Pin a lingering link's: its pin's inode noted, to be removed later only
 * if it is still that pin (no session took it meanwhile). */
static void pin_lingering(struct mt_kept *k, const char *name, int fd)
{
	struct stat st;

	/* (full: not pinned, closed with the rest, never left for good) */
	if (k->nlingering == MT_KEPT_MAX_LINGERING ||
	    put_pin(k->key_dir, name, fd) ||
	    fstatat(k->key_dir, name, &st, AT_SYMLINK_NOFOLLOW))
		return;
	snprintf(k->lingering[k->nlingering].name, MT_KEPT_PIN_NAME, "%s",
		 name);
	k->lingering[k->nlingering++].ino = st.st_ino;
}

void mt_tracer_kept_tracepoints_release(struct tracer *t, bool linger)
{
	struct bpf_program *prog;

	/* live: the programs would act between sessions, for nobody */
	if (t->kept.key_dir < 0 || !t->skel ||
	    __atomic_load_n(&t->skel->bss->session_live, __ATOMIC_ACQUIRE))
		return;
	bpf_object__for_each_program(prog, t->skel->obj)
	{
		char name[64];
		int fd = keeps_attached(t, prog) ? life_link_fd(t, prog) : -1;

		if (fd < 0 || (lingers(t, prog) && !linger))
			continue;
		tracepoint_pin_name(prog, name, sizeof(name));
		if (!lingers(t, prog)) {
			put_pin(t->kept.key_dir, name, fd);
			continue;
		}
		pin_lingering(&t->kept, name, fd);
		if (prog == t->skel->progs.on_rss_size)
			t->kept.rss_event_kept = true;
	}
}

void mt_tracer_kept_linger(struct tracer *t)
{
	struct mt_kept *k = &t->kept;
	struct timespec wait = {LINGER_MS / 1000,
				(LINGER_MS % 1000) * 1000000L};
	struct stat st;
	int slot;

	if (!k->nlingering || k->key_dir < 0)
		return;
	/* bench/quiesce waits for detachers, not for this */
	prctl(PR_SET_NAME, "mt-trace-linger");
	while (nanosleep(&wait, &wait) && errno == EINTR)
		;
	/* the slot's lock (a new open of it: the session's is closed): a
	 * session that holds it took the pins or will */
	slot = openat(k->key_dir, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (slot < 0)
		return; /* the object was emptied out of the slot */
	if (flock(slot, LOCK_EX | LOCK_NB) == 0)
		for (size_t i = 0; i < k->nlingering; i++)
			if (fstatat(k->key_dir, k->lingering[i].name, &st,
				    AT_SYMLINK_NOFOLLOW) == 0 &&
			    st.st_ino == k->lingering[i].ino)
				unlinkat(k->key_dir, k->lingering[i].name, 0);
	close(slot);
}

int mt_tracer_kept_attach_perf(struct tracer *t, struct bpf_program *prog,
			       int perf_fd)
{
	int fd = note_life_link(t, prog,
				bpf_link_create(mt_tracer_prog_fd(t, prog),
						perf_fd, BPF_PERF_EVENT, NULL));

	/* the link holds the event too; kmem:rss_stat's is held apart to be
	 * closed last (tracer_detach.c, background_detach()) */
	if (prog == t->skel->progs.on_rss_size && t->rss_perf_fd < 0)
		t->rss_perf_fd = perf_fd;
	else
		close(perf_fd);
	return keep_link_fd(&t->kept, fd);
}

static int attach_one(struct tracer *t, struct bpf_program *prog)
{
	const char *sec = bpf_program__section_name(prog);
	char group[64];
	const char *slash;
	int fd;

	if (mt_tracer_kept_take(t, prog) == 0) /* the last session's */
		return 0;
	if (strncmp(sec, "raw_tp/", 7) == 0) {
		fd = bpf_raw_tracepoint_open(sec + 7,
					     mt_tracer_prog_fd(t, prog));
		return keep_link_fd(&t->kept, note_life_link(t, prog, fd));
	}
	if (strncmp(sec, "tracepoint/", 11) != 0)
		return 0; /* not attached by the skeleton either */
	slash = strchr(sec + 11, '/');
	if (!slash || (size_t)(slash - sec - 11) >= sizeof(group))
		return -EINVAL;
	snprintf(group, sizeof(group), "%.*s", (int)(slash - sec - 11),
		 sec + 11);
	fd = open_tracepoint(group, slash + 1);
	if (fd < 0)
		return fd;
	return mt_tracer_kept_attach_perf(t, prog, fd);
}

int mt_tracer_kept_attach(struct tracer *t)
{
	struct bpf_program *prog;
	int err = 0;

	bpf_object__for_each_program(prog, t->skel->obj)
	{
		if (err || !bpf_program__autoload(prog) ||
		    !bpf_program__autoattach(prog))
			continue;
		err = attach_one(t, prog);
	}
	return err;
}

/* ---- links on the copies ------------------------------------------------- */

/*
 * A link on a copy is pinned in the object's directory as l-<the copy's
 * inode>-<a hash of its probes>, between sessions only: a session that
 * finds one takes it and removes the pin, and its detacher pins it again
 * unless a process still maps the copy (one the tree left running: it
 * would trap on every call, recorded by nobody).  So should mt-trace die,
 * the kernel closes the links it holds as it always did (watchdog.c
 * counts on no probe outliving mt-trace).  Links serve only a session
 * whose copies are in the cache slot of its own slot's number (confine.c
 * tries that one first): they run the object's programs, which trace the
 * slot's session.  A pin whose copy is gone (replaced, its slot emptied)
 * is removed at the next session's start.
 */

/* A link's pin: the copy's inode and a hash of its probes. */
static void link_pin_name(const struct mt_link_spec *spec, ino_t ino,
			  char *name, size_t size)
{
	uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};

	hash_u64(h, (uint64_t)spec->attach_type);
	hash_u64(h, spec->retprobe);
	hash_u64(h, spec->n);
	hash_bytes(h, spec->offsets, spec->n * sizeof(*spec->offsets));
	hash_bytes(h, spec->cookies, spec->n * sizeof(*spec->cookies));
	snprintf(name, size, "l-%llx-%016llx%016llx", (unsigned long long)ino,
		 (unsigned long long)h[0], (unsigned long long)h[1]);
}

/* The name of spec's pin, if its file is one of the session's copies. */
static bool copy_link_name(const struct mt_kept *k,
			   const struct mt_link_spec *spec, char *name,
			   ino_t *ino)
{
	struct stat st;

	if (!k->keeping_links || spec->pid != 0 || stat(spec->path, &st) ||
	    !S_ISREG(st.st_mode) || st.st_dev != k->copies_dev)
		return false;
	link_pin_name(spec, st.st_ino, name, MT_KEPT_PIN_NAME);
	*ino = st.st_ino;
	return true;
}

/* Note link fd (the session's until its end) to be pinned as name. */
static void note_link(struct mt_kept *k, const char *name, ino_t ino, int fd)
{
	struct mt_kept_link *l;

	if (k->ncopy_links == MT_KEPT_MAX_COPY_LINKS)
		return;
	l = &k->copy_links[k->ncopy_links++];
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->ino = ino;
	l->fd = fd;
}

/* A kept link is unpinned while a session uses it: should mt-trace die,
 * the kernel closes its descriptors and the links go, as they always
 * went (watchdog.c counts on it: no probe outlives mt-trace). */
static int find_link(void *ctx, const struct mt_link_spec *spec)
{
	struct mt_kept *k = ctx;
	char name[MT_KEPT_PIN_NAME];
	ino_t ino;
	int fd;

	if (!copy_link_name(k, spec, name, &ino))
		return -1;
	fd = get_pin(k->key_dir, name);
	if (fd < 0)
		return -1;
	unlinkat(k->key_dir, name, 0);
	note_link(k, name, ino, fd);
	return fd;
}

static void keep_link(void *ctx, const struct mt_link_spec *spec, int fd)
{
	struct mt_kept *k = ctx;
	char name[MT_KEPT_PIN_NAME];
	ino_t ino;

	if (copy_link_name(k, spec, name, &ino))
		note_link(k, name, ino, fd);
}

/* The inode of link pin name (l-<inode>-...), or 0. */
static ino_t pin_inode(const char *name)
{
	unsigned long long ino;

	return sscanf(name, "l-%llx-", &ino) == 1 ? (ino_t)ino : 0;
}

/* Is inode among inodes[0..n)? */
static bool among(ino_t inode, const ino_t *inodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (inodes[i] == inode)
			return true;
	return false;
}

/* The regular files of directory dir (the copies in a cache slot): their
 * inodes, those that anyone has open or mapped (a write lease refused,
 * as confine.c tests) left out when busy_out. */
static size_t copy_inodes(int dir, ino_t *inodes, size_t max, bool busy_out)
{
	DIR *d = read_dir(dir);
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 0;
	while (n < max && (e = readdir(d))) {
		int fd = openat(dir, e->d_name,
				O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;

		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    (!busy_out || fcntl(fd, F_SETLEASE, F_WRLCK) == 0))
			inodes[n++] = st.st_ino;
		if (busy_out)
			fcntl(fd, F_SETLEASE, F_UNLCK);
		close(fd);
	}
	closedir(d);
	return n;
}

/* Remove the link pins of key_dir whose inode is not among inodes (a
 * copy since replaced): the kernel frees those links, and the copies
 * they hold, off this path (bpf_link_put defers it to a worker). */
static size_t drop_links_but(int key_dir, const ino_t *inodes, size_t n)
{
	DIR *d = read_dir(key_dir);
	struct dirent *e;
	size_t dropped = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		ino_t ino = pin_inode(e->d_name);

		if (ino && !among(ino, inodes, n) &&
		    unlinkat(key_dir, e->d_name, 0) == 0)
			dropped++;
	}
	closedir(d);
	return dropped;
}

enum { MAX_COPIES = 64 };

void mt_tracer_kept_links_use(struct tracer *t)
{
	struct mt_kept *k = &t->kept;
	const struct mt_confine *c = &t->confine;
	const struct mt_link_keeper keeper = {
	    .ctx = k, .find = find_link, .keep = keep_link};
	ino_t inodes[MAX_COPIES];
	struct stat st;
	size_t n, dropped;

	k->ncopy_links = 0; /* a new attach (fall_back): the old one's gone */
	/* the copies' slot must be the object's: its links run its
	 * programs, which trace only the session holding its slot */
	if (k->key_dir < 0 || !c->bound || c->slot < 0 || c->slot != k->slot ||
	    fstat(c->slot_fd, &st))
		return;
	if (!k->keeping_links) {
		n = copy_inodes(c->slot_fd, inodes, MAX_COPIES, false);
		dropped = drop_links_but(k->key_dir, inodes, n);
		if (dropped && t->opts->verbose)
			fprintf(stderr,
				"mt-trace: %zu kept links on copies since "
				"replaced dropped\n",
				dropped);
	}
	k->keeping_links = true;
	k->copies_dev = st.st_dev;
	mt_attach_set_keeper(&t->code.attach, &keeper);
}

bool mt_tracer_kept_links_expected(const struct tracer *t)
{
	return t->kept.links_expected;
}

void mt_tracer_kept_links_release(struct tracer *t)
{
	struct mt_kept *k = &t->kept;
	ino_t idle[MAX_COPIES];
	size_t n;

	if (!k->keeping_links || t->confine.slot_fd < 0)
		return;
	/* a copy a process still maps (one the tree left running) keeps no
	 * link: it would trap on every call, recorded by nobody */
	n = copy_inodes(t->confine.slot_fd, idle, MAX_COPIES, true);
	for (size_t i = 0; i < k->ncopy_links; i++) {
		struct mt_kept_link *l = &k->copy_links[i];

		if (among(l->ino, idle, n))
			put_pin(k->key_dir, l->name, l->fd);
	}
	k->ncopy_links = 0;
}

void mt_tracer_kept_release_slot(struct tracer *t)
{
	if (t->kept.slot_fd >= 0)
		close(t->kept.slot_fd);
	t->kept.slot_fd = -1;
}

void mt_tracer_kept_end(struct tracer *t)
{
	struct mt_kept *k = &t->kept;

	close_fds(k->link_fds, k->nlinks);
	k->nlinks = 0;
	mt_tracer_kept_unload(t);
	if (k->slot_fd >= 0)
		close(k->slot_fd); /* a detacher's copy still holds the lock */
	k->slot_fd = -1;
}
