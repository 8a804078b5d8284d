/* SPDX-License-Identifier: MIT */
/*
 * mt_startup.h - a start-up written as a plan: a table of steps run in
 * order, some on the caller's thread, some begun as work beside the later
 * steps and awaited by the step that needs their result (startup.c).
 *
 * The plan owns the work it begins: a failed start ends every piece of it
 * that was begun and not yet awaited (its end() lets go of a result no
 * step took), and so does the session's end for the pieces no step awaits
 * (their consumer takes the result when it needs it, or never).
 */
#ifndef MT_STARTUP_H
#define MT_STARTUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mt_step {
	const char *name;  /* -vv's, and MT_TRACE_FAIL_AT's */
	const char *needs; /* what must be there before it (for the reader) */
	const char *makes; /* what it leaves for the later steps */
	/* A step on the caller's thread: 0, or -1 (the failure said) */
	int (*run)(void *ctx);
	/* Or work begun here, beside the later steps: begin() starts it (or
	 * decides it is not wanted), await() waits for it before the step
	 * named `until` runs (NULL: its consumer takes it when it needs it)
	 * and returns 0 or -1 (said). */
	void (*begin)(void *ctx);
	const char *until;
	int (*await)(void *ctx);
	/* Either kind: at the plan's end (mt_startup_end), for each step that
	 * ran or began, in reverse order: wait for its work if still under
	 * way, let go of what it made and nobody took (idempotent).  What a
	 * step hands on to the session (the command, the BPF object) is the
	 * session's to end, not its step's. */
	void (*end)(void *ctx);
};

#define MT_STARTUP_MAX_STEPS 40

struct mt_startup {
	const struct mt_step *steps;
	size_t nsteps;
	void *ctx;
	int verbose;		    /* -vv: each step's time */
	uint64_t began_ns, step_ns; /* the start-up, the last step's end */
	/* steps[i] ran (or began its work): its end() is owed */
	bool ran[MT_STARTUP_MAX_STEPS];
	/* its work under way, not awaited yet */
	bool underway[MT_STARTUP_MAX_STEPS];
	const char *failed; /* the step that failed, or NULL */
	/* MT_TRACE_FAIL_AT=NAME[:stop] (a testing aid, mt-trace(1)) */
	char fail_at[64];
	bool fail_stop;
};

/* The plan over ctx; began_ns: when the start-up began (the clock of
 * mt_clock_ns(CLOCK_MONOTONIC)). */
void mt_startup_init(struct mt_startup *s, const struct mt_step *steps,
		     size_t nsteps, void *ctx, int verbose, uint64_t began_ns);

/* Run the steps in order: 0, or -1 with s->failed naming the step that
 * failed (said by the step, then named by this; an injected failure by
 * this alone).  Then ctx holds what the steps made that nobody let go of
 * yet: the caller's end lets go of it, after mt_startup_end(). */
int mt_startup_run(struct mt_startup *s);

/* End every step that ran or began (a failed start; the session's end),
 * the last first.  Idempotent. */
void mt_startup_end(struct mt_startup *s);

/* -vv: a line of the start-up's timing (name, the time since the last),
 * for steps the plan does not run itself (the total). */
void mt_startup_timed(struct mt_startup *s, const char *name,
		      uint64_t since_ns);

/* MT_TRACE_FAIL_AT's ":stop": the process stops itself (SIGSTOP), so
 * that a test may look at what it holds, when asked to. */
void mt_startup_test_stop(const struct mt_startup *s);

#endif /* MT_STARTUP_H */
