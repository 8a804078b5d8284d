/* SPDX-License-Identifier: MIT */
/*
 * stack_walk.h - what the recorder (mt_preload.c) asks of its stack walk
 * (stack_walk.c), inside libmt-preload.so.  Not an interface.
 */
#ifndef MT_STACK_WALK_H
#define MT_STACK_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "mt_fast.h"

/* The unwind rows mt-trace shares, or NULL: no stacks (--stacks off). */
extern const struct mt_fast_stacks *stk;

/* A thread's walk state: its code ranges, rules, stacks sent. */
struct stack_state;

/* At start-up, with the shared memory mapped: stk set when it holds
 * stacks. */
void stacks_start(const struct mt_fast_header *shm);

/* A dlclose: code ranges and rules found before may be stale. */
void stacks_code_changed(void);

/* The calling thread's state, mapped (not through the interposed API);
 * NULL when it cannot be.  A fork child keeps its thread's: the same
 * code, and the stacks it sent are mt-trace's already. */
struct stack_state *stack_state_new(void);
void stack_state_free(struct stack_state *s);

/* The calling thread's stack below the interposed call, innermost frame
 * first, as MT_FRAME values (frames: MT_STACK_DEPTH_MAX of room), with
 * its key and MT_STACK_* flags; how many frames (0: none). */
unsigned capture_stack(struct stack_state *s, uint64_t *frames, uint64_t *key,
		       unsigned *flags);

/* The thread's CPython code objects (python.c), NULL: none met. */
struct py_codes *stack_python(struct stack_state *s);

/* Has this thread (or its process before a fork) sent the stack?  Then
 * note that it has. */
bool sent_before(const struct stack_state *s, uint64_t key);
void remember_sent(struct stack_state *s, uint64_t key);

#endif /* MT_STACK_WALK_H */
