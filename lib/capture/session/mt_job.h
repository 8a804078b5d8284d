/* SPDX-License-Identifier: MIT */
/*
 * mt_job.h - work started on a thread ahead of need, done by whoever comes
 * first: the thread, or the one who needs the result.
 *
 * mt-trace starts threads to work beside its start-up (open the BPF
 * object, open kmem:rss_stat's event, find the command's program, plan
 * libc's probes).  On two vCPUs busy with the start-up itself, a new
 * thread may not run for milliseconds: the BPF object's opener ran its
 * first instruction 3.4 and 4.7 ms after mt-trace needed its result in 2
 * sessions of 6 (`mt-trace -- true`), for an open of 0.4 ms.  A job the
 * thread has not begun is done by its waiter instead, at once; one it has
 * begun is waited for.
 */
#ifndef MT_JOB_H
#define MT_JOB_H

struct mt_job;

/* Start run(arg) on a thread of its own.  Without a thread,
 * mt_job_finish() runs it. */
struct mt_job *mt_job_start(void (*run)(void *arg), void *arg);

/* Return once run(arg) is done: here, if the thread has not begun it
 * (NULL, or a job finished already: at once). */
void mt_job_finish(struct mt_job *job);

/* Finish it, wait for its thread to be gone and free job (NULL:
 * nothing): the end of a job, by whoever started it. */
void mt_job_end(struct mt_job *job);

#endif /* MT_JOB_H */
