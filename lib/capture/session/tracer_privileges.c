// SPDX-License-Identifier: MIT
/*
 * tracer_privileges.c - what mt-trace needs of the machine before it can
 * load anything: its capabilities (said exactly when one is missing), and
 * tracefs (mounted in a namespace of its own when it is not), where the
 * classic tracepoints' ids are.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "mt_log.h"
#include "mt_tracer.h"
#include "tracer_int.h"

static uint64_t effective_caps(void)
{
	char line[256];
	uint64_t caps = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %lx", &caps) == 1)
			break;
	fclose(f);
	return caps;
}

/* The capabilities loading and attaching need that this process lacks, as
 * " CAP_BPF CAP_PERFMON", or "". */
static void missing_caps(char *missing, size_t len)
{
	enum { CAP_SYS_ADMIN_ = 21, CAP_PERFMON_ = 38, CAP_BPF_ = 39 };
	uint64_t caps = effective_caps();
	bool admin = caps & (1ull << CAP_SYS_ADMIN_);

	snprintf(missing, len, "%s%s",
		 !admin && !(caps & (1ull << CAP_BPF_)) ? " CAP_BPF" : "",
		 !admin && !(caps & (1ull << CAP_PERFMON_)) ? " CAP_PERFMON"
							    : "");
}

static void say_missing(const char *missing)
{
	mt_error("missing capability:%s (run as root, or grant it: "
		 "setcap cap_bpf,cap_perfmon,cap_sys_admin+ep mt-trace)",
		 missing);
}

bool mt_tracer_has_privileges(void)
{
	char missing[64];

	missing_caps(missing, sizeof(missing));
	if (missing[0])
		say_missing(missing);
	return !missing[0];
}

void mt_tracer_explain_privileges(const char *what, int err, bool verbose)
{
	char missing[64];

	missing_caps(missing, sizeof(missing));
	mt_error("%s: %s%s", what, strerror(err),
		 verbose ? "" : " (-v shows libbpf's messages)");
	if (missing[0])
		say_missing(missing);
}

/* Where tracefs is mounted, where it may be */
static const char *const tracefs_roots[] = {"/sys/kernel/tracing",
					    "/sys/kernel/debug/tracing"};
#define NROOTS (sizeof(tracefs_roots) / sizeof(tracefs_roots[0]))

static bool tracefs_ready(void)
{
	char path[64];

	for (size_t i = 0; i < NROOTS; i++) {
		snprintf(path, sizeof(path), "%s/events/syscalls",
			 tracefs_roots[i]);
		if (access(path, F_OK) == 0)
			return true;
	}
	return false;
}

/*
 * Classic tracepoints (kmem:rss_stat, the only source of exact RSS sizes)
 * need tracefs.  When it is not mounted, mount it in a mount namespace of
 * mt-trace's: nothing changes for the rest of the machine, and the mount
 * goes away with the namespace.  That is the tree's namespace when the
 * probes are confined (mt_tracer_confine_begin(): the private copies are being
 * bound in it by another thread at this moment, so mt-trace must stay in
 * it to see them; the tree then sees tracefs too, which only root can
 * read), else one of mt-trace's own: the child, forked before, stays in
 * the host's.
 */
int mt_tracer_ensure_tracefs(const struct tracer *t)
{
	if (tracefs_ready())
		return 0;
	if ((!t->probes.confine.entered &&
	     (unshare(CLONE_NEWNS) ||
	      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))) ||
	    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL)) {
		int e = errno;

		mt_error("tracefs is not mounted and mounting it "
			 "failed: %s",
			 strerror(e));
		if (e == EPERM)
			mt_error("missing capability: "
				 "CAP_SYS_ADMIN (or mount tracefs at "
				 "/sys/kernel/tracing first)");
		return -1;
	}
	return 0;
}

long mt_tracer_tracepoint_id(const char *group, const char *name)
{
	char path[256];
	long id = -1;

	for (size_t i = 0; id < 0 && i < NROOTS; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/events/%s/%s/id",
			 tracefs_roots[i], group, name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%ld", &id) != 1)
			id = -1;
		fclose(f);
	}
	return id;
}
