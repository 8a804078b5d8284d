// SPDX-License-Identifier: MIT
/*
 * job.c - a job run by its thread or by its waiter, whichever comes first
 * (mt_job.h says why).
 *
 * Whoever swaps `claimed` from 0 to 1 runs the job.  The waiter does not
 * wait for the thread to be scheduled only to learn that it has nothing
 * to do; the thread is joined when the job ends (mt_job_end), once it
 * has long run, by the owner that started it.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>

#include "mt_job.h"
#include "mt_xalloc.h"

struct mt_job {
	void (*run)(void *arg);
	void *arg;
	int claimed;   /* 1 once the thread or the waiter took the job */
	bool threaded; /* a thread was started: joined at the end */
	bool finished; /* mt_job_finish() returned once */
	pthread_t thread;
	sem_t done; /* posted by the thread once it ran the job */
};

static bool claim(struct mt_job *job)
{
	return __atomic_exchange_n(&job->claimed, 1, __ATOMIC_ACQ_REL) == 0;
}

static void *job_thread(void *arg)
{
	struct mt_job *job = arg;

	if (claim(job)) {
		job->run(job->arg);
		sem_post(&job->done);
	}
	return NULL;
}

struct mt_job *mt_job_start(void (*run)(void *arg), void *arg)
{
	struct mt_job *job = mt_xcalloc(1, sizeof(*job));

	job->run = run;
	job->arg = arg;
	sem_init(&job->done, 0, 0);
	/* without a thread, mt_job_finish() runs it */
	job->threaded =
	    pthread_create(&job->thread, NULL, job_thread, job) == 0;
	return job;
}

void mt_job_finish(struct mt_job *job)
{
	if (!job || job->finished)
		return;
	if (claim(job))
		job->run(job->arg);
	else
		while (sem_wait(&job->done) && errno == EINTR)
			;
	job->finished = true;
}

void mt_job_end(struct mt_job *job)
{
	if (!job)
		return;
	mt_job_finish(job);
	if (job->threaded)
		pthread_join(job->thread, NULL);
	sem_destroy(&job->done);
	free(job);
}
