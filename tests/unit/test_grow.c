// SPDX-License-Identifier: MIT
/*
 * test_grow.c - mt_grow (lib/capture/session/mt_grow.h), the doubling every
 * table of mt-trace's engine grows by: room for what is asked, the elements
 * kept; and a need whose bytes, or whose doubling, pass what a size_t
 * holds ends mt-trace (125, "out of memory") instead of wrapping to a
 * small buffer or doubling to 0 for ever.  Each such call runs in a child
 * that a 5 s alarm ends should it loop.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_grow.h"
#include "mt_log.h"

/* Under ASan (make check-asan) too: a size no allocator can give is a
 * NULL from realloc, as from glibc's, not an abort. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

static void grows(void)
{
	size_t cap = 0;
	int *a = mt_grow(NULL, &cap, 10, sizeof(int));

	CHECK_INT(cap, 1024);
	for (int i = 0; i < 10; i++)
		a[i] = i;
	a = mt_grow(a, &cap, 5000, sizeof(int));
	CHECK_INT(cap, 8192);
	a[4999] = 4999;
	CHECK_INT(a[9], 9);
	/* room already: the same array */
	CHECK(mt_grow(a, &cap, 8192, sizeof(int)) == a);
	free(a);
}

/* The status of a child that calls mt_grow(p, cap, need, elem) with
 * stderr closed; -1 if the alarm ended it. */
static int grow_in_child(size_t cap, size_t need, size_t elem)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		size_t c = cap;

		close(STDERR_FILENO);
		alarm(5);
		mt_grow(NULL, &c, need, elem);
		_exit(0); /* got a buffer: wrong */
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -2;
	if (WIFSIGNALED(status))
		return WTERMSIG(status) == SIGALRM ? -1 : -3;
	return WEXITSTATUS(status);
}

static void overflows(void)
{
	/* need * elem past SIZE_MAX: wrapped, it was a small buffer */
	CHECK_INT(grow_in_child(0, SIZE_MAX / 8 + 2, 16),
		  MT_EXIT_TRACER_FAILED);
	/* a capacity whose doubling wraps: 0 for ever */
	CHECK_INT(grow_in_child(SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2, 1),
		  MT_EXIT_TRACER_FAILED);
	/* no element size */
	CHECK_INT(grow_in_child(0, 10, 0), MT_EXIT_TRACER_FAILED);
}

int main(void)
{
	/* what mt-trace's main sets (lib/README.md, out of memory) */
	mt_log_set_oom_status(MT_EXIT_TRACER_FAILED);
	grows();
	overflows();
	return test_summary("test_grow");
}
