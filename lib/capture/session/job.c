// SPDX-License-Identifier: MIT
/*
 * job.c - a job run by its thread or by its waiter, whichever comes first
 * (mt_job.h says why).
 *
 * Whoever swaps `claimed` from 0 to 1 runs the job.  The thread is
 * detached: nobody waits for it to be scheduled only to learn that it has
 * nothing to do.  The job is freed by the last of the two to let go of it.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>

#include "mt_job.h"

struct mt_job {
	void (*run)(void *arg);
	void *arg;
	int claimed; /* 1 once the thread or the waiter took the job */
	int refs;    /* the thread's and the waiter's */
	sem_t done;  /* posted by the thread once it ran the job */
};

static bool claim(struct mt_job *job)
{
	return __atomic_exchange_n(&job->claimed, 1, __ATOMIC_ACQ_REL) == 0;
}

static void let_go(struct mt_job *job)
{
	if (__atomic_sub_fetch(&job->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		sem_destroy(&job->done);
		free(job);
	}
}

static void *job_thread(void *arg)
{
	struct mt_job *job = arg;

	if (claim(job)) {
		job->run(job->arg);
		sem_post(&job->done);
	}
	let_go(job);
	return NULL;
}

struct mt_job *mt_job_start(void (*run)(void *arg), void *arg)
{
	struct mt_job *job = calloc(1, sizeof(*job));
	pthread_attr_t attr;
	pthread_t thread;
	bool started = false;

	if (!job)
		return NULL;
	job->run = run;
	job->arg = arg;
	job->refs = 2;
	sem_init(&job->done, 0, 0);
	if (pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		started = pthread_create(&thread, &attr, job_thread, job) == 0;
		pthread_attr_destroy(&attr);
	}
	if (!started)
		job->refs = 1; /* the waiter's alone: it will run it */
	return job;
}

void mt_job_finish(struct mt_job *job)
{
	if (!job)
		return;
	if (claim(job))
		job->run(job->arg);
	else
		while (sem_wait(&job->done) && errno == EINTR)
			;
	let_go(job);
}
