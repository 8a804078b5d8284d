/* SPDX-License-Identifier: MIT */
/* mt_pss.h - a process's proportional set size from /proc/PID/smaps_rollup. */
#ifndef MT_PSS_H
#define MT_PSS_H

#include <stdint.h>
#include <sys/types.h>

struct mt_pss {
	uint64_t pss; /* bytes, each shared page divided among its users */
	uint64_t pss_anon;
	uint64_t pss_file;
	uint64_t pss_shmem;
};

/* 0, or -errno (-ENOENT once the process is gone). */
int mt_pss_read(pid_t pid, struct mt_pss *out);

/* Parse the text of a smaps_rollup file.  0, or -EINVAL without Pss. */
int mt_pss_parse(const char *text, struct mt_pss *out);

#endif /* MT_PSS_H */
