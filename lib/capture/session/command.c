// SPDX-License-Identifier: MIT
/*
 * command.c - the command's side of a session: its fork, held on a pipe
 * before its exec until the BPF side is attached, then released; its exit
 * status; and the signals mt-trace reads from a signalfd, passed on to the
 * command while it runs and mt-trace's own once it is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mt_child_env.h"
#include "mt_log.h"
#include "mt_raw.h"
#include "mt_user.h"
#include "tracer_fast.h"
#include "tracer_int.h"

static void redirect_child_stdout(const struct mt_tracer_opts *o)
{
	if (o->child_stdout_fd >= 0)
		dup2(o->child_stdout_fd, STDOUT_FILENO);
	else if (o->child_stdout_to_stderr)
		/* the trace owns stdout: keep the command's output apart */
		dup2(STDERR_FILENO, STDOUT_FILENO);
}

static void run_child(const struct tracer *t, char **env, int release_fd,
		      int exec_err_fd)
{
	const struct mt_tracer_opts *o = t->opts;
	sigset_t none;
	char go;
	int e;

	/* die with mt-trace while waiting on the release pipe; not after */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read(release_fd, &go, 1) != 1)
		_exit(MT_EXIT_TRACER_FAILED); /* mt-trace gave up */
	prctl(PR_SET_PDEATHSIG, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (t->cmd.sigint_ignored) /* as mt-trace found it (mt_command_signalfd)
				    */
		signal(SIGINT, SIG_IGN);
	redirect_child_stdout(o);
	if (t->fast)
		mt_fast_child_fds(t->fast);
	e = mt_user_become(o->user);
	if (e) {
		mt_error("cannot become uid %u: %s", (unsigned)o->user->uid,
			 strerror(-e));
		_exit(MT_EXIT_TRACER_FAILED);
	}
	environ = env; /* made before the fork (mt_child_env.h) */
	execvp(o->argv[0], o->argv);
	e = errno;
	if (write(exec_err_fd, &e, sizeof(e)) < 0)
		_exit(MT_EXIT_TRACER_FAILED);
	_exit(e == ENOENT ? MT_EXIT_NOT_FOUND : MT_EXIT_CANNOT_EXEC);
}

/* The command's environment: mt-trace's, with what the command's
 * side of mt-trace reads in it. */
static void child_environment(const struct tracer *t, struct mt_child_env *env)
{
	const struct mt_tracer_opts *o = t->opts;

	mt_child_env_init(env);
	if (o->control_path)
		mt_child_env_set(env, "MT_CONTROL", o->control_path);
	if (t->fast)
		mt_fast_child_env(t->fast, getpid(), env);
	mt_user_env(o->user, env);
}

int mt_command_spawn(struct tracer *t)
{
	int release[2], exec_err[2];
	struct mt_child_env env;

	child_environment(t, &env);
	if (pipe2(release, O_CLOEXEC) || pipe2(exec_err, O_CLOEXEC)) {
		mt_error("pipe: %s", strerror(errno));
		mt_child_env_free(&env);
		return -1;
	}
	t->cmd.child = fork();
	if (t->cmd.child < 0) {
		mt_error("fork: %s", strerror(errno));
		mt_child_env_free(&env);
		return -1;
	}
	if (t->cmd.child == 0) {
		close(release[1]);
		close(exec_err[0]);
		run_child(t, env.vars, release[0], exec_err[1]);
	}
	mt_child_env_free(&env);
	close(release[0]);
	close(exec_err[1]);
	t->cmd.release_fd = release[1];
	t->cmd.exec_err_fd = exec_err[0];
	t->cmd.pidfd = syscall(SYS_pidfd_open, t->cmd.child, 0);
	if (t->cmd.pidfd < 0) {
		mt_error("pidfd_open: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* SIGINT is mt-trace's even when it came ignored (a shell's `cmd &`):
 * one sent to it by pid is meant for it (mt_command_forward_signals); the
 * command gets the disposition mt-trace was given. */
int mt_command_signalfd(struct tracer *t)
{
	sigset_t set;
	struct sigaction was;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigprocmask(SIG_BLOCK, &set, &t->cmd.signals_old);
	if (sigaction(SIGINT, NULL, &was) == 0 && was.sa_handler == SIG_IGN) {
		t->cmd.sigint_ignored = true;
		signal(SIGINT, SIG_DFL); /* blocked: read from the signalfd */
	}
	t->cmd.signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return t->cmd.signal_fd;
}

/*
 * SIGINT sent to mt-trace alone (kill, a CI runner's timeout, a script
 * that started it in the background): the first is passed to every
 * process of the tree, as a terminal's ^C reaches its process group; the
 * next kills them.  The session then ends as usual, with the command's
 * end: a complete trace.
 */
static void interrupt_tree(struct tracer *t)
{
	int sig = t->cmd.interrupts++ ? SIGKILL : SIGINT;
	size_t n = 0;

	for (size_t i = 0; i < t->nlive; i++)
		n += kill(t->live[i], sig) == 0;
	if (sig == SIGINT)
		mt_note("interrupted: SIGINT passed to the %zu process%s of "
			"the command; another SIGINT kills them",
			n, n == 1 ? "" : "es");
	else
		mt_note("interrupted again: the %zu process%s of the command "
			"killed",
			n, n == 1 ? "" : "es");
}

/*
 * A signal from the terminal reaches the command by itself (same process
 * group); one sent to mt-trace alone (kill, a CI runner's timeout) is
 * passed on.
 */
void mt_command_forward_signals(struct tracer *t)
{
	struct signalfd_siginfo si;

	while (read(t->cmd.signal_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_code == SI_KERNEL)
			continue;
		if (si.ssi_signo == SIGINT) {
			interrupt_tree(t);
			continue;
		}
		if (t->opts->verbose)
			mt_verbose("passing signal %u on", si.ssi_signo);
		kill(t->cmd.child, si.ssi_signo);
	}
}

/*
 * The command is gone: what signals asked of it is done, and one that
 * comes now is for mt-trace, whose last drain and detach must not be
 * waited for against the user's will (a slow reader, a stuck output):
 * SIGINT and SIGTERM end it as they would any program (its trace then
 * has no trailer: readers take it as cut short).  The ones already
 * pending were the command's (a terminal's ^C reaches both).  Once: the
 * writer's wait may have come to it first (mt_tracer_output_stalled).
 */
void mt_command_signals_end(struct tracer *t)
{
	struct signalfd_siginfo si;

	if (t->cmd.signals_ended)
		return;
	t->cmd.signals_ended = true;
	while (read(t->cmd.signal_fd, &si, sizeof(si)) == sizeof(si))
		;
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigprocmask(SIG_SETMASK, &t->cmd.signals_old, NULL);
}

/*
 * The writer has waited a while for the output (a reader that does not
 * read: tracer_batch.c), and mt-trace's own thread with it: the signals
 * trace_loop would read are read here meanwhile.  Passed on while the
 * command runs (it may be waiting for mt-trace's drain); once it is gone,
 * SIGINT and SIGTERM end mt-trace as they do after trace_loop.
 */
void mt_tracer_output_stalled(struct tracer *t)
{
	struct pollfd gone = {.fd = t->cmd.pidfd, .events = POLLIN};

	if (t->cmd.signals_ended || t->cmd.signal_fd < 0)
		return;
	if (t->cmd.pidfd >= 0 && poll(&gone, 1, 0) == 1)
		mt_command_signals_end(t);
	else
		mt_command_forward_signals(t);
}

int mt_command_wait_status(struct tracer *t, struct mt_meta *meta)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, t->cmd.child, &si, WEXITED) < 0) {
		meta->exit_kind = MT_EXIT_UNKNOWN;
		return MT_EXIT_TRACER_FAILED;
	}
	if (si.si_code == CLD_EXITED) {
		meta->exit_kind = MT_EXIT_CODE;
		meta->exit_value = si.si_status;
		return si.si_status;
	}
	meta->exit_kind = MT_EXIT_SIGNAL;
	meta->exit_value = si.si_status;
	return 128 + si.si_status;
}

int mt_command_release(struct tracer *t)
{
	if (write(t->cmd.release_fd, "", 1) != 1) {
		mt_error("releasing the command: %s", strerror(errno));
		return -1;
	}
	close(t->cmd.release_fd);
	t->cmd.release_fd = -1;
	return 0;
}

void mt_command_report_exec_failure(struct tracer *t)
{
	int e;

	if (read(t->cmd.exec_err_fd, &e, sizeof(e)) == sizeof(e))
		mt_error("%s: %s", t->opts->argv[0], strerror(e));
}
