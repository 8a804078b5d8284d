// SPDX-License-Identifier: MIT
/*
 * attach.c - place the allocator uprobes.
 *
 * All probes of one ELF file go into one uprobe session link (Linux 6.10):
 * one program sees both ends of a call, and its answer at the entry says
 * whether the return is wanted, so an untraced process pays one trap a
 * call, not two.  Before 6.10, one uprobe_multi link takes the entries and
 * a second the returns; before 6.6, classic links, one per probe (each
 * waits out grace periods to detach: docs/ARCHITECTURE.md has the
 * figures).  libbpf 1.1 predates both, so
 * multi and session links are made with the raw bpf(2) call.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mt_log.h"
#include "mt_allocators.h"
#include "mt_attach.h"
#include "mt_elf.h"
#include "mt_file_id.h"
#include "mt_probe.h"
#include "mt_xalloc.h"

#define BPF_TRACE_UPROBE_MULTI_	   MT_ATTACH_UPROBE_MULTI /* Linux 6.6 */
#define BPF_TRACE_UPROBE_SESSION_  57			  /* and Linux 6.10 */
#define BPF_F_UPROBE_MULTI_RETURN_ 1u /* link_create.uprobe_multi.flags */

/* union bpf_attr's link_create member as Linux 6.6 has it for uprobe_multi;
 * the installed uapi headers (6.1) do not know it. */
struct uprobe_multi_link_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 uflags;
	__u32 pid;
	__u32 pad;
};

void mt_attach_init(struct mt_attach *a, enum mt_probe_mode mode,
		    struct bpf_program *enter, struct bpf_program *ret,
		    int verbose)
{
	memset(a, 0, sizeof(*a));
	a->mode = mode;
	a->enter = enter;
	a->ret = mode == MT_PROBES_SESSION ? NULL : ret;
	a->verbose = verbose;
}

void mt_attach_set_pid(struct mt_attach *a, pid_t pid)
{
	a->pid = pid;
}

void mt_attach_set_serial(struct mt_attach *a, uint32_t serial)
{
	a->serial = serial;
}

int mt_probe_attach_type(enum mt_probe_mode mode)
{
	return mode == MT_PROBES_SESSION ? BPF_TRACE_UPROBE_SESSION_
					 : BPF_TRACE_UPROBE_MULTI_;
}

const char *mt_probe_mode_name(enum mt_probe_mode mode)
{
	switch (mode) {
	case MT_PROBES_SESSION:
		return "uprobe session links";
	case MT_PROBES_MULTI:
		return "uprobe_multi links";
	case MT_PROBES_CLASSIC:
		return "classic uprobes";
	}
	return "?";
}

static int hold_link(struct mt_attach *a, struct bpf_link *link, int fd)
{
	if (a->nlinks == sizeof(a->links) / sizeof(a->links[0]))
		return -ENOSPC;
	a->links[a->nlinks] = link;
	a->link_fds[a->nlinks] = fd;
	a->nlinks++;
	return 0;
}

int mt_uprobe_multi_link(int prog_fd, int attach_type, const char *path,
			 const uint64_t *offsets, const uint64_t *cookies,
			 size_t n, bool retprobe, pid_t pid)
{
	struct uprobe_multi_link_attr attr;
	union bpf_attr big;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.attach_type = attach_type;
	attr.path = (uintptr_t)path;
	attr.offsets = (uintptr_t)offsets;
	attr.cookies = (uintptr_t)cookies;
	attr.cnt = n;
	attr.uflags = retprobe ? BPF_F_UPROBE_MULTI_RETURN_ : 0;
	attr.pid = pid; /* 0: every process */
	_Static_assert(sizeof(attr) <= sizeof(big), "bpf_attr too small");
	memset(&big, 0, sizeof(big));
	memcpy(&big, &attr, sizeof(attr));
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &big, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

static int attach_multi(struct mt_attach *a, struct bpf_program *prog,
			const char *path, const struct mt_probe_at *p, size_t n,
			bool retprobe)
{
	uint64_t offsets[n], cookies[n];
	int fd;

	for (size_t i = 0; i < n; i++) {
		offsets[i] = p[i].offset;
		cookies[i] = MT_COOKIE(p[i].fn, a->serial) |
			     MT_COOKIE_WITH_SITE(p[i].site);
	}
	/* pid 0: every process; the BPF side finds the tree */
	fd = mt_uprobe_multi_link(bpf_program__fd(prog),
				  mt_probe_attach_type(a->mode), path, offsets,
				  cookies, n, retprobe, a->pid);
	if (fd < 0)
		return fd;
	return hold_link(a, NULL, fd);
}

static int attach_classic(struct mt_attach *a, struct bpf_program *prog,
			  const char *path, const struct mt_probe_at *p,
			  size_t n, bool retprobe)
{
	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts,
			    .bpf_cookie = MT_COOKIE(p[i].fn, a->serial) |
					  MT_COOKIE_WITH_SITE(p[i].site),
			    .retprobe = retprobe);
		struct bpf_link *link;
		int err;

		link = bpf_program__attach_uprobe_opts(
		    prog, a->pid ? a->pid : -1, path, p[i].offset, &opts);
		if (!link)
			return -errno;
		err = hold_link(a, link, -1);
		if (err) {
			bpf_link__destroy(link);
			return err;
		}
	}
	return 0;
}

static int attach_set(struct mt_attach *a, struct bpf_program *prog,
		      const char *path, const struct mt_probe_at *p, size_t n,
		      bool retprobe)
{
	if (n == 0)
		return 0;
	if (a->mode != MT_PROBES_CLASSIC)
		return attach_multi(a, prog, path, p, n, retprobe);
	return attach_classic(a, prog, path, p, n, retprobe);
}

static bool seen_offset(const uint64_t *seen, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (seen[i] == off)
			return true;
	return false;
}

/* Entry-only probes may sit past a first instruction the kernel would
 * single-step (glibc's free starts with test %rdi,%rdi). */
static uint64_t entry_offset(struct mt_attach *a, const char *path,
			     const char *name, uint64_t off, uint64_t size)
{
	uint8_t code[32];
	int got;
	size_t skip = mt_probe_skip_null(path, off, size);

	if (!skip) {
		got = mt_elf_read_code(path, off, code, sizeof(code));
		skip = got > 0 ? mt_probe_skip(code, got) : 0;
	}
	if (skip && a->verbose > 1)
		mt_detail("%s: %s probe at +%zu", path, name, skip);
	return off + skip;
}

int mt_attach_file(struct mt_attach *a, const char *path,
		   enum mt_alloc_family *family, char *err, size_t errlen)
{
	return mt_attach_file_as(a, path, path, family, err, errlen);
}

/*
 * Plans already made by this process, by the file's identity
 * (mt_file_id.h: not a build-id, which anyone can forge): mt-trace plans
 * its libc from a thread beside the BPF load (mt_attach_prepare) and
 * attaches to the tree's private copy of it, which stands for the file
 * it was copied from: the copy's plan is the thread's, not found again in
 * its symbols on the start's critical path (0.5-1 ms, -vv's "first
 * allocators").  Kept in memory only, for the session.
 */
#define KNOWN_PLANS 4
static struct known_plan {
	struct mt_file_id id;
	int n; /* mt_attach_plan's result */
	struct mt_attach_plan plan;
} known_plans[KNOWN_PLANS];
static size_t nknown_plans;
static pthread_mutex_t known_plans_lock = PTHREAD_MUTEX_INITIALIZER;

static void plan_copy(struct mt_attach_plan *to,
		      const struct mt_attach_plan *from)
{
	size_t enter = from->nenter * sizeof(*from->enter),
	       ret = from->nret * sizeof(*from->ret);

	*to = *from;
	to->enter = mt_xmalloc(enter);
	to->ret = mt_xmalloc(ret);
	memcpy(to->enter, from->enter, enter);
	memcpy(to->ret, from->ret, ret);
}

static int plan_find(const struct mt_file_id *id, struct mt_attach_plan *plan)
{
	int n = 0;

	pthread_mutex_lock(&known_plans_lock);
	for (size_t i = 0; i < nknown_plans && !n; i++) {
		const struct known_plan *k = &known_plans[i];

		if (mt_file_id_equal(&k->id, id)) {
			plan_copy(plan, &k->plan);
			n = k->n;
		}
	}
	pthread_mutex_unlock(&known_plans_lock);
	return n;
}

static void plan_remember(const struct mt_file_id *id,
			  const struct mt_attach_plan *plan, int n)
{
	struct known_plan *k;

	pthread_mutex_lock(&known_plans_lock);
	if (nknown_plans < KNOWN_PLANS) {
		k = &known_plans[nknown_plans];
		plan_copy(&k->plan, plan);
		k->id = *id;
		k->n = n;
		nknown_plans++;
	}
	pthread_mutex_unlock(&known_plans_lock);
}

/* Sites handed out by this process (MT_COOKIE_SITE), one per plan of a
 * file whose free its own code calls directly */
static unsigned last_site;

/*
 * glibc's free (probe at), which libc.so.6 also calls directly, not
 * through the PLT: at a thread's exit, for each block its tcache holds
 * (blocks the program freed, each a Free already) and the tcache itself
 * (which no malloc made).  An interposer (the recorder of --fast) sees
 * none of those calls, and they are not the program's: the probe is
 * given a site whose calls from those places are not recorded.  In a
 * static program the program's own calls are direct too: there, only
 * those inside glibc's thread-exit function (mt_elf_internal_calls).
 */
static void plan_internal(struct mt_attach_plan *plan, struct mt_probe_at *at,
			  const char *path, uint64_t off)
{
	int n;

	if (plan->site)
		return; /* one site a plan: free's aliases share a probe */
	n = mt_elf_internal_calls(path, "libc.so.6", off, at->offset,
				  plan->internal, MT_PLAN_INTERNAL_MAX);
	if (n <= 0)
		return;
	plan->ninternal = n;
	plan->site = __atomic_add_fetch(&last_site, 1, __ATOMIC_RELAXED);
	at->site = plan->site;
}

static int plan_funcs(struct mt_attach *a, const char *path,
		      const char *symbols, struct mt_attach_plan *plan,
		      char *err, size_t errlen)
{
	size_t nfuncs;
	const struct mt_alloc_func *table = mt_alloc_funcs(&nfuncs);
	struct mt_elf_func funcs[nfuncs];
	uint64_t seen[nfuncs];
	size_t nseen = 0;
	unsigned per_family[MT_ALLOC_FAMILIES] = {0};
	int found;

	memset(plan, 0, sizeof(*plan));
	for (size_t i = 0; i < nfuncs; i++)
		funcs[i].name = table[i].name;
	found = mt_elf_find_funcs(symbols, funcs, nfuncs, err, errlen);
	if (found <= 0)
		return found;
	plan->enter = mt_xcalloc(nfuncs, sizeof(*plan->enter));
	plan->ret = mt_xcalloc(nfuncs, sizeof(*plan->ret));
	for (size_t i = 0; i < nfuncs; i++) {
		unsigned fn = table[i].fn;
		uint64_t off = funcs[i].offset;

		/* one probe per address: aliases (aligned_alloc and memalign)
		 * share one, and two probes would report a call twice */
		if (!off || seen_offset(seen, nseen, off))
			continue;
		seen[nseen++] = off;
		per_family[table[i].family]++;
		if (fn == MT_FN_FREE) {
			struct mt_probe_at *at = &plan->enter[plan->nenter++];

			*at = (struct mt_probe_at){
			    entry_offset(a, path, funcs[i].name, off,
					 funcs[i].size),
			    fn, 0};
			plan_internal(plan, at, path, off);
			continue;
		}
		/* a return probe must be at the entry, where the return
		 * address is on top of the stack (a session's too) */
		plan->enter[plan->nenter++] = (struct mt_probe_at){off, fn, 0};
		plan->ret[plan->nret++] = (struct mt_probe_at){off, fn, 0};
	}
	plan->family = mt_alloc_family_of(per_family);
	return plan->nenter + plan->nret;
}

int mt_attach_plan(struct mt_attach *a, const char *path, const char *symbols,
		   struct mt_attach_plan *plan, char *err, size_t errlen)
{
	struct mt_file_id id;
	bool known =
	    strcmp(path, symbols) == 0 && mt_file_id_of_path(path, &id) == 0;
	int n = known ? plan_find(&id, plan) : 0;

	if (n > 0)
		return n;
	n = plan_funcs(a, path, symbols, plan, err, errlen);
	if (n > 0 && known)
		plan_remember(&id, plan, n);
	return n;
}

void mt_attach_prepare(const char *path)
{
	struct mt_attach quiet;
	struct mt_attach_plan plan;
	char err[1];

	mt_attach_init(&quiet, MT_PROBES_SESSION, NULL, NULL, 0);
	if (mt_attach_plan(&quiet, path, path, &plan, err, sizeof(err)) > 0)
		mt_attach_plan_free(&plan);
}

/* The BPF side's table of the plan's internal calls (plan_internal):
 * written for each attach (the same entries again for the same file). */
static int internal_map_fd = -1;

void mt_attach_internal_map(int fd)
{
	internal_map_fd = fd;
}

static int internal_calls_known(struct mt_attach *a,
				const struct mt_attach_plan *plan)
{
	int fd = internal_map_fd;
	uint8_t one = 1;

	if (!plan->site || !a->enter || fd < 0)
		return 0;
	for (size_t i = 0; i < plan->ninternal; i++) {
		uint64_t key = MT_INTERNAL_KEY(plan->site, plan->internal[i]);

		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY))
			return -errno;
	}
	return 0;
}

int mt_attach_planned(struct mt_attach *a, const char *path,
		      const struct mt_attach_plan *plan, char *err,
		      size_t errlen)
{
	size_t nret = a->ret ? plan->nret : 0; /* a session: no return links */
	int rc;

	/* before the probes: their first call may be one of those */
	rc = internal_calls_known(a, plan);
	if (rc == 0)
		rc = attach_set(a, a->enter, path, plan->enter, plan->nenter,
				false);
	if (rc == 0 && nret)
		rc = attach_set(a, a->ret, path, plan->ret, nret, true);
	if (rc) {
		snprintf(err, errlen, "attaching %zu uprobes: %s",
			 plan->nenter + nret, strerror(-rc));
		return rc;
	}
	a->nprobes += plan->nenter + nret;
	return plan->nenter + nret;
}

void mt_attach_plan_free(struct mt_attach_plan *plan)
{
	free(plan->enter);
	free(plan->ret);
	memset(plan, 0, sizeof(*plan));
}

int mt_attach_file_as(struct mt_attach *a, const char *path,
		      const char *symbols, enum mt_alloc_family *family,
		      char *err, size_t errlen)
{
	struct mt_attach_plan plan;
	int n;

	*family = MT_ALLOC_NONE;
	n = mt_attach_plan(a, path, symbols, &plan, err, errlen);
	if (n <= 0)
		return n;
	n = mt_attach_planned(a, path, &plan, err, errlen);
	if (n > 0)
		*family = plan.family;
	mt_attach_plan_free(&plan);
	return n;
}

void mt_attach_hand_over(struct mt_attach *a, void (*take)(void *ctx, int fd),
			 void *ctx)
{
	for (size_t i = 0; i < a->nlinks; i++) {
		if (a->links[i]) {
			/* libbpf's own close is then not the last */
			int fd = fcntl(bpf_link__fd(a->links[i]),
				       F_DUPFD_CLOEXEC, 0);

			if (fd >= 0)
				take(ctx, fd);
		} else if (a->link_fds[i] >= 0) {
			take(ctx, a->link_fds[i]);
			a->link_fds[i] = -1;
		}
	}
	mt_attach_destroy(a);
}

void mt_attach_destroy(struct mt_attach *a)
{
	for (size_t i = 0; i < a->nlinks; i++) {
		if (a->links[i])
			bpf_link__destroy(a->links[i]);
		else if (a->link_fds[i] >= 0)
			close(a->link_fds[i]);
	}
	a->nlinks = 0;
}
