/* SPDX-License-Identifier: MIT */
/*
 * tracer_python.h - the Python frames of the BPF side's stacks
 * (tracer_python.c), for tracer_stacks.c.  Not an interface.
 */
#ifndef MT_TRACER_PYTHON_H
#define MT_TRACER_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mt_event.h"

struct mt_python;
struct mt_stack_file;

/* A code file being inspected (via: a path that opens it): when it is a
 * CPython interpreter's, with a version mt knows, file gets its runtime
 * and its entry in the BPF side's py_files (py_files_fd) (the BPF side
 * then reads Python frames) and id its evaluation loop's addresses.  An unknown
 * version is said once (say). */
void mt_python_file(struct mt_python **py, const char *via, const char *path,
		    struct mt_stack_file *file, bool say, int py_files_fd);

/* A code object the BPF side read (MT_STACK_RING_PYCODE, size bytes):
 * its PyCode record kept until first used, under a new id. */
void mt_python_code_seen(struct mt_python *py, const void *data, size_t size,
			 uint32_t (*next_code_id)(void *), void *ctx);

/* A Python frames ring record (MT_STACK_RING_PYTHON) of size bytes: its
 * code objects read from the process now, kept by key. */
void mt_python_seen(struct mt_python *py, const void *data, size_t size,
		    uint32_t (*next_code_id)(void *), void *ctx);

/* The native frames (n of them, innermost first) with the Python frames
 * of key put just inside the evaluation loop calls that ran them, into
 * out (at most cap); their number, *truncated set when some did not fit.
 * 0 when key is not known. */
size_t mt_python_merge(struct mt_python *py, uint64_t key, const __u64 *native,
		       size_t n, __u64 *out, size_t cap, bool *truncated);

/* For each Python frame of frames[0, n) whose code's PyCode record is not
 * written yet: write(ctx, record, slots) is given it (header and payload
 * slots, stamped as use), once; -1 when write fails. */
int mt_python_codes(struct mt_python *py, const uint64_t *frames, size_t n,
		    const struct mt_event *use,
		    int (*write)(void *ctx, const struct mt_event *recs,
				 size_t nrecs),
		    void *ctx);

/* A process ended: its code objects are forgotten. */
void mt_python_exited(struct mt_python *py, pid_t pid);

void mt_python_free(struct mt_python *py);

#endif /* MT_TRACER_PYTHON_H */
