// SPDX-License-Identifier: MIT
/*
 * fast_clock.c - mt-trace --fast: the TSC or clock_gettime for the
 * recorders' records (fast_clock.h).
 *
 * The recorders' records and the BPF events merge by time; the BPF events
 * carry CLOCK_MONOTONIC (bpf_ktime_get_ns).  A record stamped by rdtsc
 * (~11 ns here) is placed on CLOCK_MONOTONIC by mt-trace, which takes a
 * (counter, monotonic) point at every drain and interpolates between two:
 * right when every CPU's counter is the same counter, running at a
 * constant rate, that CLOCK_MONOTONIC is a linear function of between the
 * kernel's updates.  Otherwise each record costs a clock_gettime (~27 ns
 * through the vDSO, ~60 on other machines: more than the malloc it
 * stamps).  Two clocksources say the TSC is such a counter:
 *
 * - tsc: the kernel counts CLOCK_MONOTONIC in it, and only keeps it as the
 *   clocksource while its checks find it synchronised across CPUs.
 * - kvm-clock (a KVM guest): the guest's CLOCK_MONOTONIC is the pvclock,
 *   the TSC scaled by parameters the host publishes.  The vDSO reads it
 *   only when the host sets the pvclock's TSC-stable bit, and then
 *   converts every CPU's TSC with one set of parameters (vCPU 0's), so
 *   clock_gettime served by the vDSO is itself the TSC through one linear
 *   map: as synchronised as the TSC is, which is what the host vouches
 *   for with that bit.  Without it the vDSO makes the system call, each
 *   CPU's reading its own parameters.  So: kvm-clock, constant_tsc and
 *   nonstop_tsc (the rate never changes, the counter never stops), and a
 *   clock_gettime that made no system call, checked at the session's start.
 *   (This machine boots with tsc=unstable, so tsc is not even offered as a
 *   clocksource; a two-CPU rdtsc ping-pong saw 2 steps back in 400,000, at
 *   most 189 ticks, 90 ns: the same steps the vDSO's clock takes.)
 *
 * A host that clears the bit later (a live migration) is not noticed
 * until the next session; MT_FAST_CLOCK=gettime makes the recorders call
 * clock_gettime whatever the machine says.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "mt_log.h"
#include "fast_clock.h"

#define CLOCKSOURCE                                                            \
	"/sys/devices/system/clocksource/clocksource0/"                        \
	"current_clocksource"

bool mt_cpuinfo_has_flag(const char *cpuinfo, const char *flag)
{
	size_t len = strlen(flag);
	const char *line = cpuinfo;

	while (line && *line) {
		const char *end = strchr(line, '\n'), *p;

		if (!end)
			end = line + strlen(line);
		if (strncmp(line, "flags", 5) == 0 &&
		    (p = memchr(line, ':', end - line))) {
			for (p++; p < end;) {
				while (p < end && *p == ' ')
					p++;
				const char *w = p;

				while (p < end && *p != ' ')
					p++;
				if ((size_t)(p - w) == len &&
				    strncmp(w, flag, len) == 0)
					return true;
			}
			return false; /* the first CPU's flags are enough */
		}
		line = *end ? end + 1 : end;
	}
	return false;
}

bool mt_fast_clock_tsc(const struct mt_fast_clock_facts *facts,
		       const char **why)
{
	const char *cs = facts->clocksource;

	if (facts->choice == MT_CLOCK_GETTIME) {
		*why = "MT_FAST_CLOCK=gettime";
		return false;
	}
	if (!facts->x86_64) {
		*why = "no TSC on this architecture";
		return false;
	}
	if (strcmp(cs, "tsc") == 0) {
		*why = "the clocksource is the TSC";
		return true;
	}
	if (strcmp(cs, "kvm-clock") != 0) {
		*why = "the clocksource is neither tsc nor kvm-clock";
		return false;
	}
	if (!facts->constant_tsc || !facts->nonstop_tsc) {
		*why = "kvm-clock, but the TSC is not constant_tsc and "
		       "nonstop_tsc";
		return false;
	}
	if (!facts->vdso_monotonic) {
		*why = "kvm-clock, but clock_gettime is not served by the vDSO "
		       "(the host does not say the TSC is stable)";
		return false;
	}
	*why = "kvm-clock over a stable TSC (constant, nonstop, read by the "
	       "vDSO)";
	return true;
}

/* The thread that tries clock_gettime under the filter: it returns
 * (void *)1 when the call succeeded. */
static void *try_clock(void *arg)
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		     offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		     offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
	clockid_t clock = (clockid_t)(intptr_t)arg;
	struct timespec ts;
	bool served = true;

	/* both for this thread alone (no SECCOMP_FILTER_FLAG_TSYNC); no new
	 * privileges is what an unprivileged filter needs */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return NULL;
	for (int i = 0; i < 3 && served; i++)
		served = clock_gettime(clock, &ts) == 0;
	return served ? (void *)1 : NULL;
}

/* The check of clock started on a thread (*th); false if none could. */
static bool vdso_check_start(pthread_t *th, clockid_t clock)
{
#if defined(__x86_64__)
	return pthread_create(th, NULL, try_clock, (void *)(intptr_t)clock) ==
	       0;
#else
	(void)th;
	(void)clock;
	return false;
#endif
}

static bool vdso_check_finish(pthread_t th)
{
	void *served = NULL;

	pthread_join(th, &served);
	return served != NULL;
}

bool mt_vdso_serves(clockid_t clock)
{
	pthread_t th;

	return vdso_check_start(&th, clock) && vdso_check_finish(th);
}

static void read_clocksource(char *out, size_t len)
{
	FILE *f = fopen(CLOCKSOURCE, "re");

	out[0] = '\0';
	if (f) {
		if (!fgets(out, len, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

/* The first "flags" line of /proc/cpuinfo. */
static void read_tsc_flags(struct mt_fast_clock_facts *facts)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	while (f && getline(&line, &cap, f) > 0) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		facts->constant_tsc = mt_cpuinfo_has_flag(line, "constant_tsc");
		facts->nonstop_tsc = mt_cpuinfo_has_flag(line, "nonstop_tsc");
		break;
	}
	free(line);
	if (f)
		fclose(f);
}

static int read_choice(enum mt_fast_clock_choice *choice)
{
	const char *env = getenv("MT_FAST_CLOCK");

	*choice = MT_CLOCK_AUTO;
	if (!env || !*env || strcmp(env, "auto") == 0)
		return 0;
	if (strcmp(env, "gettime") == 0) {
		*choice = MT_CLOCK_GETTIME;
		return 0;
	}
	mt_error("MT_FAST_CLOCK: '%s' is neither auto nor gettime", env);
	return -1;
}

int mt_fast_clock_facts(struct mt_fast_clock_facts *facts)
{
	*facts = (struct mt_fast_clock_facts){0};
	if (read_choice(&facts->choice))
		return -1;
#if defined(__x86_64__)
	facts->x86_64 = true;
#endif
	if (facts->choice == MT_CLOCK_GETTIME || !facts->x86_64)
		return 0;
	read_clocksource(facts->clocksource, sizeof(facts->clocksource));
	if (strcmp(facts->clocksource, "kvm-clock") != 0)
		return 0; /* the rest decides nothing */
	read_tsc_flags(facts);
	if (facts->constant_tsc && facts->nonstop_tsc)
		facts->vdso_checking =
		    vdso_check_start(&facts->vdso_check, CLOCK_MONOTONIC);
	return 0;
}

void mt_fast_clock_facts_finish(struct mt_fast_clock_facts *facts)
{
	if (!facts->vdso_checking)
		return;
	facts->vdso_monotonic = vdso_check_finish(facts->vdso_check);
	facts->vdso_checking = false;
}

void mt_tsc_line_set(struct mt_tsc_line *l, uint64_t tsc0, uint64_t ns0,
		     uint64_t tsc1, uint64_t ns1)
{
	uint64_t dtsc = tsc1 - tsc0, rem;

	*l = (struct mt_tsc_line){.at_tsc = tsc0, .at_ns = ns0};
	if (tsc1 <= tsc0)
		return;
	l->whole = (ns1 - ns0) / dtsc;
	rem = (ns1 - ns0) % dtsc;
	/* rem * 2^64 / dtsc rounded up (below 2^64: rem < dtsc): a whole ns
	 * (the second point's, a slope of 1/3 at 3 ticks) comes out whole,
	 * not a hair under it and truncated */
	l->frac =
	    (uint64_t)((((unsigned __int128)rem << 64) + dtsc - 1) / dtsc);
}
