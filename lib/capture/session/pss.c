// SPDX-License-Identifier: MIT
/* pss.c - sample /proc/PID/smaps_rollup (the --physical fallback). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_pss.h"
#include "mt_xalloc.h"

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

/* Room for n samples in *a (capacity *cap). */
static void reserve(void **a, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return;
	*a = mt_xreallocarray(*a, n, size);
	*cap = n;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = ((const struct mt_pss_sample *)a)->pid;
	pid_t y = ((const struct mt_pss_sample *)b)->pid;

	return (x > y) - (x < y);
}

void mt_pss_sweep_read(struct mt_pss_sweep *w, const pid_t *pids, size_t n)
{
	reserve((void **)&w->now, &w->cap_now, n, sizeof(*w->now));
	reserve((void **)&w->order, &w->cap_order, n, sizeof(*w->order));
	w->nnow = 0;
	for (size_t i = 0; i < n; i++) {
		struct mt_pss_sample *s = &w->now[w->nnow];

		if (mt_pss_read(pids[i], &s->pss) == 0) {
			s->pid = pids[i];
			w->nnow++;
		}
	}
	mt_pss_sweep_order(w);
}

/* Whether s's PSS is above its last round's (0 when it had none). */
static bool rose(const struct mt_pss_sweep *w, const struct mt_pss_sample *s)
{
	const struct mt_pss_sample *was =
	    w->nlast ? bsearch(s, w->last, w->nlast, sizeof(*s), by_pid) : NULL;

	return s->pss.pss > (was ? was->pss.pss : 0);
}

void mt_pss_sweep_order(struct mt_pss_sweep *w)
{
	size_t k = 0;

	if (w->nnow)
		qsort(w->now, w->nnow, sizeof(*w->now), by_pid);
	for (int rising = 0; rising <= 1; rising++)
		for (size_t i = 0; i < w->nnow; i++)
			if (rose(w, &w->now[i]) == rising)
				w->order[k++] = i;
}

void mt_pss_sweep_next(struct mt_pss_sweep *w)
{
	struct mt_pss_sample *a = w->last;
	size_t cap = w->cap_last;

	w->last = w->now;
	w->nlast = w->nnow;
	w->cap_last = w->cap_now;
	w->now = a;
	w->cap_now = cap;
	w->nnow = 0;
}

void mt_pss_sweep_free(struct mt_pss_sweep *w)
{
	free(w->last);
	free(w->now);
	free(w->order);
	*w = (struct mt_pss_sweep){0};
}
