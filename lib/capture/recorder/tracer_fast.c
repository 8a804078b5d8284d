// SPDX-License-Identifier: MIT
/*
 * tracer_fast.c - mt-trace --fast: the rings of the preloaded recorder
 * (lib/preload/mt_preload.c, layout in mt_fast.h), drained into the events
 * the BPF rings stage, so that the stream's later stages cannot tell them
 * apart.
 *
 * Time: the recorders stamp records with the CPU's time-stamp counter (a
 * clock_gettime costs ~60 ns here, more than the malloc it stamps; the
 * counter ~10-25 ns).  The kernel keeps CLOCK_MONOTONIC linear in that
 * counter between its updates, so each drain takes a calibration point
 * (counter, monotonic) and the records between two points are placed by
 * interpolation.  That is what the BPF events carry (bpf_ktime_get_ns), so
 * both merge by time.  Only when the TSC is synchronised across CPUs and
 * CLOCK_MONOTONIC linear in it (fast_clock.c says when); otherwise the
 * recorders call clock_gettime.
 *
 * Here: the shared memory's start, the time line, the processes with and
 * without the recorder, the recorders' unwind rows.  Reading the rings at
 * a drain is tracer_fast_drain.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "mt_elf.h"
#include "mt_log.h"
#include "fast_clock.h"
#include "mt_event.h"
#include "mt_fast.h"
#include "mt_grow.h"
#include "mt_stack.h"
#include "mt_trace.skel.h"
#include "mt_user.h"
#include "mt_child_env.h"
#include "tracer_fast.h"
#include "mt_xalloc.h"
#include "tracer_fast_int.h"
#include "tracer_int.h"

/*
 * A thread's ring: 8,192 records (256 KiB of shared memory, the tracer's
 * RSS once touched); 1,024 threads at once (the file is sparse: untouched
 * rings cost nothing).  A thread wakes mt-trace when its ring is half
 * full and waits when it is full.  The size weighs the first touch of
 * each page, a fault that costs 15-19 us on these machines, against the
 * waits of a ring too small for mt-trace's wake-up: with the recorder's
 * write prefetch, 8,192 records wait more often than 32,768 did
 * (storm_threads 500 times against 180) yet ran as fast or faster
 * everywhere measured; 4,096 made allocheavy 5% slower (bench/RESULTS.md,
 * "The ring's size").  MT_FAST_RING_RECORDS sets another size (a power of
 * two, RING_RECORDS_MIN..RING_RECORDS_MAX).
 */
#define RING_RECORDS	 8192u
#define RING_RECORDS_MIN 64u
#define RING_RECORDS_MAX 262144u
/* processes that loaded the recorder, kept (then only counted) */
#define MAX_PIDS 65536u
/* --stacks: as many files and rows as the BPF side holds (tracer_stacks.c),
 * the rows at the same indexes */
#define STACK_FILES_MAX MT_FRAME_FILE_MAX
#define STACK_ROWS_MAX	(1u << 20)

_Static_assert(sizeof(struct mt_fast_record) == 32, "record layout");
_Static_assert(sizeof(struct mt_fast_ring) == 192, "ring header layout");
_Static_assert(sizeof(struct mt_fast_header) == 128, "header layout");
_Static_assert(sizeof(struct mt_fast_file) == 40, "file layout");
_Static_assert(sizeof(struct mt_cfi_row) == 16, "row layout");

/* ---- time ---------------------------------------------------------------- */

static inline uint64_t read_tsc(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	return 0;
#endif
}

/* A (counter, monotonic) pair: the tightest of a few reads, the clock
 * read taken as made halfway between the two counter reads. */
static struct calib calibrate(void)
{
	struct calib best = {0};
	uint64_t best_span = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = read_tsc();
		uint64_t ns = mt_clock_ns(CLOCK_MONOTONIC);
		uint64_t b = read_tsc();

		if (b - a < best_span) {
			best_span = b - a;
			best = (struct calib){a + (b - a) / 2, ns};
		}
	}
	return best;
}

/* A new calibration point: the line goes through it and the one before
 * (its slope computed once a drain, not once a record). */
static void recalibrate(struct mt_fast *f)
{
	f->prev = f->cur;
	f->cur = calibrate();
	mt_tsc_line_set(&f->line, f->prev.tsc, f->prev.ns, f->cur.tsc,
			f->cur.ns);
}

/* ---- start --------------------------------------------------------------- */

static bool usable_preload(const char *path)
{
	/* opened as the user mt-trace acts for (mt_user.h), who loads it:
	 * root says nothing of a file they may not read */
	int fd = mt_user_open(path, O_RDONLY | O_NONBLOCK, 0);
	struct stat st;
	bool regular = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);

	if (fd >= 0) {
		close(fd);
		errno = 0; /* not a reason to open: the file's kind, its name */
	}
	/* LD_PRELOAD splits on spaces and colons */
	return regular && !strpbrk(path, " :\t");
}

/* MT_PRELOAD, else beside mt-trace's binary: build/bin/../lib, or an
 * installed PREFIX/bin/../lib/mt. */
static int find_preload(char *out, size_t len)
{
	static const char *const rel[] = {"/../lib/libmt-preload.so",
					  "/../lib/mt/libmt-preload.so"};
	const char *env = getenv("MT_PRELOAD");
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		if (usable_preload(out))
			return 0;
		mt_error("MT_PRELOAD: %s: %s", env,
			 errno ? strerror(errno)
			       : "not a regular file without spaces or colons");
		return -1;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char path[PATH_MAX + 64];

		snprintf(path, sizeof(path), "%s%s", self, rel[i]);
		if (realpath(path, out) && usable_preload(out))
			return 0;
	}
	return -1;
}

bool mt_fast_available(void)
{
	const char *env = getenv("MT_PRELOAD");
	char path[PATH_MAX];

	return (env && *env) || find_preload(path, sizeof(path)) == 0;
}

/* Where the stacks' part of the shared memory goes (at offset at, a page
 * boundary), and the offset past it. */
static size_t stacks_layout(struct mt_fast_stacks *st, size_t at, size_t page)
{
	size_t files_at = at + sizeof(*st);
	size_t rows_at =
	    files_at + STACK_FILES_MAX * sizeof(struct mt_fast_file);
	size_t end;

	rows_at = (rows_at + 63) & ~(size_t)63;
	end = rows_at + (size_t)STACK_ROWS_MAX * sizeof(struct mt_cfi_row);
	*st = (struct mt_fast_stacks){
	    .max_files = STACK_FILES_MAX,
	    .files_offset = files_at,
	    .rows_offset = rows_at,
	    .max_rows = STACK_ROWS_MAX,
	};
	return (end + page - 1) & ~(page - 1);
}

static void map_stacks(struct mt_fast *f, const struct mt_fast_stacks *layout,
		       size_t at, unsigned depth)
{
	char *base = (char *)f->hdr;

	f->stacks = (struct mt_fast_stacks *)(base + at);
	*f->stacks = *layout;
	f->stack_files = (struct mt_fast_file *)(base + layout->files_offset);
	f->stack_rows = (struct mt_cfi_row *)(base + layout->rows_offset);
	f->hdr->stacks_offset = at;
	f->hdr->stack_depth = depth;
	/* mt-trace's own copies: the traced command may write the header */
	f->stack_depth = depth;
	f->stack_max_files = layout->max_files;
	f->stack_max_rows = layout->max_rows;
	f->stack_nfiles = 0;
}

static int make_shared(struct mt_fast *f, unsigned stack_depth)
{
	size_t rings_at = sizeof(struct mt_fast_header);
	size_t page = sysconf(_SC_PAGESIZE);
	size_t pids_at = rings_at + NRINGS * sizeof(struct mt_fast_ring);
	size_t data_at =
	    (pids_at + MAX_PIDS * sizeof(struct mt_fast_pid) + page - 1) &
	    ~(page - 1);
	struct mt_fast_stacks layout;
	size_t stacks_at;

	f->size = data_at + (size_t)NRINGS * f->ring_records *
				sizeof(struct mt_fast_record);
	stacks_at = f->size;
	if (stack_depth) /* sparse too: only what files fill is touched */
		f->size = stacks_layout(&layout, stacks_at, page);
	f->memfd = memfd_create("mt-fast", MFD_CLOEXEC);
	if (f->memfd < 0 || ftruncate(f->memfd, f->size))
		return -1;
	f->hdr = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      f->memfd, 0);
	if (f->hdr == MAP_FAILED) {
		f->hdr = NULL;
		return -1;
	}
	f->hdr->magic = MT_FAST_MAGIC;
	f->hdr->version = MT_FAST_VERSION;
	f->hdr->nrings = NRINGS;
	f->hdr->ring_records = f->ring_records;
	f->hdr->rings_offset = rings_at;
	f->hdr->data_offset = data_at;
	f->hdr->enabled = 1;
	f->hdr->page_size = page;
	f->hdr->pids_offset = pids_at;
	f->hdr->max_pids = MAX_PIDS;
	/* mt-trace's own copies of the layout, never read back */
	f->nrings = NRINGS;
	f->rings = (struct mt_fast_ring *)((char *)f->hdr + rings_at);
	f->records = (struct mt_fast_record *)((char *)f->hdr + data_at);
	f->pids = (const struct mt_fast_pid *)((char *)f->hdr + pids_at);
	f->max_pids = MAX_PIDS;
	f->tail = mt_xcalloc(NRINGS, sizeof(*f->tail));
	f->head = mt_xcalloc(NRINGS, sizeof(*f->head));
	f->abandoned = mt_xcalloc(NRINGS, sizeof(*f->abandoned));
	f->ring_last = mt_xcalloc(NRINGS, sizeof(*f->ring_last));
	if (stack_depth)
		map_stacks(f, &layout, stacks_at, stack_depth);
	f->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return f->wakefd < 0 ? -1 : 0;
}

/* The records a ring holds: RING_RECORDS, or MT_FAST_RING_RECORDS. */
static int ring_size(struct mt_fast *f)
{
	const char *env = getenv("MT_FAST_RING_RECORDS");
	unsigned long long n;
	char *end;

	f->ring_records = RING_RECORDS;
	if (!env || !*env)
		return 0;
	errno = 0;
	n = strtoull(env, &end, 10);
	if (errno || *end || n < RING_RECORDS_MIN || n > RING_RECORDS_MAX ||
	    (n & (n - 1))) {
		mt_error("MT_FAST_RING_RECORDS: '%s' is not a power "
			 "of two from %u to %u",
			 env, RING_RECORDS_MIN, RING_RECORDS_MAX);
		return -1;
	}
	f->ring_records = n;
	return 0;
}

/* The TSC or clock_gettime for the records (fast_clock.c: the rule),
 * once its facts are in: in the header before any recorder reads it (the
 * command runs after mt_fast_configure), with a first calibration point. */
static void decide_clock(struct mt_fast *f)
{
	if (f->clock_why)
		return; /* decided */
	mt_fast_clock_facts_finish(&f->clock);
	f->tsc = mt_fast_clock_tsc(&f->clock, &f->clock_why);
	f->hdr->clock = f->tsc ? MT_FAST_CLOCK_TSC : MT_FAST_CLOCK_MONOTONIC;
	if (f->tsc) {
		f->prev = f->cur = calibrate();
		/* flat at the point until the first drain's */
		mt_tsc_line_set(&f->line, f->prev.tsc, f->prev.ns, f->cur.tsc,
				f->cur.ns);
	}
	if (f->verbose)
		mt_verbose("--fast: times from %s (%s)",
			   f->tsc ? "the TSC" : "clock_gettime", f->clock_why);
}

struct mt_fast *mt_fast_start(int verbose, unsigned stack_depth)
{
	struct mt_fast *f = mt_xcalloc(1, sizeof(*f));
	struct stat st;

	f->memfd = f->wakefd = -1;
	f->verbose = verbose;
	if (find_preload(f->preload, sizeof(f->preload))) {
		mt_error("--fast: libmt-preload.so not found beside "
			 "mt-trace (../lib or ../lib/mt) nor in MT_PRELOAD (a "
			 "readable path without spaces or colons)");
		mt_fast_free(f);
		return NULL;
	}
	if (stat(f->preload, &st) == 0) {
		f->preload_dev = st.st_dev;
		f->preload_ino = st.st_ino;
	}
	if (ring_size(f)) {
		mt_fast_free(f);
		return NULL;
	}
	if (make_shared(f, stack_depth)) {
		mt_error("--fast: shared memory: %s", strerror(errno));
		mt_fast_free(f);
		return NULL;
	}
	if (verbose)
		mt_verbose("--fast: %s, %u rings of %u records", f->preload,
			   NRINGS, (unsigned)f->ring_records);
	/* the vDSO check, when the rule needs it, runs beside the fork and
	 * the BPF object's opening (mt_fast_configure waits for it) */
	if (mt_fast_clock_facts(&f->clock)) {
		mt_fast_free(f);
		return NULL;
	}
	if (!f->clock.vdso_checking)
		decide_clock(f);
	return f;
}

/* MT_FAST_ENV's value for a command mt-trace (tracer) runs. */
static void shm_description(const struct mt_fast *f, pid_t tracer, char *out,
			    size_t len)
{
	struct stat st = {0};

	fstat(f->memfd, &st);
	snprintf(out, len, "%d,%d,%llu,%d", f->memfd, f->wakefd,
		 (unsigned long long)st.st_ino, (int)tracer);
}

void mt_fast_child_env(const struct mt_fast *f, pid_t tracer,
		       struct mt_child_env *env)
{
	const char *old = mt_child_env_get(env, "LD_PRELOAD");
	char desc[128], *preload;

	shm_description(f, tracer, desc, sizeof(desc));
	mt_child_env_set(env, MT_FAST_ENV, desc);
	if (!old || !*old) {
		mt_child_env_set(env, "LD_PRELOAD", f->preload);
		return;
	}
	preload = mt_xasprintf("%s:%s", f->preload, old);
	mt_child_env_set(env, "LD_PRELOAD", preload);
	free(preload);
}

void mt_fast_child_fds(const struct mt_fast *f)
{
	/* the recorder of every program the command runs maps them */
	fcntl(f->memfd, F_SETFD, 0);
	fcntl(f->wakefd, F_SETFD, 0);
}

void mt_fast_configure(struct mt_fast *f, struct mt_trace *skel)
{
	struct stat st = {0};

	decide_clock(f);
	fstat(f->memfd, &st);
	skel->rodata->fast_links = true;
	/* too long a path (over 255 bytes): every exec stops */
	if (strlen(f->preload) < sizeof(skel->rodata->fast_preload)) {
		strcpy((char *)skel->rodata->fast_preload, f->preload);
		skel->rodata->fast_preload_len = strlen(f->preload);
	}
	/* read-only data: on_exec compares it with bpf_strncmp, which the
	 * verifier checks once, where a loop by hand over global data was
	 * walked 64 times (half of on_exec's verifier time) */
	shm_description(f, getpid(), (char *)skel->rodata->fast_shm,
			sizeof(skel->rodata->fast_shm));
	skel->rodata->fast_shm_len = strlen((char *)skel->rodata->fast_shm);
	skel->data->fast_memfd = f->memfd;
	skel->bss->fast_memfd_ino = st.st_ino;
	skel->bss->fast_preload_dev =
	    (uint64_t)major(f->preload_dev) << 20 | minor(f->preload_dev);
	skel->bss->fast_preload_ino = f->preload_ino;
}

int mt_fast_wake_fd(const struct mt_fast *f)
{
	return f->wakefd;
}

void mt_fast_set_enabled(struct mt_fast *f, bool on)
{
	__atomic_store_n(&f->hdr->enabled, on, __ATOMIC_RELEASE);
}

void mt_fast_damaged(struct mt_fast *f, enum mt_fast_damage why)
{
	static const char *const said[] = {
	    [MT_FAST_DAMAGE_POSITIONS] = "a ring's positions",
	    [MT_FAST_DAMAGE_RECORD] = "a ring's records",
	    [MT_FAST_DAMAGE_COUNTER] = "the lost counters",
	};

	if (f->damage)
		return;
	f->damage = why;
	mt_error("--fast: the traced command wrote over %s of the "
		 "recorders' shared memory: what no recorder writes is "
		 "dropped, the trace is marked incomplete",
		 said[why]);
}

bool mt_fast_incomplete(const struct mt_fast *f)
{
	return f->damage != MT_FAST_DAMAGE_NONE;
}

/* A counter the recorders keep, as mt-trace takes it: never back (the
 * batches' lost counts are its differences), never past
 * MT_FAST_COUNTER_MAX; a value that would is damage, and the last good
 * one stays. */
static uint64_t take_counter(struct mt_fast *f, const uint64_t *shared,
			     uint64_t *seen)
{
	uint64_t v = __atomic_load_n(shared, __ATOMIC_RELAXED);

	if (v < *seen || v > MT_FAST_COUNTER_MAX) {
		mt_fast_damaged(f, MT_FAST_DAMAGE_COUNTER);
		return *seen;
	}
	return *seen = v;
}

uint64_t mt_fast_lost(struct mt_fast *f)
{
	return take_counter(f, &f->hdr->lost, &f->lost_seen) +
	       take_counter(f, &f->hdr->no_ring, &f->no_ring_seen) + f->dropped;
}

void mt_fast_exited(struct mt_fast *f, pid_t pid)
{
	f->exited =
	    mt_grow(f->exited, &f->cap_exited, f->nexited + 1, sizeof(pid));
	f->exited[f->nexited++] = pid;
}

/* ---- processes without the recorder ---------------------------------- */

/* Does the program at path have a dynamic loader (PT_INTERP)?  Only such a
 * program loads the recorder; a static one is probed as always. */
static bool dynamic_program(const char *path)
{
	bool interp = false;
	size_t nph = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	Elf *elf;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { /* a FIFO, a device */
		close(fd);
		return false;
	}
	elf = elf_version(EV_CURRENT) != EV_NONE
		  ? elf_begin(fd, ELF_C_READ_MMAP, NULL)
		  : NULL;
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph && !interp; i++) {
			GElf_Phdr ph;

			interp =
			    gelf_getphdr(elf, i, &ph) && ph.p_type == PT_INTERP;
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return interp;
}

static uint64_t record_ns(const struct mt_fast *f, uint64_t when)
{
	return f->tsc ? tsc_to_ns(f, when) : when;
}

/* -v: a static program is probed (path: its file, or the path its exec
 * named, the process being gone already). */
static void say_static(pid_t pid, const char *path)
{
	mt_verbose("pid %d (%s): recorded by probes: a static program (no "
		   "loader to preload the recorder)",
		   (int)pid, path);
}

void mt_fast_exec(struct mt_fast *f, pid_t pid, uint64_t when,
		  const char *named, size_t len)
{
	char proc[64], path[PATH_MAX];
	ssize_t n;

	/* its new program already said it carries the recorder */
	for (size_t i = 0; i < f->nloaded; i++)
		if ((pid_t)f->loaded[i].pid == pid && f->loaded[i].when >= when)
			return;
	snprintf(proc, sizeof(proc), "/proc/%d/exe", (int)pid);
	n = readlink(proc, path, sizeof(path) - 1);
	if (n <= 0) { /* gone already: nothing to expect */
		/* -v: the file its exec named, if that is where it was */
		n = len < sizeof(path) ? (ssize_t)len : 0;
		memcpy(path, named, n);
		path[n] = '\0';
		if (f->verbose && path[0] == '/' && !dynamic_program(path) &&
		    access(path, F_OK) == 0)
			say_static(pid, path);
		return;
	}
	path[n] = '\0';
	if (!dynamic_program(proc)) {
		if (f->verbose)
			say_static(pid, path);
		return; /* static: nothing to expect */
	}
	for (size_t i = 0; i < f->nwaiting; i++) {
		if (f->waiting[i].pid == pid) { /* exec'd again */
			free(f->waiting[i].path);
			f->waiting[i].path = mt_xstrdup(path);
			f->waiting[i].since = when;
			return;
		}
	}
	f->waiting = mt_grow(f->waiting, &f->cap_waiting, f->nwaiting + 1,
			     sizeof(*f->waiting));
	f->waiting[f->nwaiting++] =
	    (struct exec_wait){pid, mt_xstrdup(path), when};
}

static void forget_waiting(struct mt_fast *f, size_t i)
{
	free(f->waiting[i].path);
	f->waiting[i] = f->waiting[--f->nwaiting];
}

/* -v: how a process that loaded the recorder is recorded (flags: what
 * its recorder said, MT_FAST_PID_*; the traced command may write them,
 * so they only choose the words).  Not its program: by the time the
 * table is read the process may have exec'd another, or be gone. */
static void say_recorded(uint32_t pid, uint32_t flags)
{
	if (flags & MT_FAST_PID_RECORDS_C)
		mt_verbose("pid %u: recorded by the preloaded recorder%s", pid,
			   flags & MT_FAST_PID_OTHER_CXX
			       ? " (C++ operators by probes: its operator new "
				 "is not libstdc++'s)"
			       : "");
	else
		mt_verbose("pid %u: recorded by probes: its malloc is not "
			   "glibc's (a preloaded allocator or a sanitizer "
			   "runtime), the recorder passes the calls on to it",
			   pid);
}

/* The processes that said they carry the recorder since the last look. */
static void read_pid_table(struct mt_fast *f)
{
	const struct mt_fast_pid *pids = f->pids; /* mt-trace's own offset */

	while (f->pids_read < f->max_pids) {
		uint32_t pid =
		    __atomic_load_n(&pids[f->pids_read].pid, __ATOMIC_ACQUIRE);
		uint64_t when;

		if (!pid)
			break; /* claimed, not yet written: next time */
		when = record_ns(f, __atomic_load_n(&pids[f->pids_read].when,
						    __ATOMIC_RELAXED));
		if (f->verbose)
			say_recorded(pid,
				     __atomic_load_n(&pids[f->pids_read].flags,
						     __ATOMIC_RELAXED));
		f->loaded = mt_grow(f->loaded, &f->cap_loaded, f->nloaded + 1,
				    sizeof(*f->loaded));
		f->loaded[f->nloaded++] =
		    (struct mt_fast_pid){.pid = pid, .when = when};
		f->pids_read++;
		/* loaded by the program it exec'd, not the one before */
		for (size_t i = 0; i < f->nwaiting; i++)
			if ((uint32_t)f->waiting[i].pid == pid &&
			    when >= f->waiting[i].since)
				forget_waiting(f, i--);
	}
}

/* pid exited without ever carrying the recorder since its exec: its calls
 * into libc went unrecorded.  Said once per program. */
static void exited_uncovered(struct mt_fast *f, pid_t pid)
{
	for (size_t i = 0; i < f->nloaded; i++)
		if ((pid_t)f->loaded[i].pid == pid)
			f->loaded[i--] = f->loaded[--f->nloaded];
	for (size_t i = 0; i < f->nwaiting; i++) {
		const char *path = f->waiting[i].path;
		bool said = false;

		if (f->waiting[i].pid != pid)
			continue;
		f->uncovered++;
		for (size_t k = 0; k < f->nwarned && !said; k++)
			said = path && strcmp(f->warned[k], path) == 0;
		if (!said && path && f->nwarned < MAX_WARNED) {
			fprintf(
			    stderr,
			    "mt-trace: --fast: pid %d (%s) ran without the "
			    "recorder its environment named: its calls into "
			    "libc were not recorded; trace it with "
			    "--no-fast\n",
			    (int)pid, path);
			f->warned[f->nwarned++] = mt_xstrdup(path);
		}
		forget_waiting(f, i);
		return;
	}
}

uint64_t mt_fast_clock_now(const struct mt_fast *f)
{
	return f->tsc ? read_tsc() : mt_clock_ns(CLOCK_MONOTONIC);
}

uint64_t mt_fast_uncovered(const struct mt_fast *f)
{
	return f->uncovered;
}

bool mt_fast_drain_begin(struct mt_fast *f, uint64_t *limit)
{
	uint64_t wakes;

	if (read(f->wakefd, &wakes, sizeof(wakes)) < 0 && errno != EAGAIN)
		return false;
	if (f->tsc) {
		recalibrate(f);
		*limit = f->cur.tsc;
	} else {
		*limit = mt_clock_ns(CLOCK_MONOTONIC);
	}
	read_pid_table(f);
	for (size_t i = 0; i < f->nexited; i++)
		exited_uncovered(f, f->exited[i]);
	return true;
}

/* ---- will a new program carry the recorder? ----------------------------- */

/* The whole of /proc/PID/name (environ, auxv), with a NUL after it; NULL
 * when the process is gone. */
static char *read_proc(pid_t pid, const char *name, size_t *len)
{
	char path[64], *buf = NULL;
	size_t cap = 0, n = 0;
	ssize_t got = 1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	while (got > 0) {
		buf = mt_grow(buf, &cap, n + 4097, 1);
		got = read(fd, buf + n, cap - n - 1);
		n += got > 0 ? (size_t)got : 0;
	}
	close(fd);
	if (got < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* AT_SECURE in the auxiliary vector: a set-user-ID or set-group-ID
 * program, or one with file capabilities, whose loader ignores a preload
 * named by a path. */
static bool secure_exec(pid_t pid)
{
	enum { AT_SECURE_ = 23 };
	size_t len = 0;
	uint64_t *auxv = (uint64_t *)read_proc(pid, "auxv", &len);
	bool secure = false;

	for (size_t i = 0; auxv && i + 1 < len / sizeof(*auxv); i += 2)
		if (auxv[i] == AT_SECURE_)
			secure = auxv[i + 1] != 0;
	free(auxv);
	return secure;
}

/* The value of name in an environment block (NAME=VALUE strings, each
 * ended by a NUL): the first (getenv's) or the last (the loader's: each
 * LD_PRELOAD it reads replaces the one before). */
static const char *env_value(const char *env, size_t len, const char *name,
			     bool last)
{
	size_t nlen = strlen(name);
	const char *found = NULL;

	for (size_t at = 0; at < len; at += strlen(env + at) + 1) {
		if (strncmp(env + at, name, nlen) != 0 || env[at + nlen] != '=')
			continue;
		found = env + at + nlen + 1;
		if (!last)
			break;
	}
	return found;
}

/* Is elem (n bytes of an LD_PRELOAD list, as process pid sees paths) the
 * recorder? */
static bool names_recorder(const struct mt_fast *f, pid_t pid, const char *elem,
			   size_t n)
{
	const char *base = strrchr(f->preload, '/');
	char path[PATH_MAX + 64];
	struct stat st;

	if (n == 0 || n >= PATH_MAX)
		return false;
	if (strlen(f->preload) == n && memcmp(elem, f->preload, n) == 0)
		return true;
	if (!memchr(elem, '/', n)) /* looked for in the library path */
		return base && strlen(base + 1) == n &&
		       memcmp(elem, base + 1, n) == 0;
	snprintf(path, sizeof(path), "/proc/%d/%s/%.*s", (int)pid,
		 elem[0] == '/' ? "root" : "cwd", (int)n, elem);
	return stat(path, &st) == 0 && st.st_dev == f->preload_dev &&
	       st.st_ino == f->preload_ino;
}

/* The loader's reading of LD_PRELOAD: names split at spaces and colons. */
static bool preloads_recorder(const struct mt_fast *f, pid_t pid,
			      const char *list)
{
	while (list && *list) {
		size_t n = strcspn(list, " :");

		if (names_recorder(f, pid, list, n))
			return true;
		list += n + (list[n] != '\0');
	}
	return false;
}

/* Does process pid hold CAP_SYS_PTRACE (so may open mt-trace's /proc)? */
static bool may_ptrace(pid_t pid)
{
	enum { CAP_SYS_PTRACE_ = 19 };
	size_t len = 0;
	char *status = read_proc(pid, "status", &len);
	const char *line = status ? strstr(status, "\nCapEff:") : NULL;
	unsigned long long caps = 0;

	if (line)
		sscanf(line, "\nCapEff: %llx", &caps);
	free(status);
	return caps & (1ull << CAP_SYS_PTRACE_);
}

/* Will the recorder of process pid reach the shared memory, as
 * map_shared() in mt_preload.c does: MT_FAST_SHM names this session's
 * memfd, which the process still holds, or else may open through
 * mt-trace's /proc/PID/fd. */
static bool reaches_shared(const struct mt_fast *f, pid_t pid, const char *desc)
{
	unsigned long long ino;
	int memfd, efd, tracer;
	char path[64];
	struct stat mine, theirs;

	if (!desc ||
	    sscanf(desc, "%d,%d,%llu,%d", &memfd, &efd, &ino, &tracer) != 4 ||
	    fstat(f->memfd, &mine) || ino != mine.st_ino || tracer != getpid())
		return false;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, memfd);
	if (stat(path, &theirs) == 0 && theirs.st_ino == mine.st_ino &&
	    theirs.st_dev == mine.st_dev)
		return true;
	return may_ptrace(pid);
}

bool mt_fast_needs_links(struct mt_fast *f, pid_t pid, const char **why)
{
	char exe[64];
	size_t len = 0;
	char *env;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (!dynamic_program(exe))
		return false; /* static, or gone: probed as always */
	if (secure_exec(pid)) {
		*why = "set-user-ID or with capabilities: the loader ignores "
		       "LD_PRELOAD";
	} else if (!(env = read_proc(pid, "environ", &len))) {
		return false; /* gone */
	} else {
		*why = NULL;
		if (!preloads_recorder(f, pid,
				       env_value(env, len, "LD_PRELOAD", true)))
			*why = "LD_PRELOAD without the recorder";
		else if (!reaches_shared(
			     f, pid, env_value(env, len, MT_FAST_ENV, false)))
			*why = MT_FAST_ENV " missing, or its memfd closed";
		free(env);
		if (!*why)
			return false;
	}
	/* traced by links: it is not expected to say it loaded the recorder */
	for (size_t i = 0; i < f->nwaiting; i++)
		if (f->waiting[i].pid == pid)
			forget_waiting(f, i--);
	return true;
}

/* ---- unwind rows for the recorders (--stacks) --------------------------- */

void mt_fast_stack_file(struct mt_fast *f, const struct mt_code_key *key,
			const struct mt_stack_file *file,
			const struct mt_cfi_row *rows)
{
	struct mt_fast_stacks *st = f->stacks;
	struct mt_fast_file *out;
	uint32_t n;

	/* mt-trace's own counts: st is the traced command's to write */
	if (!st || f->stack_nfiles >= f->stack_max_files)
		return;
	n = f->stack_nfiles;
	out = &f->stack_files[n];
	*out = (struct mt_fast_file){
	    .dev = key->dev,
	    .ino = key->ino,
	    .vaddr_minus_offset = file->vaddr_minus_offset,
	    .id = file->id,
	};
	/* at the BPF side's indexes: the same rows, as many files */
	if (rows && file->nrows && file->first_row <= f->stack_max_rows &&
	    file->nrows <= f->stack_max_rows - file->first_row) {
		memcpy(&f->stack_rows[file->first_row], rows,
		       file->nrows * sizeof(*rows));
		out->first_row = file->first_row;
		out->nrows = file->nrows;
	}
	/* last: a recorder that sees the count sees the entry whole */
	f->stack_nfiles = n + 1;
	__atomic_store_n(&st->nfiles, n + 1, __ATOMIC_RELEASE);
}

void mt_fast_stacks_reset(struct mt_fast *f)
{
	if (!f->stacks)
		return;
	f->stack_nfiles = 0;
	__atomic_store_n(&f->stacks->nfiles, 0, __ATOMIC_RELEASE);
}

uint32_t mt_fast_next_code_id(struct mt_fast *f)
{
	if (!f || !f->stacks)
		return 0;
	return __atomic_add_fetch(&f->stacks->code_ids, 1, __ATOMIC_RELAXED);
}

/* ---- which files the preload covers ------------------------------------- */

bool mt_fast_covers(const struct mt_fast *f, int fd,
		    enum mt_alloc_family *family)
{
	char soname[64] = "";
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_dev == f->preload_dev &&
	    st.st_ino == f->preload_ino) {
		*family = MT_ALLOC_NONE;
		return true;
	}
	if (!mt_elf_fd_soname(fd, soname, sizeof(soname)))
		return false;
	if (strcmp(soname, "libc.so.6") == 0) {
		*family = MT_ALLOC_LIBC;
		return true;
	}
	if (strcmp(soname, "libstdc++.so.6") == 0) {
		*family = MT_ALLOC_CXX;
		return true;
	}
	return false;
}

void mt_fast_free(struct mt_fast *f)
{
	if (!f)
		return;
	mt_fast_clock_facts_finish(&f->clock); /* its thread, if it runs */
	if (f->hdr) {
		uint64_t waits =
		    __atomic_load_n(&f->hdr->waits, __ATOMIC_RELAXED);

		if (f->verbose && waits <= MT_FAST_COUNTER_MAX)
			mt_verbose("--fast: a full ring put a thread "
				   "to sleep %llu times",
				   (unsigned long long)waits);
		f->hdr->enabled = 0;
		munmap(f->hdr, f->size);
	}
	if (f->memfd >= 0)
		close(f->memfd);
	if (f->wakefd >= 0)
		close(f->wakefd);
	free(f->exited);
	while (f->nwaiting)
		forget_waiting(f, 0);
	free(f->waiting);
	free(f->loaded);
	for (size_t i = 0; i < f->nwarned; i++)
		free(f->warned[i]);
	free(f->merged);
	free(f->runs);
	free(f->ring_last);
	free(f->calls);
	free(f->tail);
	free(f->head);
	free(f->abandoned);
	free(f);
}
