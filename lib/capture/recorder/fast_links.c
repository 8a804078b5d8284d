// SPDX-License-Identifier: MIT
/*
 * fast_links.c - mt-trace --fast: uprobe links of their own for the
 * processes whose program does not carry the preloaded recorder.
 *
 * Under --fast libc.so.6 and libstdc++.so.6 carry no probes for the tree:
 * the recorder (libmt-preload.so) records their calls in-process.  A
 * program that drops LD_PRELOAD or replaces it, a set-user-ID one (its
 * loader ignores it), one whose recorder cannot reach the shared memory,
 * runs without it.  Such a process gets links of its own on those files,
 * uprobe links with its pid (the kernel runs them for that process alone),
 * made while it is stopped at its exec, before its first instruction
 * (the BPF side stops every exec under --fast; tracer_fast.c tells which
 * programs will carry the recorder).  Its fork children inherit the
 * breakpoints but not the link: the BPF side stops each at its first
 * return to user space, and it gets links of its own too.
 *
 * A process's links go when it exits or execs a program that carries the
 * recorder: the BPF side ignores them at once (their serial number, in
 * their cookies, is no longer the one `pid_links` holds for the process:
 * MT_COOKIE_LINK), and they are closed off mt-trace's path (closer.c), as
 * closing one waits for grace periods.  Every trap walks every link on
 * the probed function, so links of exited processes do not stay.  Making
 * one is fast right after another, slow after a pause; the probe offsets
 * are read from each file once.  (The figures: docs/ARCHITECTURE.md,
 * "What is measured where".)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "fast_links.h"
#include "mt_event.h"
#include "mt_grow.h"
#include "mt_probe.h"
#include "mt_trace.skel.h"
#include "tracer_code.h"
#include "tracer_fast.h"
#include "mt_xalloc.h"

void mt_fast_links_init(struct mt_fast_links *l, int verbose)
{
	memset(l, 0, sizeof(*l));
	l->pid_links_fd = -1;
	l->verbose = verbose;
	mt_closer_init(&l->closer);
}

void mt_fast_links_use_bpf(struct mt_fast_links *l, struct mt_trace *skel,
			   enum mt_probe_mode mode)
{
	l->mode = mode;
	mt_code_alloc_programs(skel, mode, &l->enter, &l->ret);
	l->pid_links_fd = bpf_map__fd(skel->maps.pid_links);
}

/* Make p's links on file ff. */
static void link_file(struct mt_fast_links *l, struct fast_linked *p,
		      const struct fast_file *ff)
{
	size_t before = p->attach->nlinks;
	char via[64], err[512];
	int n;

	/* the open file, whatever the mount namespace */
	snprintf(via, sizeof(via), "/proc/self/fd/%d", ff->fd);
	n = mt_attach_planned(p->attach, via, &ff->plan, err, sizeof(err));
	l->links_made += p->attach->nlinks - before;
	if (n < 0)
		mt_warning("pid %d: %s: allocators not traced: "
			   "%s",
			   (int)p->pid, ff->path, err);
}

void mt_fast_links_file(struct mt_fast_links *l, int fd)
{
	struct fast_file ff = {.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)};
	char via[64], err[512], path[PATH_MAX] = "?";
	struct mt_attach planner;
	ssize_t len;
	int n;

	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	len = readlink(via, path, sizeof(path) - 1);
	path[len > 0 ? len : 1] = '\0';
	if (ff.fd < 0) {
		mt_error("%s: %s", path, strerror(errno));
		return;
	}
	mt_attach_init(&planner, l->mode, l->enter, l->ret, l->verbose);
	snprintf(via, sizeof(via), "/proc/self/fd/%d", ff.fd);
	n = mt_attach_plan(&planner, via, via, &ff.plan, err, sizeof(err));
	if (n <= 0) {
		if (n < 0)
			mt_warning("%s: allocators of "
				   "processes without the recorder not "
				   "traced: "
				   "%s",
				   path, err);
		mt_attach_plan_free(&ff.plan);
		close(ff.fd);
		return;
	}
	ff.path = mt_xstrdup(path);
	l->files =
	    mt_grow(l->files, &l->cap_files, l->nfiles + 1, sizeof(*l->files));
	l->files[l->nfiles++] = ff;
	for (size_t i = 0; i < l->nprocs; i++)
		link_file(l, &l->procs[i], &l->files[l->nfiles - 1]);
}

static struct fast_linked *find(struct mt_fast_links *l, pid_t pid)
{
	for (size_t i = 0; i < l->nprocs; i++)
		if (l->procs[i].pid == pid)
			return &l->procs[i];
	return NULL;
}

static void take_fd(void *ctx, int fd)
{
	mt_closer_close(ctx, fd);
}

/* Links that record nothing any more (their serial is not current): to
 * the closer, and gone from here. */
static void retire(struct mt_fast_links *l, struct mt_attach *a)
{
	mt_attach_hand_over(a, take_fd, &l->closer);
	free(a);
}

/* Process pid gets links of its own, new ones (a non-leader thread's
 * exec leaves the old ones tied to the old leader, dead). */
static void give(struct mt_fast_links *l, pid_t pid, const char *why)
{
	struct fast_linked *p = find(l, pid);
	struct mt_attach *old = p ? p->attach : NULL;
	__u32 key = pid;

	if (!p) {
		l->procs = mt_grow(l->procs, &l->cap_procs, l->nprocs + 1,
				   sizeof(*l->procs));
		p = &l->procs[l->nprocs++];
		p->pid = pid;
		l->processes_linked++;
	}
	if (++l->last_serial == 0)
		l->last_serial = 1; /* 0: a probe for every process */
	p->serial = l->last_serial;
	p->attach = mt_xmalloc(sizeof(*p->attach));
	mt_attach_init(p->attach, l->mode, l->enter, l->ret, l->verbose);
	mt_attach_set_pid(p->attach, pid);
	mt_attach_set_serial(p->attach, p->serial);
	for (size_t i = 0; i < l->nfiles; i++)
		link_file(l, p, &l->files[i]);
	/* from now on the new links count, the old ones no more */
	bpf_map_update_elem(l->pid_links_fd, &key, &p->serial, BPF_ANY);
	if (old)
		retire(l, old);
	if (l->verbose)
		mt_verbose("--fast: pid %d: %s: traced by "
			   "uprobe links "
			   "of its own",
			   (int)pid, why);
}

/* Process pid has links no more. */
static void take(struct mt_fast_links *l, pid_t pid)
{
	struct fast_linked *p = find(l, pid);
	__u32 key = pid;

	if (!p)
		return;
	bpf_map_delete_elem(l->pid_links_fd, &key);
	retire(l, p->attach);
	*p = l->procs[--l->nprocs];
}

void mt_fast_links_stopped(struct mt_fast_links *l, struct mt_fast *f,
			   const struct mt_event *e)
{
	const char *why = NULL;

	if (e->flags & MT_NEW_CODE_FORKED) {
		give(l, e->pid, "forked by a process without the recorder");
		return;
	}
	if (e->addr != 0)
		return; /* a library: its process keeps what it has */
	l->execs_stopped++;
	if (mt_fast_needs_links(f, e->pid, &why))
		give(l, e->pid, why);
	else
		take(l, e->pid);
}

void mt_fast_links_exited(struct mt_fast_links *l, pid_t pid)
{
	take(l, pid);
}

void mt_fast_links_flush(struct mt_fast_links *l)
{
	mt_closer_flush(&l->closer);
}

void mt_fast_links_free(struct mt_fast_links *l)
{
	if (l->verbose)
		mt_verbose("--fast: %llu execs stopped for mt-trace to "
			   "look at their program",
			   (unsigned long long)l->execs_stopped);
	if (l->verbose && l->processes_linked)
		mt_verbose("--fast: %llu processes without the "
			   "recorder traced by links of their own (%llu "
			   "links)",
			   (unsigned long long)l->processes_linked,
			   (unsigned long long)l->links_made);
	while (l->nprocs)
		take(l, l->procs[0].pid);
	mt_closer_end(&l->closer);
	for (size_t i = 0; i < l->nfiles; i++) {
		close(l->files[i].fd);
		free(l->files[i].path);
		mt_attach_plan_free(&l->files[i].plan);
	}
	free(l->files);
	free(l->procs);
	memset(l, 0, sizeof(*l));
	l->pid_links_fd = -1;
}
