/* SPDX-License-Identifier: MIT */
/* mt_closer.h - BPF links closed off mt-trace's path (see closer.c). */
#ifndef MT_CLOSER_H
#define MT_CLOSER_H

#include <sys/types.h>

#include <stddef.h>

struct mt_closer {
	int sock;	      /* to the closing process; -1: none yet */
	pid_t pid;	      /* the closing process, 0: none could start */
	unsigned long handed; /* descriptors handed over */
	int *queued;	      /* until the next flush */
	size_t nqueued, cap_queued;
};

void mt_closer_init(struct mt_closer *c);

/* fd is the caller's no more: closed at the next flush. */
void mt_closer_close(struct mt_closer *c, int fd);

/* Hand the queued descriptors to the closing process (started on first
 * use), which closes them in its own time; where it cannot, they are
 * closed here. */
void mt_closer_flush(struct mt_closer *c);

/* Nothing more to close: the closing process finishes what it holds and
 * exits (not waited for: it may still be in a grace period). */
void mt_closer_end(struct mt_closer *c);

#endif /* MT_CLOSER_H */
