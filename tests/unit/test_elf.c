/* SPDX-License-Identifier: MIT */
/*
 * test_elf - where free() may be probed (mt_probe_skip_null): past its NULL
 * test only when nothing else can reach that instruction.  Each case is a
 * tiny shared object assembled here from known bytes, so the answer is
 * known by construction.  Then what elf.c refuses, and a symbol table of
 * two million entries read in bounded memory.
 */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_attach.h"
#include "mt_elf.h"
#include "mt_probe.h"

static char dir[] = "/tmp/mt-test-elf-XXXXXX";

/* Assemble body (AT&T) into a shared object; the function is `free`,
 * and `after` the code after its end; ldflags: the link's own. */
static const char *build_with(const char *name, const char *body,
			      const char *after, const char *ldflags)
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
		"free:\n%s\n\t.size free, .-free\n%s"
		"\t.section .note.GNU-stack,\"\",@progbits\n",
		body, after);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -nostdlib %s -o %s %s", ldflags,
		 so, src);
	return system(cmd) == 0 ? so : NULL;
}

static const char *build(const char *name, const char *body, const char *after)
{
	return build_with(name, body, after, "");
}

static long skip_of_after(const char *name, const char *body, const char *after)
{
	struct mt_elf_func fn = {.name = "free"};
	const char *so = build(name, body, after);
	char err[256];

	if (!so || mt_elf_find_funcs(so, &fn, 1, err, sizeof(err)) != 1) {
		fprintf(stderr, "test_elf: %s: cannot build or read\n", name);
		return -1;
	}
	return (long)mt_probe_skip_null(so, fn.offset, fn.size);
}

static long skip_of(const char *name, const char *body)
{
	return skip_of_after(name, body, "");
}

/* glibc's shape: test; je to the ret; push %rbp (emulated) after. */
#define PLAIN                                                                  \
	"\ttest %rdi,%rdi\n\tje 1f\n\tpush %rbp\n\tmov %rdi,%rax\n"            \
	"\tpop %rbp\n1:\tret\n"

/* The largest of this process's resident memory since clear_refs 5. */
static long peak_rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void reset_peak_rss(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "we");

	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

/*
 * An ELF64 file whose .symtab has nsyms entries: all functions named "x"
 * but the last, "malloc", at file offset 0x200 (one executable PT_LOAD
 * maps the whole file at 0x400000).
 */
static const char *big_symtab(size_t nsyms)
{
	static char path[256];
	static const char strtab[] = "\0x\0malloc";
	static const char shstrtab[] = "\0.symtab\0.strtab\0.shstrtab";
	size_t symoff = 0x1000, stroff = symoff + nsyms * sizeof(Elf64_Sym);
	size_t shstroff = stroff + sizeof(strtab);
	size_t shoff = (shstroff + sizeof(shstrtab) + 7) & ~(size_t)7;
	Elf64_Ehdr eh = {
	    .e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64,
			ELFDATA2LSB, EV_CURRENT},
	    .e_type = ET_DYN,
	    .e_machine = EM_X86_64,
	    .e_version = EV_CURRENT,
	    .e_phoff = sizeof(Elf64_Ehdr),
	    .e_shoff = shoff,
	    .e_ehsize = sizeof(Elf64_Ehdr),
	    .e_phentsize = sizeof(Elf64_Phdr),
	    .e_phnum = 1,
	    .e_shentsize = sizeof(Elf64_Shdr),
	    .e_shnum = 4,
	    .e_shstrndx = 3,
	};
	Elf64_Phdr ph = {.p_type = PT_LOAD,
			 .p_flags = PF_R | PF_X,
			 .p_vaddr = 0x400000,
			 .p_filesz = shoff,
			 .p_memsz = shoff,
			 .p_align = 0x1000};
	Elf64_Shdr sh[4] = {
	    {0},
	    {.sh_name = 1,
	     .sh_type = SHT_SYMTAB,
	     .sh_offset = symoff,
	     .sh_size = nsyms * sizeof(Elf64_Sym),
	     .sh_link = 2,
	     .sh_entsize = sizeof(Elf64_Sym)},
	    {.sh_name = 9,
	     .sh_type = SHT_STRTAB,
	     .sh_offset = stroff,
	     .sh_size = sizeof(strtab)},
	    {.sh_name = 17,
	     .sh_type = SHT_STRTAB,
	     .sh_offset = shstroff,
	     .sh_size = sizeof(shstrtab)},
	};
	Elf64_Sym sym = {.st_name = 1,
			 .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
			 .st_shndx = 1,
			 .st_value = 0x400100,
			 .st_size = 16};
	FILE *f;

	snprintf(path, sizeof(path), "%s/big.so", dir);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	fwrite(&eh, sizeof(eh), 1, f);
	fwrite(&ph, sizeof(ph), 1, f);
	fseek(f, symoff, SEEK_SET);
	for (size_t i = 0; i < nsyms; i++) {
		if (i == nsyms - 1) {
			sym.st_name = 3;
			sym.st_value = 0x400200;
		}
		fwrite(&sym, sizeof(sym), 1, f);
	}
	fwrite(strtab, sizeof(strtab), 1, f);
	fwrite(shstrtab, sizeof(shstrtab), 1, f);
	fseek(f, shoff, SEEK_SET);
	fwrite(sh, sizeof(sh), 1, f);
	return fclose(f) == 0 ? path : NULL;
}

/* Two million symbols (a 48 MB table): malloc, the last, is found, and
 * reading them raised this process's resident memory by a few MB, not the
 * table's size (the whole table stayed mapped before). */
static void check_big_symtab(void)
{
	struct mt_elf_func fn = {.name = "malloc"};
	const char *path = big_symtab(2000000);
	char err[256];
	long before, grew;

	CHECK(path != NULL);
	if (!path)
		return;
	reset_peak_rss();
	before = peak_rss_kb();
	CHECK_INT(mt_elf_find_funcs(path, &fn, 1, err, sizeof(err)), 1);
	CHECK_INT(fn.offset, 0x200);
	grew = peak_rss_kb() - before;
	printf("test_elf: 2,000,000 symbols read, peak RSS +%ld kB\n", grew);
	CHECK(grew >= 0 && grew < 8 * 1024);
}

/* Not ELF, or not one to read: refused with a reason, nothing found. */
static void check_refused(void)
{
	struct mt_elf_func fn = {.name = "malloc"};
	char path[256], err[256];
	Elf64_Ehdr eh = {.e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
				     ELFCLASS64, ELFDATA2MSB, EV_CURRENT}};
	FILE *f;

	snprintf(path, sizeof(path), "%s/text", dir);
	f = fopen(path, "w");
	fprintf(f, "#!/bin/sh\necho this is no ELF file, but long enough\n");
	fclose(f);
	CHECK_INT(mt_elf_find_funcs(path, &fn, 1, err, sizeof(err)), -ENOEXEC);
	CHECK_STR(err, "not an ELF file");
	snprintf(path, sizeof(path), "%s/big-endian", dir);
	f = fopen(path, "w");
	fwrite(&eh, sizeof(eh), 1, f);
	fclose(f);
	CHECK_INT(mt_elf_find_funcs(path, &fn, 1, err, sizeof(err)), -ENOEXEC);
	CHECK_STR(err, "not a little-endian ELF file");
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_shoff = sizeof(eh);
	eh.e_shnum = 0; /* extended: the count is in section 0's sh_size */
	f = fopen(path, "w");
	fwrite(&eh, sizeof(eh), 1, f);
	{
		Elf64_Shdr sh0 = {.sh_size = MT_ELF_MAX_SECTIONS + 1};

		fwrite(&sh0, sizeof(sh0), 1, f);
	}
	fclose(f);
	CHECK_INT(mt_elf_find_funcs(path, &fn, 1, err, sizeof(err)), -E2BIG);
	CHECK_INT(fn.offset, 0);
}

/*
 * Branches from outside free, far away (rel32: call, jmp, jcc), to the
 * instruction past its test: refused wherever they sit.  The branch scan
 * reads the code 16 bytes at a time in 64 KiB chunks, so each kind is put
 * at 16 successive offsets (every place in a 16-byte block, code after it
 * so that it is not in the scan's last bytes, read one at a time), and
 * around the end of the first chunk (free is at the start of the code
 * segment, so that end is 64 KiB on).
 */
static void check_far_branches(void)
{
	static const char *const kinds[] = {"call", "jmp", "jne"};
	/* PLAIN with a label (9) past the test: a local label, so that the
	 * assembler resolves the branch (a call to free+5 would go through
	 * the PLT) */
	static const char *const past = "\ttest %rdi,%rdi\n\tje 1f\n"
					"9:\tpush %rbp\n\tmov %rdi,%rax\n"
					"\tpop %rbp\n1:\tret\n";
	char name[64], after[256];

	for (size_t k = 0; k < 3; k++) {
		for (int pad = 300; pad < 316; pad++) {
			snprintf(name, sizeof(name), "far_%s_%d", kinds[k],
				 pad);
			snprintf(after, sizeof(after),
				 "\t.skip %d, 0x90\n\t.globl other\n"
				 "other:\n\t%s 9b\n\t.skip 64, 0x90\n",
				 pad, kinds[k]);
			CHECK_INT(skip_of_after(name, past, after), 0);
		}
		for (int back = 0; back <= 8; back++) {
			snprintf(name, sizeof(name), "chunk_%s_%d", kinds[k],
				 back);
			snprintf(after, sizeof(after),
				 "\t.skip 65536 - 11 - %d, 0x90\n"
				 "\t.globl other\nother:\n\t%s 9b\n"
				 "\t.skip 64, 0x90\n",
				 back, kinds[k]);
			CHECK_INT(skip_of_after(name, past, after), 0);
		}
	}
	/* a far branch elsewhere (free's start) is no reason to refuse */
	CHECK_INT(skip_of_after("far_elsewhere", PLAIN,
				"\t.skip 300, 0x90\n\t.globl other\n"
				"other:\n\tjmp free\n"),
		  5);
}

/*
 * Two files with the same build-id and other code (anyone can write any
 * build-id into a file of theirs): what is remembered of the first (its
 * free's probe offset, its probe plan) is never used for the second.  A
 * plan kept by build-id once put a root session's uprobe in the middle of
 * an instruction of the real libc (issue 31).
 */
#define FORGED_ID "-Wl,--build-id=0x6d74666f72676564"
#define MALLOC_FN                                                              \
	"\t.globl malloc\n\t.type malloc,@function\nmalloc:\n\tret\n"          \
	"\t.size malloc, .-malloc\n"
static void check_forged_build_id(void)
{
	/* the real one: free's NULL test skipped (5); the forgery: another
	 * function jumps past it, so no skip (0), and malloc elsewhere
	 * (build's path is a static buffer: copied) */
	const char *built =
	    build_with("forged_real", PLAIN, MALLOC_FN, FORGED_ID);
	char *real = built ? strdup(built) : NULL;
	const char *fake = build_with(
	    "forged_fake", PLAIN,
	    "\t.globl other\nother:\n\tjmp free+5\n\tnop\n\tnop\n" MALLOC_FN,
	    FORGED_ID);
	struct mt_elf_func real_fn[2] = {{.name = "free"}, {.name = "malloc"}};
	struct mt_elf_func fake_fn[2] = {{.name = "free"}, {.name = "malloc"}};
	struct mt_attach_plan real_plan, fake_plan;
	struct mt_attach planner;
	uint8_t id_real[40], id_fake[40];
	char err[256];

	CHECK(real && fake);
	if (!real || !fake) {
		free(real);
		return;
	}
	/* the control: the same build-id, malloc at another offset */
	CHECK_INT(mt_elf_build_id(real, id_real, sizeof(id_real)), 8);
	CHECK_INT(mt_elf_build_id(fake, id_fake, sizeof(id_fake)), 8);
	CHECK(memcmp(id_real, id_fake, 8) == 0);
	CHECK_INT(mt_elf_find_funcs(real, real_fn, 2, err, sizeof(err)), 2);
	CHECK_INT(mt_elf_find_funcs(fake, fake_fn, 2, err, sizeof(err)), 2);
	CHECK(real_fn[1].offset != fake_fn[1].offset);
	/* free's check: the real file's answer first, then the forgery's own */
	CHECK_INT(mt_probe_skip_null(real, real_fn[0].offset, real_fn[0].size),
		  5);
	CHECK_INT(mt_probe_skip_null(fake, fake_fn[0].offset, fake_fn[0].size),
		  0);
	/* the plans: each file's own offsets */
	mt_attach_init(&planner, MT_PROBES_SESSION, NULL, NULL, 0);
	CHECK(mt_attach_plan(&planner, real, real, &real_plan, err,
			     sizeof(err)) > 0);
	CHECK(mt_attach_plan(&planner, fake, fake, &fake_plan, err,
			     sizeof(err)) > 0);
	for (size_t i = 0; i < fake_plan.nenter; i++) {
		if (fake_plan.enter[i].fn == MT_FN_MALLOC)
			CHECK_INT(fake_plan.enter[i].offset, fake_fn[1].offset);
		/* past its test %rdi,%rdi alone (single-stepped, not
		 * emulated: attach.c), not past its NULL test */
		if (fake_plan.enter[i].fn == MT_FN_FREE)
			CHECK_INT(fake_plan.enter[i].offset,
				  fake_fn[0].offset + 3);
	}
	for (size_t i = 0; i < real_plan.nenter; i++)
		if (real_plan.enter[i].fn == MT_FN_FREE)
			CHECK_INT(real_plan.enter[i].offset,
				  real_fn[0].offset + 5);
	mt_attach_plan_free(&real_plan);
	mt_attach_plan_free(&fake_plan);
	free(real);
}

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
	/* the same bytes but the jump goes to free's start, not past its
	 * test: free sits at the same offset with the same size as in
	 * from_outside, only the answer differs (answers are remembered by
	 * the file, not by where the function is) */
	CHECK_INT(
	    skip_of("to_start", PLAIN "\t.globl other\nother:\n\tjmp free\n"),
	    5);
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
	check_far_branches();
	check_forged_build_id();
	check_refused();
	check_big_symtab();
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
