/* SPDX-License-Identifier: MIT */
/*
 * python.h - the recorder's reading of CPython's frames (python.c), for
 * the stack walk (stack_walk.c) and the recorder (mt_preload.c), inside
 * libmt-preload.so.  Not an interface.
 */
#ifndef MT_PRELOAD_PYTHON_H
#define MT_PRELOAD_PYTHON_H

#include <stddef.h>
#include <stdint.h>

#include "mt_event.h"
#include "mt_fast.h"

/* Python frames one stack holds at most, and evaluation loops. */
#define PY_FRAMES_MAX MT_STACK_DEPTH_MAX
#define PY_GROUPS_MAX 32

/*
 * The Python frames one call of the evaluation loop
 * (_PyEval_EvalFrameDefault) was running, innermost first: where its
 * _PyCFrame is (a local of that call, so in its native frame on the C
 * stack) and its frames in python_frames.frame[first, first + n).
 */
struct py_group {
	uintptr_t cframe;
	unsigned first, n;
};

struct py_frames {
	unsigned ngroups, nframes;
	struct py_group group[PY_GROUPS_MAX];
	uint64_t frame[PY_FRAMES_MAX]; /* MT_FRAME(MT_FRAME_FILE_PYTHON, ..) */
};

/* A thread's code objects seen and the records of new ones not yet sent. */
struct py_codes;

/* At start-up (the shared memory mapped, --stacks): is there an
 * interpreter in this process whose frames it can read (its symbols
 * found with lookup)?  An unknown version of CPython is said once, on
 * stderr. */
void python_start(const void *stacks, void *(*lookup)(const char *name));

/* The calling thread's Python frames (0 groups: none, or no
 * interpreter); codes: the thread's table, made at its first use (*codes
 * NULL: not yet). */
void python_frames(struct py_codes **codes, struct py_frames *out);

/* The next record of a code object the thread has not sent yet: its id,
 * the fast record's extra (MT_FAST_PYCODE, line, version) and payload;
 * false when there is none.  python_sent: that record was written. */
int python_pending(struct py_codes *codes, uint64_t *id, uint64_t *extra,
		   const void **payload, size_t *len);
void python_sent(struct py_codes *codes);

void python_codes_free(struct py_codes *codes);

#endif /* MT_PRELOAD_PYTHON_H */
