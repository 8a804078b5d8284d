// SPDX-License-Identifier: MIT
/*
 * test_tsc_line.c - --fast's counter-to-CLOCK_MONOTONIC line in fixed
 * point (fast_clock.h: mt_tsc_line_set, mt_tsc_line_ns) against the
 * double-precision line mt-trace used before it (the reference below, as
 * tracer_fast_int.h had it) and the exact line (128-bit integers): within
 * 1 ns of the double everywhere a session goes (counters of 0.5 to 5 GHz,
 * calibration points a microsecond to an hour apart, records before the
 * first point and past the second), nearly always equal, the exact line's
 * reading, and never going back as the counter goes on.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fast_clock.h"
#include "formats_test.h"

/* The line as tracer_fast_int.h computed it with doubles. */
static uint64_t line_double(uint64_t tsc0, uint64_t ns0, uint64_t tsc1,
			    uint64_t ns1, uint64_t tsc)
{
	double ns_per_tick =
	    tsc1 > tsc0 ? (double)(ns1 - ns0) / (double)(tsc1 - tsc0) : 0;
	double d = (double)(int64_t)(tsc - tsc0) * ns_per_tick;

	return (uint64_t)((int64_t)ns0 + (int64_t)d);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* uniform in [lo, hi] (hi - lo < 2^64 - 1) */
static uint64_t between(uint64_t lo, uint64_t hi)
{
	return lo + next() % (hi - lo + 1);
}

/* log-uniform in [lo, hi] */
static uint64_t log_between(uint64_t lo, uint64_t hi)
{
	unsigned bits = 0, maxbits = 64 - __builtin_clzll(hi);
	uint64_t v;

	do {
		bits = between(64 - __builtin_clzll(lo), maxbits);
		v = bits >= 64 ? next() : next() & ((1ull << bits) - 1);
	} while (v < lo || v > hi);
	return v;
}

/* The line exactly: the offset's ticks times the slope's fraction, in
 * 128 bits, truncated toward zero. */
static uint64_t line_exact(uint64_t tsc0, uint64_t ns0, uint64_t tsc1,
			   uint64_t ns1, uint64_t tsc)
{
	int64_t d = (int64_t)(tsc - tsc0);
	unsigned __int128 m = d < 0 ? -(uint64_t)d : (uint64_t)d;
	uint64_t q;

	if (tsc1 <= tsc0)
		return ns0;
	q = (uint64_t)(m * (ns1 - ns0) / (tsc1 - tsc0));
	return ns0 + (d < 0 ? -q : q);
}

static long worst;
static uint64_t compared, equal, exact_misses;

static void compare(uint64_t tsc0, uint64_t ns0, uint64_t tsc1, uint64_t ns1,
		    const struct mt_tsc_line *l, uint64_t tsc)
{
	uint64_t want = line_double(tsc0, ns0, tsc1, ns1, tsc);
	uint64_t got = mt_tsc_line_ns(l, tsc);
	long diff = (long)(got - want);

	compared++;
	equal += diff == 0;
	exact_misses += got != line_exact(tsc0, ns0, tsc1, ns1, tsc);
	if (labs(diff) > worst)
		worst = labs(diff);
	if (labs(diff) > 1) {
		CHECK(labs(diff) <= 1);
		fprintf(stderr,
			"  line (%llu, %llu)-(%llu, %llu) at %llu: %llu, "
			"want %llu\n",
			(unsigned long long)tsc0, (unsigned long long)ns0,
			(unsigned long long)tsc1, (unsigned long long)ns1,
			(unsigned long long)tsc, (unsigned long long)got,
			(unsigned long long)want);
	}
}

/* Random lines and records on and around them. */
static void against_double(void)
{
	for (int k = 0; k < 20000; k++) {
		/* ticks per ns, 0.5 to 5, in thousandths */
		uint64_t rate = between(500, 5000);
		uint64_t dns = log_between(1000, 3600000000000ull);
		uint64_t dtsc = dns * rate / 1000 + between(0, 200) - 100;
		uint64_t tsc0 = log_between(1ull << 30, 1ull << 58);
		uint64_t ns0 = log_between(1000000000ull, 1ull << 52);
		uint64_t tsc1 = tsc0 + dtsc, ns1 = ns0 + dns;
		struct mt_tsc_line l;

		mt_tsc_line_set(&l, tsc0, ns0, tsc1, ns1);
		compare(tsc0, ns0, tsc1, ns1, &l, tsc0);
		compare(tsc0, ns0, tsc1, ns1, &l, tsc1);
		CHECK_INT(mt_tsc_line_ns(&l, tsc0), ns0);
		for (int i = 0; i < 50; i++) {
			/* mostly between the points, some before the first
			 * (a record that waited a drain), some well past */
			uint64_t tsc = i < 40 ? tsc0 + between(0, dtsc)
				       : i < 45
					   ? tsc0 - between(0, dtsc / 8 + 1)
					   : tsc1 + between(0, dtsc);

			compare(tsc0, ns0, tsc1, ns1, &l, tsc);
		}
	}
	printf("test_tsc_line: %llu readings against the double line: %llu "
	       "equal, worst %ld ns; %llu not the exact line's\n",
	       (unsigned long long)compared, (unsigned long long)equal, worst,
	       (unsigned long long)exact_misses);
	/* the fixed-point slope has a 64-bit fraction, the double's 53
	 * bits: the double line is the one off the exact line, by a rounding,
	 * where the offset is within its rounding error of a whole ns (0.1% of
	 * these readings; the sample is the same every run) */
	CHECK(exact_misses == 0);
	CHECK(equal * 1000 >= compared * 995);
}

/* Never back as the counter goes on: small steps across the point
 * (records before it, then after) and big ones far past it. */
static void monotonic(void)
{
	for (int k = 0; k < 200; k++) {
		uint64_t rate = between(500, 5000);
		uint64_t dns = log_between(1000, 3600000000000ull);
		uint64_t tsc0 = log_between(1ull << 30, 1ull << 58);
		uint64_t ns0 = log_between(1000000000ull, 1ull << 52);
		struct mt_tsc_line l;
		uint64_t tsc = tsc0 - 100000, prev;
		bool back = false;

		mt_tsc_line_set(&l, tsc0, ns0, tsc0 + dns * rate / 1000,
				ns0 + dns);
		prev = mt_tsc_line_ns(&l, tsc);
		for (int i = 0; i < 20000 && !back; i++) {
			uint64_t ns;

			tsc += i < 15000 ? between(1, 16)
					 : log_between(1, 1ull << 36);
			ns = mt_tsc_line_ns(&l, tsc);
			back = ns < prev;
			prev = ns;
		}
		CHECK(!back);
	}
}

/* A flat line (the second point not after the first): the first's ns. */
static void flat(void)
{
	struct mt_tsc_line l;

	mt_tsc_line_set(&l, 5000, 77, 5000, 99);
	CHECK_INT(mt_tsc_line_ns(&l, 5000), 77);
	CHECK_INT(mt_tsc_line_ns(&l, 9000), 77);
	CHECK_INT(mt_tsc_line_ns(&l, 1000), 77);
	mt_tsc_line_set(&l, 5000, 77, 4000, 99);
	CHECK_INT(mt_tsc_line_ns(&l, 6000), 77);
}

/* Exact slopes: 1 ns a tick, 3 ticks a ns, 2.5 ns a tick. */
static void exact(void)
{
	struct mt_tsc_line l;

	mt_tsc_line_set(&l, 1000, 1000000, 2000, 1001000);
	CHECK_INT(mt_tsc_line_ns(&l, 1500), 1000500);
	CHECK_INT(mt_tsc_line_ns(&l, 500), 999500);
	mt_tsc_line_set(&l, 3000, 10, 6000, 1010);
	CHECK_INT(mt_tsc_line_ns(&l, 3002), 10); /* 0.67 down to 0 */
	CHECK_INT(mt_tsc_line_ns(&l, 3003), 11);
	CHECK_INT(mt_tsc_line_ns(&l, 2998), 10); /* -0.67 up to 0 */
	CHECK_INT(mt_tsc_line_ns(&l, 2997), 9);
	mt_tsc_line_set(&l, 0, 0, 2, 5);
	CHECK_INT(mt_tsc_line_ns(&l, 1ull << 40), 5ull << 39);
	CHECK_INT(mt_tsc_line_ns(&l, 3), 7);
}

int main(void)
{
	against_double();
	monotonic();
	flat();
	exact();
	return test_summary("test_tsc_line");
}
