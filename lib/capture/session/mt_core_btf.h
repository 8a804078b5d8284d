/* SPDX-License-Identifier: MIT */
/* mt_core_btf.h - the small BTF mt-trace carries for its CO-RE reads. */
#ifndef MT_CORE_BTF_H
#define MT_CORE_BTF_H

#include <stddef.h>

/*
 * When the BTF built into mt-trace was cut from the running kernel, put it
 * in a memory file and its /proc/self/fd path into path (for libbpf's
 * btf_custom_path); returns the file's descriptor, for the caller to close
 * after loading.  Otherwise returns -1 and sets *why: libbpf then reads
 * the kernel's own BTF, which is always right, only slower and larger.
 */
int mt_core_btf_open(char *path, size_t len, const char **why);

#endif /* MT_CORE_BTF_H */
