// SPDX-License-Identifier: MIT
/* pss.c - sample /proc/PID/smaps_rollup (the --physical fallback). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mt_pss.h"

/* "Key:   123 kB" anywhere in text -> bytes; -1 when absent */
static int64_t field_kib(const char *text, const char *key)
{
	size_t klen = strlen(key);
	const char *p = text;
	unsigned long long kib;

	while ((p = strstr(p, key)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[klen] == ':' &&
		    sscanf(p + klen + 1, " %llu kB", &kib) == 1)
			return (int64_t)kib * 1024;
		p += klen;
	}
	return -1;
}

int mt_pss_parse(const char *text, struct mt_pss *out)
{
	int64_t pss = field_kib(text, "Pss");
	int64_t anon = field_kib(text, "Pss_Anon");
	int64_t file = field_kib(text, "Pss_File");
	int64_t shmem = field_kib(text, "Pss_Shmem");

	if (pss < 0)
		return -EINVAL;
	out->pss = pss;
	out->pss_anon = anon < 0 ? 0 : anon;
	out->pss_file = file < 0 ? 0 : file;
	out->pss_shmem = shmem < 0 ? 0 : shmem;
	return 0;
}

int mt_pss_read(pid_t pid, struct mt_pss *out)
{
	char path[64], text[4096];
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (got <= 0)
		return got < 0 ? -errno : -ENOENT; /* empty once it exited */
	text[got] = '\0';
	return mt_pss_parse(text, out);
}
