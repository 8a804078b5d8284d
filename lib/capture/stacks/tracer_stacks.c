// SPDX-License-Identifier: MIT
/*
 * tracer_stacks.c - mt-trace's half of the call stacks (bpf/mt_stack.bpf.h
 * is the other): unwind rows for each code file the tree maps, and the
 * stack records of the raw stream.
 *
 * Files: every code file mt-trace inspects (tracer_code.c) gets an id, a
 * CODE_FILE record (path, build-id) and, when it has .eh_frame, its rows
 * in the BPF side's row array, written through a shared mapping of it;
 * the file table entry published last makes them visible.  At an exec the
 * dynamic loader, which the kernel mapped itself, is added the same way.
 *
 * Stacks: the BPF side sends each distinct stack once (a STACK ring
 * record keyed by a hash of its frames) and events carry that key.  Here
 * keys become small ids, and a stack's STACK record is written into the
 * stream just before the first STACK_REF naming it.  A key whose STACK
 * record has not been drained yet (another CPU sent it a moment later) is
 * read from the BPF side's stack table instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "mt_cfi.h"
#include "mt_elf.h"
#include "mt_grow.h"
#include "mt_stack.h"
#include "mt_xalloc.h"
#include "mt_python.h"
#include "mt_trace.skel.h"
#include "tracer_fast.h"
#include "tracer_int.h"
#include "tracer_python.h"

/* Rows the BPF side can hold (16 bytes each): libc has 28 k, python3.11
 * 65 k, a large C++ program a few hundred k. */
#define STACK_ROWS_MAX (1u << 20)
/* Page index entries (8 bytes each) over all files: 1 GiB of code. */
#define STACK_PAGES_MAX (1u << 18)

struct stack_slot {
	uint64_t key; /* 0: empty */
	uint32_t id;  /* 0: not written to the stream yet */
	uint16_t flags;
	uint16_t nframes;
	uint64_t *frames; /* until written */
};

/* A code file's device and inode, and the inode's generation when the
 * file system says: a new file can get a deleted one's inode number. */
struct file_identity {
	struct mt_code_key key;
	uint32_t generation;
	bool generation_known;
};

/* A code file known to the unwinder: its CODE_FILE record, written just
 * before the first record that names the file (its first frame or
 * mapping), so it carries that use's pid and time. */
struct code_file {
	bool written;
	uint8_t build_id_len;
	uint8_t build_id[64];
	char *path;
};

struct mt_tracer_stacks {
	/* the BPF side's rows: how many are written, of how many */
	size_t rows_used, rows_cap;
	bool rows_full_said;
	/* and their page indexes (struct mt_stack_file; 8 bytes an entry: a
	 * BPF array's element size) */
	size_t pages_used, pages_cap;
	/* code files by identity */
	struct file_identity *file_ids;
	struct code_file *files; /* by id - 1, as file_ids */
	size_t nfiles, cap_files, cap_file_info;
	/* stacks by key: open addressing, power-of-two size */
	struct stack_slot *slots;
	size_t nslots, used;
	uint32_t next_id;
	uint64_t unresolved; /* STACK_REFs whose stack could not be found */
	/* CODE_MAPs of files not inspected yet (their process waits) */
	struct mt_event *maps_pending;
	size_t nmaps_pending, cap_maps_pending;
	/* the Python frames of the BPF side's stacks (tracer_python.c) */
	struct mt_python *python;
	uint32_t code_ids; /* without the recorders' shared count */
};

/* ---- set-up ----------------------------------------------------------- */

/* MT_PYTHON_FRAMES=0: no Python frames (as the recorder) */
static bool python_wanted(void)
{
	const char *env = getenv("MT_PYTHON_FRAMES");

	return !env || strcmp(env, "0") != 0;
}

void mt_tracer_stacks_configure(const struct tracer *t, struct mt_trace *skel)
{
	bool on = t->opts->stacks;

	skel->rodata->stacks_enabled = on;
	skel->rodata->python_frames = on && python_wanted();
	skel->rodata->stack_depth = t->opts->stack_depth;
	bpf_map__set_max_entries(skel->maps.cfi_rows, on ? STACK_ROWS_MAX : 1);
	bpf_map__set_max_entries(skel->maps.cfi_pages,
				 on ? STACK_PAGES_MAX : 1);
	if (!on) {
		bpf_map__set_max_entries(skel->maps.stacks, 1);
		bpf_map__set_max_entries(skel->maps.stack_files, 1);
	}
	/* the Python walk's tables only when it runs: py_stacks is a hash
	 * table whose buckets the kernel builds when it is made */
	if (!skel->rodata->python_frames) {
		bpf_map__set_max_entries(skel->maps.py_stacks, 1);
		bpf_map__set_max_entries(skel->maps.py_codes_sent, 1);
	}
}

static void stacks_reset(struct mt_tracer_stacks *s)
{
	s->rows_used = s->rows_cap = 0;
	s->pages_used = s->pages_cap = 0;
	for (size_t i = 0; i < s->nfiles; i++)
		free(s->files[i].path);
	s->nfiles = 0;
}

/*
 * Write n elements of size bytes from src at element first of an mmapable
 * BPF array, through a mapping of just the pages they fall in: the kernel
 * maps such an array's pages all at once, so a mapping of the whole rows
 * array would be 16 MiB of mt-trace's RSS.
 */
static int write_array(const struct bpf_map *map, size_t first, const void *src,
		       size_t n, size_t size, const char *what)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t from = first * size, start = from - from % page;
	size_t len = from + n * size - start;
	void *p;

	if (n == 0)
		return 0;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
		 bpf_map__fd(map), (off_t)start);
	if (p == MAP_FAILED) {
		mt_error("mapping the %s: %s", what, strerror(errno));
		return -1;
	}
	memcpy((char *)p + (from - start), src, n * size);
	munmap(p, len);
	return 0;
}

/* After each load: the new object's row and page arrays are empty. */
void mt_tracer_stacks_loaded(struct tracer *t)
{
	struct mt_tracer_stacks *s = t->stacks;

	if (!t->opts->stacks)
		return;
	if (!s)
		s = t->stacks = mt_xcalloc(1, sizeof(*s));
	stacks_reset(s);
	if (t->fast) /* the files are inspected again, rows placed anew */
		mt_fast_stacks_reset(t->fast);
	s->rows_cap = STACK_ROWS_MAX;
	s->pages_cap = STACK_PAGES_MAX;
	for (__u32 i = 0; i < MT_PY_LAYOUTS; i++)
		if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.py_layouts),
					&i, &mt_py_layouts[i], BPF_ANY))
			mt_error("Python layouts: %s", strerror(errno));
}

/* ---- code files ---------------------------------------------------------- */

/* The id of the newest file with key's device and inode (0: none); with
 * id (an open file's identity), 0 also when that file has another known
 * generation: it was deleted, and id is a new file on its inode number. */
static uint32_t known_file(const struct mt_tracer_stacks *s,
			   const struct mt_code_key *key,
			   const struct file_identity *id)
{
	for (size_t i = s->nfiles; i-- > 0;) {
		const struct file_identity *f = &s->file_ids[i];

		if (f->key.dev != key->dev || f->key.ino != key->ino)
			continue;
		if (id && id->generation_known && f->generation_known &&
		    id->generation != f->generation)
			return 0;
		return i + 1;
	}
	return 0;
}

/* The identity of the open file fd, named by key. */
static struct file_identity file_identity(int fd, const struct mt_code_key *key)
{
	struct file_identity id = {.key = *key};
	long generation = 0; /* some file systems write an int */

	if (ioctl(fd, FS_IOC_GETVERSION, &generation) == 0) {
		id.generation = (uint32_t)generation;
		id.generation_known = true;
	}
	return id;
}

/*
 * The page index of a file's published rows (struct mt_stack_file): for
 * each 4 KiB page from its first row's to its last row's, the row in
 * effect at the page's start.  Without room, the file has none and the
 * BPF side searches all its rows.
 */
static void publish_pages(struct tracer *t, const struct mt_cfi_table *table,
			  struct mt_stack_file *file)
{
	struct mt_tracer_stacks *s = t->stacks;
	uint32_t base, npages, row = 0;
	uint64_t *pages;

	if (table->nrows == 0)
		return;
	base = table->rows[0].addr >> MT_CFI_PAGE_SHIFT;
	npages = (table->rows[table->nrows - 1].addr >> MT_CFI_PAGE_SHIFT) -
		 base + 1;
	if (npages > s->pages_cap - s->pages_used)
		return;
	pages = mt_xreallocarray(NULL, npages, sizeof(*pages));
	for (uint32_t i = 0; i < npages; i++) {
		uint64_t start = (uint64_t)(base + i) << MT_CFI_PAGE_SHIFT;

		while (row + 1 < table->nrows &&
		       table->rows[row + 1].addr <= start)
			row++;
		pages[i] = row;
	}
	if (write_array(t->skel->maps.cfi_pages, s->pages_used, pages, npages,
			sizeof(*pages), "unwind rows' page index")) {
		free(pages);
		return;
	}
	free(pages);
	file->first_page = s->pages_used;
	file->page_base = base;
	file->npages = npages;
	s->pages_used += npages;
}

/* Copy the file's rows into the BPF side's array; false when full. */
static bool publish_rows(struct tracer *t, const struct mt_cfi_table *table,
			 struct mt_stack_file *file, const char *path)
{
	struct mt_tracer_stacks *s = t->stacks;

	if (table->nrows > s->rows_cap - s->rows_used) {
		if (!s->rows_full_said)
			mt_warning("%s: no room for its "
				   "unwind rows (%zu of %zu used): stacks stop "
				   "in its code",
				   path, s->rows_used, s->rows_cap);
		s->rows_full_said = true;
		return false;
	}
	if (write_array(t->skel->maps.cfi_rows, s->rows_used, table->rows,
			table->nrows, sizeof(*table->rows), "unwind rows"))
		return false;
	file->first_row = s->rows_used;
	file->nrows = table->nrows;
	s->rows_used += table->nrows;
	publish_pages(t, table, file);
	return true;
}

/* Remember what the CODE_FILE record of file id will say. */
static void describe_file(struct mt_tracer_stacks *s, uint32_t id,
			  const char *via, const char *path)
{
	struct code_file *f;
	int len;

	s->files = mt_grow(s->files, &s->cap_file_info, id, sizeof(*s->files));
	f = &s->files[id - 1];
	memset(f, 0, sizeof(*f));
	len = mt_elf_build_id(via, f->build_id, sizeof(f->build_id));
	f->build_id_len = len > 0 ? len : 0;
	f->path = mt_xstrdup(path);
}

/* The CODE_FILE record of file id (build-id bytes, then the path as
 * payload), if not written yet, stamped as use: the record about to name
 * the file. */
static int write_code_file(struct tracer *t, uint32_t id,
			   const struct mt_event *use)
{
	struct mt_tracer_stacks *s = t->stacks;
	struct mt_event recs[1 + (64 + PATH_MAX + MT_DATA_PER_RECORD - 1) /
				     MT_DATA_PER_RECORD];
	struct code_file *f;
	size_t path_len, len, n;

	if (id == 0 || id > s->nfiles || s->files[id - 1].written)
		return 0;
	f = &s->files[id - 1];
	f->written = true;
	path_len = strnlen(f->path, PATH_MAX);
	len = f->build_id_len + path_len;
	n = 1 + (len + MT_DATA_PER_RECORD - 1) / MT_DATA_PER_RECORD;
	memset(recs, 0, n * sizeof(recs[0]));
	recs[0].timestamp = use->timestamp;
	recs[0].pid = use->pid;
	recs[0].tid = use->tid;
	recs[0].kind = MT_EV_CODE_FILE;
	recs[0].addr = id;
	recs[0].old_addr = s->file_ids[id - 1].key.dev;
	recs[0].old_size = s->file_ids[id - 1].key.ino;
	recs[0].flags = f->build_id_len;
	recs[0].aux = len;
	memcpy(&recs[1], f->build_id, f->build_id_len);
	memcpy((char *)&recs[1] + f->build_id_len, f->path, path_len);
	return mt_tracer_append(t, recs, n);
}

int mt_tracer_stack_file(struct tracer *t, int fd, const char *path,
			 const struct mt_code_key *key)
{
	struct mt_tracer_stacks *s = t->stacks;
	struct mt_stack_file file = {0};
	struct file_identity id;
	struct mt_cfi_table table;
	char via[64], err[256];
	bool built_in_parallel;
	int rc;

	if (!s)
		return 0;
	id = file_identity(fd, key);
	if (known_file(s, key, &id) || s->nfiles >= MT_FRAME_FILE_MAX)
		return 0;
	s->file_ids =
	    mt_grow(s->file_ids, &s->cap_files, s->nfiles + 1, sizeof(id));
	s->file_ids[s->nfiles++] = id;
	file.id = s->nfiles;
	file.generation = id.generation;
	file.generation_known = id.generation_known;
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	describe_file(s, file.id, via, path);
	built_in_parallel =
	    mt_tracer_parallel_cfi(t, s->files[file.id - 1].build_id,
				   s->files[file.id - 1].build_id_len, &table);
	rc = built_in_parallel ? 0 : mt_cfi_build(fd, &table, err, sizeof(err));
	if (rc == 0) {
		file.vaddr_minus_offset = table.vaddr_minus_offset;
		publish_rows(t, &table, &file, path);
		if (t->opts->verbose > 1)
			mt_detail("%s: %zu unwind rows (%zu it "
				  "cannot follow)%s",
				  path, table.nrows, table.unsupported,
				  built_in_parallel
				      ? ", built beside the BPF load"
				      : "");
	} else if (t->opts->verbose) {
		mt_verbose("%s: no unwind rows: %s", path, err);
	}
	if (t->skel->rodata->python_frames)
		mt_python_file(&s->python, via, path, &file, !t->fast,
			       bpf_map__fd(t->skel->maps.py_files));
	if (t->fast) /* --fast: the preloaded recorders walk it too */
		mt_fast_stack_file(t->fast, key, &file, table.rows);
	if (rc == 0)
		mt_cfi_free(&table);
	/* last: from now on the BPF side walks through this file */
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.stack_files), key,
				&file, BPF_ANY))
		mt_error("%s: unwinder's file table: %s", path,
			 strerror(errno));
	/* and forgets the walks it remembered: one may have stopped in the
	 * file's code, which it could not follow until now */
	t->skel->bss->files_published++;
	return 0;
}

/*
 * At an exec (the process is stopped): the code the kernel mapped besides
 * the program, that is the dynamic loader, which no mmap call reports.
 */
void mt_tracer_stacks_at_exec(struct tracer *t, pid_t pid)
{
	char maps[64], line[PATH_MAX + 128];
	FILE *f;

	if (!t->stacks)
		return;
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char perms[8], proc[PATH_MAX + 64];
		uint64_t start, end;
		struct mt_code_key key;
		struct stat st;
		int name_at = 0, fd;
		char *path;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %*s %n",
			   &start, &end, perms, &name_at) < 3 ||
		    perms[2] != 'x' || !name_at || line[name_at] != '/')
			continue;
		path = line + name_at;
		path[strcspn(path, "\n")] = '\0';
		snprintf(proc, sizeof(proc),
			 "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
			 start, end);
		fd = open(proc, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0) {
			key.dev = ((uint64_t)major(st.st_dev) << 20) |
				  minor(st.st_dev);
			key.ino = st.st_ino;
			mt_tracer_stack_file(t, fd, path, &key);
		}
		close(fd);
	}
	fclose(f);
}

/* ---- stacks -------------------------------------------------------------- */

static struct stack_slot *find_slot(struct mt_tracer_stacks *s, uint64_t key)
{
	size_t mask = s->nslots - 1, i = (key * 0x9e3779b97f4a7c15ull) & mask;

	while (s->slots[i].key && s->slots[i].key != key)
		i = (i + 1) & mask;
	return &s->slots[i];
}

static void grow_slots(struct mt_tracer_stacks *s)
{
	struct stack_slot *old = s->slots;
	size_t nold = s->nslots;

	s->nslots = nold ? nold * 2 : 4096;
	s->slots = mt_xcalloc(s->nslots, sizeof(*s->slots));
	for (size_t i = 0; i < nold; i++)
		if (old[i].key)
			*find_slot(s, old[i].key) = old[i];
	free(old);
}

static struct stack_slot *slot_for(struct mt_tracer_stacks *s, uint64_t key)
{
	struct stack_slot *slot;

	if ((s->used + 1) * 2 > s->nslots)
		grow_slots(s);
	slot = find_slot(s, key);
	if (!slot->key) {
		slot->key = key;
		s->used++;
	}
	return slot;
}

static void keep_frames(struct stack_slot *slot, const struct mt_event *ev,
			const __u64 *frames, size_t nframes)
{
	if (nframes > MT_STACK_DEPTH_MAX)
		nframes = MT_STACK_DEPTH_MAX;
	slot->frames = mt_xmalloc(nframes * sizeof(*frames) + 1);
	memcpy(slot->frames, frames, nframes * sizeof(*frames));
	slot->nframes = nframes;
	slot->flags = ev->flags;
}

/* The next CPython code id of the stream: the recorders' count when they
 * keep one. */
static uint32_t next_code_id(void *ctx)
{
	struct tracer *t = ctx;
	uint32_t id = mt_fast_next_code_id(t->fast);

	return id ? id : ++t->stacks->code_ids;
}

/* A STACK record from the ring (size bytes): kept until first used. */
void mt_tracer_stack_seen(struct tracer *t, const void *data, size_t size)
{
	const struct mt_stack_record *rec = data;
	struct stack_slot *slot;
	size_t nframes = (size - sizeof(rec->ev)) / sizeof(rec->frames[0]);

	if (!t->stacks || size < sizeof(rec->ev) || !rec->ev.addr)
		return;
	if (rec->ev.flags & MT_STACK_RING_PYCODE) {
		mt_python_code_seen(t->stacks->python, data, size, next_code_id,
				    t);
		return;
	}
	if (rec->ev.flags & MT_STACK_RING_PYTHON) {
		mt_python_seen(t->stacks->python, data, size, next_code_id, t);
		return;
	}
	if (rec->ev.size < nframes)
		nframes = rec->ev.size;
	slot = slot_for(t->stacks, rec->ev.addr);
	if (slot->id || slot->frames)
		return; /* sent again (the table was full): one is enough */
	keep_frames(slot, &rec->ev, rec->frames, nframes);
}

/* The frames of a key no STACK record brought yet: the BPF side's table. */
static bool fetch_frames(struct tracer *t, struct stack_slot *slot)
{
	struct mt_stack_record rec;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.stacks), &slot->key,
				&rec))
		return false;
	keep_frames(slot, &rec.ev, rec.frames, rec.ev.size);
	return true;
}

static int write_stack(struct tracer *t, struct stack_slot *slot,
		       const struct mt_event *ref)
{
	size_t bytes = slot->nframes * sizeof(uint64_t);
	size_t n = 1 + (bytes + MT_DATA_PER_RECORD - 1) / MT_DATA_PER_RECORD;
	struct mt_event
	    recs[1 + (MT_STACK_DEPTH_MAX * 8 + MT_DATA_PER_RECORD - 1) /
			 MT_DATA_PER_RECORD];

	for (size_t i = 0; i < slot->nframes; i++)
		if (write_code_file(t, MT_FRAME_FILE(slot->frames[i]), ref))
			return -1;
	memset(recs, 0, n * sizeof(recs[0]));
	recs[0] = *ref;
	recs[0].kind = MT_EV_STACK;
	recs[0].addr = slot->id = ++t->stacks->next_id;
	recs[0].size = slot->nframes;
	recs[0].flags = slot->flags;
	recs[0].aux = bytes;
	memcpy(&recs[1], slot->frames, bytes);
	free(slot->frames);
	slot->frames = NULL;
	return mt_tracer_append(t, recs, n);
}

bool mt_tracer_stack_ref_pairs(const struct mt_event *staged,
			       const struct mt_event *next)
{
	/* the events a stack goes with (a reader's takes_a_stack) */
	return next && next->tid == staged->tid &&
	       next->timestamp == staged->timestamp &&
	       next->kind >= MT_EV_MALLOC && next->kind <= MT_EV_BRK;
}

/* The native frames of key, into frames: from its record, else the BPF
 * side's table; how many (0: not found). */
static size_t native_frames(struct tracer *t, uint64_t key, __u64 *frames,
			    uint16_t *flags)
{
	struct stack_slot *slot = slot_for(t->stacks, key);
	struct mt_stack_record rec;
	size_t n;

	if (slot->frames) {
		memcpy(frames, slot->frames, slot->nframes * sizeof(*frames));
		*flags = slot->flags;
		return slot->nframes;
	}
	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.stacks), &key, &rec))
		return 0;
	n = rec.ev.size < MT_STACK_DEPTH_MAX ? rec.ev.size : MT_STACK_DEPTH_MAX;
	memcpy(frames, rec.frames, n * sizeof(*frames));
	*flags = rec.ev.flags;
	return n;
}

static int append_records(void *ctx, const struct mt_event *recs, size_t n)
{
	return mt_tracer_append(ctx, recs, n);
}

/*
 * A staged STACK_REF whose event has Python frames too (old_addr = their
 * key): the stack of both merged (tracer_python.c), under a key of its
 * own, its code objects' PyCode records and its STACK record first if it
 * is new, then the reference and the event.  1: not merged (the native
 * stack alone goes), else mt_tracer_stack_ref's result.
 */
static int python_stack_ref(struct tracer *t, const struct mt_event *staged,
			    const struct mt_event *next)
{
	struct mt_tracer_stacks *s = t->stacks;
	uint64_t key =
	    (staged->addr ^ staged->old_addr * 0x9e3779b97f4a7c15ull) | 1;
	struct mt_event pair[2] = {*staged, *next};
	__u64 native[MT_STACK_DEPTH_MAX], merged[MT_STACK_DEPTH_MAX];
	struct stack_slot *slot;
	uint16_t flags = 0;
	bool truncated = false;
	size_t n, m;

	slot = s->nslots ? find_slot(s, key) : NULL;
	if (!slot || !slot->key || (!slot->id && !slot->frames)) {
		/* merged first, then kept: native_frames may grow the table
		 * (a slot pointer held across it would dangle), and a merge
		 * that fails leaves no key behind to break a probe chain */
		n = native_frames(t, staged->addr, native, &flags);
		m = n ? mt_python_merge(s->python, staged->old_addr, native, n,
					merged, t->opts->stack_depth,
					&truncated)
		      : 0;
		if (!m)
			return 1; /* not kept: the native stack goes */
		slot = slot_for(s, key);
		keep_frames(slot, staged, merged, m);
		slot->flags = flags | (truncated ? MT_STACK_TRUNCATED : 0);
	}
	if (!slot->id) {
		if (mt_python_codes(s->python, slot->frames, slot->nframes,
				    staged, append_records, t) ||
		    write_stack(t, slot, staged))
			return -1;
	}
	pair[0].addr = slot->id;
	pair[0].old_addr = 0;
	return mt_tracer_append(t, pair, 2);
}

/* A STACK_REF staged by the ring consumer (addr = key) and its event
 * (next): the STACK record first if this is the stack's first use, then
 * the reference by id and the event, appended together so that a full
 * batch never parts them. */
int mt_tracer_stack_ref(struct tracer *t, const struct mt_event *staged,
			const struct mt_event *next)
{
	struct mt_tracer_stacks *s = t->stacks;
	struct mt_event pair[2] = {*staged};
	struct stack_slot *slot;

	if (!mt_tracer_stack_ref_pairs(staged, next))
		return 0; /* no event of its own: the reference goes */
	pair[1] = *next;
	/* key 0 is no stack's (mt_tracer_stack_seen keeps none): with
	 * --fast a traced command could send any number of them */
	if (!s || !staged->addr)
		return mt_tracer_append(t, next, 1);
	if (staged->old_addr && s->python) {
		int rc = python_stack_ref(t, staged, next);

		if (rc <= 0)
			return rc;
	}
	slot = slot_for(s, staged->addr);
	if (!slot->id && !slot->frames && !fetch_frames(t, slot)) {
		s->unresolved++;
		return mt_tracer_append(t, next, 1); /* without its stack */
	}
	if (!slot->id && write_stack(t, slot, staged))
		return -1;
	pair[0].addr = slot->id;
	pair[0].old_addr = 0; /* the Python frames' key, if any */
	return mt_tracer_append(t, pair, 2);
}

/* ---- where files are mapped ------------------------------------------ */

/* A CODE_MAP staged by the ring consumer, its file named by device (aux)
 * and inode (old_size): written with the file's id, or kept until the
 * file is inspected (a new file's mapping comes before its inspection). */
int mt_tracer_code_map(struct tracer *t, const struct mt_event *staged)
{
	struct mt_tracer_stacks *s = t->stacks;
	struct mt_code_key key = {.dev = staged->aux, .ino = staged->old_size};
	struct mt_event e = *staged;

	if (!s)
		return 0;
	e.old_size = known_file(s, &key, NULL);
	if (!e.old_size) {
		s->maps_pending =
		    mt_grow(s->maps_pending, &s->cap_maps_pending,
			    s->nmaps_pending + 1, sizeof(*s->maps_pending));
		s->maps_pending[s->nmaps_pending++] = *staged;
		return 0;
	}
	e.aux = 0;
	if (write_code_file(t, e.old_size, &e))
		return -1;
	return mt_tracer_append(t, &e, 1);
}

/* After inspecting new files: the mappings that waited for them (those of
 * a file that could not be opened are dropped). */
void mt_tracer_code_maps_pending(struct tracer *t,
				 int (*emit)(struct tracer *t,
					     const struct mt_event *e))
{
	struct mt_tracer_stacks *s = t->stacks;
	size_t n = s ? s->nmaps_pending : 0;

	for (size_t i = 0; i < n; i++) {
		struct mt_event e = s->maps_pending[i];
		struct mt_code_key key = {.dev = e.aux, .ino = e.old_size};

		e.old_size = known_file(s, &key, NULL);
		e.aux = 0;
		if (e.old_size && write_code_file(t, e.old_size, &e) == 0)
			emit(t, &e);
	}
	if (n == 0) /* nothing waited (maps_pending may be NULL) */
		return;
	/* writing drained the rings: they may have brought more */
	memmove(s->maps_pending, s->maps_pending + n,
		(s->nmaps_pending - n) * sizeof(*s->maps_pending));
	s->nmaps_pending -= n;
}

void mt_tracer_stacks_free(struct tracer *t)
{
	struct mt_tracer_stacks *s = t->stacks;

	if (!s)
		return;
	if (s->unresolved && t->opts->verbose)
		mt_verbose("%" PRIu64 " events without their stack "
			   "(not found)\n",
			   s->unresolved);
	if (t->opts->verbose && t->skel)
		mt_verbose("%" PRIu64 " stacks not taken (a walk was "
			   "under way on the CPU: preempted)\n",
			   mt_tracer_read_counters(t, MT_DROP_STACK_BUSY,
						   MT_DROP_STACK_BUSY + 1));
	for (size_t i = 0; i < s->nslots; i++)
		free(s->slots[i].frames);
	free(s->slots);
	stacks_reset(s);
	free(s->files);
	free(s->file_ids);
	free(s->maps_pending);
	mt_python_free(s->python);
	free(s);
	t->stacks = NULL;
}
