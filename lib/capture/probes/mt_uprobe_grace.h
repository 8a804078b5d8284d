/* SPDX-License-Identifier: MIT */
/* mt_uprobe_grace.h - the first uprobe registration's grace period, waited
 * for beside the BPF load (see uprobe_grace.c). */
#ifndef MT_UPROBE_GRACE_H
#define MT_UPROBE_GRACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_UPROBE_GRACE_MAX 32 /* links: ~100 ms of start-up at most */

struct mt_uprobe_grace {
	pthread_t thread;
	bool running;
	int prog_fd, file_fd, stop_pipe[2];
	char path[64];
	int link_fds[MT_UPROBE_GRACE_MAX]; /* closed with the session's */
	size_t nlinks;
	int err;	   /* the registration that failed, -errno */
	uint64_t first_ns; /* the first registration took */
};

/* Start registering probes nobody hits, in a thread (nothing happens on
 * failure: the first real registration then waits as before). */
void mt_uprobe_grace_start(struct mt_uprobe_grace *w);

/* The real links are made: stop registering.  The links made so far stay
 * in w->link_fds until closed with the session's. */
void mt_uprobe_grace_stop(struct mt_uprobe_grace *w);

#endif /* MT_UPROBE_GRACE_H */
