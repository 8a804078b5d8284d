// SPDX-License-Identifier: MIT
/*
 * test_program.c - the program a command line runs, found before it runs
 * (mt_program.h): execvp(3)'s search over a made-up PATH whose entries
 * execvp skips (missing, a directory of the name, a file without the
 * execute bit) or takes, checked against execvp itself in a child; and
 * the ELF headers of this test's own program (its loader is the one the
 * kernel mapped, /proc/self/maps), a script and another machine's ELF.
 */
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_program.h"

static char dir[] = "/tmp/mt-test-program-XXXXXX";

static void make_file(const char *name, const char *text, mode_t mode)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

/* What execvp(file) runs with PATH=search: each candidate is a script
 * that prints its own path, so the child's output names the one taken. */
static void execvp_runs(const char *file, const char *search, char *out,
			size_t outlen)
{
	int fds[2];
	ssize_t n;
	pid_t pid;

	out[0] = '\0';
	if (pipe(fds))
		return;
	pid = fork();
	if (pid == 0) {
		char *argv[] = {(char *)file, NULL};

		dup2(fds[1], 1);
		setenv("PATH", search, 1);
		execvp(file, argv);
		_exit(127);
	}
	close(fds[1]);
	n = read(fds[0], out, outlen - 1);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	close(fds[0]);
	waitpid(pid, NULL, 0);
}

static void search(void)
{
	char got[PATH_MAX], want[PATH_MAX], ran[PATH_MAX], sub[64];
	char missing[64], noexec[64], ok[64], path[512];

	if (!mkdtemp(dir)) {
		perror(dir);
		exit(2);
	}
	snprintf(missing, sizeof(missing), "%s/none", dir);
	snprintf(sub, sizeof(sub), "%s/dir", dir);
	snprintf(noexec, sizeof(noexec), "%s/noexec", dir);
	snprintf(ok, sizeof(ok), "%s/ok", dir);
	mkdir(sub, 0755);
	mkdir(noexec, 0755);
	mkdir(ok, 0755);
	/* a directory named prog, a file prog without x, then the one */
	snprintf(want, sizeof(want), "%s/dir/prog", dir);
	mkdir(want, 0755);
	make_file("noexec/prog", "#!/bin/sh\necho \"$0\"\n", 0644);
	make_file("ok/prog", "#!/bin/sh\necho \"$0\"\n", 0755);
	snprintf(path, sizeof(path), "%s:%s:%s:%s", missing, sub, noexec, ok);
	snprintf(want, sizeof(want), "%s/ok/prog", dir);
	CHECK_INT(mt_program_resolve("prog", path, got, sizeof(got)), 0);
	CHECK_STR(got, want);
	execvp_runs("prog", path, ran, sizeof(ran));
	CHECK_STR(ran, want); /* the outside truth: execvp took it too */

	/* nothing to take: execvp fails too */
	snprintf(path, sizeof(path), "%s:%s", missing, noexec);
	CHECK_INT(mt_program_resolve("prog", path, got, sizeof(got)), -1);

	/* an empty entry is the current directory: the name alone */
	if (chdir(ok) == 0) {
		snprintf(path, sizeof(path), "%s::%s", missing, sub);
		CHECK_INT(mt_program_resolve("prog", path, got, sizeof(got)),
			  0);
		CHECK_STR(got, "prog");
		execvp_runs("prog", path, ran, sizeof(ran));
		CHECK_STR(ran, "prog");
		CHECK(chdir("/") == 0);
	}

	/* a name with a slash is not searched for */
	snprintf(path, sizeof(path), "%s", ok);
	CHECK_INT(mt_program_resolve("ok/prog", path, got, sizeof(got)), -1);
	CHECK_INT(mt_program_resolve(want, "/nonexistent", got, sizeof(got)),
		  0);
	CHECK_STR(got, want);
	snprintf(ran, sizeof(ran), "%s/noexec/prog", dir);
	CHECK_INT(mt_program_resolve(ran, NULL, got, sizeof(got)), -1);

	/* no PATH: execvp's default, /bin:/usr/bin */
	CHECK_INT(mt_program_resolve("sh", NULL, got, sizeof(got)), 0);
	CHECK_STR(got, "/bin/sh");
	CHECK_INT(mt_program_resolve("", NULL, got, sizeof(got)), -1);
	/* a result that does not fit is no result */
	CHECK_INT(mt_program_resolve("sh", NULL, got, 4), -1);
}

/* The loader the kernel mapped for this very program: the file of the
 * mapping of ours whose name says ld-linux. */
static void kernel_loader(char *out, size_t outlen)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "re");

	out[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		char *name = strchr(line, '/');

		if (name && strstr(name, "/ld-linux")) {
			name[strcspn(name, "\n")] = '\0';
			snprintf(out, outlen, "%s", name);
			break;
		}
	}
	if (f)
		fclose(f);
}

static void headers(void)
{
	struct mt_program_elf elf;
	char loader[PATH_MAX], mapped[PATH_MAX], real[PATH_MAX];
	char script[PATH_MAX + 32];
	Elf64_Ehdr other;
	int fd = open("/proc/self/exe", O_RDONLY);

	CHECK_INT(mt_program_read(fd, &elf), 0);
	close(fd);
	CHECK(elf.native);
	kernel_loader(mapped, sizeof(mapped));
	CHECK(mapped[0] != '\0');
	CHECK(realpath(elf.interp, loader) != NULL);
	CHECK(realpath(mapped, real) != NULL);
	CHECK_STR(loader, real);
	mt_program_free(&elf);

	snprintf(script, sizeof(script), "%s/ok/prog", dir);
	fd = open(script, O_RDONLY);
	CHECK_INT(mt_program_read(fd, &elf), -1);
	CHECK(!elf.native);
	close(fd);

	/* this program's header with another machine in it */
	fd = open("/proc/self/exe", O_RDONLY);
	CHECK(pread(fd, &other, sizeof(other), 0) == sizeof(other));
	close(fd);
	other.e_machine =
	    other.e_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
	make_file("other", "", 0755);
	snprintf(script, sizeof(script), "%s/other", dir);
	fd = open(script, O_RDWR);
	CHECK(pwrite(fd, &other, sizeof(other), 0) == sizeof(other));
	CHECK_INT(mt_program_read(fd, &elf), -1);
	close(fd);
}

int main(void)
{
	char cmd[PATH_MAX + 16];

	search();
	headers();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_program: could not remove %s\n", dir);
	return test_summary("test_program");
}
