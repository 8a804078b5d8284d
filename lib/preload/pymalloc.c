// SPDX-License-Identifier: MIT
/*
 * pymalloc.c - CPython's own allocator (pymalloc) recorded by
 * libmt-preload.so, through the interpreter's allocator hook.
 */
#include <stddef.h>

#include "recorder.h"

/*
 * CPython hands out its objects from arenas it maps itself (pymalloc):
 * PyObject_Malloc and PyMem_Malloc mostly never reach malloc.  Debian's
 * python3.11 (built with PGO and LTO) also inlines them into ~60 of their
 * callers, so no interposition or uprobe on their names sees every call.
 * CPython's own hook does: PyMem_SetAllocator on the MEM and OBJ domains
 * (tracemalloc's mechanism, ABI-stable since 3.5).  The recorder installs
 * its hook from its constructor, before the interpreter's main runs:
 * CPython replaces the allocators only for PYTHONMALLOC (and -X dev), at
 * pre-initialisation (Python/preconfig.c, _PyPreConfig_Write), which would
 * drop the hook, and then nothing is recorded as pymalloc.  A request
 * pymalloc forwards to malloc (over 512 bytes) runs inside the hook: the
 * depth makes it the allocator's own call, one object, one event.
 */

/* CPython's PyMemAllocatorEx and PyMemAllocatorDomain (Include/cpython/
 * pymem.h), declared here: the recorder is built without Python.h. */
struct py_allocator {
	void *ctx;
	void *(*malloc)(void *ctx, size_t size);
	void *(*calloc)(void *ctx, size_t n, size_t size);
	void *(*realloc)(void *ctx, void *p, size_t size);
	void (*free)(void *ctx, void *p);
};
enum { PY_DOMAIN_MEM = 1, PY_DOMAIN_OBJ = 2 };

/* the allocators the hook passes each domain's calls on to */
static struct py_allocator py_next[3];

static void *py_malloc(void *ctx, size_t size)
{
	const struct py_allocator *n = ctx;
	bool rec = enter(true);
	void *p = n->malloc(n->ctx, size);

	if (rec && p)
		put(MT_EV_MALLOC, now(), (uintptr_t)p, size, 0);
	leave();
	return p;
}

static void *py_calloc(void *ctx, size_t nelem, size_t size)
{
	const struct py_allocator *n = ctx;
	bool rec = enter(true);
	void *p = n->calloc(n->ctx, nelem, size);

	if (rec && p)
		put(MT_EV_CALLOC, now(), (uintptr_t)p, nelem * size, 0);
	leave();
	return p;
}

/* pymalloc's realloc(p, 0) keeps a block (of one byte); a failure keeps
 * the old one */
static void *py_realloc(void *ctx, void *old, size_t size)
{
	const struct py_allocator *n = ctx;
	bool rec = enter(true);
	void *p = n->realloc(n->ctx, old, size);

	if (rec && p)
		put(MT_EV_REALLOC, now(), (uintptr_t)p, size, (uintptr_t)old);
	leave();
	return p;
}

static void py_free(void *ctx, void *p)
{
	const struct py_allocator *n = ctx;

	if (!p) {
		n->free(n->ctx, p);
		return;
	}
	if (enter(true))
		put(MT_EV_FREE, now(), (uintptr_t)p, 0, 0);
	n->free(n->ctx, p);
	leave();
}

/* The interpreter in this process, if any (its executable or a libpython
 * it links exports the C API): its MEM and OBJ domains hooked. */
void hook_pymalloc(void)
{
	void (*get)(int, struct py_allocator *) = (void (*)(
	    int, struct py_allocator *))python_symbol("PyMem_GetAllocator");
	void (*set)(int, struct py_allocator *) = (void (*)(
	    int, struct py_allocator *))python_symbol("PyMem_SetAllocator");

	if (!get || !set || !shm)
		return;
	for (int d = PY_DOMAIN_MEM; d <= PY_DOMAIN_OBJ; d++) {
		struct py_allocator hook = {&py_next[d], py_malloc, py_calloc,
					    py_realloc, py_free};

		get(d, &py_next[d]);
		if (py_next[d].malloc == py_malloc)
			continue; /* a fork's copy: hooked already */
		set(d, &hook);
	}
}
