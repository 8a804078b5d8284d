// SPDX-License-Identifier: MIT
/*
 * tracer.c - mt-trace's engine: start the command held before its exec, load
 * and attach the BPF side, let the command go, and turn the ring buffers
 * into the raw stream until the command exits.
 *
 * Start-up order matters (docs/ARCHITECTURE.md): the child is forked
 * first and blocks on a pipe; only when its pid is in the traced table and
 * every probe is attached does one byte release it to exec, so the new
 * program's first instruction (ld.so, constructors) is already traced.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_attach.h"
#include "mt_confine.h"
#include "mt_control.h"
#include "mt_core_btf.h"
#include "mt_human.h"
#include "mt_elf.h"
#include "mt_grow.h"
#include "mt_log.h"
#include "mt_probe.h"
#include "mt_pss.h"
#include "mt_stack.h"
#include "mt_raw.h"
#include "mt_tracer.h"
#include "mt_trace.skel.h"
#include "mt_watchdog.h"
#include "tracer_fast.h"
#include "tracer_int.h"
#include "mt_xalloc.h"

/* How often the events ring is drained when it does not wake us (its BPF
 * side wakes the consumer only at a fill level). */
#define DRAIN_INTERVAL_MS 50

/* The inspection reports an allocator it found: an event of the stream. */
static int allocator_found(void *ctx, pid_t pid, const char *path,
			   enum mt_alloc_family family)
{
	struct mt_event fields = {.flags = family};

	return mt_tracer_own_event(ctx, MT_EV_ALLOCATOR, pid, path,
				   strlen(path), &fields);
}

/* --fast: libc and libstdc++ are the preload's to record, not probed
 * (but for processes without it, which get links of their own on them). */
static bool covered_by_preload(void *ctx, int fd, enum mt_alloc_family *family)
{
	struct tracer *t = ctx;

	if (!mt_fast_covers(t->fast, fd, family))
		return false;
	if (*family != MT_ALLOC_NONE) /* not the recorder itself */
		mt_fast_links_file(&t->links, fd);
	return true;
}

/* --fast: a process stopped at its exec or fork may need links of its
 * own. */
static void fast_before_resume(void *ctx, const struct mt_event *e)
{
	struct tracer *t = ctx;

	mt_fast_links_stopped(&t->links, t->fast, e);
}

/* A code file the tree maps, first seen: for the call stacks. */
static void code_file_found(void *ctx, int fd, const char *path, pid_t pid,
			    const struct mt_code_key *key)
{
	(void)pid; /* its CODE_FILE is stamped with the file's first use */
	mt_tracer_stack_file(ctx, fd, path, key);
}

static void exec_inspected(void *ctx, pid_t pid)
{
	mt_tracer_stacks_at_exec(ctx, pid);
}

static void use_bpf_for_code(struct tracer *t)
{
	const struct mt_code_host host = {
	    .ctx = t,
	    .allocator_found = allocator_found,
	    .code_file_found = code_file_found,
	    .exec_inspected = exec_inspected,
	    .probe_allocators = t->opts->track_allocators,
	    .covered = t->fast ? covered_by_preload : NULL,
	    .before_resume = t->fast ? fast_before_resume : NULL,
	};

	mt_code_use_bpf(&t->probes.code, t->skel, t->probes.probe_mode, &host,
			t->opts->verbose);
	if (t->fast)
		mt_fast_links_use_bpf(&t->links, t->skel, t->probes.probe_mode);
}

/* The kernel refused the links of the current mode (no uprobe sessions
 * before 6.10, no uprobe_multi before 6.6): the next mode needs the
 * programs loaded for it, so load again. */
static int fall_back(struct tracer *t)
{
	enum mt_probe_mode next = t->probes.probe_mode + 1;

	if (t->opts->verbose)
		mt_verbose("no %s (%s); using %s",
			   mt_probe_mode_name(t->probes.probe_mode),
			   strerror(t->probes.code.links_refused),
			   mt_probe_mode_name(next));
	mt_tracer_rings_await(t); /* they go with the object */
	mt_trace__destroy(t->skel);
	t->skel = NULL;
	if (mt_tracer_load_bpf_mode(t, next) || mt_tracer_make_rings(t))
		return -1;
	use_bpf_for_code(t);
	return 0;
}

/* --scan FILE and MT_SCAN=FILE:FILE... (which mt-trace's main adds) */
static int scan_extra(struct tracer *t)
{
	return mt_code_scan(&t->probes.code, t->opts->scan, t->opts->nscan,
			    t->cmd.child);
}

/* mt-trace's own C library (the one most programs share) and --scan's
 * files are probed before the command starts: reported as its own. */
static int probe_first_allocators(struct tracer *t)
{
	const char *libc =
	    t->opts->libc_path ? t->opts->libc_path : mt_self_libc();
	int rc = 0;

	use_bpf_for_code(t);
	if (libc[0]) {
		rc = mt_code_probe_first(&t->probes.code, libc, t->cmd.child);
		while (rc == MT_CODE_NO_SUCH_LINKS &&
		       t->probes.probe_mode != MT_PROBES_CLASSIC &&
		       fall_back(t) == 0)
			rc = mt_code_probe_first(&t->probes.code, libc,
						 t->cmd.child);
		if (rc)
			return -1;
	}
	return scan_extra(t);
}

/* The command's program and its libraries, found beside the BPF load:
 * inspected now, so that neither its exec nor their mappings stop. */
static void inspect_program(struct tracer *t)
{
	struct mt_code_program p;

	if (!mt_tracer_parallel_program(t, &p))
		return;
	mt_code_inspect_program(&t->probes.code, &p, t->cmd.child);
	mt_code_program_free(&p);
}

/* -vv: the time from the command's end to mt-trace's, one phase at a
 * time (what the process's own exit takes after that, the kernel's, is
 * not in it; the start-up's are the plan's, below) */
static void exit_phase(struct tracer *t, const char *name, uint64_t since_ns)
{
	uint64_t now = mt_clock_ns(CLOCK_MONOTONIC);

	if (t->opts->verbose > 1)
		mt_detail("exit: %-18s %6.2f ms", name, (now - since_ns) / 1e6);
	t->phase_ns = now;
}

/* kmem:rss_stat's program on the perf event a thread opened beside the
 * load (parallel_start.c); without it, the skeleton's attach opens its
 * own, and says what failed. */
static void attach_rss_size_opened(struct tracer *t)
{
	struct bpf_program *prog = t->skel->progs.on_rss_size;
	int fd = mt_tracer_parallel_rss_event(t);
	struct bpf_link *link;

	if (fd < 0)
		return;
	link = bpf_program__attach_perf_event(prog, fd);
	if (!link) {
		close(fd);
		return;
	}
	t->skel->links.on_rss_size = link; /* closes fd when destroyed */
	t->rss_perf_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* closed last */
	bpf_program__set_autoattach(prog, false);
}

/* ---- the loop ------------------------------------------------------------ */

static int write_header(struct tracer *t)
{
	const struct mt_tracer_opts *o = t->opts;
	struct mt_meta meta = {0};
	struct utsname un;
	int argc = 0, err;

	while (o->argv[argc])
		argc++;
	uname(&un);
	meta.version = MT_RAW_VERSION;
	meta.page_size = sysconf(_SC_PAGESIZE);
	meta.clock_id = CLOCK_MONOTONIC;
	meta.root_pid = t->cmd.child;
	meta.flags =
	    MT_HDR_SYSCALLS | (o->track_allocators ? MT_HDR_ALLOCATORS : 0) |
	    (t->rss ? MT_HDR_RSS : 0) | (o->physical ? MT_HDR_PHYSICAL : 0) |
	    (o->stacks ? MT_HDR_STACKS : 0) |
	    (t->probes.confine.confined ? MT_HDR_CONFINED : 0) |
	    (t->fast ? MT_HDR_RECORDER : 0);
	meta.start_monotonic_ns = t->start_monotonic_ns;
	meta.start_realtime_ns = t->start_realtime_ns;
	meta.host = un.nodename;
	meta.argc = argc;
	meta.argv = o->argv;
	err = mt_raw_write_header(o->out_fd, &meta);
	if (err) {
		mt_error("%s: %s", o->out_name, strerror(-err));
		t->out.output_failed = true;
		return -1;
	}
	return 0;
}

/* ---- control FIFO and sampling ----------------------------------------- */

static void set_enabled(struct tracer *t, bool on)
{
	t->skel->data->allocs_enabled = on;
	t->skel->data->syscalls_enabled = on;
	if (t->fast)
		mt_fast_set_enabled(t->fast, on);
}

static void on_control(void *ctx, enum mt_control_cmd cmd, const char *arg,
		       size_t arglen, const char *line)
{
	struct tracer *t = ctx;
	int rc = 0;

	switch (cmd) {
	case MT_CTL_ENABLE:
	case MT_CTL_DISABLE:
		/* drain first: what happened before the switch stays in */
		rc = mt_tracer_collect(t, false);
		set_enabled(t, cmd == MT_CTL_ENABLE);
		if (!rc)
			rc = mt_tracer_own_event(
			    t,
			    cmd == MT_CTL_ENABLE ? MT_EV_ENABLE : MT_EV_DISABLE,
			    0, NULL, 0, NULL);
		break;
	case MT_CTL_MARKER:
		rc = mt_tracer_own_event(t, MT_EV_MARKER, 0, arg, arglen, NULL);
		break;
	case MT_CTL_INVALID:
		mt_error("%s: unknown command '%.80s' (expected "
			 "enable, disable or marker NAME)",
			 t->control.path, line);
		break;
	}
	if (rc == 0 && cmd != MT_CTL_INVALID && t->opts->verbose)
		mt_verbose("control: %s", line);
	mt_control_ack(&t->control);
}

static int open_control(struct tracer *t)
{
	const char *path = t->opts->control_path;
	char why[PATH_MAX + 160];

	if (!path)
		return 0;
	if (mt_control_open(&t->control, path, t->opts->user, why,
			    sizeof(why))) {
		mt_error("--control: %s", why);
		mt_control_close(&t->control);
		return -1;
	}
	t->has_control = true;
	return 0;
}

/* --physical without the kernel's rmap hooks: PSS of each live process,
 * read as one round before any is written (mt_pss.h: why) */
static int sample_pss(struct tracer *t)
{
	struct mt_pss_sweep *w = &t->sampling.sweep;

	mt_pss_sweep_read(w, t->live, t->nlive);
	for (size_t k = 0; k < w->nnow; k++) {
		const struct mt_pss_sample *s = &w->now[w->order[k]];
		struct mt_event fields = {
		    .size = s->pss.pss,
		    .addr = s->pss.pss_anon,
		    .old_addr = s->pss.pss_file,
		    .old_size = s->pss.pss_shmem,
		};

		if (mt_tracer_own_event(t, MT_EV_PSS, s->pid, NULL, 0, &fields))
			return -1;
	}
	mt_pss_sweep_next(w);
	return 0;
}

static int start_sampling(struct tracer *t)
{
	struct itimerspec its = {
	    .it_interval = mt_timespec_of(t->opts->interval_ns),
	    .it_value = mt_timespec_of(t->opts->interval_ns),
	};

	t->sampling.fd = -1;
	if (!t->opts->physical)
		return 0;
	t->sampling.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (t->sampling.fd < 0 ||
	    timerfd_settime(t->sampling.fd, 0, &its, NULL)) {
		mt_error("timerfd: %s", strerror(errno));
		return -1;
	}
	return 0;
}

enum { SRC_RING, SRC_CHILD, SRC_SIGNAL, SRC_CONTROL, SRC_SAMPLE, SRC_OUTPUT };

static void watch(int epfd, int fd, uint32_t id, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u32 = id};

	if (fd >= 0)
		epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int trace_loop(struct tracer *t)
{
	struct epoll_event evs[8];
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	bool child_done = false;
	uint64_t ticks;

	/*
	 * The rings edge-triggered: libbpf's epoll set is ready as long as any
	 * record waits, so a level-triggered watch woke mt-trace for every few
	 * events the program made (a wake-up per ~9 events, half a CPU);
	 * edge-triggered, it wakes when the BPF side asks (a ring 1/8 full, a
	 * fork, exec or exit) and the timer drains the rest.
	 */
	watch(epfd, ring_buffer__epoll_fd(t->rings), SRC_RING,
	      EPOLLIN | EPOLLET);
	watch(epfd, t->cmd.pidfd, SRC_CHILD, EPOLLIN);
	/* --fast: a recorder's ring is half full (read at each drain) */
	watch(epfd, t->fast ? mt_fast_wake_fd(t->fast) : -1, SRC_RING, EPOLLIN);
	watch(epfd, t->cmd.signal_fd, SRC_SIGNAL, EPOLLIN);
	watch(epfd, t->has_control ? t->control.fd : -1, SRC_CONTROL, EPOLLIN);
	watch(epfd, t->sampling.fd, SRC_SAMPLE, EPOLLIN);
	/* a pipe's write end reports an error as soon as its reader is gone:
	 * know it then, not at the next write, which a quiet command may never
	 * make (epoll refuses a regular file, harmlessly) */
	watch(epfd, t->opts->out_fd, SRC_OUTPUT, 0);
	while (!child_done && !t->out.output_failed) {
		int n = epoll_wait(epfd, evs, 8, DRAIN_INTERVAL_MS);

		if (n < 0 && errno != EINTR) {
			mt_error("epoll: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case SRC_CHILD:
				child_done = true;
				break;
			case SRC_SIGNAL:
				mt_command_forward_signals(t);
				break;
			case SRC_CONTROL:
				mt_control_read(&t->control, on_control, t);
				break;
			case SRC_OUTPUT:
				mt_tracer_output_gone(t);
				break;
			case SRC_SAMPLE:
				if (read(t->sampling.fd, &ticks,
					 sizeof(ticks)) > 0)
					sample_pss(t);
				break;
			}
		}
		if (mt_tracer_drain(t, false))
			break;
	}
	close(epfd);
	return child_done && !t->out.output_failed ? 0 : -1;
}

/*
 * Stops for new code and for backpressure are undone by mt-trace; should
 * it die before, by its watchdog (watchdog.c).  Only with stops: --no-stop
 * makes none, --track-allocators=false none for code.
 */
static void start_watchdog(struct tracer *t)
{
	bool code_stops = t->opts->track_allocators && !t->opts->no_stop;

	if (!code_stops && !t->bp.on)
		return;
	t->watchdog = mt_watchdog_start(bpf_map__fd(t->skel->maps.traced),
					bpf_map__fd(t->skel->maps.resumed),
					bpf_map__fd(t->skel->maps.unthrottled));
}

/* mt-trace is ending with every stop undone (mt_tracer_release_stopped(), and
 * its background detacher): the watchdog has nothing left to do.  Not waited
 * for (its exit took 1-10 ms on a busy machine): whoever reaps mt-trace's
 * orphans reaps it. */
static void stop_watchdog(struct tracer *t)
{
	if (t->watchdog <= 0)
		return;
	kill(t->watchdog, SIGKILL);
	t->watchdog = -1;
}

static void cleanup(struct tracer *t)
{
	/* the largest maps, awaited and not given up: a failed start */
	mt_tracer_parallel_maps_end(t);
	if (t->has_control)
		mt_control_close(&t->control);
	if (t->sampling.fd >= 0)
		close(t->sampling.fd);
	mt_pss_sweep_free(&t->sampling.sweep);
	if (t->skel) {
		t->skel->bss->discover_code = 0;
		t->skel->bss->backpressure = 0;
		__atomic_store_n(&t->skel->bss->session_live, 0,
				 __ATOMIC_RELEASE);
	}
	if (t->fast) /* before the detacher forks: it would hold them */
		mt_fast_links_free(&t->links);
	if (!mt_tracer_detach_in_background(t)) {
		mt_tracer_detach_all(t);
		if (t->rss_perf_fd >= 0)
			close(t->rss_perf_fd);
		t->rss_perf_fd = -1;
	}
	exit_phase(t, "detach", t->phase_ns);
	mt_tracer_release_stopped(t);
	free(t->live);
	mt_code_free(&t->probes.code);
	mt_tracer_stacks_free(t);
	stop_watchdog(t);
	mt_backpressure_unwatch_rings(t);
	ring_buffer__free(t->rings);
	mt_trace__destroy(t->skel);
	mt_tracer_staging_free(&t->staged);
	mt_tracer_writer_end(t);
	free(t->out.batch);
	mt_fast_free(t->fast); /* descendants still running record no more */
	/* last: the threads of the work done in parallel with the start-up
	 * are joined when they have had the most time to end (a failed start
	 * ended that work first: failed_start()) */
	mt_startup_end(&t->plan);
	exit_phase(t, "free", t->phase_ns);
}

/* ---- the start-up -------------------------------------------------------
 *
 * Its steps, each a function of the session (0, or -1 said), and the work
 * begun beside them; the plan below says in which order, what each needs
 * and makes, and what runs beside what.  Order matters: the command is
 * forked first and waits on its release pipe; only when its pid is in the
 * traced table and every probe is attached does one byte release it to
 * exec, so its first instruction is traced.
 */

static struct tracer *ctx_tracer(void *ctx)
{
	return ctx;
}

/* --fast: the preloaded recorders' rings, before the fork (the command
 * inherits them) */
static int step_fast_rings(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);
	const struct mt_tracer_opts *o = t->opts;

	if (!o->fast || !o->track_allocators)
		return 0;
	t->fast = mt_fast_start(o->verbose, o->stacks ? o->stack_depth : 0);
	if (!t->fast)
		return -1;
	mt_fast_set_enabled(t->fast, !o->start_disabled);
	mt_fast_links_init(&t->links, o->verbose);
	return 0;
}

static int step_namespace(void *ctx)
{
	mt_tracer_confine_begin(ctx_tracer(ctx));
	return 0; /* without it, the probes are global (said) */
}

static int step_fork(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);

	if (mt_command_spawn(t))
		return -1;
	mt_tracer_live_add(t, t->cmd.child);
	return 0;
}

/* RSS needs the classic kmem:rss_stat tracepoint, so tracefs */
static int step_tracefs(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);

	t->rss = t->opts->rss && mt_tracer_ensure_tracefs(t) == 0;
	if (t->opts->rss && !t->rss)
		mt_warning("tracing without RSS");
	if (t->opts->physical)
		mt_note("physical memory: %s",
			mt_physical_method_note(t->opts->verbose > 0));
	return 0;
}

static int step_control(void *ctx)
{
	return open_control(ctx_tracer(ctx));
}

static int step_load(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);

	t->ncpus = libbpf_num_possible_cpus();
	return mt_tracer_load_best_bpf(t);
}

static void begin_rings(void *ctx)
{
	mt_tracer_rings_begin(ctx_tracer(ctx));
}

static int await_rings(void *ctx)
{
	return mt_tracer_rings_await(ctx_tracer(ctx));
}

static void end_rings(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);

	mt_job_end(t->parallel.rings); /* made, or a start that failed */
	t->parallel.rings = NULL;
}

static int step_first_allocators(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);

	if (!mt_tracer_follows_code(t->opts))
		return 0;
	return probe_first_allocators(t);
}

static int step_inspect_program(void *ctx)
{
	inspect_program(ctx_tracer(ctx));
	return 0;
}

/* raw tracepoints and kmem:rss_stat: the skeleton attaches them */
static int step_tracepoints(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);
	int err;

	if (t->rss)
		attach_rss_size_opened(t);
	err = mt_trace__attach(t->skel);
	if (err) {
		mt_tracer_explain_privileges("attaching tracepoints", -err,
					     t->opts->verbose > 0);
		return -1;
	}
	/* the process-life programs act from now on */
	__atomic_store_n(&t->skel->bss->session_live, 1, __ATOMIC_RELEASE);
	return 0;
}

static int step_traced_table(void *ctx)
{
	struct tracer *t = ctx_tracer(ctx);
	__u32 pid = t->cmd.child;
	struct mt_traced entry = {.state = MT_AWAITING_EXEC};

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.traced), &pid, &entry,
				BPF_ANY)) {
		mt_error("traced table: %s", strerror(errno));
		return -1;
	}
	mt_tracer_parallel_maps_end(t); /* the skeleton holds its own */
	return 0;
}

static int step_sampling(void *ctx)
{
	return start_sampling(ctx_tracer(ctx));
}

static int step_header(void *ctx)
{
	return write_header(ctx_tracer(ctx));
}

static int step_watchdog(void *ctx)
{
	start_watchdog(ctx_tracer(ctx));
	return 0; /* without one, a stopped process waits for mt-trace */
}

/* a step of its own: the command, woken, may take this CPU first */
static int step_release(void *ctx)
{
	return mt_command_release(ctx_tracer(ctx));
}

/* The work begun beside the steps: the same functions over the context */
#define BESIDE(what)                                                           \
	static void begin_##what(void *ctx)                                    \
	{                                                                      \
		mt_tracer_##what##_begin(ctx_tracer(ctx));                     \
	}                                                                      \
	static void end_##what(void *ctx)                                      \
	{                                                                      \
		mt_tracer_##what##_end(ctx_tracer(ctx));                       \
	}
#define AWAITED(what)                                                          \
	BESIDE(what)                                                           \
	static int await_##what(void *ctx)                                     \
	{                                                                      \
		return mt_tracer_##what##_await(ctx_tracer(ctx));              \
	}
AWAITED(open)
AWAITED(parallel_maps)
AWAITED(confine_copies)
AWAITED(grace)
AWAITED(libc_plan)
BESIDE(cfi)
AWAITED(program)
AWAITED(rss)

/*
 * The plan.  A step with run() runs on mt-trace's thread; one with
 * begin() starts work beside the later steps (a thread, mt_job.h), which
 * the step named by `until` waits for (-vv: "NAME (waited)"), or which its
 * consumer takes when it needs it.  Two vCPUs: the work beside is what
 * needs no BPF (opening the object, the maps, the copies, the plans), so
 * that the kernel's load on one CPU is overlapped by it on the other.
 */
static const struct mt_step startup_plan[] = {
    {"open BPF object", "", "the skeleton, opened (ELF, BTF)",
     .begin = begin_open, .until = "BPF load", .await = await_open,
     .end = end_open},
    {"--fast rings", "", "the recorders' shared rings (--fast)",
     .run = step_fast_rings},
    {"mount namespace", "", "mt-trace in the tree's namespace",
     .run = step_namespace, .end = end_confine_copies},
    {"largest maps", "", "the largest maps' fds", .begin = begin_parallel_maps,
     .until = "BPF load", .await = await_parallel_maps,
     .end = end_parallel_maps},
    {"fork", "the recorders' rings, the namespace",
     "the command, held before its exec; its pidfd", .run = step_fork},
    {"private copies", "the namespace, the fork",
     "the allocator files' copies, bound", .begin = begin_confine_copies,
     .until = "first allocators", .await = await_confine_copies,
     .end = end_confine_copies},
    {"uprobe grace period", "", "the first registration's grace period waited",
     .begin = begin_grace, .until = "program inspected", .await = await_grace,
     .end = end_grace},
    {"libc plan", "", "where libc's probes go", .begin = begin_libc_plan,
     .until = "first allocators", .await = await_libc_plan,
     .end = end_libc_plan},
    {"libc unwind rows", "", "libc's CFI table (--stacks)", .begin = begin_cfi,
     .end = end_cfi},
    {"program found", "", "the command's program and libraries, read",
     .begin = begin_program, .until = "program inspected",
     .await = await_program, .end = end_program},
    {"tracefs", "the namespace", "tracefs mounted, or RSS off",
     .run = step_tracefs},
    {"rss_stat event", "tracefs", "kmem:rss_stat's perf event",
     .begin = begin_rss, .until = "tracepoints", .await = await_rss,
     .end = end_rss},
    {"control FIFO", "", "--control's FIFO, open", .run = step_control},
    {"BPF load", "the skeleton, the maps", "programs and maps, loaded",
     .run = step_load},
    {"rings", "the loaded maps", "the rings' consumer", .begin = begin_rings,
     .until = "release", .await = await_rings, .end = end_rings},
    {"first allocators", "the load, the copies, libc's plan",
     "libc's and --scan's probes, attached", .run = step_first_allocators},
    {"program inspected", "the load, the program found",
     "its files probed before its exec", .run = step_inspect_program},
    {"tracepoints", "the load, the rss_stat event", "the tracepoints, attached",
     .run = step_tracepoints},
    {"traced table", "the load, the fork", "the command's pid, traced",
     .run = step_traced_table},
    {"sampling timer", "", "--physical's timer", .run = step_sampling},
    {"header", "the fork", "the stream's header, written", .run = step_header},
    {"watchdog", "the load", "the process that continues stopped ones",
     .run = step_watchdog},
    {"release", "everything above", "the command, running",
     .run = step_release},
};

/* The start-up failed: the command, waiting on its release pipe, exits
 * as the pipe closes; the rest is let go of. */
static void failed_start(struct tracer *t)
{
	t->start_failed = true;
	mt_startup_end(&t->plan);
	if (t->cmd.release_fd >= 0)
		close(t->cmd.release_fd);
	t->cmd.release_fd = -1;
	if (t->cmd.child > 0)
		waitpid(t->cmd.child, NULL, 0);
	t->cmd.child = 0;
	cleanup(t);
	if (t->cmd.pidfd >= 0)
		close(t->cmd.pidfd);
	if (t->cmd.exec_err_fd >= 0)
		close(t->cmd.exec_err_fd);
}

int mt_trace_run(const struct mt_tracer_opts *opts)
{
	struct tracer t = {
	    .opts = opts,
	    .cmd = {.release_fd = -1,
		    .exec_err_fd = -1,
		    .pidfd = -1,
		    .signal_fd = -1},
	    .sampling = {.fd = -1},
	    .rss_perf_fd = -1,
	    .watchdog = -1,
	    /* a stop is what --no-stop asks never to see */
	    .bp = {.on = !opts->no_backpressure && !opts->no_stop},
	};
	struct mt_meta end = {0};
	uint64_t rss_dropped;
	int status, err;

	t.start_monotonic_ns = mt_clock_ns(CLOCK_MONOTONIC);
	t.phase_ns = t.start_monotonic_ns;
	t.start_realtime_ns = mt_clock_ns(CLOCK_REALTIME);
	signal(SIGPIPE, SIG_IGN);
	t.out.batch = mt_xmalloc(sizeof(struct mt_raw_batch) +
				 (size_t)BATCH_MAX_RECORDS * MT_EVENT_SIZE);
	if (mt_command_signalfd(&t) < 0) {
		mt_error("cannot start the command: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &t.cmd.signals_old, NULL);
		free(t.out.batch);
		return MT_EXIT_TRACER_FAILED;
	}
	mt_tracer_libbpf_log(opts->verbose);
	mt_startup_init(&t.plan, startup_plan,
			sizeof(startup_plan) / sizeof(startup_plan[0]), &t,
			opts->verbose, t.start_monotonic_ns);
	if (mt_startup_run(&t.plan)) {
		failed_start(&t);
		close(t.cmd.signal_fd);
		sigprocmask(SIG_SETMASK, &t.cmd.signals_old, NULL);
		mt_startup_test_stop(&t.plan); /* let go of everything */
		return MT_EXIT_TRACER_FAILED;
	}
	mt_startup_timed(&t.plan, "total", t.start_monotonic_ns);
	if (trace_loop(&t)) {
		/* the output is gone: do not leave the command running (nor
		 * stopped, should the BPF side have stopped it just now) */
		kill(t.cmd.child, SIGTERM);
		kill(t.cmd.child, SIGCONT);
		cleanup(&t);
		return MT_EXIT_TRACER_FAILED;
	}
	mt_command_signals_end(&t);
	status = mt_command_wait_status(&t, &end);
	t.phase_ns = mt_clock_ns(CLOCK_MONOTONIC);
	t.exit_ns = t.phase_ns;
	mt_command_report_exec_failure(&t);
	/* everything the command did is committed by now: last drain */
	if (mt_tracer_drain(&t, true) || mt_tracer_flush(&t)) {
		cleanup(&t);
		return MT_EXIT_TRACER_FAILED;
	}
	/* the command's own end, not when its trace was all written (a slow
	 * reader may have held mt-trace up long after) */
	end.end_monotonic_ns = t.out.last_record_ns
				   ? t.out.last_record_ns
				   : mt_clock_ns(CLOCK_MONOTONIC);
	end.events = t.out.events_written;
	end.lost = t.out.lost_reported;
	end.batches = t.out.seq;
	end.has_trailer = true;
	if (t.fast && mt_fast_incomplete(t.fast))
		end.incomplete = MT_INCOMPLETE_SHARED_MEMORY;
	err = mt_raw_write_trailer(opts->out_fd, &end);
	if (err)
		mt_error("%s: %s", opts->out_name, strerror(-err));
	rss_dropped = mt_tracer_read_counters(&t, MT_DROP_RSS_UNATTRIBUTED,
					      MT_DROP_RSS_UNATTRIBUTED + 1);
	if (opts->verbose && t.rss)
		mt_verbose("%llu RSS updates not attributable (new or "
			   "dying address spaces) dropped",
			   (unsigned long long)rss_dropped);
	if (opts->verbose && t.skel)
		mt_verbose(
		    "%llu frees glibc made itself (its threads' "
		    "tcaches at their exits) not recorded",
		    (unsigned long long)mt_tracer_read_counters(
			&t, MT_DROP_INTERNAL_FREE, MT_DROP_INTERNAL_FREE + 1));
	if (opts->verbose && t.bp.on)
		mt_verbose(
		    "%llu backpressure stops, %llu held on for a "
		    "record still being written",
		    (unsigned long long)(t.skel ? t.skel->bss->throttles : 0),
		    (unsigned long long)t.bp.releases_held);
	if (end.lost && !end.incomplete)
		mt_error("%llu event%s lost (ring buffer "
			 "full); try a larger --ring-size",
			 (unsigned long long)end.lost, mt_plural(end.lost));
	else if (end.lost)
		mt_error("%llu event%s lost", (unsigned long long)end.lost,
			 mt_plural(end.lost));
	exit_phase(&t, "last drain, end", t.phase_ns);
	cleanup(&t);
	exit_phase(&t, "total", t.exit_ns);
	if (end.incomplete) /* said already, and in the trailer */
		return MT_EXIT_TRACER_FAILED;
	return err ? MT_EXIT_TRACER_FAILED : status;
}
