/* SPDX-License-Identifier: MIT */
/*
 * tracer_int.h - the state of mt-trace's engine (tracer.c: the process,
 * the rings, the stream), with the inspection of the code traced processes
 * map (tracer_code.h) inside it.  Not an interface.
 */
#ifndef MT_TRACER_INT_H
#define MT_TRACER_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "fast_links.h"
#include "mt_attach.h"
#include "mt_clock.h"
#include "mt_uprobe_grace.h"
#include "mt_confine.h"
#include "mt_job.h"
#include "mt_startup.h"
#include "mt_control.h"
#include "mt_event.h"
#include "mt_probe.h"
#include "mt_pss.h"
#include "mt_tracer.h"
#include "rawpack.h"
#include "tracer_code.h"

struct ring_buffer;
struct bpf_program;
struct mt_trace;
struct mt_tracer_stacks;
struct mt_fast;
struct mt_batch_writer;
struct mt_meta;

/*
 * The work the start-up's plan (tracer.c) begins beside its steps, each
 * piece awaited by the step that needs it or taken by its consumer, and
 * ended by the plan (mt_startup_end) when nobody took it.
 */
struct tracer_parallel {
	/* the BPF object, opened from mt-trace's start (parallel_start.c) */
	struct mt_parallel_open *open;
	/* the largest maps, made while the command is forked (parallel_maps.c)
	 */
	struct mt_parallel_maps *maps;
	/* the tree's private copies, made while the BPF side loads
	 * (tracer_confine.c) */
	struct confine_job *copies;
	/* the first uprobe registration's grace period (uprobe_grace.c); its
	 * links are closed with the session's (tracer_detach.c) */
	struct mt_uprobe_grace uprobe_grace;
	/* libc's probe plan (mt_attach_prepare) */
	struct mt_job *libc_plan;
	/* --stacks: libc's unwind rows, taken by the first of its files */
	struct mt_parallel_cfi *cfi;
	/* the command's program and libraries, found */
	struct mt_parallel_program *program;
	/* kmem:rss_stat's perf event, opened */
	struct mt_parallel_event *rss_event;
	/* the rings' consumer, made after the load (tracer.c) */
	struct mt_job *rings;
	int rings_rc;	  /* its result */
	bool rings_ready; /* awaited: the drain may read them */
};

struct staged_life {
	uint64_t timestamp;
	size_t first; /* index into life_slots */
	size_t nslots;
};

/* The drain's staging (writer/tracer_drain.c; the recorder's rings are
 * read into it by recorder/tracer_fast_drain.c): records consumed, before
 * merging by time (those after the last drain's watermark wait here for
 * the next). */
struct tracer_staging {
	struct mt_event *ev;
	size_t nev, cap_ev;
	struct mt_event *life_slots;
	size_t nlife_slots, cap_life_slots;
	struct staged_life *life;
	size_t nlife, cap_life;
	uint64_t written_until; /* every record up to this time is written */
};

/* The probes (probes/): finding and probing allocators, what the loaded
 * programs are for (tracer_code.c), how they are attached, the tree's
 * private allocator files (tracer_confine.c). */
struct tracer_probes {
	struct mt_code code;
	enum mt_probe_mode probe_mode;
	struct mt_confine confine;
};

/* The command (tracer.c): forked before the BPF side is set up, held on
 * its release pipe until every probe is attached, waited for at the end. */
struct tracer_command {
	pid_t child;
	int pidfd;
	int release_fd;	      /* write end: one byte lets the child exec */
	int exec_err_fd;      /* read end: errno of a failed exec */
	bool sigint_ignored;  /* mt-trace came with SIGINT ignored */
	int interrupts;	      /* SIGINTs sent to mt-trace alone */
	int signal_fd;	      /* mt-trace's signals, read while it traces */
	sigset_t signals_old; /* the mask mt-trace came with */
	bool signals_ended;   /* SIGINT and SIGTERM end mt-trace now */
};

/* --physical's sampling (tracer.c): its timer and its rounds */
struct tracer_sampling {
	int fd; /* timerfd, or -1 */
	struct mt_pss_sweep sweep;
};

/* Backpressure (backpressure.c): on, and the BPF side's stop count when
 * its table was last found all continued; each ring's consumer and
 * producer positions (lifecycle, events), mapped read-only, and the fill
 * below which its stops are undone. */
struct tracer_backpressure {
	bool on;
	uint64_t throttles_released;
	void *ring_pos[2];
	uint64_t ring_low_water[2];
	uint64_t releases_held; /* -v: undoing them waited for the rings */
};

/* The raw stream being written (tracer_batch.c), with the thread that
 * writes it. */
struct tracer_output {
	/* the batch being built: header then records */
	unsigned char *batch;
	size_t batch_records;
	/* its first batch_packed records packed straight into batch_pack
	 * (header room, then batch_pack_bytes of body, batch_pack_state
	 * after them) by --fast's drain, their slots unused; NULL until
	 * then */
	unsigned char *batch_pack;
	size_t batch_packed, batch_pack_bytes;
	struct mt_rawpack_state batch_pack_state;
	/* the thread that writes full batches, or NULL */
	struct mt_batch_writer *writer;
	bool writer_failed; /* it could not start: the drain writes */
	bool writing_last;  /* the last drain: it writes, after the writer */
	uint64_t seq;
	uint64_t lost_reported;
	uint64_t events_written;
	uint64_t last_record_ns; /* the latest record written */
	bool output_failed;
};

/* A session: the parts each job owns, and what they share (the options,
 * the BPF object, the rings, the processes alive). */
struct tracer {
	const struct mt_tracer_opts *opts;
	struct mt_trace *skel;
	struct ring_buffer *rings;
	int ncpus;
	uint64_t start_monotonic_ns; /* before anything was attached */
	uint64_t start_realtime_ns;
	uint64_t phase_ns; /* -vv: the start-up (or exit) phase began */
	uint64_t exit_ns;  /* -vv: the command's end was seen */
	/* the start-up: its plan (tracer.c), and the work it began beside
	 * its steps, which it ends */
	struct mt_startup plan;
	struct tracer_parallel parallel;
	bool start_failed; /* the end waits for the detach (tracer_detach.c) */
	struct tracer_command cmd;
	pid_t watchdog; /* continues stopped processes if we die, or -1 */
	struct mt_control control;
	bool has_control;
	struct tracer_sampling sampling;
	struct tracer_probes probes;
	bool rss; /* kmem:rss_stat is traced */
	/* kmem:rss_stat's perf event, held beside its link (or -1): closed
	 * last (tracer_detach.c) */
	int rss_perf_fd;
	/* processes alive now, from the lifecycle events (sampling, SIGINT) */
	pid_t *live;
	size_t nlive, cap_live;
	struct tracer_staging staged;
	struct tracer_output out;
	struct tracer_backpressure bp;
	/* call stacks: code files and stack ids (tracer_stacks.c) */
	struct mt_tracer_stacks *stacks;
	/* --fast: the preloaded recorders' rings (tracer_fast.c), or NULL */
	struct mt_fast *fast;
	/* --fast: links of their own for processes without the recorder */
	struct mt_fast_links links;
};

/* command.c: the command's fork (held before its exec), its release, its
 * exit status, and the signals mt-trace reads (a signalfd: -1 and errno
 * when it cannot be made); passed on while the command runs, mt-trace's
 * own once mt_command_signals_end (once, idempotent) says it is gone. */
int mt_command_spawn(struct tracer *t);
int mt_command_release(struct tracer *t);
void mt_command_report_exec_failure(struct tracer *t);
int mt_command_wait_status(struct tracer *t, struct mt_meta *meta);
int mt_command_signalfd(struct tracer *t);
void mt_command_forward_signals(struct tracer *t);
void mt_command_signals_end(struct tracer *t);
/* The writer waits for its output: signals read meanwhile. */
void mt_tracer_output_stalled(struct tracer *t);

/* bpf_load.c: libbpf's messages at mt-trace's -v level; the skeleton
 * configured and loaded for a probe mode, or the best the kernel has (0,
 * or -1 said); the rings' consumer made, or made beside the next steps
 * and then awaited. */
void mt_tracer_libbpf_log(int verbose);
int mt_tracer_load_bpf_mode(struct tracer *t, enum mt_probe_mode mode);
int mt_tracer_load_best_bpf(struct tracer *t);
int mt_tracer_make_rings(struct tracer *t);
void mt_tracer_rings_begin(struct tracer *t);
int mt_tracer_rings_await(struct tracer *t);

/* tracer_privileges.c: capabilities and tracefs */
/* Say what failed (err: an errno) and exactly which capability is
 * missing, when one is; verbose: libbpf's messages were shown (-v). */
void mt_tracer_explain_privileges(const char *what, int err, bool verbose);
/* tracefs mounted (classic tracepoints need it), in a mount namespace of
 * mt-trace's when it was not: 0, or -1 said on stderr. */
int mt_tracer_ensure_tracefs(const struct tracer *t);
/* The id of tracefs event group/name, or -1. */
long mt_tracer_tracepoint_id(const char *group, const char *name);

/* tracer_drain.c: the rings' callbacks, and their draining into batches
 * (final: the last drain, which writes everything it holds) */
int mt_tracer_on_event(void *ctx, void *data, size_t size);
int mt_tracer_on_lifecycle(void *ctx, void *data, size_t size);
void mt_tracer_live_add(struct tracer *t, pid_t pid);
int mt_tracer_collect(struct tracer *t, bool final);
/* The staged lifecycle records before first dropped (written). */
void mt_tracer_keep_life_from(struct tracer *t, size_t first);
int mt_tracer_drain(struct tracer *t, bool final);
/* What the staging holds, let go (at the session's end). */
void mt_tracer_staging_free(struct tracer_staging *s);

/* tracer_batch.c: the batch being built, and its writing.  A batch is
 * written when it holds BATCH_MAX_RECORDS records (about 3.5 MiB), and at
 * every drain: handed to a writer thread, so that a drain never waits for
 * the output while the rings fill.  mt_tracer_flush() writes the batch
 * and waits until all are written (before the trailer);
 * mt_tracer_writer_end() stops the thread (any path out). */
#define BATCH_MAX_RECORDS 65536
int mt_tracer_append(struct tracer *t, const struct mt_event *slots, size_t n);
/* Room for records at the batch's end, filled in place (a full batch is
 * written first): where, and how many fit (want at most, at least 1);
 * NULL if the write failed.  Then mt_tracer_appended() with how many were
 * filled and the last one's time. */
struct mt_event *mt_tracer_batch_room(struct tracer *t, size_t want,
				      size_t *room);
void mt_tracer_appended(struct tracer *t, size_t n, uint64_t last_ns);
/* Room for records packed straight into the batch (--fast's drain, when
 * nothing but packed records is in it yet; a full batch is written
 * first): 1, with where the bytes go (*p, room for mt_rawpack_bound of
 * *room), the packer's state and how many (want at most, at least 1);
 * 0 when the batch takes slots instead (mt_tracer_batch_room); -1 if the
 * write failed.  Then mt_tracer_packed() with how many were packed, the
 * end of their bytes and the last one's time. */
int mt_tracer_pack_room(struct tracer *t, size_t want, size_t *room,
			unsigned char **p, struct mt_rawpack_state **st);
void mt_tracer_packed(struct tracer *t, size_t n, unsigned char *end,
		      uint64_t last_ns);
int mt_tracer_write_batch(struct tracer *t);
int mt_tracer_flush(struct tracer *t);
void mt_tracer_writer_end(struct tracer *t);
/* sum of the per-CPU counters first..last-1 of the `lost` map */
uint64_t mt_tracer_read_counters(struct tracer *t, __u32 first, __u32 last);
void mt_tracer_output_gone(struct tracer *t);

/* Append an event mt-trace makes itself, after all the rings hold. */
int mt_tracer_own_event(struct tracer *t, uint16_t kind, pid_t pid,
			const void *payload, size_t len,
			const struct mt_event *fields);

/* tracer_stacks.c */
/* before each load, after each load */
void mt_tracer_stacks_configure(const struct tracer *t, struct mt_trace *skel);
void mt_tracer_stacks_loaded(struct tracer *t);
int mt_tracer_stack_file(struct tracer *t, int fd, const char *path,
			 const struct mt_code_key *key);
void mt_tracer_stacks_at_exec(struct tracer *t, pid_t pid);
void mt_tracer_stack_seen(struct tracer *t, const void *data, size_t size);
/* A staged STACK_REF and the event after it (or NULL): the stack's record
 * if first used, then the reference and the event, in one batch (a
 * reader takes a StackRef for the record after it in its batch); the
 * reference alone is dropped when next is not its event (pairs()
 * false: next is written on its own). */
int mt_tracer_stack_ref(struct tracer *t, const struct mt_event *staged,
			const struct mt_event *next);
bool mt_tracer_stack_ref_pairs(const struct mt_event *staged,
			       const struct mt_event *next);
int mt_tracer_code_map(struct tracer *t, const struct mt_event *staged);
/* emit: how the core writes a CodeMap that waited (stamped now) */
void mt_tracer_code_maps_pending(struct tracer *t,
				 int (*emit)(struct tracer *t,
					     const struct mt_event *e));
void mt_tracer_stacks_free(struct tracer *t);

/* backpressure.c */
/* before the load: the rings' high-water marks (t->backpressure set) */
void mt_backpressure_configure(struct tracer *t, struct mt_trace *skel);
/* continue the processes stopped for a full ring, once it is drained;
 * all: look at the table even when no new stop was counted */
void mt_backpressure_release(struct tracer *t, bool all);
/* after the load: map the rings' positions (again after a reload); and
 * let them go */
void mt_backpressure_watch_rings(struct tracer *t);
void mt_backpressure_unwatch_rings(struct tracer *t);
/* an exit record was read: the process's note goes */
void mt_backpressure_exited(struct tracer *t, pid_t pid);

/* Probes for the tree alone (tracer_confine.c): enter the namespace before
 * the command is forked (begin), copy in a thread after (copies_begin),
 * wait before attaching (copies_await); copies_end lets go of the copying
 * quietly (a failed start; idempotent). */
void mt_tracer_confine_begin(struct tracer *t);
void mt_tracer_confine_copies_begin(struct tracer *t);
int mt_tracer_confine_copies_await(struct tracer *t);
void mt_tracer_confine_copies_end(struct tracer *t);

/* parallel_maps.c: the largest maps made by a thread while the command is
 * forked (begin: after the namespace is entered; await: before the load),
 * used by the load when they are what the object asks for (use: before
 * mt_trace__load), given up once the BPF side is set up (end). */
void mt_tracer_parallel_maps_begin(struct tracer *t);
int mt_tracer_parallel_maps_await(struct tracer *t);
void mt_tracer_parallel_maps_use(struct tracer *t, struct mt_trace *skel);
void mt_tracer_parallel_maps_end(struct tracer *t);
/* Slots for a table keyed by process: max, or pid_max when fewer (there
 * cannot be more processes). */
__u32 mt_tracer_process_slots(__u32 max);

/* tracer_detach.c: close the session's links (detach_all, in parallel),
 * or fork a background process that does (detach_in_background: false
 * when it cannot, with --wait-detach or after a failed start); continue
 * every process the BPF side stopped and mt-trace did not continue
 * (release_stopped). */
void mt_tracer_detach_all(struct tracer *t);
bool mt_tracer_detach_in_background(struct tracer *t);
void mt_tracer_release_stopped(struct tracer *t);

/*
 * The rest of the work begun beside the start-up's steps
 * (parallel_start.c), each piece with its begin (it may decide it is not
 * wanted), its await (before the step that needs it) and its end (wait
 * for it if under way, let go of what nobody took; idempotent).
 */
/* The BPF object opened (libbpf reads its ELF and BTF: 1-3 ms here) with
 * the built-in kernel BTF's file for the load (btf_fd, or -1 and why). */
struct mt_opened_bpf {
	struct mt_trace *skel; /* NULL: err */
	int err;
	int btf_fd;
	char btf_path[64];
	const char *why;
};
void mt_tracer_open_bpf(struct mt_opened_bpf *o);
/* The same by a thread from mt-trace's start; opened() moves it to *o,
 * false when there is none (taken already). */
void mt_tracer_open_begin(struct tracer *t);
int mt_tracer_open_await(struct tracer *t);
void mt_tracer_open_end(struct tracer *t);
bool mt_tracer_parallel_opened(struct tracer *t, struct mt_opened_bpf *o);
/* The first uprobe registration's grace period, waited for by a thread;
 * await: the allocator probes are made, the thread stops. */
void mt_tracer_grace_begin(struct tracer *t);
int mt_tracer_grace_await(struct tracer *t);
void mt_tracer_grace_end(struct tracer *t);
/* libc's probe plan (mt_attach_prepare), awaited before the probes. */
void mt_tracer_libc_plan_begin(struct tracer *t);
int mt_tracer_libc_plan_await(struct tracer *t);
void mt_tracer_libc_plan_end(struct tracer *t);
/* --stacks: libc's unwind table, taken by the stacks (parallel_cfi: the
 * table of a file with this build-id, when it is the one built: waits
 * for it, moves it to *table; false otherwise). */
struct mt_cfi_table;
void mt_tracer_cfi_begin(struct tracer *t);
void mt_tracer_cfi_end(struct tracer *t);
bool mt_tracer_parallel_cfi(struct tracer *t, const uint8_t *build_id,
			    size_t build_id_len, struct mt_cfi_table *table);
/* The command's program and libraries, found (mt_code_find_program);
 * parallel_program moves them to *p (the caller's to free), false if none
 * were looked for. */
void mt_tracer_program_begin(struct tracer *t);
int mt_tracer_program_await(struct tracer *t);
void mt_tracer_program_end(struct tracer *t);
bool mt_tracer_parallel_program(struct tracer *t, struct mt_code_program *p);
/* kmem:rss_stat's perf event (RSS: tracefs is there by now), opened;
 * rss_event: its fd (the caller's to close), or -1 if it could not be. */
void mt_tracer_rss_begin(struct tracer *t);
int mt_tracer_rss_await(struct tracer *t);
void mt_tracer_rss_end(struct tracer *t);
int mt_tracer_parallel_rss_event(struct tracer *t);

#endif /* MT_TRACER_INT_H */
