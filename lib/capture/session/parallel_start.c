// SPDX-License-Identifier: MIT
/*
 * parallel_start.c - start-up work done by threads while the BPF side
 * loads (the private copies have theirs in tracer_confine.c): the first
 * uprobe registration's grace period (uprobe_grace.c), libc's probe plan,
 * whose branch scan is remembered for the attach (elf.c), with --stacks
 * libc's unwind rows (cfi.c), kmem:rss_stat's perf event, and the files
 * the command's program will map (tracer_code.c).
 */
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt_attach.h"
#include "mt_cfi.h"
#include "mt_core_btf.h"
#include "mt_elf.h"
#include "mt_job.h"
#include "mt_log.h"
#include "mt_user.h"
#include "mt_xalloc.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

void mt_tracer_open_bpf(struct mt_opened_bpf *o)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts);

	o->why = NULL;
	o->btf_fd = mt_core_btf_open(o->btf_path, sizeof(o->btf_path), &o->why);
	opts.btf_custom_path = o->btf_fd >= 0 ? o->btf_path : NULL;
	o->skel = mt_trace__open_opts(&opts);
	o->err = o->skel ? 0 : errno;
}

/* Opening the object (libbpf reads its ELF and BTF) needs nothing of the
 * session's, so a job does it from the start (mt_job.h). */
struct mt_parallel_open {
	struct mt_job *job;
	struct mt_opened_bpf opened;
	bool taken;
};

static void open_bpf_job(void *arg)
{
	struct mt_parallel_open *e = arg;

	mt_tracer_open_bpf(&e->opened);
}

void mt_tracer_open_begin(struct tracer *t)
{
	struct mt_parallel_open *e = mt_xcalloc(1, sizeof(*e));

	e->job = mt_job_start(open_bpf_job, e);
	t->parallel.open = e;
}

int mt_tracer_open_await(struct tracer *t)
{
	if (t->parallel.open)
		mt_job_finish(t->parallel.open->job);
	return 0;
}

bool mt_tracer_parallel_opened(struct tracer *t, struct mt_opened_bpf *o)
{
	struct mt_parallel_open *e = t->parallel.open;

	if (!e || e->taken)
		return false;
	mt_job_finish(e->job);
	*o = e->opened;
	e->taken = true;
	return true;
}

void mt_tracer_open_end(struct tracer *t)
{
	struct mt_parallel_open *e = t->parallel.open;
	struct mt_opened_bpf opened;

	if (!e)
		return;
	if (mt_tracer_parallel_opened(t, &opened)) { /* not taken */
		mt_trace__destroy(opened.skel);
		if (opened.btf_fd >= 0)
			close(opened.btf_fd);
	}
	mt_job_end(e->job);
	free(e);
	t->parallel.open = NULL;
}

/* libc's unwind table, built by a thread, and the build-id of its bytes
 * (the tree maps private copies of libc: other files, the same bytes) */
struct mt_parallel_cfi {
	pthread_t thread;
	char *path;
	uint8_t build_id[64];
	int build_id_len;
	struct mt_cfi_table table;
	int rc; /* mt_cfi_build's */
};

static void prepare_libc(void *path)
{
	mt_attach_prepare(path);
}

/* Where libc's probes go takes ~2 ms to work out (free()'s branch scan):
 * a thread does it while the BPF side loads.  --fast needs it too, for the
 * links of processes without the recorder (fast_links.c). */
void mt_tracer_libc_plan_begin(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();

	if (!t->opts->track_allocators || !libc[0])
		return;
	t->parallel.libc_plan = mt_job_start(prepare_libc, (void *)libc);
}

int mt_tracer_libc_plan_await(struct tracer *t)
{
	mt_job_finish(t->parallel.libc_plan);
	return 0;
}

void mt_tracer_libc_plan_end(struct tracer *t)
{
	mt_job_end(
	    t->parallel.libc_plan); /* what it made: the attach's cache */
	t->parallel.libc_plan = NULL;
}

static void *build_cfi(void *arg)
{
	struct mt_parallel_cfi *e = arg;
	char err[256];
	int fd = open(e->path, O_RDONLY | O_CLOEXEC);

	e->rc = fd < 0 ? -1 : mt_cfi_build(fd, &e->table, err, sizeof(err));
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* libc's 28 k unwind rows take ~8 ms to build (libdw reads its .eh_frame),
 * and its first process needs them before it runs: a thread builds them
 * while the BPF side loads, for mt_tracer_stack_file() to take. */
void mt_tracer_cfi_begin(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();
	struct mt_parallel_cfi *e;

	if (!t->opts->stacks || !libc[0])
		return;
	e = mt_xcalloc(1, sizeof(*e));
	e->build_id_len =
	    mt_elf_build_id(libc, e->build_id, sizeof(e->build_id));
	if (e->build_id_len <= 0) { /* nothing to know its copies by */
		free(e);
		return;
	}
	e->path = mt_xstrdup(libc);
	if (pthread_create(&e->thread, NULL, build_cfi, e) != 0) {
		free(e->path);
		free(e);
		return;
	}
	t->parallel.cfi = e;
}

/*
 * kmem:rss_stat's perf event.  Opening it takes the kernel's event_mutex,
 * which whoever closes the last perf event of a tracepoint holds through
 * an RCU grace period: the detacher of the session before (bench/run's
 * back-to-back `true` rows) or any other session's.  Waited for at the
 * attach, that was 20-80 ms of a start-up of ~25 now and then (sched_switch
 * stacks: perf_trace_init -> mutex_lock, load 2-4); a thread opens it
 * while the BPF side loads, and the program is attached to it after.
 */
struct mt_parallel_event {
	struct mt_job *job;
	int fd; /* -1: not opened, or taken */
};

/* The same event as libbpf's attach opens: every process, CPU 0. */
static void open_rss_event(void *arg)
{
	struct mt_parallel_event *e = arg;
	struct perf_event_attr attr = {
	    .type = PERF_TYPE_TRACEPOINT,
	    .size = sizeof(attr),
	};
	long id = mt_tracer_tracepoint_id("kmem", "rss_stat");

	if (id < 0)
		return;
	attr.config = (__u64)id;
	e->fd = (int)syscall(SYS_perf_event_open, &attr, -1, 0, -1,
			     PERF_FLAG_FD_CLOEXEC);
	if (e->fd < 0)
		e->fd = -1;
}

void mt_tracer_rss_begin(struct tracer *t)
{
	struct mt_parallel_event *e;

	if (!t->rss)
		return;
	e = mt_xcalloc(1, sizeof(*e));
	e->fd = -1;
	e->job = mt_job_start(open_rss_event, e);
	t->parallel.rss_event = e;
}

int mt_tracer_rss_await(struct tracer *t)
{
	if (t->parallel.rss_event)
		mt_job_finish(t->parallel.rss_event->job);
	return 0;
}

int mt_tracer_parallel_rss_event(struct tracer *t)
{
	struct mt_parallel_event *e = t->parallel.rss_event;
	int fd;

	if (!e)
		return -1;
	mt_job_finish(e->job);
	fd = e->fd;
	e->fd = -1;
	return fd;
}

void mt_tracer_rss_end(struct tracer *t)
{
	struct mt_parallel_event *e = t->parallel.rss_event;

	if (!e)
		return;
	mt_job_end(e->job);
	if (e->fd >= 0) /* not attached */
		close(e->fd);
	free(e);
	t->parallel.rss_event = NULL;
}

/* The command's program and its libraries, found by a thread: finding
 * them and reading their symbols (~0.3 ms for true, ~0.7 for ls) needs
 * no BPF. */
struct mt_parallel_program {
	struct mt_job *job;
	const char *file, *libc;
	struct mt_code_program program;
	bool taken;
};

static void find_program(void *arg)
{
	struct mt_parallel_program *e = arg;

	mt_code_find_program(&e->program, e->file, e->libc);
}

/* Not for a command run as another user: execvp(3) searches with its
 * rights, not ours. */
void mt_tracer_program_begin(struct tracer *t)
{
	const struct mt_tracer_opts *o = t->opts;
	struct mt_parallel_program *e;

	if (!mt_tracer_follows_code(o) || (o->user && o->user->is_sudo))
		return;
	e = mt_xcalloc(1, sizeof(*e));
	e->file = o->argv[0];
	e->libc = o->libc_path ? o->libc_path : mt_self_libc();
	e->job = mt_job_start(find_program, e);
	t->parallel.program = e;
}

int mt_tracer_program_await(struct tracer *t)
{
	if (t->parallel.program)
		mt_job_finish(t->parallel.program->job);
	return 0;
}

bool mt_tracer_parallel_program(struct tracer *t, struct mt_code_program *p)
{
	struct mt_parallel_program *e = t->parallel.program;

	if (!e || e->taken)
		return false;
	mt_job_finish(e->job);
	*p = e->program;
	e->taken = true;
	return true;
}

void mt_tracer_program_end(struct tracer *t)
{
	struct mt_parallel_program *e = t->parallel.program;
	struct mt_code_program p;

	if (!e)
		return;
	if (mt_tracer_parallel_program(t, &p)) /* not inspected */
		mt_code_program_free(&p);
	mt_job_end(e->job);
	free(e);
	t->parallel.program = NULL;
}

/* Will the start-up register uprobes?  Not under --fast, whose preload
 * records libc (only --scan's files are probed at the start): the
 * allocator probes' step then waited for the grace thread's own first
 * registration, its grace period (10-14 ms of `mt-trace --fast -- true`,
 * -vv), for nothing. */
static bool grace_wanted(const struct tracer *t)
{
	const char *scan = getenv("MT_SCAN");

	if (!mt_tracer_follows_code(t->opts))
		return false;
	return !t->fast || t->opts->nscan || (scan && *scan);
}

void mt_tracer_grace_begin(struct tracer *t)
{
	if (grace_wanted(t))
		mt_uprobe_grace_start(&t->parallel.uprobe_grace);
}

/* The thread's table, once it is done (freed unless taken). */
static struct mt_parallel_cfi *parallel_cfi_done(struct tracer *t)
{
	struct mt_parallel_cfi *e = t->parallel.cfi;

	if (e) {
		pthread_join(e->thread, NULL);
		t->parallel.cfi = NULL;
	}
	return e;
}

static void parallel_cfi_free(struct mt_parallel_cfi *e)
{
	if (!e)
		return;
	if (e->rc == 0)
		mt_cfi_free(&e->table);
	free(e->path);
	free(e);
}

bool mt_tracer_parallel_cfi(struct tracer *t, const uint8_t *build_id,
			    size_t build_id_len, struct mt_cfi_table *table)
{
	struct mt_parallel_cfi *e = t->parallel.cfi;
	bool built;

	/* another file (the program, mapped before libc) does not wait */
	if (!e || build_id_len != (size_t)e->build_id_len ||
	    memcmp(build_id, e->build_id, build_id_len) != 0)
		return false;
	e = parallel_cfi_done(t);
	built = e->rc == 0;
	if (built) {
		*table = e->table;
		e->rc = -1; /* taken */
	}
	parallel_cfi_free(e);
	return built;
}

void mt_tracer_cfi_end(struct tracer *t)
{
	parallel_cfi_free(parallel_cfi_done(t)); /* not taken */
}

/* The allocator probes are made: the grace thread stops (its links stay until
 * the session's go). */
int mt_tracer_grace_await(struct tracer *t)
{
	const struct mt_uprobe_grace *w = &t->parallel.uprobe_grace;

	mt_uprobe_grace_stop(&t->parallel.uprobe_grace);
	if (t->opts->verbose < 2)
		return 0;
	if (w->nlinks)
		mt_detail("uprobe grace period taken beside the BPF "
			  "load: the first registration in %.2f ms, %zu in all",
			  w->first_ns / 1e6, w->nlinks);
	else if (w->err)
		mt_detail("uprobe grace period not taken beside: %s",
			  strerror(-w->err));
	return 0;
}

void mt_tracer_grace_end(struct tracer *t)
{
	mt_uprobe_grace_stop(&t->parallel.uprobe_grace);
}
