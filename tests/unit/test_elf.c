/* SPDX-License-Identifier: MIT */
/*
 * test_elf - where free() may be probed (mt_probe_skip_null): past its NULL
 * test only when nothing else can reach that instruction.  Each case is a
 * tiny shared object assembled here from known bytes, so the answer is
 * known by construction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_elf.h"

static char dir[] = "/tmp/mt-test-elf-XXXXXX";

/* Assemble body (AT&T) into a shared object; the function is `free`. */
static const char *build(const char *name, const char *body)
{
	static char so[256];
	char src[256], cmd[768];
	FILE *f;

	snprintf(src, sizeof(src), "%s/%s.S", dir, name);
	snprintf(so, sizeof(so), "%s/%s.so", dir, name);
	f = fopen(src, "w");
	if (!f)
		return NULL;
	fprintf(f,
		"\t.text\n\t.globl free\n\t.type free,@function\n"
		"free:\n%s\n\t.size free, .-free\n"
		"\t.section .note.GNU-stack,\"\",@progbits\n",
		body);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -nostdlib -o %s %s", so, src);
	return system(cmd) == 0 ? so : NULL;
}

static long skip_of(const char *name, const char *body)
{
	struct mt_elf_func fn = {.name = "free"};
	const char *so = build(name, body);
	char err[256];

	if (!so || mt_elf_find_funcs(so, &fn, 1, err, sizeof(err)) != 1) {
		fprintf(stderr, "test_elf: %s: cannot build or read\n", name);
		return -1;
	}
	return (long)mt_probe_skip_null(so, fn.offset, fn.size);
}

/* glibc's shape: test; je to the ret; push %rbp (emulated) after. */
#define PLAIN                                                                  \
	"\ttest %rdi,%rdi\n\tje 1f\n\tpush %rbp\n\tmov %rdi,%rax\n"            \
	"\tpop %rbp\n1:\tret\n"

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* 48 85 ff, 74 xx: the probe goes 5 bytes in */
	CHECK_INT(skip_of("plain", PLAIN), 5);
	/* endbr64 first, and a je rel32: 4 + 3 + 6 */
	CHECK_INT(skip_of("endbr_rel32", "\tendbr64\n\ttest %rdi,%rdi\n"
					 "\t.byte 0x0f,0x84\n\t.long 1f-(.+4)\n"
					 "\tpush %rbp\n\tpop %rbp\n1:\tret\n"),
		  13);
	/* a loop back to the instruction after the je: refused */
	CHECK_INT(skip_of("loop_back",
			  "\ttest %rdi,%rdi\n\tje 2f\n1:\tpush %rbp\n"
			  "\tpop %rbp\n\tdec %rsi\n\tjnz 1b\n2:\tret\n"),
		  0);
	/* another function of the file jumps there: refused */
	CHECK_INT(skip_of("from_outside",
			  PLAIN "\t.globl other\nother:\n\tjmp free+5\n"),
		  0);
	/* an indirect jump in the function (a jump table): refused */
	CHECK_INT(skip_of("indirect", "\ttest %rdi,%rdi\n\tje 1f\n\tpush %rbp\n"
				      "\tpop %rbp\n\tjmp *%rax\n1:\tret\n"),
		  0);
	/* the instruction after the je would be single-stepped: refused */
	CHECK_INT(skip_of("not_emulated", "\ttest %rdi,%rdi\n\tje 1f\n"
					  "\tmov %rdi,%rax\n1:\tret\n"),
		  0);
	/* no NULL test at the start (jne, or a test of another register) */
	CHECK_INT(skip_of("jne", "\ttest %rdi,%rdi\n\tjne 1f\n\tpush %rbp\n"
				 "\tpop %rbp\n1:\tret\n"),
		  0);
	CHECK_INT(skip_of("rsi", "\ttest %rsi,%rsi\n\tje 1f\n\tpush %rbp\n"
				 "\tpop %rbp\n1:\tret\n"),
		  0);
	/* the C library this machine runs: glibc's free is the real case */
	{
		struct mt_elf_func fn = {.name = "free"};
		char err[256];
		const char *libc = mt_self_libc();

		CHECK(mt_elf_find_funcs(libc, &fn, 1, err, sizeof(err)) == 1);
		printf("test_elf: %s: free probed at +%zu\n", libc,
		       mt_probe_skip_null(libc, fn.offset, fn.size));
	}
	{
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return test_summary("test_elf");
}
