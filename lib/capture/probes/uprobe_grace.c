// SPDX-License-Identifier: MIT
/*
 * uprobe_grace.c - the first uprobe registration's grace period, waited for
 * beside the BPF load instead of after it.
 *
 * Every uprobe registration takes dup_mmap_sem for writing, and the first
 * one after a quiet spell waits there for an RCU grace period
 * (percpu_down_write -> rcu_sync_enter -> synchronize_rcu): 5-15 ms of
 * `mt-trace -- true` on these machines, measured with sched_switch stacks.
 * Once one writer has passed, the semaphore stays on its writer path until
 * a grace period after the last writer left, and a writer in that window
 * does not wait.  So a thread registers a probe nobody can hit (offset 0
 * of a memfd that is never mapped) while the main thread loads the BPF
 * side, and again every few milliseconds until the real links are made;
 * they then find the semaphore ready.  The probes' links stay open until
 * the session's links are closed (off mt-trace's path, by the detacher).
 *
 * Nothing depends on it: where it fails (no uprobe_multi, Linux < 6.6),
 * the first real registration waits as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "mt_attach.h"
#include "mt_clock.h"
#include "mt_uprobe_grace.h"

/* a registration while the semaphore is on its writer path; the window after
 * the last one is a grace period, 5 ms or more here */
#define GRACE_INTERVAL_MS 3

/* A program that does nothing, for links that never fire. */
static int load_nothing(void)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type =
			(enum bpf_attach_type)MT_ATTACH_UPROBE_MULTI);

	return bpf_prog_load(BPF_PROG_TYPE_KPROBE, "mt_grace", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), &opts);
}

static int register_one(struct mt_uprobe_grace *w)
{
	uint64_t offset = 0;
	int fd = mt_uprobe_multi_link(w->prog_fd, MT_ATTACH_UPROBE_MULTI,
				      w->path, &offset, NULL, 1, false, 0);

	if (fd < 0)
		return fd;
	w->link_fds[w->nlinks++] = fd;
	return 0;
}

/* true: asked to stop (or the wait failed) */
static bool wait_or_stop(struct mt_uprobe_grace *w, int ms)
{
	struct pollfd p = {.fd = w->stop_pipe[0], .events = POLLIN};
	int n;

	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	return n != 0;
}

static void *grace_thread(void *arg)
{
	struct mt_uprobe_grace *w = arg;
	uint64_t start = mt_clock_ns(CLOCK_MONOTONIC);

	w->err = register_one(w);
	w->first_ns = mt_clock_ns(CLOCK_MONOTONIC) - start;
	while (!w->err && w->nlinks < MT_UPROBE_GRACE_MAX &&
	       !wait_or_stop(w, GRACE_INTERVAL_MS))
		w->err = register_one(w);
	return NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* What the registering needs and the links do not hold (they hold the
 * program and the file themselves). */
static void close_setup(struct mt_uprobe_grace *w)
{
	close_fd(&w->stop_pipe[0]);
	close_fd(&w->stop_pipe[1]);
	close_fd(&w->prog_fd);
	close_fd(&w->file_fd);
}

void mt_uprobe_grace_start(struct mt_uprobe_grace *w)
{
	memset(w, 0, sizeof(*w));
	w->prog_fd = w->file_fd = w->stop_pipe[0] = w->stop_pipe[1] = -1;
	w->file_fd = memfd_create("mt-grace", MFD_CLOEXEC);
	w->prog_fd = load_nothing();
	if (w->file_fd < 0 || w->prog_fd < 0 ||
	    pipe2(w->stop_pipe, O_CLOEXEC) ||
	    ftruncate(w->file_fd, 4096) /* offset 0 lies in the file */) {
		w->err = -errno;
		close_setup(w);
		return;
	}
	snprintf(w->path, sizeof(w->path), "/proc/self/fd/%d", w->file_fd);
	w->running = pthread_create(&w->thread, NULL, grace_thread, w) == 0;
	if (!w->running)
		close_setup(w);
}

void mt_uprobe_grace_stop(struct mt_uprobe_grace *w)
{
	if (!w->running)
		return;
	if (write(w->stop_pipe[1], "", 1) < 0) {
		/* the thread stops at MT_UPROBE_GRACE_MAX links anyway */
	}
	pthread_join(w->thread, NULL);
	w->running = false;
	close_setup(w);
}
