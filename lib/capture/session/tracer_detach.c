// SPDX-License-Identifier: MIT
/*
 * tracer_detach.c - the end of a session's probes: its links closed (in
 * parallel: each waits out RCU grace periods), by a background process of
 * mt-trace's by default, so that mt-trace's exit does not wait for them;
 * every process a last BPF program stopped continued.  Nothing of the
 * session outlives the detacher: no pin, no link, no file, no process.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "mt_sanitizer.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

/*
 * The end of kmem:rss_stat's last perf event waits out an RCU tasks-trace
 * grace period (perf_trace_event_unreg(): 58-62 ms here) holding the
 * kernel's event_mutex, which the next session's perf_event_open() of the
 * same tracepoint then waits for (the 8-47 ms outliers of back-to-back
 * `mt-trace -- true`).  So the detacher turns the event off at once and
 * closes it this long after its links: a session started meanwhile holds
 * an event of its own by then, and the close is not the last.  Off and
 * with no program attached, the event costs the rest of the machine a
 * call and two tests per rss_stat.
 */
#define RSS_EVENT_CLOSE_DELAY_MS 150

struct detach_job {
	struct bpf_link **link;
	int *fd;
	pthread_t thread;
	bool started;
};

static void *detach_one(void *arg)
{
	struct detach_job *job = arg;

	if (job->link) {
		bpf_link__destroy(*job->link);
		*job->link = NULL;
	} else {
		close(*job->fd);
		*job->fd = -1;
	}
	return NULL;
}

/*
 * Detaching is where the time goes at exit: each tracepoint or uprobe link
 * waits for its own RCU grace periods (tens of ms each:
 * docs/ARCHITECTURE.md, "What is measured where").  Done
 * in parallel the waits overlap, and `mt-trace -- true` ends in a fraction
 * of the time.
 */
void mt_tracer_detach_all(struct tracer *t)
{
	struct bpf_object_skeleton *s = t->skel ? t->skel->skeleton : NULL;
	struct detach_job jobs[MT_MAX_LINKS + MT_UPROBE_GRACE_MAX + 32];
	size_t n = 0;

	/* off at once: the slow part of its end is left for the end */
	if (t->rss_perf_fd >= 0)
		ioctl(t->rss_perf_fd, PERF_EVENT_IOC_DISABLE, 0);
	for (int i = 0; s && i < s->prog_cnt; i++)
		if (*s->progs[i].link && n < sizeof(jobs) / sizeof(jobs[0]))
			jobs[n++] =
			    (struct detach_job){.link = s->progs[i].link};
	for (size_t i = 0; i < t->probes.code.attach.nlinks; i++) {
		struct mt_attach *a = &t->probes.code.attach;

		if (n == sizeof(jobs) / sizeof(jobs[0]))
			break;
		if (a->links[i])
			jobs[n++] = (struct detach_job){.link = &a->links[i]};
		else if (a->link_fds[i] >= 0)
			jobs[n++] = (struct detach_job){.fd = &a->link_fds[i]};
	}
	for (size_t i = 0; i < t->parallel.uprobe_grace.nlinks; i++)
		if (n < sizeof(jobs) / sizeof(jobs[0]))
			jobs[n++] = (struct detach_job){
			    .fd = &t->parallel.uprobe_grace.link_fds[i]};
	for (size_t i = 0; i < n; i++)
		jobs[i].started = pthread_create(&jobs[i].thread, NULL,
						 detach_one, &jobs[i]) == 0;
	for (size_t i = 0; i < n; i++) {
		if (jobs[i].started)
			pthread_join(jobs[i].thread, NULL);
		else
			detach_one(&jobs[i]);
	}
}

/*
 * Never leave a process stopped: the BPF side stops a process that maps new
 * code until mt-trace has looked at it.  Once detached no BPF program runs,
 * so the rings then hold every such stop there will be: continue them all.
 */
void mt_tracer_release_stopped(struct tracer *t)
{
	if (t->rings)
		ring_buffer__consume(t->rings);
	mt_code_resume_queued(&t->probes.code);
	mt_backpressure_release(t, true);
}

/*
 * The child of mt_tracer_detach_in_background(): it holds the last references
 * to the links, so its closing them is the detach.  It lets go of everything
 * the caller could wait on first (the output, the terminal), so the reader of
 * the trace sees its end and mt-trace's parent its exit at once.  Then it
 * waits for mt-trace to be gone (its end of parent_alive reads end of file)
 * before closing anything: whichever process closes a link last waits out
 * its grace period, and a detacher that finished first left mt-trace's own
 * cleanup that wait (the rss_stat perf link: 14-85 ms, strace -T; session
 * 4's bimodal `mt-trace -- true`, 20 or 70 ms).
 */
static _Noreturn void background_detach(struct tracer *t, int parent_alive)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct timespec delay = {0, RSS_EVENT_CLOSE_DELAY_MS * 1000000L};
	char byte;

	for (int fd = 0; fd <= 2 && null >= 0; fd++)
		dup2(null, fd);
	if (t->opts->out_fd > 2)
		close(t->opts->out_fd);
	if (t->cmd.pidfd >= 0)
		close(t->cmd.pidfd);
	setsid(); /* a ^C meant for the command's group is not for us */
	prctl(PR_SET_NAME, "mt-trace-detach"); /* what ps(1) shows it doing */
	while (read(parent_alive, &byte, 1) < 0 && errno == EINTR)
		;
	mt_tracer_detach_all(t);
	mt_tracer_release_stopped(t);
	if (t->rss_perf_fd >= 0) {
		nanosleep(&delay, NULL);
		close(t->rss_perf_fd);
	}
	_exit(0);
}

/*
 * The detacher is forked from mt-trace's threads and starts threads of its
 * own.  glibc's malloc is made safe for that at the fork; AddressSanitizer's
 * (gcc 12's libasan) is not: a lock of its quarantine another thread held
 * at the fork stays held in the child, whose threads then spin on it
 * forever as they exit (seen: make check-asan, a detacher at 100% CPU for
 * 17 minutes).  An ASan build detaches in the foreground, as --wait-detach.
 */
#define FORK_SAFE_ALLOCATOR (!MT_ASAN)

/*
 * Detaching costs RCU grace periods (50-65 ms for the uprobe links here),
 * paid by whoever closes the last reference to each link.  The trace is
 * complete by now, so a child process takes that wait off mt-trace's exit:
 * the probes stay until it is done (they record nothing, no process is
 * traced any more), then go.  --wait-detach keeps the old order.
 */
bool mt_tracer_detach_in_background(struct tracer *t)
{
	int parent_alive[2];
	pid_t pid;

	/* a failed start lets go of everything before it returns */
	if (t->opts->wait_detach || t->start_failed || !t->skel ||
	    !FORK_SAFE_ALLOCATOR || pipe2(parent_alive, O_CLOEXEC))
		return false;
	pid = fork();
	if (pid < 0) {
		close(parent_alive[0]);
		close(parent_alive[1]);
		return false;
	}
	if (pid == 0) {
		close(parent_alive[1]);
		background_detach(t, parent_alive[0]);
	}
	/* the write end stays open until mt-trace exits: that is the signal */
	close(parent_alive[0]);
	return true;
}
