/* SPDX-License-Identifier: MIT */
/*
 * mt_decimal.h - an unsigned integer in decimal, written in place: its
 * digit count first, then the digits two at a time from the end.  Nothing
 * but two-byte memcpy (async-signal-safe), so a signal handler may use it
 * too (lib/input.c's SIGBUS message); lib/reconstruct.c writes every
 * integer of its JSON with it.
 */
#ifndef MT_DECIMAL_H
#define MT_DECIMAL_H

#include <stdint.h>
#include <string.h>

/* Decimal digits of u (1 for 0). */
static inline unsigned mt_decimal_len(uint64_t u)
{
	static const uint64_t pow10[20] = {1ull,
					   10ull,
					   100ull,
					   1000ull,
					   10000ull,
					   100000ull,
					   1000000ull,
					   10000000ull,
					   100000000ull,
					   1000000000ull,
					   10000000000ull,
					   100000000000ull,
					   1000000000000ull,
					   10000000000000ull,
					   100000000000000ull,
					   1000000000000000ull,
					   10000000000000000ull,
					   100000000000000000ull,
					   1000000000000000000ull,
					   10000000000000000000ull};
	/* bits * log10(2), rounded down, is the digits of 2^(bits-1) less
	 * one: the number has that many or one more */
	unsigned n = (64 - __builtin_clzll(u | 1)) * 1233 >> 12;

	return n + (u >= pow10[n]) + !u;
}

/* u in n decimal digits at b, two at a time from the end. */
static inline void mt_put_decimal(char *b, uint64_t u, unsigned n)
{
	static const char pairs[] = "00010203040506070809"
				    "10111213141516171819"
				    "20212223242526272829"
				    "30313233343536373839"
				    "40414243444546474849"
				    "50515253545556575859"
				    "60616263646566676869"
				    "70717273747576777879"
				    "80818283848586878889"
				    "90919293949596979899";
	char *p = b + n;

	while (u >= 100) {
		unsigned pair = u % 100;

		u /= 100;
		p -= 2;
		memcpy(p, pairs + 2 * pair, 2);
	}
	if (u >= 10)
		memcpy(p - 2, pairs + 2 * u, 2);
	else
		p[-1] = '0' + u;
}

#endif /* MT_DECIMAL_H */
