// SPDX-License-Identifier: MIT
/*
 * closer.c - close BPF links off mt-trace's path.
 *
 * Closing the last reference to a uprobe link waits for RCU grace periods
 * in the kernel, tens of milliseconds a link (docs/ARCHITECTURE.md, "What
 * is measured where", and the command that measures it).  mt-trace closes
 * links while the traced command runs (--fast: each process without the
 * recorder has links of its own, closed when it exits or execs a program
 * that carries the recorder), and must not sit in close(2) meanwhile:
 * stopped processes wait for it, the rings fill.  A thread would not do:
 * a process whose thread is in close(2) cannot finish exiting, so
 * mt-trace's own exit (and its reader's end of file) would wait for it.
 *
 * So a process of its own does it: mt-trace passes each descriptor over a
 * socket (SCM_RIGHTS) and closes its copy, which is then not the last
 * reference and costs nothing; then it says so (a message without a
 * descriptor), and only then may the closing process close what it got
 * before: had it closed first, mt-trace's close would be the last.  It
 * closes many at once, each in a thread of its own (grace periods
 * overlap: a dozen times faster than one by one),
 * while it goes on receiving, and exits when mt-trace closes the socket
 * or dies.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mt_closer.h"
#include "mt_xalloc.h"

/* closes under way at once (one thread each) */
#define CLOSE_AT_ONCE 64

void mt_closer_init(struct mt_closer *c)
{
	memset(c, 0, sizeof(*c));
	c->sock = -1;
	c->pid = -1;
}

/* Receive one message: 1 with a descriptor in *fd, 2 for "mt-trace closed
 * its copies of those before", 0 at end of file (mt-trace done or gone;
 * its copies are closed then too). */
static int receive(int sock, int *fd)
{
	char byte;
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	struct cmsghdr *cmsg;
	ssize_t n;

	do
		n = recvmsg(sock, &msg, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return 0;
	cmsg = CMSG_FIRSTHDR(&msg);
	if (!cmsg || cmsg->cmsg_type != SCM_RIGHTS)
		return 2;
	memcpy(fd, CMSG_DATA(cmsg), sizeof(*fd));
	return 1;
}

/* closes under way at once: a thread each, which mostly waits */
static sem_t free_slots;

static void *close_one(void *arg)
{
	close((int)(intptr_t)arg);
	sem_post(&free_slots);
	return NULL;
}

/*
 * Close fds[0..n), each in a thread of its own, and return at once: the
 * next descriptors are received meanwhile (waiting for the closes here
 * let the socket fill, and mt-trace's send wait seconds).  At most
 * CLOSE_AT_ONCE closes are under way.
 */
static void close_soon(const int *fds, size_t n)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	for (size_t i = 0; i < n; i++) {
		pthread_t thread;

		while (sem_wait(&free_slots) && errno == EINTR)
			;
		if (pthread_create(&thread, &attr, close_one,
				   (void *)(intptr_t)fds[i]))
			close_one((void *)(intptr_t)fds[i]);
	}
	pthread_attr_destroy(&attr);
}

static _Noreturn void closing_process(int sock)
{
	int high = fcntl(sock, F_DUPFD, 10);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int *fds = NULL, got;
	size_t n = 0, cap = 0;

	/* nothing of mt-trace's but the socket (as 3): not its output (its
	 * reader waits for the end of file), nor its links (closing these
	 * copies costs nothing, mt-trace holds them) */
	if (high < 0 || null < 0)
		_exit(1);
	for (int fd = 0; fd <= 2; fd++)
		dup2(null, fd);
	if (dup2(high, 3) < 0)
		_exit(1);
	close_range(4, ~0u, 0);
	setsid(); /* a ^C meant for the command's group is not for us */
	prctl(PR_SET_NAME, "mt-trace-close");
	sem_init(&free_slots, 0, CLOSE_AT_ONCE);
	do {
		/* no memory: this process ends (mt_xalloc.h), and what it
		 * holds closes at its exit */
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			fds = mt_xreallocarray(fds, cap, sizeof(*fds));
		}
		got = receive(3, &fds[n]);
		n += got == 1;
		if (got != 1) { /* mt-trace's copies are closed */
			close_soon(fds, n);
			n = 0;
		}
	} while (got != 0);
	/* the closes under way end first: exiting kills the threads, and a
	 * thread killed inside uprobe_unregister() leaves its uprobe
	 * registered for good (the kernel says "mt-trace-close:PID failed to
	 * unregister, leaking uprobe"; 1,573 such lines here from --fast
	 * sessions before this wait) */
	for (int i = 0; i < CLOSE_AT_ONCE; i++)
		while (sem_wait(&free_slots) && errno == EINTR)
			;
	_exit(0);
}

static int start(struct mt_closer *c)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0)
		closing_process(sv[1]);
	close(sv[1]);
	c->sock = sv[0];
	c->pid = pid;
	return 0;
}

static int hand_over(int sock, int fd)
{
	char byte = 0;
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	ssize_t n;

	memset(&control, 0, sizeof(control));
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(fd));
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

void mt_closer_close(struct mt_closer *c, int fd)
{
	if (fd < 0)
		return;
	if (c->nqueued == c->cap_queued) {
		c->cap_queued = c->cap_queued ? 2 * c->cap_queued : 16;
		c->queued = mt_xreallocarray(c->queued, c->cap_queued,
					     sizeof(*c->queued));
	}
	c->queued[c->nqueued++] = fd;
}

void mt_closer_flush(struct mt_closer *c)
{
	char said = 'c';

	if (c->nqueued == 0)
		return;
	if (c->sock < 0 && c->pid < 0 && start(c))
		c->pid = 0; /* could not: close here from now on */
	for (size_t i = 0; i < c->nqueued; i++)
		if (c->sock >= 0 && hand_over(c->sock, c->queued[i]) == 0)
			c->handed++;
	for (size_t i = 0; i < c->nqueued; i++)
		close(c->queued[i]);
	c->nqueued = 0;
	if (c->sock >= 0 && send(c->sock, &said, 1, MSG_NOSIGNAL) != 1) {
		close(c->sock); /* it is gone: close here from now on */
		c->sock = -1;
	}
}

void mt_closer_end(struct mt_closer *c)
{
	mt_closer_flush(c);
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	free(c->queued);
	c->queued = NULL;
	c->cap_queued = 0;
}
