/*
 * bench/py-offsets.c - print the CPython structure offsets that
 * bpf/mt_python.h's table holds, from an interpreter's own headers
 * (Py_BUILD_CORE: the internal ones), to check the table against a
 * version (issue 34).  Not built by make:
 *
 *   gcc -I/usr/include/python3.11 bench/py-offsets.c -o /tmp/py-offsets
 *   gcc -I$(pyenv prefix 3.12.1)/include/python3.12 bench/py-offsets.c ...
 *
 * Debian's python3.11-dev (3.11.7 here): tstate_current 576,
 * interpreters.head 40, threads.head 16, next 8, cframe 56, thread_id
 * 152, current_frame 8, previous 16, f_code 32, previous 48, prev_instr
 * 56, owner 69, is_entry 68, co_code 184, _co_firsttraceable 168.
 * pyenv's 3.12.1: interpreters.head 40, threads.head 72, next 8, cframe
 * 56, thread_id 136, current_frame 0, previous 8, f_code 0, previous 8,
 * prev_instr 56, owner 70, co_code 192, _co_firsttraceable 176.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#include <stddef.h>
#include <stdio.h>

int main(void)
{
#if PY_MINOR_VERSION == 11
	printf("rt_tstate_current %zu\n",
	       offsetof(_PyRuntimeState, gilstate.tstate_current));
	printf("fr_is_entry %zu\n", offsetof(_PyInterpreterFrame, is_entry));
#endif
	printf("rt_interp_head %zu\n",
	       offsetof(_PyRuntimeState, interpreters.head));
	printf("interp_threads_head %zu\n",
	       offsetof(PyInterpreterState, threads.head));
	printf("ts_next %zu ts_cframe %zu ts_thread_id %zu\n",
	       offsetof(PyThreadState, next), offsetof(PyThreadState, cframe),
	       offsetof(PyThreadState, thread_id));
	printf("cf_current_frame %zu cf_previous %zu\n",
	       offsetof(_PyCFrame, current_frame),
	       offsetof(_PyCFrame, previous));
	printf("fr_code %zu fr_previous %zu fr_prev_instr %zu fr_owner %zu\n",
	       offsetof(_PyInterpreterFrame, f_code),
	       offsetof(_PyInterpreterFrame, previous),
	       offsetof(_PyInterpreterFrame, prev_instr),
	       offsetof(_PyInterpreterFrame, owner));
	printf("co_code %zu co_firsttraceable %zu\n",
	       offsetof(PyCodeObject, co_code_adaptive),
	       offsetof(PyCodeObject, _co_firsttraceable));
	return 0;
}
