/* SPDX-License-Identifier: MIT */
/* mt_attach.h - allocator uprobes on ELF files (see attach.c). */
#ifndef MT_ATTACH_H
#define MT_ATTACH_H

#include <stdbool.h>
#include <stddef.h>

struct bpf_program;
struct bpf_link;

#define MT_MAX_PROBES 64
#define MT_MAX_LINKS  256

struct mt_attach {
	struct bpf_program *enter; /* entry program (cookie = mt_probe_fn) */
	struct bpf_program *ret;   /* return program */
	bool use_multi;		   /* one uprobe_multi link per file and kind */
	int verbose;
	size_t nprobes;
	size_t nlinks;
	struct bpf_link *links[MT_MAX_LINKS]; /* classic links */
	int link_fds[MT_MAX_LINKS];	      /* raw uprobe_multi link fds */
};

void mt_attach_init(struct mt_attach *a, struct bpf_program *enter,
		    struct bpf_program *ret, int verbose);

/* Probe glibc's allocator API in the C library at path.  0 or -errno
 * (message in err). */
int mt_attach_glibc(struct mt_attach *a, const char *path, char *err,
		    size_t errlen);

void mt_attach_destroy(struct mt_attach *a);

#endif /* MT_ATTACH_H */
