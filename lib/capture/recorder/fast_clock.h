/* SPDX-License-Identifier: MIT */
/*
 * fast_clock.h - mt-trace --fast: may the recorders stamp their records
 * with the CPU's time-stamp counter (placed on CLOCK_MONOTONIC by
 * mt-trace's calibration), or must they call clock_gettime?  The facts the
 * answer rests on, read from the machine, and the rule, kept apart so
 * that tests/unit/test_fast_clock.c can check the rule on any machine.
 */
#ifndef MT_FAST_CLOCK_H
#define MT_FAST_CLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* MT_FAST_CLOCK's values */
enum mt_fast_clock_choice {
	MT_CLOCK_AUTO,	  /* unset, empty or "auto": the rule decides */
	MT_CLOCK_GETTIME, /* "gettime": clock_gettime, whatever the rule */
};

struct mt_fast_clock_facts {
	bool x86_64;	      /* rdtsc exists */
	char clocksource[32]; /* current_clocksource, without the newline */
	bool constant_tsc;    /* /proc/cpuinfo's flags */
	bool nonstop_tsc;
	bool vdso_monotonic; /* clock_gettime(CLOCK_MONOTONIC) made no
				system call (only looked at for kvm-clock) */
	enum mt_fast_clock_choice choice;
	/* the vDSO check's thread, while it runs */
	pthread_t vdso_check;
	bool vdso_checking;
};

/*
 * The facts of this machine, now, but vdso_monotonic: when it matters,
 * its check has started on a thread (vdso_checking), for
 * mt_fast_clock_facts_finish to wait for.  A thread starts and is
 * scheduled in 20 us to 8 ms here (the other CPU busy): mt-trace has
 * other work to do meanwhile.  -1 with a message on stderr when
 * MT_FAST_CLOCK holds something else than auto or gettime.
 */
int mt_fast_clock_facts(struct mt_fast_clock_facts *facts);

/* vdso_monotonic known (the check's thread waited for). */
void mt_fast_clock_facts_finish(struct mt_fast_clock_facts *facts);

/* The rule: true when the TSC may stamp the records; *why says why either
 * way (for -v). */
bool mt_fast_clock_tsc(const struct mt_fast_clock_facts *facts,
		       const char **why);

/* Is flag one of the words of the "flags" line of /proc/cpuinfo's text? */
bool mt_cpuinfo_has_flag(const char *cpuinfo, const char *flag);

/* Did clock_gettime(clock) complete without a system call (the vDSO
 * served it)?  Tried on a thread of its own that clock_gettime system
 * calls fail on (a seccomp filter, which only that thread carries). */
bool mt_vdso_serves(clockid_t clock);

/*
 * The counter-to-CLOCK_MONOTONIC line mt-trace places the records on:
 * through a calibration point (at_tsc, at_ns) with a slope of whole +
 * frac / 2^64 ns a tick, in fixed point: a record costs two multiplies
 * (the fraction's the high half of a 64x64-bit one), not three
 * conversions and a double-precision multiply (--fast's drain reads
 * millions).  The fraction is rounded up: a reading is the exact line's
 * (truncated toward zero) unless the exact offset is within 2^-64 of it a
 * tick under a whole ns, and within 1 ns of the double-precision line's
 * (tests/unit/test_tsc_line.c).
 */
struct mt_tsc_line {
	uint64_t at_tsc, at_ns;
	uint64_t whole, frac;
};

/* The line through (tsc0, ns0) and (tsc1, ns1), placed at the first; flat
 * when tsc1 is not after tsc0. */
void mt_tsc_line_set(struct mt_tsc_line *l, uint64_t tsc0, uint64_t ns0,
		     uint64_t tsc1, uint64_t ns1);

/* The line's ns at counter value tsc, before or after the point: the
 * offset (tick count times slope) truncated toward zero, as a conversion
 * of the double would. */
static inline uint64_t mt_tsc_line_ns(const struct mt_tsc_line *l, uint64_t tsc)
{
	int64_t d = (int64_t)(tsc - l->at_tsc);
	uint64_t m = d < 0 ? -(uint64_t)d : (uint64_t)d;
	uint64_t q =
	    m * l->whole + (uint64_t)(((unsigned __int128)m * l->frac) >> 64);

	return l->at_ns + (d < 0 ? -q : q);
}

#endif /* MT_FAST_CLOCK_H */
