/* SPDX-License-Identifier: MIT */
/*
 * mtcount.so - an LD_PRELOAD allocation counter: the tests' independent
 * count of the allocator calls a program makes.
 *
 *   LD_PRELOAD=build/preload/mtcount.so MTCOUNT_OUT=counts.jsonl CMD
 *
 * Every call is forwarded once to the next definition (glibc's), and
 * counted in the terms of the events mt-trace must produce for it:
 *
 *   Malloc        malloc that returned a block (malloc(0) included)
 *   Calloc        calloc that returned a block
 *   Realloc       realloc / reallocarray that returned a block
 *   AlignedAlloc  memalign, aligned_alloc, posix_memalign, valloc, pvalloc
 *                 that returned a block
 *   Free          free of a non-NULL pointer, and realloc(p, 0) of a
 *                 non-NULL p (glibc frees p and returns NULL)
 *
 * and, apart, what must be no event: free(NULL) ("free_null") and calls
 * that failed ("failed").  "calls" counts each function by name;
 * "realloc_null" says how many of the Realloc events were realloc(NULL, n).
 *
 * Each process appends one JSON line to $MTCOUNT_OUT when it exits (exit
 * or _exit) and just before it execs (the new program starts from zero):
 *   {"pid":P,"why":"exit","events":{...},"calls":{...},"free_null":N,...}
 * Sum a pid's lines for the whole life of that pid.
 *
 * What this counter cannot see, and a uprobe on glibc can: calls inside
 * glibc that do not go through the PLT (realloc(NULL, n) calling malloc,
 * realloc(p, 0) calling free, memalign calling malloc).  Those nested calls
 * must not be events, so for a correct tracer the two counts agree exactly
 * when the tracer watches the same run.  What neither sees: ld.so's
 * allocations before libc is relocated (its own minimal malloc), and the
 * allocations dlsym makes while this library looks up glibc's functions,
 * which come from a static buffer here and are counted as "bootstrap".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum counted {
	EV_MALLOC,
	EV_CALLOC,
	EV_REALLOC,
	EV_ALIGNED,
	EV_FREE,
	FREE_NULL,
	FAILED,
	BOOTSTRAP,
	REALLOC_NULL, /* of the Realloc events: realloc(NULL, n) */
	N_COUNTED
};

static const char *const counted_name[N_COUNTED] = {
    [EV_MALLOC] = "Malloc",
    [EV_CALLOC] = "Calloc",
    [EV_REALLOC] = "Realloc",
    [EV_ALIGNED] = "AlignedAlloc",
    [EV_FREE] = "Free",
    [FREE_NULL] = "free_null",
    [FAILED] = "failed",
    [BOOTSTRAP] = "bootstrap",
    [REALLOC_NULL] = "realloc_null",
};

enum function {
	F_MALLOC,
	F_CALLOC,
	F_REALLOC,
	F_REALLOCARRAY,
	F_FREE,
	F_MEMALIGN,
	F_ALIGNED_ALLOC,
	F_POSIX_MEMALIGN,
	F_VALLOC,
	F_PVALLOC,
	N_FUNCTIONS
};

static const char *const function_name[N_FUNCTIONS] = {
    "malloc",	"calloc",	 "realloc",	   "reallocarray", "free",
    "memalign", "aligned_alloc", "posix_memalign", "valloc",	   "pvalloc",
};

static unsigned long counts[N_COUNTED];
static unsigned long calls[N_FUNCTIONS];

static void count(enum counted what)
{
	__atomic_fetch_add(&counts[what], 1, __ATOMIC_RELAXED);
}

static void count_call(enum function fn)
{
	__atomic_fetch_add(&calls[fn], 1, __ATOMIC_RELAXED);
}

/* An allocation that returned block (or NULL) is event `what` (or a
 * failure). */
static void *counted_result(void *block, enum counted what)
{
	count(block ? what : FAILED);
	return block;
}

/* glibc's definitions, looked up once. */
static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	void *(*memalign)(size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execv)(const char *, char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	void (*_exit)(int) __attribute__((noreturn));
} real;

/*
 * dlsym itself may allocate (calloc for its error state).  While it runs,
 * allocations come from this buffer, are never freed, and never reach
 * glibc, so neither this counter nor a tracer sees them as calls.
 */
static char bootstrap_heap[64 * 1024] __attribute__((aligned(64)));
static size_t bootstrap_used;
static int resolving;

static void *bootstrap_alloc(size_t size)
{
	size_t start = (bootstrap_used + 63) & ~(size_t)63;

	if (start + size > sizeof(bootstrap_heap))
		return NULL;
	bootstrap_used = start + size;
	count(BOOTSTRAP);
	return bootstrap_heap + start;
}

static int is_bootstrap(const void *p)
{
	return (const char *)p >= bootstrap_heap &&
	       (const char *)p < bootstrap_heap + sizeof(bootstrap_heap);
}

#define RESOLVE(name)                                                          \
	(real.name = (__typeof__(real.name))dlsym(RTLD_NEXT, #name))

static void resolve(void)
{
	if (real.free)
		return;
	resolving = 1;
	RESOLVE(malloc);
	RESOLVE(calloc);
	RESOLVE(realloc);
	RESOLVE(memalign);
	RESOLVE(aligned_alloc);
	RESOLVE(posix_memalign);
	RESOLVE(valloc);
	RESOLVE(pvalloc);
	RESOLVE(execve);
	RESOLVE(execv);
	RESOLVE(execvp);
	RESOLVE(execvpe);
	RESOLVE(_exit);
	RESOLVE(free); /* last: it marks the lookup as done */
	resolving = 0;
}

/* --- writing the counts (no allocation: a stack buffer and write(2)) --- */

struct line {
	char text[2048];
	size_t used;
};

static void append(struct line *line, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void append(struct line *line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (line->used >= sizeof(line->text))
		return;
	va_start(ap, fmt);
	n = vsnprintf(line->text + line->used, sizeof(line->text) - line->used,
		      fmt, ap);
	va_end(ap);
	if (n > 0)
		line->used += (size_t)n;
}

static void write_counts(const char *why)
{
	const char *path = getenv("MTCOUNT_OUT");
	struct line line = {.used = 0};
	int i, fd;

	if (!path || !*path)
		return;
	append(&line, "{\"pid\":%d,\"why\":\"%s\",\"events\":{", (int)getpid(),
	       why);
	for (i = EV_MALLOC; i <= EV_FREE; i++)
		append(&line, "%s\"%s\":%lu", i ? "," : "", counted_name[i],
		       counts[i]);
	append(&line, "},\"calls\":{");
	for (i = 0; i < N_FUNCTIONS; i++)
		append(&line, "%s\"%s\":%lu", i ? "," : "", function_name[i],
		       calls[i]);
	append(&line, "}");
	for (i = FREE_NULL; i < N_COUNTED; i++)
		append(&line, ",\"%s\":%lu", counted_name[i], counts[i]);
	append(&line, "}\n");
	if (line.used >= sizeof(line.text))
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line.text, line.used) < 0) {
		/* nothing useful to do: the test will miss this line */
	}
	close(fd);
}

static void reset_counts(void)
{
	memset(counts, 0, sizeof(counts));
	memset(calls, 0, sizeof(calls));
}

__attribute__((constructor)) static void mtcount_init(void)
{
	resolve();
	/* A forked child starts its own count. */
	pthread_atfork(NULL, NULL, reset_counts);
}

__attribute__((destructor)) static void mtcount_fini(void)
{
	write_counts("exit");
}

/* --- the allocator API --- */

void *malloc(size_t size)
{
	if (!real.free) {
		if (resolving)
			return bootstrap_alloc(size);
		resolve();
	}
	count_call(F_MALLOC);
	return counted_result(real.malloc(size), EV_MALLOC);
}

void *calloc(size_t nmemb, size_t size)
{
	if (!real.free) {
		size_t total;

		if (__builtin_mul_overflow(nmemb, size, &total))
			return NULL;
		if (resolving)
			return bootstrap_alloc(total); /* static: zeroed */
		resolve();
	}
	count_call(F_CALLOC);
	return counted_result(real.calloc(nmemb, size), EV_CALLOC);
}

/* realloc's outcome for block p resized to size, which returned result. */
static void *counted_realloc_result(void *p, size_t size, void *result)
{
	if (p && size == 0 && !result)
		count(EV_FREE);
	else
		counted_result(result, EV_REALLOC);
	if (!p && result)
		count(REALLOC_NULL);
	return result;
}

/* A bootstrap block cannot be handed to glibc: copy it out. */
static void *realloc_from_bootstrap(void *p, size_t size)
{
	size_t room =
	    (size_t)(bootstrap_heap + sizeof(bootstrap_heap) - (char *)p);
	void *moved = malloc(size);

	if (moved)
		memcpy(moved, p, size < room ? size : room);
	return moved;
}

void *realloc(void *p, size_t size)
{
	if (!real.free) {
		if (resolving)
			return bootstrap_alloc(size);
		resolve();
	}
	if (is_bootstrap(p))
		return realloc_from_bootstrap(p, size);
	count_call(F_REALLOC);
	return counted_realloc_result(p, size, real.realloc(p, size));
}

/* glibc's reallocarray calls realloc through the PLT, which would count
 * twice here; do what it does (overflow check, then realloc) once. */
void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t total;

	resolve();
	count_call(F_REALLOCARRAY);
	if (__builtin_mul_overflow(nmemb, size, &total)) {
		count(FAILED);
		errno = ENOMEM;
		return NULL;
	}
	if (is_bootstrap(p))
		return realloc_from_bootstrap(p, total);
	return counted_realloc_result(p, total, real.realloc(p, total));
}

void free(void *p)
{
	if (is_bootstrap(p))
		return;
	if (!real.free)
		resolve();
	count_call(F_FREE);
	count(p ? EV_FREE : FREE_NULL);
	real.free(p);
}

void *memalign(size_t alignment, size_t size)
{
	resolve();
	count_call(F_MEMALIGN);
	return counted_result(real.memalign(alignment, size), EV_ALIGNED);
}

void *aligned_alloc(size_t alignment, size_t size)
{
	resolve();
	count_call(F_ALIGNED_ALLOC);
	return counted_result(real.aligned_alloc(alignment, size), EV_ALIGNED);
}

int posix_memalign(void **out, size_t alignment, size_t size)
{
	int rc;

	resolve();
	count_call(F_POSIX_MEMALIGN);
	rc = real.posix_memalign(out, alignment, size);
	count(rc == 0 ? EV_ALIGNED : FAILED);
	return rc;
}

void *valloc(size_t size)
{
	resolve();
	count_call(F_VALLOC);
	return counted_result(real.valloc(size), EV_ALIGNED);
}

void *pvalloc(size_t size)
{
	resolve();
	count_call(F_PVALLOC);
	return counted_result(real.pvalloc(size), EV_ALIGNED);
}

/* --- process ends and program changes: write the counts first --- */

void _exit(int status)
{
	resolve();
	write_counts("_exit");
	real._exit(status);
}

/* The new program starts from zero; if exec fails, counting goes on from
 * zero and the next line holds the rest (a pid's lines add up). */
static void before_exec(void)
{
	resolve();
	write_counts("exec");
	reset_counts();
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec();
	return real.execve(path, argv, envp);
}

int execv(const char *path, char *const argv[])
{
	before_exec();
	return real.execv(path, argv);
}

int execvp(const char *file, char *const argv[])
{
	before_exec();
	return real.execvp(file, argv);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	return real.execvpe(file, argv, envp);
}
