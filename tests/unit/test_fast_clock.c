// SPDX-License-Identifier: MIT
/*
 * test_fast_clock.c - --fast's clock (fast_clock.h): the rule on every
 * combination of its inputs, the cpuinfo flags read from real text, and
 * the vDSO check against outside truths: the vDSO never serves
 * CLOCK_PROCESS_CPUTIME_ID (the kernel's lib/vdso serves the wall and
 * monotonic clocks only), and where it serves CLOCK_MONOTONIC a call costs
 * a fraction of the system call's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fast_clock.h"
#include "formats_test.h"

static const char cpuinfo[] =
    "processor\t: 0\n"
    "vendor_id\t: AuthenticAMD\n"
    "model name\t: AMD EPYC\n"
    "flags\t\t: fpu vme de pse tsc msr constant_tsc rep_good nopl "
    "nonstop_tsc cpuid tsc_known_freq\n"
    "bugs\t\t: sysret_ss_attrs\n"
    "\n"
    "processor\t: 1\n"
    "flags\t\t: fpu nonstop_tsc_x\n";

static void flags(void)
{
	CHECK(mt_cpuinfo_has_flag(cpuinfo, "constant_tsc"));
	CHECK(mt_cpuinfo_has_flag(cpuinfo, "nonstop_tsc"));
	CHECK(mt_cpuinfo_has_flag(cpuinfo, "fpu"));
	CHECK(mt_cpuinfo_has_flag(cpuinfo, "tsc_known_freq"));
	CHECK(mt_cpuinfo_has_flag(cpuinfo, "tsc"));
	/* a word's prefix or extension is not the word */
	CHECK(!mt_cpuinfo_has_flag(cpuinfo, "constant"));
	CHECK(!mt_cpuinfo_has_flag(cpuinfo, "nonstop_tsc_x"));
	CHECK(!mt_cpuinfo_has_flag(cpuinfo, "tsc_known"));
	/* only the flags line: not the model name, not bugs */
	CHECK(!mt_cpuinfo_has_flag(cpuinfo, "EPYC"));
	CHECK(!mt_cpuinfo_has_flag(cpuinfo, "sysret_ss_attrs"));
	CHECK(!mt_cpuinfo_has_flag("processor\t: 0\n", "fpu"));
	CHECK(!mt_cpuinfo_has_flag("", "fpu"));
	CHECK(mt_cpuinfo_has_flag("flags\t: a b", "b")); /* no newline */
}

/* The rule over every combination of its inputs: the TSC only with tsc,
 * or with kvm-clock and all three of constant, nonstop, vDSO. */
static void rule(void)
{
	static const char *const sources[] = {"tsc", "kvm-clock", "hpet",
					      "tsc-early", ""};
	int yes = 0;

	for (unsigned s = 0; s < 5; s++) {
		for (unsigned bits = 0; bits < 32; bits++) {
			struct mt_fast_clock_facts f = {
			    .x86_64 = bits & 1,
			    .constant_tsc = bits & 2,
			    .nonstop_tsc = bits & 4,
			    .vdso_monotonic = bits & 8,
			    .choice =
				bits & 16 ? MT_CLOCK_GETTIME : MT_CLOCK_AUTO,
			};
			const char *why = NULL;
			bool want, got;

			strcpy(f.clocksource, sources[s]);
			want = f.x86_64 && f.choice == MT_CLOCK_AUTO &&
			       (s == 0 || (s == 1 && f.constant_tsc &&
					   f.nonstop_tsc && f.vdso_monotonic));
			got = mt_fast_clock_tsc(&f, &why);
			CHECK_INT(got, want);
			CHECK(why && *why);
			yes += got;
		}
	}
	CHECK_INT(yes, 8 + 1); /* tsc: 8 combinations; kvm-clock: 1 */
}

/* The messages -v shows name the input that said no. */
static void reasons(void)
{
	struct mt_fast_clock_facts f = {.x86_64 = true,
					.clocksource = "kvm-clock",
					.constant_tsc = true,
					.nonstop_tsc = true};
	const char *why;

	CHECK(!mt_fast_clock_tsc(&f, &why));
	CHECK(strstr(why, "vDSO") != NULL);
	f.vdso_monotonic = true;
	CHECK(mt_fast_clock_tsc(&f, &why));
	CHECK(strstr(why, "kvm-clock") != NULL);
	f.nonstop_tsc = false;
	CHECK(!mt_fast_clock_tsc(&f, &why));
	CHECK(strstr(why, "nonstop_tsc") != NULL);
	f.choice = MT_CLOCK_GETTIME;
	CHECK(!mt_fast_clock_tsc(&f, &why));
	CHECK_STR(why, "MT_FAST_CLOCK=gettime");
}

/* MT_FAST_CLOCK: auto, gettime, or refused. */
static void choice(void)
{
	struct mt_fast_clock_facts f;

	setenv("MT_FAST_CLOCK", "gettime", 1);
	CHECK_INT(mt_fast_clock_facts(&f), 0);
	CHECK_INT(f.choice, MT_CLOCK_GETTIME);
	setenv("MT_FAST_CLOCK", "auto", 1);
	CHECK_INT(mt_fast_clock_facts(&f), 0);
	CHECK_INT(f.choice, MT_CLOCK_AUTO);
	setenv("MT_FAST_CLOCK", "tsc", 1);
	CHECK_INT(mt_fast_clock_facts(&f), -1);
	unsetenv("MT_FAST_CLOCK");
	CHECK_INT(mt_fast_clock_facts(&f), 0);
	CHECK_INT(f.choice, MT_CLOCK_AUTO);
}

static uint64_t ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The fastest of 2,000 calls (ns), through libc or the system call. */
static uint64_t fastest_monotonic(bool syscall_itself)
{
	uint64_t best = UINT64_MAX;
	struct timespec ts;

	for (int i = 0; i < 2000; i++) {
		uint64_t a = ns(), b;

		if (syscall_itself)
			syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
		else
			clock_gettime(CLOCK_MONOTONIC, &ts);
		b = ns();
		if (b - a < best)
			best = b - a;
	}
	return best;
}

static void vdso(void)
{
	uint64_t lib = fastest_monotonic(false), sys = fastest_monotonic(true);
	bool served = mt_vdso_serves(CLOCK_MONOTONIC);

	/* a system call always: the filter sees it */
	CHECK(!mt_vdso_serves(CLOCK_PROCESS_CPUTIME_ID));
	printf("test_fast_clock: CLOCK_MONOTONIC %s by the vDSO; fastest "
	       "call %llu ns through libc, %llu ns as a system call\n",
	       served ? "served" : "not served", (unsigned long long)lib,
	       (unsigned long long)sys);
	if (served)
		CHECK(lib * 2 < sys);
	else
		CHECK(lib * 2 >= sys);
}

int main(void)
{
	vdso();
	flags();
	rule();
	reasons();
	choice();
	return test_summary("test_fast_clock");
}
