/* SPDX-License-Identifier: MIT */
/*
 * mt_file_id.h - a file's identity as this mt-trace process saw it, the
 * key of its in-memory caches of work done on a file (probe plans in
 * attach.c, instruction checks in elf.c).  See file_id.c.
 */
#ifndef MT_FILE_ID_H
#define MT_FILE_ID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct mt_file_id {
	uint64_t dev, ino, size;
	int64_t mtime_sec, ctime_sec;
	long mtime_nsec, ctime_nsec;
};

/* The identity of the open file fd: a private copy this process made
 * (mt_file_id_copied) stands for the file it copied.  0, or -errno. */
int mt_file_id_of(int fd, struct mt_file_id *id);
/* The same for path, opened here (O_RDONLY). */
int mt_file_id_of_path(const char *path, struct mt_file_id *id);
bool mt_file_id_equal(const struct mt_file_id *a, const struct mt_file_id *b);

/* This process copied the file source (as fstat(2) saw it when it opened
 * it) into copy, which nobody else writes: the same bytes. */
void mt_file_id_copied(const struct stat *copy, const struct stat *source);
/* The copies noted are gone (a failed or ended confinement). */
void mt_file_id_forget_copies(void);

#endif /* MT_FILE_ID_H */
