/* SPDX-License-Identifier: MIT */
/*
 * mt_python.h - where CPython keeps what a stack walk reads of it: the
 * offsets of its structures' fields, for each version mt knows, in one
 * table shared by the recorder's walk (lib/preload/python.c, in the
 * process), the BPF side's (bpf/mt_stack.bpf.h, given the offsets by
 * mt-trace) and mt-trace's (lib/capture/stacks/tracer_python.c).
 *
 * The offsets are those of CPython's headers for each version
 * (Include/internal/pycore_frame.h, pycore_runtime.h, pycore_interp.h,
 * Include/cpython/code.h, pystate.h, unicodeobject.h), checked with
 * offsetof() against Debian's python3.11-dev headers and pyenv's 3.12.1
 * (bench/py-offsets.c prints them).  Release builds only: a debug build
 * (Py_REF_DEBUG) lays its objects out otherwise.
 */
#ifndef MT_PYTHON_H
#define MT_PYTHON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

struct mt_py_layout {
	__u32 version; /* major << 8 | minor */
	/* _PyRuntime: its first interpreter (interpreters.head), and in
	 * 3.11 the thread holding the GIL (gilstate.tstate_current; 0:
	 * none, 3.12 keeps it in a thread-local variable) */
	__u32 rt_interp_head, rt_tstate_current;
	__u32 interp_threads_head; /* PyInterpreterState.threads.head */
	/* PyThreadState: the next thread's, the thread's evaluation loop
	 * calls (cframe), its pthread_self() (thread_id) */
	__u32 ts_next, ts_cframe, ts_thread_id;
	__u32 cf_current_frame, cf_previous; /* _PyCFrame */
	/* _PyInterpreterFrame */
	__u32 fr_code, fr_previous, fr_prev_instr, fr_owner;
	__s32 fr_is_entry; /* -1: none (3.12 marks an entry by its owner) */
	/* PyCodeObject */
	__u32 co_firstlineno, co_filename, co_name, co_qualname;
	__u32 co_linetable, co_firsttraceable, co_code;
	/* PyCompactUnicodeObject */
	__u32 str_ascii_data, str_utf8_length, str_utf8;
};

/* The versions known, by index (the BPF side is told index + 1). */
#define MT_PY_LAYOUTS 2

static const struct mt_py_layout mt_py_layouts[MT_PY_LAYOUTS] = {
    {
	.version = 0x030b,
	.rt_interp_head = 40,
	.rt_tstate_current = 576,
	.interp_threads_head = 16,
	.ts_next = 8,
	.ts_cframe = 56,
	.ts_thread_id = 152,
	.cf_current_frame = 8,
	.cf_previous = 16,
	.fr_code = 32,
	.fr_previous = 48,
	.fr_prev_instr = 56,
	.fr_owner = 69,
	.fr_is_entry = 68,
	.co_firstlineno = 72,
	.co_filename = 112,
	.co_name = 120,
	.co_qualname = 128,
	.co_linetable = 136,
	.co_firsttraceable = 168,
	.co_code = 184,
	.str_ascii_data = 48,
	.str_utf8_length = 48,
	.str_utf8 = 56,
    },
    {
	.version = 0x030c,
	.rt_interp_head = 40,
	.rt_tstate_current = 0,
	.interp_threads_head = 72,
	.ts_next = 8,
	.ts_cframe = 56,
	.ts_thread_id = 136,
	.cf_current_frame = 0,
	.cf_previous = 8,
	.fr_code = 0,
	.fr_previous = 8,
	.fr_prev_instr = 56,
	.fr_owner = 70,
	.fr_is_entry = -1,
	.co_firstlineno = 68,
	.co_filename = 112,
	.co_name = 120,
	.co_qualname = 128,
	.co_linetable = 136,
	.co_firsttraceable = 176,
	.co_code = 192,
	.str_ascii_data = 40,
	.str_utf8_length = 40,
	.str_utf8 = 48,
    },
};

/* _PyInterpreterFrame.owner values */
enum { MT_PY_OWNED_BY_GENERATOR = 1, MT_PY_OWNED_BY_CSTACK = 3 };

/* The bytes of an _PyInterpreterFrame a walk reads (every field above
 * lies in them, in both versions). */
#define MT_PY_FRAME_READ 72

/* PyObject_VAR_HEAD's ob_size, PyBytesObject's ob_sval, PyASCIIObject's
 * length and state, PyObject's ob_type, PyTypeObject's tp_name: the same
 * in every version here */
#define MT_PY_OB_TYPE	      8
#define MT_PY_VAR_SIZE	      16
#define MT_PY_BYTES_DATA      32
#define MT_PY_STR_LENGTH      16
#define MT_PY_STR_STATE	      32
#define MT_PY_TP_NAME	      24
#define MT_PY_STR_COMPACT(st) ((st) >> 5 & 1)
#define MT_PY_STR_ASCII(st)   ((st) >> 6 & 1)

#endif /* MT_PYTHON_H */
