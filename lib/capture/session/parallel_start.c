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
#include "mt_user.h"
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
};

static void open_bpf_job(void *arg)
{
	struct mt_parallel_open *e = arg;

	mt_tracer_open_bpf(&e->opened);
}

void mt_tracer_parallel_open_start(struct tracer *t)
{
	struct mt_parallel_open *e = calloc(1, sizeof(*e));

	if (!e)
		return;
	e->job = mt_job_start(open_bpf_job, e);
	if (!e->job) {
		free(e);
		return;
	}
	t->parallel_open = e;
}

bool mt_tracer_parallel_opened(struct tracer *t, struct mt_opened_bpf *o)
{
	struct mt_parallel_open *e = t->parallel_open;

	if (!e)
		return false;
	mt_job_finish(e->job);
	*o = e->opened;
	free(e);
	t->parallel_open = NULL;
	return true;
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
static void start_preparing(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();

	if (!t->opts->track_allocators || !libc[0])
		return;
	t->preparing = mt_job_start(prepare_libc, (void *)libc);
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
static void start_building_cfi(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();
	struct mt_parallel_cfi *e;

	if (!t->opts->stacks || !libc[0])
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->build_id_len =
	    mt_elf_build_id(libc, e->build_id, sizeof(e->build_id));
	if (e->build_id_len <= 0) { /* nothing to know its copies by */
		free(e);
		return;
	}
	e->path = strdup(libc);
	if (!e->path || pthread_create(&e->thread, NULL, build_cfi, e) != 0) {
		free(e->path);
		free(e);
		return;
	}
	t->parallel_cfi = e;
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
	int fd; /* -1: not opened */
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

void mt_tracer_parallel_rss_start(struct tracer *t)
{
	struct mt_parallel_event *e;

	if (!t->rss)
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->fd = -1;
	e->job = mt_job_start(open_rss_event, e);
	if (!e->job) {
		free(e);
		return;
	}
	t->rss_event = e;
}

int mt_tracer_parallel_rss_event(struct tracer *t)
{
	struct mt_parallel_event *e = t->rss_event;
	int fd;

	if (!e)
		return -1;
	mt_job_finish(e->job);
	fd = e->fd;
	free(e);
	t->rss_event = NULL;
	return fd;
}

/* The command's program and its libraries, found by a thread: finding
 * them and reading their symbols (~0.3 ms for true, ~0.7 for ls) needs
 * no BPF. */
struct mt_parallel_program {
	struct mt_job *job;
	const char *file, *libc;
	struct mt_code_program program;
};

static void find_program(void *arg)
{
	struct mt_parallel_program *e = arg;

	mt_code_find_program(&e->program, e->file, e->libc);
}

/* Not for a command run as another user: execvp(3) searches with its
 * rights, not ours. */
static void start_finding_program(struct tracer *t)
{
	const struct mt_tracer_opts *o = t->opts;
	struct mt_parallel_program *e;

	if (!mt_tracer_follows_code(o) || (o->user && o->user->is_sudo))
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->file = o->argv[0];
	e->libc = o->libc_path ? o->libc_path : mt_self_libc();
	e->job = mt_job_start(find_program, e);
	if (!e->job) {
		free(e);
		return;
	}
	t->parallel_program = e;
}

bool mt_tracer_parallel_program(struct tracer *t, struct mt_code_program *p)
{
	struct mt_parallel_program *e = t->parallel_program;

	if (!e)
		return false;
	mt_job_finish(e->job);
	*p = e->program;
	free(e);
	t->parallel_program = NULL;
	return true;
}

/* Will the start-up register uprobes?  Not under --fast, whose preload
 * records libc (only --scan's files are probed at the start): the
 * allocator probes' step then waited for the first of the grace-period
 * registrations, its grace period (10-14 ms of `mt-trace --fast -- true`,
 * -vv), for nothing. */
static bool grace_wanted(const struct tracer *t)
{
	const char *scan = getenv("MT_SCAN");

	if (!mt_tracer_follows_code(t->opts))
		return false;
	return !t->fast || t->opts->nscan || (scan && *scan);
}

void mt_tracer_parallel_start(struct tracer *t)
{
	if (grace_wanted(t))
		mt_uprobe_grace_start(&t->uprobe_grace);
	start_preparing(t);
	start_building_cfi(t);
	start_finding_program(t);
}

/* The thread's table, once it is done (freed unless taken). */
static struct mt_parallel_cfi *parallel_cfi_done(struct tracer *t)
{
	struct mt_parallel_cfi *e = t->parallel_cfi;

	if (e) {
		pthread_join(e->thread, NULL);
		t->parallel_cfi = NULL;
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
	struct mt_parallel_cfi *e = t->parallel_cfi;
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

void mt_tracer_parallel_prepared(struct tracer *t)
{
	mt_job_finish(t->preparing);
	t->preparing = NULL;
}

void mt_tracer_parallel_probes_made(struct tracer *t)
{
	const struct mt_uprobe_grace *w = &t->uprobe_grace;

	mt_uprobe_grace_stop(&t->uprobe_grace);
	if (t->opts->verbose < 2)
		return;
	if (w->nlinks)
		fprintf(stderr,
			"mt-trace: uprobe registration warmed beside the BPF "
			"load: the first in %.2f ms, %zu in all\n",
			w->first_ns / 1e6, w->nlinks);
	else if (w->err)
		fprintf(stderr,
			"mt-trace: uprobe registration not warmed: %s\n",
			strerror(-w->err));
}

void mt_tracer_parallel_end(struct tracer *t)
{
	struct mt_opened_bpf opened;

	if (mt_tracer_parallel_opened(t, &opened)) { /* a failed start */
		mt_trace__destroy(opened.skel);
		if (opened.btf_fd >= 0)
			close(opened.btf_fd);
	}
	/* a failed start: still registering */
	mt_uprobe_grace_stop(&t->uprobe_grace);
	mt_tracer_parallel_prepared(t);
	parallel_cfi_free(parallel_cfi_done(t));
	if (t->parallel_program) { /* a failed start: not inspected */
		struct mt_code_program p;

		mt_tracer_parallel_program(t, &p);
		mt_code_program_free(&p);
	}
	if (t->rss_event) { /* a failed start: not attached */
		int fd = mt_tracer_parallel_rss_event(t);

		if (fd >= 0)
			close(fd);
	}
}
