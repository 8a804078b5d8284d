// SPDX-License-Identifier: MIT
/*
 * core_btf.c - hand libbpf the BTF built into mt-trace (bpf/mt_trace_btf.S)
 * for CO-RE, instead of /sys/kernel/btf/vmlinux.
 *
 * Why: libbpf reads and indexes the whole kernel BTF (5 MB here) to relocate
 * a few dozen field reads; that was most of mt-trace's peak RSS and 20-30 ms
 * of its start.  The cut-down BTF is only valid for the kernel it was cut
 * from, which the kernel's notes (its GNU build ID) identify exactly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mt_core_btf.h"

extern const char mt_core_btf[], mt_core_btf_end[];
extern const char mt_core_btf_notes[], mt_core_btf_notes_end[];

/* Are the running kernel's notes the bytes recorded at build time? */
static bool same_kernel(void)
{
	size_t want = (size_t)(mt_core_btf_notes_end - mt_core_btf_notes);
	char notes[4096];
	ssize_t got = 0, n;
	int fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while ((size_t)got < sizeof(notes) &&
	       (n = read(fd, notes + got, sizeof(notes) - got)) > 0)
		got += n;
	close(fd);
	return want > 0 && (size_t)got == want &&
	       memcmp(notes, mt_core_btf_notes, want) == 0;
}

static bool write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

int mt_core_btf_open(char *path, size_t len, const char **why)
{
	size_t size = (size_t)(mt_core_btf_end - mt_core_btf);
	int fd;

	if (size == 0) {
		*why = "no BTF was built in (bpftool gen min_core_btf failed)";
		return -1;
	}
	if (!same_kernel()) {
		*why = "the built-in BTF is from another kernel";
		return -1;
	}
	fd = memfd_create("mt-trace-btf", MFD_CLOEXEC);
	if (fd < 0 || !write_all(fd, mt_core_btf, size)) {
		*why = "cannot make a memory file for it";
		if (fd >= 0)
			close(fd);
		return -1;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}
