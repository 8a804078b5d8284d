// SPDX-License-Identifier: MIT
/*
 * cxx_ops.c - C++ operator new and delete in libmt-preload.so: each
 * recorded as the program's call when the next operator is libstdc++'s
 * (record_cxx), the malloc it makes inside then the operator's own.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "recorder.h"

/*
 * Each operator calls libstdc++'s (which calls malloc or aligned_alloc,
 * and loops on the new-handler or throws: its behaviour is kept whole).
 * Built with -fexceptions: an exception out of operator new unwinds
 * through these frames, and the cleanup restores the depth.  The
 * unwinder's two functions the cleanup needs are weak: only a C++ program
 * throws, and its libstdc++ has loaded libgcc_s, which defines them; a C
 * program does not load libgcc_s for the recorder (84 KiB of its RSS).
 */
__asm__(".weak _Unwind_Resume\n\t.weak __gcc_personality_v0");
static void leave_cleanup(bool *rec)
{
	(void)rec;
	leave();
}
#define ENTER_CXX(rec)                                                         \
	bool rec __attribute__((cleanup(leave_cleanup))) = enter(record_cxx)

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);
typedef void (*delete_fn)(void *);
typedef void (*delete_sized_fn)(void *, size_t);
typedef void (*delete_nothrow_fn)(void *, const void *);
typedef void (*delete_aligned_fn)(void *, size_t);
typedef void (*delete_sized_aligned_fn)(void *, size_t, size_t);
typedef void (*delete_aligned_nothrow_fn)(void *, size_t, const void *);

/* The next operator, resolved again if it was not there at start (a
 * libstdc++ loaded later); missing altogether, the C API stands in. */
void *next_op(enum cxx_op op)
{
	if (unlikely(!next_cxx[op])) {
		if (init_state != 2)
			recorder_init();
		if (!next_cxx[op])
			next_cxx[op] = dlsym(RTLD_NEXT, cxx_names[op]);
	}
	return next_cxx[op];
}

static void *new_plain(enum cxx_op op, size_t size)
{
	new_fn fn = (new_fn)next_op(op);
	ENTER_CXX(rec);
	void *p = fn ? fn(size) : malloc(size);

	if (!p)
		abort(); /* only without libstdc++: nothing to throw with */
	if (rec)
		put(MT_EV_MALLOC, now(), (uintptr_t)p, size, 0);
	return p;
}

static void *new_nothrow(enum cxx_op op, size_t size, const void *tag)
{
	new_nothrow_fn fn = (new_nothrow_fn)next_op(op);
	ENTER_CXX(rec);
	void *p = fn ? fn(size, tag) : malloc(size);

	if (rec && p)
		put(MT_EV_MALLOC, now(), (uintptr_t)p, size, 0);
	return p;
}

static void *new_aligned(enum cxx_op op, size_t size, size_t align)
{
	new_aligned_fn fn = (new_aligned_fn)next_op(op);
	ENTER_CXX(rec);
	void *p = fn ? fn(size, align) : aligned_alloc(align, size);

	if (!p)
		abort(); /* only without libstdc++ */
	if (rec)
		put(MT_EV_ALIGNED_ALLOC, now(), (uintptr_t)p, size, align);
	return p;
}

static void *new_aligned_nothrow(enum cxx_op op, size_t size, size_t align,
				 const void *tag)
{
	new_aligned_nothrow_fn fn = (new_aligned_nothrow_fn)next_op(op);
	ENTER_CXX(rec);
	void *p = fn ? fn(size, align, tag) : aligned_alloc(align, size);

	if (rec && p)
		put(MT_EV_ALIGNED_ALLOC, now(), (uintptr_t)p, size, align);
	return p;
}

/* Every delete: a Free before the block goes, then the next operator with
 * its own arguments (args: how many of size, align, tag it takes). */
#define DELETE_OP(op, call)                                                    \
	do {                                                                   \
		void *fn = next_op(op);                                        \
		ENTER_CXX(rec);                                                \
		if (!p)                                                        \
			break;                                                 \
		if (rec)                                                       \
			put(MT_EV_FREE, now(), (uintptr_t)p, 0, 0);            \
		if (fn)                                                        \
			call;                                                  \
		else                                                           \
			free(p);                                               \
	} while (0)

EXPORT void *_Znwm(size_t size)
{
	return new_plain(CXX_NEW, size);
}

EXPORT void *_Znam(size_t size)
{
	return new_plain(CXX_NEW_ARRAY, size);
}

EXPORT void *_ZnwmRKSt9nothrow_t(size_t size, const void *tag)
{
	return new_nothrow(CXX_NEW_NOTHROW, size, tag);
}

EXPORT void *_ZnamRKSt9nothrow_t(size_t size, const void *tag)
{
	return new_nothrow(CXX_NEW_ARRAY_NOTHROW, size, tag);
}

EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t align)
{
	return new_aligned(CXX_NEW_ALIGNED, size, align);
}

EXPORT void *_ZnamSt11align_val_t(size_t size, size_t align)
{
	return new_aligned(CXX_NEW_ARRAY_ALIGNED, size, align);
}

EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align,
						const void *tag)
{
	return new_aligned_nothrow(CXX_NEW_ALIGNED_NOTHROW, size, align, tag);
}

EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align,
						const void *tag)
{
	return new_aligned_nothrow(CXX_NEW_ARRAY_ALIGNED_NOTHROW, size, align,
				   tag);
}

EXPORT void _ZdlPv(void *p)
{
	DELETE_OP(CXX_DELETE, ((delete_fn)fn)(p));
}

EXPORT void _ZdaPv(void *p)
{
	DELETE_OP(CXX_DELETE_ARRAY, ((delete_fn)fn)(p));
}

EXPORT void _ZdlPvm(void *p, size_t size)
{
	DELETE_OP(CXX_DELETE_SIZED, ((delete_sized_fn)fn)(p, size));
}

EXPORT void _ZdaPvm(void *p, size_t size)
{
	DELETE_OP(CXX_DELETE_ARRAY_SIZED, ((delete_sized_fn)fn)(p, size));
}

EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *tag)
{
	DELETE_OP(CXX_DELETE_NOTHROW, ((delete_nothrow_fn)fn)(p, tag));
}

EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *tag)
{
	DELETE_OP(CXX_DELETE_ARRAY_NOTHROW, ((delete_nothrow_fn)fn)(p, tag));
}

EXPORT void _ZdlPvSt11align_val_t(void *p, size_t align)
{
	DELETE_OP(CXX_DELETE_ALIGNED, ((delete_aligned_fn)fn)(p, align));
}

EXPORT void _ZdaPvSt11align_val_t(void *p, size_t align)
{
	DELETE_OP(CXX_DELETE_ARRAY_ALIGNED, ((delete_aligned_fn)fn)(p, align));
}

EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align)
{
	DELETE_OP(CXX_DELETE_SIZED_ALIGNED,
		  ((delete_sized_aligned_fn)fn)(p, size, align));
}

EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t align)
{
	DELETE_OP(CXX_DELETE_ARRAY_SIZED_ALIGNED,
		  ((delete_sized_aligned_fn)fn)(p, size, align));
}

EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align,
						const void *tag)
{
	DELETE_OP(CXX_DELETE_ALIGNED_NOTHROW,
		  ((delete_aligned_nothrow_fn)fn)(p, align, tag));
}

EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align,
						const void *tag)
{
	DELETE_OP(CXX_DELETE_ARRAY_ALIGNED_NOTHROW,
		  ((delete_aligned_nothrow_fn)fn)(p, align, tag));
}
