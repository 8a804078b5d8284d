// SPDX-License-Identifier: MIT
/*
 * startup.c - run a start-up plan (mt_startup.h): its steps in order, the
 * work some of them begin awaited before the step that needs it, each
 * step timed for -vv under its name, and on a failure everything begun
 * ended before the caller lets go of the rest.
 *
 * MT_TRACE_FAIL_AT=NAME makes the step NAME fail as it begins (a testing
 * aid, mt-trace(1) ENVIRONMENT): tests/startup.bats fails each step of
 * the plan in turn and checks that the failed start left nothing.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_clock.h"
#include "mt_log.h"
#include "mt_startup.h"

void mt_startup_init(struct mt_startup *s, const struct mt_step *steps,
		     size_t nsteps, void *ctx, int verbose, uint64_t began_ns)
{
	const char *fail = getenv("MT_TRACE_FAIL_AT");
	const char *colon;

	memset(s, 0, sizeof(*s));
	s->steps = steps;
	s->nsteps =
	    nsteps < MT_STARTUP_MAX_STEPS ? nsteps : MT_STARTUP_MAX_STEPS;
	s->ctx = ctx;
	s->verbose = verbose;
	s->began_ns = began_ns;
	s->step_ns = began_ns;
	if (!fail || !*fail)
		return;
	colon = strrchr(fail, ':');
	s->fail_stop = colon && strcmp(colon, ":stop") == 0;
	snprintf(s->fail_at, sizeof(s->fail_at), "%.*s",
		 (int)(s->fail_stop ? colon - fail : (long)strlen(fail)), fail);
}

void mt_startup_timed(struct mt_startup *s, const char *name, uint64_t since_ns)
{
	uint64_t now = mt_clock_ns(CLOCK_MONOTONIC);

	if (s->verbose > 1)
		mt_detail("start-up: %-20s %6.2f ms", name,
			  (now - since_ns) / 1e6);
	s->step_ns = now;
}

void mt_startup_test_stop(const struct mt_startup *s)
{
	if (s->fail_stop)
		raise(SIGSTOP);
}

/* Wait for the work that the step `name` needs. */
static int await_for(struct mt_startup *s, const char *name)
{
	for (size_t i = 0; i < s->nsteps; i++) {
		const struct mt_step *w = &s->steps[i];
		char waited[96];
		int rc = 0;

		if (!s->underway[i] || !w->until || strcmp(w->until, name))
			continue;
		s->underway[i] = false;
		mt_log_step(w->name);
		if (w->await)
			rc = w->await(s->ctx);
		snprintf(waited, sizeof(waited), "%s (waited)", w->name);
		mt_startup_timed(s, waited, s->step_ns);
		if (rc) {
			s->failed = w->name;
			return -1;
		}
	}
	return 0;
}

static int run_step(struct mt_startup *s, size_t i)
{
	const struct mt_step *step = &s->steps[i];

	if (await_for(s, step->name))
		return -1;
	mt_log_step(step->name);
	if (s->fail_at[0] && strcmp(s->fail_at, step->name) == 0) {
		s->failed = step->name;
		mt_error("start-up: %s: failed (MT_TRACE_FAIL_AT)", step->name);
		mt_startup_test_stop(s);
		return -1;
	}
	if (step->begin) {
		step->begin(s->ctx);
		s->underway[i] = true;
	} else if (step->run(s->ctx)) {
		s->ran[i] = true; /* what it took before failing is let go */
		s->failed = step->name;
		mt_error("start-up: %s: failed", step->name);
		return -1;
	}
	s->ran[i] = true;
	mt_startup_timed(s, step->name, s->step_ns);
	return 0;
}

int mt_startup_run(struct mt_startup *s)
{
	int rc = 0;

	for (size_t i = 0; i < s->nsteps && rc == 0; i++)
		rc = run_step(s, i);
	mt_log_step(NULL);
	return rc;
}

void mt_startup_end(struct mt_startup *s)
{
	for (size_t i = s->nsteps; i-- > 0;) {
		if (!s->ran[i])
			continue;
		s->ran[i] = s->underway[i] = false;
		if (s->steps[i].end)
			s->steps[i].end(s->ctx);
	}
}
