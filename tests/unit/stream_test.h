/* SPDX-License-Identifier: MIT */
/* stream_test.h - a raw stream built by the lib writers in a memfd, taken
 * into memory to be cut or patched (test_raw, test_raw_pack). */
#ifndef STREAM_TEST_H
#define STREAM_TEST_H

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A stream under construction: the bytes the writers produced. */
struct stream {
	unsigned char *p;
	size_t len;
};

static inline int memfd(void)
{
	int fd = memfd_create("stream", 0);

	if (fd < 0)
		abort();
	return fd;
}

/* The bytes written to fd, into s (one byte more, for patches); closes
 * fd. */
static inline void take(int fd, struct stream *s)
{
	off_t len = lseek(fd, 0, SEEK_END);

	s->p = malloc(len + 1);
	s->len = len;
	if (pread(fd, s->p, len, 0) != len)
		abort();
	close(fd);
}

#endif /* STREAM_TEST_H */
