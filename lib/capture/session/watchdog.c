// SPDX-License-Identifier: MIT
/*
 * watchdog.c - never leave a traced process stopped.
 *
 * The BPF side stops a process that maps new code until mt-trace has
 * inspected the file and sent SIGCONT (tracer_code.c).  Should mt-trace die
 * in between (SIGKILL, the OOM killer, a crash), nobody would send it: the
 * process would stay stopped for good, reparented to init; so would one
 * stopped by backpressure until mt-trace drained a ring (backpressure.c).
 * So mt-trace forks this watchdog once the BPF side is loaded.  It keeps
 * three maps and a pidfd of mt-trace, nothing else (no link, so mt-trace's
 * death detaches every probe; not the trace's output, so its reader sees the
 * end; its own session, so no signal meant for the command's terminal reaches
 * it), and sleeps until mt-trace ends.  Then every process in `traced` whose
 * stop for new code is not the one `resumed` records (the BPF side writes the
 * first before each stop, mt-trace the second after each SIGCONT), or
 * whose backpressure stop is not the one `unthrottled` records, gets a
 * SIGCONT.
 * mt-trace ending normally has continued everyone itself (and its
 * background detacher whoever a last BPF program stopped): it kills its
 * watchdog on the way out, so nothing outlives it.
 *
 * When mt-trace died, a BPF program that began before its links went may
 * still be on its way to a stop: the table is read again after a grace
 * time.  A process continued twice (mt-trace died between its SIGCONT and
 * its note of it) sees one more SIGCONT, which a stopped process ignores.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "mt_log.h"
#include "mt_probe.h"
#include "mt_stops.h"
#include "mt_watchdog.h"

/* Long enough for any BPF program running when mt-trace's links closed
 * to have finished (they run for microseconds; the links' RCU grace
 * periods take a few milliseconds). */
#define GRACE_MS 50

/* The stops the watchdog has undone: a stop is undone once. */
struct undone {
	__u32 pid[64];
	__u64 stop[64];
	int n;
};

static bool undone_before(const struct undone *u, __u32 pid, __u64 stop)
{
	for (int i = 0; i < u->n; i++)
		if (u->pid[i] == pid && u->stop[i] == stop)
			return true;
	return false;
}

/* Is pid's stop made at `stop` (0: none) still to be undone? */
static bool still_stopped(__u32 pid, __u64 stop, int done_fd,
			  const struct undone *u)
{
	return !mt_stop_undone(done_fd, pid, stop) &&
	       !undone_before(u, pid, stop);
}

static int resume(__u32 pid, __u64 stop, struct undone *u)
{
	int n = kill(pid, SIGCONT) == 0;

	if (u->n < 64) {
		u->pid[u->n] = pid;
		u->stop[u->n++] = stop;
	}
	return n;
}

/* Continue every process stopped and not resumed, for new code
 * (fds[1]: resumed) or by backpressure (fds[2]: unthrottled); the number
 * of continues. */
static int resume_all(const int fds[3], struct undone *u)
{
	__u32 key, next;
	__u32 *prev = NULL;
	struct mt_traced entry;
	int n = 0;

	while (bpf_map_get_next_key(fds[0], prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fds[0], &key, &entry))
			continue; /* it exited meanwhile */
		if (still_stopped(key, entry.stopped, fds[1], u))
			n += resume(key, entry.stopped, u);
		if (still_stopped(key, entry.throttled, fds[2], u))
			n += resume(key, entry.throttled, u);
	}
	return n;
}

#define NKEEP 4

/* Close every descriptor but keep[0..NKEEP-1] (sorted here). */
static void keep_only(int keep[NKEEP])
{
	int lo = 3;

	for (int i = 0; i < NKEEP; i++)
		for (int j = i + 1; j < NKEEP; j++)
			if (keep[j] < keep[i]) {
				int x = keep[i];

				keep[i] = keep[j];
				keep[j] = x;
			}
	for (int i = 0; i < NKEEP; i++) {
		if (keep[i] < lo)
			continue; /* -1: none */
		if (keep[i] > lo)
			close_range(lo, keep[i] - 1, 0);
		lo = keep[i] + 1;
	}
	close_range(lo, ~0u, 0);
}

static _Noreturn void watch(pid_t tracer, const int fds[3])
{
	int pidfd = syscall(SYS_pidfd_open, tracer, 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int keep[NKEEP] = {fds[0], fds[1], fds[2], pidfd};
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	struct timespec grace = {0, GRACE_MS * 1000000L};
	struct undone undone = {.n = 0};
	int n;

	/* stderr stays: it says so, should it have to act */
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	setsid();
	prctl(PR_SET_NAME, "mt-trace-watch");
	keep_only(keep);
	/* until mt-trace is gone (re-parented, the watchdog knows it too) */
	while (getppid() == tracer) {
		if (pidfd >= 0 && poll(&p, 1, -1) > 0)
			break;
		if (pidfd < 0)
			nanosleep(&grace, NULL);
	}
	n = resume_all(fds, &undone);
	nanosleep(&grace, NULL);
	n += resume_all(fds, &undone);
	if (n)
		mt_error("watchdog: mt-trace (pid %d) ended with %d "
			 "processes stopped for it; continued them",
			 (int)tracer, n);
	_exit(0);
}

int mt_watchdog_start(int traced_fd, int resumed_fd, int unthrottled_fd)
{
	const int fds[3] = {traced_fd, resumed_fd, unthrottled_fd};
	pid_t tracer = getpid(), pid = fork();

	if (pid < 0) {
		mt_error("watchdog: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		watch(tracer, fds);
	return pid;
}
