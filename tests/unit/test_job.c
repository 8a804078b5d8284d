// SPDX-License-Identifier: MIT
/*
 * test_job.c - a job (mt_job.h) runs exactly once, by its thread or by its
 * waiter, and what it made is there when mt_job_finish() returns:
 *  - the thread's path: the waiter comes after the job ran (it watches the
 *    job's own store, up to 5 s) and finds it run on another thread;
 *  - the waiter's path, forced: a job whose thread is not scheduled before
 *    the waiter asks (both on one CPU, the waiter at a real-time priority,
 *    when the machine allows it) runs on the waiter;
 *  - either path, 2,000 times in a row at once: each job once;
 *  - mt_job_end() after either: the job still ran once, its thread is
 *    joined (no leak under ASan, no thread left).
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_job.h"

struct work {
	int runs;
	pthread_t by;
	uint64_t made;
};

static void do_work(void *arg)
{
	struct work *w = arg;

	w->by = pthread_self();
	w->made = 0x6d74; /* read after mt_job_finish() */
	__atomic_add_fetch(&w->runs, 1, __ATOMIC_RELEASE);
}

static void thread_path(void)
{
	struct work w = {0};
	struct mt_job *job = mt_job_start(do_work, &w);

	CHECK(job != NULL);
	for (int i = 0; i < 5000 && !__atomic_load_n(&w.runs, __ATOMIC_ACQUIRE);
	     i++)
		usleep(1000);
	mt_job_finish(job);
	CHECK_INT(w.runs, 1);
	CHECK(!pthread_equal(w.by, pthread_self()));
	CHECK_INT(w.made, 0x6d74);
	mt_job_end(job);
	CHECK_INT(w.runs, 1);
}

/* The calling thread, and the threads it makes, on one CPU at a real-time
 * priority: a new thread (which inherits neither here: a plain one) runs
 * only once the caller blocks.  false: not allowed here. */
static bool hog_one_cpu(void)
{
	struct sched_param rt = {.sched_priority = 1};
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return false;
	return pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) == 0;
}

static void waiter_path(void)
{
	struct sched_param normal = {.sched_priority = 0};
	pthread_attr_t attr;
	struct work w = {0};
	struct mt_job *job;

	if (!hog_one_cpu()) {
		printf("test_job: no real-time priority here: the waiter's "
		       "path is left to the runs in a row\n");
		return;
	}
	/* new threads: a normal policy, not inherited from the caller */
	pthread_getattr_default_np(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	pthread_attr_setschedparam(&attr, &normal);
	pthread_setattr_default_np(&attr);
	job = mt_job_start(do_work, &w);
	mt_job_finish(job); /* the thread has not run: this CPU is ours */
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
	CHECK_INT(w.runs, 1);
	CHECK(pthread_equal(w.by, pthread_self()));
	CHECK_INT(w.made, 0x6d74);
	mt_job_end(job); /* the thread finds the job taken, and ends */
	CHECK_INT(w.runs, 1);
	pthread_attr_destroy(&attr);
}

static void in_a_row(void)
{
	int ran_here = 0;

	for (int i = 0; i < 2000; i++) {
		struct work w = {0};
		struct mt_job *job = mt_job_start(do_work, &w);

		mt_job_finish(job);
		CHECK_INT(w.runs, 1);
		CHECK_INT(w.made, 0x6d74);
		ran_here += pthread_equal(w.by, pthread_self());
		mt_job_end(job);
		CHECK_INT(w.runs, 1);
	}
	printf("test_job: 2000 jobs at once: %d run by their waiter\n",
	       ran_here);
}

int main(void)
{
	thread_path();
	in_a_row();
	waiter_path();
	return test_summary("test_job");
}
