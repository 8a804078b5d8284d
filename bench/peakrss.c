/* SPDX-License-Identifier: MIT */
/*
 * peakrss - run a command and report the peak RSS of that process alone,
 * not of the children it starts.
 *
 *   peakrss [-o FILE] [-m MAPS] -- CMD [ARGS...]
 *
 * /usr/bin/time -v and wait4(2) report ru_maxrss of the process AND of the
 * children it waited for (the kernel takes the larger), and mt-trace forks
 * the command it traces, so they measure whichever is bigger.  VmHWM in
 * /proc/PID/status is the process's own high-water mark, but it vanishes
 * the moment the process exits.  So peakrss runs CMD under ptrace with only
 * PTRACE_O_TRACEEXIT: the kernel stops CMD at its exit, before it drops
 * its memory, and peakrss reads VmHWM there.  Nothing else is traced (no
 * fork following, no syscall stops), so CMD runs at full speed.
 *
 * Prints one JSON line (to FILE, else stderr):
 *   {"vm_hwm_kb":N,"with_children_maxrss_kb":M,"cpu_ms":C,"status":S}
 * with_children_maxrss_kb is what /usr/bin/time would have said; cpu_ms
 * is CMD's own user + system time (its threads, not its children), read
 * at the same stop.
 * -m MAPS saves CMD's /proc/PID/smaps at its exit, to see where it went.
 *
 * Exit status: CMD's (128+N if killed by signal N); 125 if peakrss failed,
 * 127 if CMD could not be run.
 */
#include <err.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(out, "usage: peakrss [-o FILE] [-m MAPS] -- CMD [ARGS...]\n");
}

/* VmHWM of pid in kB, or -1. */
static long read_vm_hwm_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Copy /proc/pid/smaps to path; a failure only costs the copy. */
static void save_smaps(pid_t pid, const char *path)
{
	char proc_path[64], buf[8192];
	FILE *in, *out;
	size_t n;

	snprintf(proc_path, sizeof(proc_path), "/proc/%d/smaps", (int)pid);
	in = fopen(proc_path, "r");
	if (!in) {
		warn("%s", proc_path);
		return;
	}
	out = fopen(path, "w");
	if (!out) {
		warn("%s", path);
		fclose(in);
		return;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	fclose(out);
}

/* CPU time of pid's threads, not its children's, in ms, or -1. */
static long read_cpu_ms(pid_t pid)
{
	char path[64], line[1024], *after_name;
	unsigned long long utime, stime;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	after_name = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	/* fields 3..13 after the name, then utime (14) and stime (15) */
	if (!after_name || sscanf(after_name + 2,
				  "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
				  "%llu %llu",
				  &utime, &stime) != 2)
		return -1;
	return (long)((utime + stime) * 1000 /
		      (unsigned long long)sysconf(_SC_CLK_TCK));
}

static pid_t start_traced(char **argv)
{
	pid_t pid = fork();

	if (pid < 0)
		err(125, "fork");
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
			err(125, "ptrace(TRACEME)");
		execvp(argv[0], argv);
		warn("%s", argv[0]);
		_exit(127);
	}
	return pid;
}

/*
 * Let pid run to its end, passing its signals on; read VmHWM at the exit
 * stop.  Returns the wait status of the final exit.
 */
static int run_to_exit(pid_t pid, long *vm_hwm_kb, long *cpu_ms,
		       const char *smaps_path)
{
	int status;
	bool options_set = false;

	for (;;) {
		int signal_to_pass = 0;

		if (waitpid(pid, &status, 0) < 0) {
			if (errno == EINTR)
				continue;
			err(125, "waitpid");
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return status;
		if (!WIFSTOPPED(status))
			continue;
		if (!options_set && WSTOPSIG(status) == SIGTRAP) {
			/* the stop after execve: from here on, only exits */
			if (ptrace(PTRACE_SETOPTIONS, pid, NULL,
				   (void *)(long)(PTRACE_O_TRACEEXIT |
						  PTRACE_O_EXITKILL)) < 0)
				err(125, "ptrace(SETOPTIONS)");
			options_set = true;
		} else if (status >> 8 ==
			   (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
			*vm_hwm_kb = read_vm_hwm_kb(pid);
			*cpu_ms = read_cpu_ms(pid);
			if (smaps_path)
				save_smaps(pid, smaps_path);
		} else {
			signal_to_pass = WSTOPSIG(status);
		}
		if (ptrace(PTRACE_CONT, pid, NULL,
			   (void *)(long)signal_to_pass) < 0 &&
		    errno != ESRCH)
			err(125, "ptrace(CONT)");
	}
}

int main(int argc, char **argv)
{
	const char *out_path = NULL, *smaps_path = NULL;
	long vm_hwm_kb = -1, cpu_ms = -1;
	struct rusage children;
	FILE *out = stderr;
	int opt, status;
	pid_t pid;

	while ((opt = getopt(argc, argv, "+hm:o:")) != -1) {
		switch (opt) {
		case 'm':
			smaps_path = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 125;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 125;
	}
	pid = start_traced(argv + optind);
	status = run_to_exit(pid, &vm_hwm_kb, &cpu_ms, smaps_path);
	getrusage(RUSAGE_CHILDREN, &children);
	if (out_path && !(out = fopen(out_path, "w")))
		err(125, "%s", out_path);
	fprintf(out,
		"{\"vm_hwm_kb\":%ld,\"with_children_maxrss_kb\":%ld,"
		"\"cpu_ms\":%ld,\"status\":%d}\n",
		vm_hwm_kb, children.ru_maxrss, cpu_ms,
		WIFEXITED(status) ? WEXITSTATUS(status)
				  : 128 + WTERMSIG(status));
	if (out != stderr)
		fclose(out);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
