// SPDX-License-Identifier: MIT
/*
 * test_xalloc.c - mt_xalloc.h, the one out-of-memory policy of
 * lib/capture (lib/README.md): an allocation that cannot be had says
 * "out of memory" through the sink, as an error, and exits with the
 * tool's status (mt-trace's 125), never returns NULL.  Each failing call
 * runs in a child; its message comes back through a pipe.  Sizes no
 * allocator gives (and sizes whose bytes wrap a size_t) fail everywhere;
 * strdup and asprintf are made to fail by RLIMIT_AS, outside ASan
 * (whose shadow memory a small address-space limit does not hold).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_log.h"
#include "mt_tracer.h"
#include "mt_xalloc.h"

/* Under ASan (make check-asan) too: a size no allocator can give is a
 * NULL, as from glibc's, not an abort. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

enum call {
	MALLOC,
	CALLOC,
	CALLOC_WRAPS,
	REALLOCARRAY_WRAPS,
	STRDUP,
	ASPRINTF
};

/* the child's sink: "LEVEL TEXT\n" down the pipe */
static void to_pipe(const struct mt_log_msg *m, void *arg)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%d %s\n", (int)m->level, m->text);

	if (write(*(int *)arg, line, n) < 0)
		_exit(99);
}

/* A string of 64 MiB, then an address space with no room for a copy. */
static const char *big_string_no_room(void)
{
	size_t len = 64 << 20;
	char *s = malloc(len + 1);
	struct rlimit rl;
	unsigned long pages;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!s || !f || fscanf(f, "%lu", &pages) != 1)
		_exit(98);
	fclose(f);
	memset(s, 'x', len);
	s[len] = '\0';
	rl.rlim_cur = rl.rlim_max =
	    pages * (unsigned long)sysconf(_SC_PAGESIZE) + (8 << 20);
	if (setrlimit(RLIMIT_AS, &rl))
		_exit(97);
	return s;
}

static void call(enum call c)
{
	void *p = NULL;

	switch (c) {
	case MALLOC:
		p = mt_xmalloc(SIZE_MAX - 4096);
		break;
	case CALLOC:
		p = mt_xcalloc(SIZE_MAX / 16, 8);
		break;
	case CALLOC_WRAPS:
		p = mt_xcalloc(SIZE_MAX / 4, 16);
		break;
	case REALLOCARRAY_WRAPS: /* wrapped, it was 16 bytes */
		p = mt_xreallocarray(NULL, SIZE_MAX / 8 + 2, 8);
		break;
	case STRDUP:
		p = mt_xstrdup(big_string_no_room());
		break;
	case ASPRINTF:
		p = mt_xasprintf("%s", big_string_no_room());
		break;
	}
	(void)p;
}

/* What a child calling c exited with; its messages in said. */
static int status_of(enum call c, char *said, size_t saidlen)
{
	int fds[2], status;
	ssize_t got;
	size_t n = 0;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		mt_log_set_sink(to_pipe, &fds[1]);
		alarm(10);
		call(c);
		_exit(0); /* got memory: wrong */
	}
	close(fds[1]);
	while (n + 1 < saidlen &&
	       (got = read(fds[0], said + n, saidlen - 1 - n)) > 0)
		n += got;
	said[n] = '\0';
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void fails(enum call c)
{
	char said[512], want[64];

	snprintf(want, sizeof(want), "%d out of memory\n", (int)MT_LOG_ERROR);
	CHECK_INT(status_of(c, said, sizeof(said)), MT_EXIT_TRACER_FAILED);
	CHECK_STR(said, want);
}

static void succeeds(void)
{
	char *s = mt_xstrdup("abc"), *f = mt_xasprintf("%s-%d", s, 7);
	int *a = mt_xcalloc(4, sizeof(int));

	CHECK_STR(s, "abc");
	CHECK_STR(f, "abc-7");
	CHECK_INT(a[3], 0);
	a = mt_xreallocarray(a, 1000, sizeof(int));
	a[999] = 5;
	CHECK_INT(a[3] + a[999], 5);
	/* 0 bytes: never NULL */
	free(s);
	s = mt_xmalloc(0);
	CHECK(s != NULL);
	free(s);
	free(f);
	free(a);
}

int main(void)
{
	/* what mt-trace's main sets (lib/README.md, out of memory) */
	mt_log_set_oom_status(MT_EXIT_TRACER_FAILED);
	succeeds();
	fails(MALLOC);
	fails(CALLOC);
	fails(CALLOC_WRAPS);
	fails(REALLOCARRAY_WRAPS);
#ifndef UNDER_ASAN
	fails(STRDUP);
	fails(ASPRINTF);
#endif
	return test_summary("test_xalloc");
}
