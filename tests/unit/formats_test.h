/* SPDX-License-Identifier: MIT */
/* formats_test.h - the checks of the formats' unit tests: each failed
 * check prints where and what, and test_summary() turns them into the exit
 * status tests/run looks at. */
#ifndef FORMATS_TEST_H
#define FORMATS_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int test_checks, test_failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		test_checks++;                                                 \
		if (!(cond)) {                                                 \
			test_failures++;                                       \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, \
				__LINE__, #cond);                              \
		}                                                              \
	} while (0)

#define CHECK_INT(got, want)                                                   \
	do {                                                                   \
		long long g_ = (long long)(got), w_ = (long long)(want);       \
		test_checks++;                                                 \
		if (g_ != w_) {                                                \
			test_failures++;                                       \
			fprintf(stderr, "%s:%d: %s = %lld, want %lld\n",       \
				__FILE__, __LINE__, #got, g_, w_);             \
		}                                                              \
	} while (0)

#define CHECK_STR(got, want)                                                   \
	do {                                                                   \
		const char *g_ = (got), *w_ = (want);                          \
		test_checks++;                                                 \
		if (!g_ || strcmp(g_, w_)) {                                   \
			test_failures++;                                       \
			fprintf(                                               \
			    stderr, "%s:%d: %s =\n  \"%s\"\nwant\n  \"%s\"\n", \
			    __FILE__, __LINE__, #got, g_ ? g_ : "(null)", w_); \
		}                                                              \
	} while (0)

static inline int test_summary(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
	return test_failures ? 1 : 0;
}

#endif
