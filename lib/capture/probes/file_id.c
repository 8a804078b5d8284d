// SPDX-License-Identifier: MIT
/*
 * file_id.c - the key of mt-trace's in-memory caches of work done on a
 * file (the probe plan of a C library, the check of its free()'s first
 * instructions): the work is done once, from a thread beside the BPF load,
 * and reused when the probes are placed on the tree's private copy.
 *
 * Not a build-id: anyone can write any build-id into a file of theirs,
 * and a plan reused for a forged file puts a uprobe in the middle of an
 * instruction of the real one.  The key is what the kernel says of the
 * file mt-trace itself opened: device, inode, size, and the modification
 * and change times (a write changes the change time, which no user can
 * set back).  A private copy mt-trace made (confine.c) stands for its
 * source: mt-trace wrote its bytes itself, from that file, and nobody
 * else can write it.  The caches live in one mt-trace process and go
 * with it; nothing is kept between sessions.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "mt_confine.h"
#include "mt_file_id.h"

static struct {
	struct mt_file_id copy, source;
} copies[MT_CONFINE_MAX_FILES];
static size_t ncopies;
static pthread_mutex_t copies_lock = PTHREAD_MUTEX_INITIALIZER;

static void from_stat(struct mt_file_id *id, const struct stat *st)
{
	memset(id, 0, sizeof(*id));
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = st->st_size;
	id->mtime_sec = st->st_mtim.tv_sec;
	id->mtime_nsec = st->st_mtim.tv_nsec;
	id->ctime_sec = st->st_ctim.tv_sec;
	id->ctime_nsec = st->st_ctim.tv_nsec;
}

bool mt_file_id_equal(const struct mt_file_id *a, const struct mt_file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
	       a->ctime_sec == b->ctime_sec && a->ctime_nsec == b->ctime_nsec;
}

void mt_file_id_copied(const struct stat *copy, const struct stat *source)
{
	pthread_mutex_lock(&copies_lock);
	if (ncopies < MT_CONFINE_MAX_FILES) {
		from_stat(&copies[ncopies].copy, copy);
		from_stat(&copies[ncopies].source, source);
		ncopies++;
	}
	pthread_mutex_unlock(&copies_lock);
}

void mt_file_id_forget_copies(void)
{
	pthread_mutex_lock(&copies_lock);
	ncopies = 0;
	pthread_mutex_unlock(&copies_lock);
}

int mt_file_id_of(int fd, struct mt_file_id *id)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	from_stat(id, &st);
	pthread_mutex_lock(&copies_lock);
	for (size_t i = 0; i < ncopies; i++)
		if (mt_file_id_equal(&copies[i].copy, id)) {
			*id = copies[i].source;
			break;
		}
	pthread_mutex_unlock(&copies_lock);
	return 0;
}

int mt_file_id_of_path(const char *path, struct mt_file_id *id)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = mt_file_id_of(fd, id);
	close(fd);
	return rc;
}
