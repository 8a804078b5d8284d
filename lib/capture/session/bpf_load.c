// SPDX-License-Identifier: MIT
/*
 * bpf_load.c - the BPF side made ready: the skeleton (opened beside the
 * other steps: parallel_start.c) configured for the session, the programs
 * it needs chosen, loaded in the best probe mode the kernel has, and the
 * rings' consumer made.  The kernel's verifier is most of the load's time
 * (mt-trace -vvv: verifier_stats.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_attach.h"
#include "mt_job.h"
#include "mt_log.h"
#include "mt_probe.h"
#include "mt_trace.skel.h"
#include "mt_verifier_stats.h"
#include "tracer_fast.h"
#include "tracer_int.h"

/* libbpf's print callback has no context pointer */
static int mt_tracer_verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list args)
{
	/* libbpf's warnings come with hints that are wrong here (memlock:
	 * maps are charged to the memory cgroup); mt-trace says what failed
	 * and -v shows libbpf's own words.  Its debug output (-vvv) is not
	 * -vv's: writing its ~1,000 lines made -vv's timed "BPF load" 2-4 ms
	 * longer than a session's without them. */
	if (level == LIBBPF_DEBUG && mt_tracer_verbose < 3)
		return 0;
	if (level != LIBBPF_DEBUG && mt_tracer_verbose < 1)
		return 0;
	mt_log_verbatim(level == LIBBPF_DEBUG ? MT_LOG_DETAIL : MT_LOG_VERBOSE,
			fmt, args);
	return 0;
}

/* Load only the allocator programs the probe mode attaches, each with the
 * attach type it needs (the kernel checks it at load), and of the programs
 * that come with and without the stack walk, the one --stacks asks for
 * (mt_code_alloc_programs_for says which). */
static void choose_alloc_programs(struct mt_trace *skel,
				  enum mt_probe_mode mode, bool track,
				  bool stacks)
{
	struct bpf_program *all[] = {
	    skel->progs.alloc_enter,	skel->progs.alloc_session,
	    skel->progs.session_stacks, skel->progs.alloc_return,
	    skel->progs.return_stacks,
	};
	struct bpf_program *enter, *ret;

	mt_code_alloc_programs_for(skel, mode, stacks, &enter, &ret);
	bpf_program__set_autoload(skel->progs.on_sys_exit, !stacks);
	bpf_program__set_autoload(skel->progs.sys_exit_stacks, stacks);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		bool used = all[i] == enter ||
			    (all[i] == ret && mode != MT_PROBES_SESSION);

		bpf_program__set_autoload(all[i], track && used);
		/* classic uprobes keep the default attach type */
		if (mode != MT_PROBES_CLASSIC)
			bpf_program__set_expected_attach_type(
			    all[i], mt_probe_attach_type(mode));
	}
}

/*
 * The tables keyed by process (thread-group id) are hash tables whose
 * buckets the kernel allocates when they are made, 16 bytes a slot: 0.85 ms
 * of every start for each 65,536-slot table here.  They hold
 * MT_PROCESS_SLOTS live processes (mt_probe.h), fewer where pid_max is
 * lower (no table can hold more processes than there are process ids),
 * and --fast's two tables serve --fast alone.
 */
static void size_process_tables(struct mt_trace *skel, bool fast)
{
	__u32 slots =
	    mt_tracer_process_slots(bpf_map__max_entries(skel->maps.traced));
	struct bpf_map *tables[] = {
	    skel->maps.traced,	  skel->maps.resumed,	 skel->maps.unthrottled,
	    skel->maps.pid_links, skel->maps.fork_stops,
	};

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		bpf_map__set_max_entries(tables[i], slots);
	if (!fast) {
		bpf_map__set_max_entries(skel->maps.pid_links, 1);
		bpf_map__set_max_entries(skel->maps.fork_stops, 1);
	}
}

int mt_tracer_load_bpf_mode(struct tracer *t, enum mt_probe_mode mode)
{
	const struct mt_tracer_opts *o = t->opts;
	struct mt_verifier_stats *stats = NULL;
	struct mt_opened_bpf opened;
	struct mt_trace *skel;
	int btf_fd, err;

	if (!mt_tracer_parallel_opened(t, &opened))
		mt_tracer_open_bpf(&opened);
	skel = opened.skel;
	btf_fd = opened.btf_fd;
	if (btf_fd < 0 && o->verbose)
		mt_verbose("reading the kernel's BTF: %s", opened.why);
	if (!skel) {
		mt_tracer_explain_privileges("opening the BPF object",
					     opened.err, mt_tracer_verbose > 0);
		if (btf_fd >= 0)
			close(btf_fd);
		return -1;
	}
	bpf_map__set_max_entries(skel->maps.events, o->ring_bytes);
	size_process_tables(skel, t->fast != NULL);
	skel->rodata->page_size = sysconf(_SC_PAGESIZE);
	skel->rodata->wakeup_bytes = o->ring_bytes / 8;
	skel->bss->discover_code = mt_tracer_follows_code(o);
	skel->rodata->stop_for_new_code = !o->no_stop;
	skel->rodata->privileged_unseen = o->user && o->user->is_sudo;
	if (t->fast)
		mt_fast_configure(t->fast, skel);
	skel->data->allocs_enabled = !o->start_disabled;
	skel->data->syscalls_enabled = !o->start_disabled;
	skel->rodata->lifecycle_wakeup_bytes =
	    bpf_map__max_entries(skel->maps.lifecycle) / 4;
	if (!t->rss) {
		bpf_program__set_autoload(skel->progs.on_rss_owner, false);
		bpf_program__set_autoload(skel->progs.on_rss_size, false);
	}
	/* the recorder's own page faults, told apart from the program's
	 * (the tracer's RSS): x86's exceptions:page_fault_user */
#if defined(__x86_64__)
	if (!t->rss || !t->fast)
#endif
		bpf_program__set_autoload(skel->progs.on_page_fault, false);
	choose_alloc_programs(skel, mode, o->track_allocators, o->stacks);
	t->probes.probe_mode = mode;
	mt_tracer_stacks_configure(t, skel);
	mt_backpressure_configure(t, skel);
	mt_tracer_parallel_maps_use(t, skel);
	if (mt_tracer_verbose >= 3)
		stats = mt_verifier_stats_ask(skel->obj);
	err = mt_trace__load(skel);
	mt_verifier_stats_print(stats, skel->obj);
	if (btf_fd >= 0)
		close(btf_fd);
	if (err) {
		/* a kernel without sessions refuses their attach type: the
		 * caller tries the next mode, which says what failed */
		if (mode == MT_PROBES_SESSION && o->track_allocators) {
			if (o->verbose)
				mt_verbose("no uprobe sessions (%s)",
					   strerror(-err));
		} else {
			mt_tracer_explain_privileges("loading the BPF programs",
						     -err,
						     mt_tracer_verbose > 0);
		}
		mt_trace__destroy(skel);
		return -1;
	}
	t->skel = skel;
	mt_tracer_stacks_loaded(t);
	return 0;
}

/* Consumers of both rings, the lifecycle ring first (see mt_tracer_collect()).
 */
int mt_tracer_make_rings(struct tracer *t)
{
	ring_buffer__free(t->rings);
	t->rings = ring_buffer__new(bpf_map__fd(t->skel->maps.lifecycle),
				    mt_tracer_on_lifecycle, t, NULL);
	if (!t->rings ||
	    ring_buffer__add(t->rings, bpf_map__fd(t->skel->maps.events),
			     mt_tracer_on_event, t)) {
		mt_error("ring buffer: %s", strerror(errno));
		return -1;
	}
	mt_backpressure_watch_rings(t);
	return 0;
}

/* The rings' consumer is made by a job beside the steps after the load
 * (its mappings, 4 MiB the kernel maps at once, took 0.6-1.1 ms of the
 * "BPF load" step, -vv), and waited for before the command runs. */
static void make_rings_job(void *arg)
{
	struct tracer *t = arg;

	t->parallel.rings_rc = mt_tracer_make_rings(t);
}

void mt_tracer_rings_begin(struct tracer *t)
{
	t->parallel.rings_rc = 0;
	t->parallel.rings = mt_job_start(make_rings_job, t);
}

int mt_tracer_rings_await(struct tracer *t)
{
	mt_job_finish(t->parallel.rings);
	t->parallel.rings_ready = t->parallel.rings_rc == 0;
	return t->parallel.rings_rc;
}

/* The first probe mode to try: the best there is, or MT_PROBES's (session,
 * multi, classic), which tests use to run the fallbacks too. */
static enum mt_probe_mode first_probe_mode(void)
{
	const char *want = getenv("MT_PROBES");

	if (want && strcmp(want, "classic") == 0)
		return MT_PROBES_CLASSIC;
	if (want && strcmp(want, "multi") == 0)
		return MT_PROBES_MULTI;
	return MT_PROBES_SESSION;
}

int mt_tracer_load_best_bpf(struct tracer *t)
{
	enum mt_probe_mode mode = first_probe_mode();

	if (mode == MT_PROBES_SESSION &&
	    mt_tracer_load_bpf_mode(t, MT_PROBES_SESSION) == 0)
		return 0;
	return mt_tracer_load_bpf_mode(
	    t, mode == MT_PROBES_SESSION ? MT_PROBES_MULTI : mode);
}

void mt_tracer_libbpf_log(int verbose)
{
	mt_tracer_verbose = verbose;
	libbpf_set_print(libbpf_print);
}
