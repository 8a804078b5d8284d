/* SPDX-License-Identifier: MIT */
/*
 * fuzz_elf - libFuzzer entry: any bytes as a file a traced process maps as
 * code, through everything mt-trace does with such a file as root
 * (lib/capture/probes/elf.c): the allocator symbols looked up, the build ID
 * read, and for each function found, the placement of its probe (the NULL test
 * of free-like functions decoded, the file's code scanned for branches).
 * The file is a memfd, named by /proc/self/fd/N as mt-trace names the
 * files it inspects.  Nothing may crash, hang, leak or read out of bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mt_allocators.h"
#include "mt_elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The file the input is written to, made once. */
static const char *input_file(void)
{
	static char path[64];
	static int fd = -1;

	if (fd < 0) {
		fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
		if (fd < 0) {
			perror("fuzz_elf: memfd_create");
			_exit(1);
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	return path;
}

static int write_input(const char *path, const uint8_t *data, size_t size)
{
	int fd;

	sscanf(path, "/proc/self/fd/%d", &fd);
	if (ftruncate(fd, 0) || ftruncate(fd, size))
		return -1;
	return pwrite(fd, data, size, 0) == (ssize_t)size ? 0 : -1;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The allocator names mt-trace looks for, sorted once (elf.c then skips
 * sorting them at every input). */
static const char **names(size_t *n)
{
	static const char **sorted;
	static size_t count;
	const struct mt_alloc_func *table;

	if (!sorted) {
		table = mt_alloc_funcs(&count);
		sorted = calloc(count, sizeof(*sorted));
		if (!sorted)
			_exit(1);
		for (size_t i = 0; i < count; i++)
			sorted[i] = table[i].name;
		qsort(sorted, count, sizeof(*sorted), by_name);
	}
	*n = count;
	return sorted;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = input_file();
	size_t nfuncs;
	const char **name = names(&nfuncs);
	struct mt_elf_func funcs[nfuncs];
	uint8_t id[64], code[32];
	char err[512];
	int found, got;

	if (write_input(path, data, size))
		return 0;
	for (size_t i = 0; i < nfuncs; i++)
		funcs[i].name = name[i];
	found = mt_elf_find_funcs(path, funcs, nfuncs, err, sizeof(err));
	for (size_t i = 0; found > 0 && i < nfuncs; i++) {
		if (!funcs[i].offset)
			continue;
		mt_probe_skip_null(path, funcs[i].offset, funcs[i].size);
		got =
		    mt_elf_read_code(path, funcs[i].offset, code, sizeof(code));
		if (got > 0)
			mt_probe_skip(code, got);
	}
	mt_elf_build_id(path, id, sizeof(id));
	mt_probe_skip(data, size); /* the bytes as code, too */
	return 0;
}
