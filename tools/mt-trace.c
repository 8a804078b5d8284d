// SPDX-License-Identifier: MIT
/* mt-trace - run a command and record its memory events as a raw stream. */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_event.h"
#include "mt_human.h"
#include "mt_log.h"
#include "mt_tracer.h"
#include "mt_user.h"
#include "mt_cli.h"
#include "mt_version.h"

/* 1 MiB holds ~18,700 events: two threads storming on two cores (~1.3 M
 * events/s) lose none even with 256 KiB, and each MiB costs 2 MiB of
 * mt-trace's RSS (the ring is mapped twice) */
#define DEFAULT_RING_BYTES (1u << 20)

/* Call stacks cost ~1-2 us more per allocator call (man/mt-trace.1) */
#define DEFAULT_STACKS false

static void usage(FILE *f)
{
	fputs("usage: mt-trace [-v] [-o FILE] [--child-stdout FILE] "
	      "[--ring-size SIZE]\n"
	      "                [--track-allocators=BOOL | "
	      "--no-track-allocators] [--libc PATH]\n"
	      "                [--control FIFO]"
	      " [--scan FILE] [--no-stop] [--start-disabled]\n"
	      "                [--no-backpressure] [--physical]"
	      " [--interval DURATION] [--wait-detach]\n"
	      "                [--global-probes]\n"
	      "                [--stacks=BOOL | --no-stacks] [--stack-depth N] "
	      "[--fast | --no-fast]\n"
	      "                -- CMD [ARGS...]\n"
	      "       mt-trace --help | --version\n"
	      "\n"
	      "Run CMD and write its memory events (allocator calls, "
	      "mmap/munmap/mremap/brk,\nRSS, fork/exec/exit of every process "
	      "it starts) as a raw stream to stdout.\n"
	      "\n"
	      "  -o, --output FILE         write the trace to FILE, not "
	      "stdout\n"
	      "      --child-stdout FILE   send CMD's stdout to FILE (default: "
	      "stderr when\n"
	      "                            the trace goes to stdout)\n"
	      "      --ring-size SIZE      events ring buffer (default 1MiB; "
	      "power of two)\n"
	      "      --track-allocators=BOOL  trace malloc & co. (default "
	      "true; env\n"
	      "                            MT_TRACK_ALLOCATORS=0 turns it "
	      "off; the value\n"
	      "                            only with '=')\n"
	      "      --no-track-allocators  --track-allocators=false\n"
	      "      --libc PATH           the C library to probe first "
	      "(default: mt-trace's own)\n"
	      "      --no-stop             do not stop a process while its new "
	      "code is inspected\n"
	      "                            (invisible to it; its first calls "
	      "may be missed;\n"
	      "                            implies --no-backpressure)\n"
	      "      --no-backpressure     drop (and count) what a full ring "
	      "cannot hold rather\n"
	      "                            than stop its maker until it is "
	      "drained\n"
	      "      --scan FILE           also probe the allocators of this "
	      "ELF file (repeatable;\n"
	      "                            env MT_SCAN=FILE:FILE...)\n"
	      "      --control FIFO        create FIFO (and FIFO.ack) and obey "
	      "its commands:\n"
	      "                            enable, disable, marker NAME\n"
	      "      --start-disabled      allocator and syscall events off "
	      "until 'enable'\n"
	      "                            (needs --control)\n"
	      "      --physical            record the tree's physical memory "
	      "(PSS)\n"
	      "      --interval DURATION   PSS sampling period (default "
	      "10ms)\n"
	      "      --wait-detach         remove the probes before exiting "
	      "(default: a\n"
	      "                            background process removes them "
	      "just after)\n"
	      "      --global-probes       probe the allocators for every "
	      "process on the machine,\n"
	      "                            not only the tree's (for trees "
	      "that leave mt-trace's\n"
	      "                            mount namespace: nsenter, setns)\n"
	      "      --stacks=BOOL         record the call stack of every "
	      "allocation, mmap,\n"
	      "                            munmap, mremap and brk (default "
	      "false; env\n"
	      "                            MT_STACKS; --no-stacks: false)\n"
	      "      --stack-depth N       frames kept per stack, 1-127 "
	      "(default 127)\n"
	      "      --no-fast             allocator calls by uprobes alone "
	      "(env MT_FAST=0);\n"
	      "                            by default the C library's and "
	      "libstdc++'s calls\n"
	      "                            are recorded in-process where the "
	      "recorder loads\n"
	      "                            (LD_PRELOAD of libmt-preload.so: "
	      "CMD sees it), by\n"
	      "                            uprobes in the processes it cannot "
	      "(static,\n"
	      "                            set-user-ID, LD_PRELOAD dropped); "
	      "one trace\n"
	      "      --fast                the default, kept for scripts: "
	      "insist on the\n"
	      "                            recorder (no libmt-preload.so: "
	      "exit 125)\n"
	      "  -v, --verbose             say what is attached; twice: the "
	      "start-up's and\n"
	      "                            exit's steps timed; three times: "
	      "libbpf's debug\n"
	      "                            output and each BPF program's "
	      "verifier time\n"
	      "  -h, --help                this text\n"
	      "  -V, --version             mt-trace's version\n"
	      "\n"
	      "CMD starts after '--' (or at the first argument that is not an "
	      "option).\n"
	      "\n"
	      "Environment: MT_TRACK_ALLOCATORS, MT_STACKS, MT_FAST and "
	      "MT_SCAN (above);\n"
	      "MT_PRELOAD: the recorder to preload (default: "
	      "../lib/libmt-preload.so or\n../lib/mt/libmt-preload.so "
	      "beside mt-trace);\n"
	      "MT_FAST_CLOCK (auto or gettime): how the recorders stamp "
	      "their records\n(auto: the TSC where it is CLOCK_MONOTONIC's "
	      "counter, else clock_gettime);\n"
	      "MT_PROBES (session, multi or classic): the first way of "
	      "attaching allocator\nprobes to try; "
	      "under sudo (SUDO_UID, SUDO_GID), CMD runs as the\n"
	      "invoking user with its HOME, USER, LOGNAME, SHELL and groups, "
	      "and every FILE,\nFIFO, PATH, MT_SCAN and MT_PRELOAD is opened "
	      "as that user.\n"
	      "\n"
	      "Exit status: CMD's (128+N if killed by signal N); 125 if "
	      "mt-trace failed or\nwas used wrongly, 126 if CMD cannot be run, "
	      "127 if it was not found.\n",
	      f);
}

/* A usage error: the message, a pointer to --help, mt-trace's own status
 * (125: 2 could be the command's). */
static _Noreturn void usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
	mt_try_help(MT_EXIT_TRACER_FAILED);
}

static bool parse_bool(const char *s, const char *what)
{
	if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
	    !strcmp(s, "1") || !strcasecmp(s, "on"))
		return true;
	if (!strcasecmp(s, "false") || !strcasecmp(s, "no") ||
	    !strcmp(s, "0") || !strcasecmp(s, "off"))
		return false;
	usage_error("%s: expected true or false, got '%s'", what, s);
}

static uint64_t parse_ring_size(const char *s)
{
	uint64_t bytes;
	long page = sysconf(_SC_PAGESIZE);

	if (mt_parse_size(s, &bytes) || bytes < (uint64_t)page ||
	    bytes > (1ull << 31) || (bytes & (bytes - 1)))
		usage_error("--ring-size: '%s' is not a power of two between "
			    "%ld bytes and 2GiB",
			    s, page);
	return bytes;
}

static uint32_t parse_stack_depth(const char *s)
{
	char *end;
	unsigned long n = strtoul(s, &end, 10);

	if (!*s || *end || n < 1 || n > MT_STACK_DEPTH_MAX)
		usage_error("--stack-depth: '%s' is not a number of frames "
			    "from 1 to %d",
			    s, MT_STACK_DEPTH_MAX);
	return n;
}

/* "--" as the value of an option that takes one: its value was forgotten,
 * and what follows would be read wrongly. */
static const char *value_of(const char *option)
{
	if (!strcmp(optarg, "--"))
		usage_error("%s needs a value before '--'", option);
	return optarg;
}

/*
 * --track-allocators and --stacks take their value only with '=': a value
 * given as the next word ("--track-allocators false") would otherwise be
 * the command and run (/usr/bin/false).  No spelling of an option becomes
 * the command.
 */
static bool bool_arg(const char *option, int argc, char **argv)
{
	if (optarg)
		return parse_bool(optarg, option);
	if (optind < argc && argv[optind][0] != '-')
		usage_error("%s takes its value after '=' (%s=%s), and the "
			    "command goes after '--'",
			    option, option, argv[optind]);
	return true;
}

struct outputs {
	const char *trace_path; /* -o, NULL or "-" for stdout */
	const char *child_path; /* --child-stdout, or NULL */
	struct mt_output trace, child;
};

/* The trace and CMD's stdout in one file interleave into neither a trace
 * nor CMD's output (`mt-trace -o t -- cmd >t`, `2>&1 | mt-encode`). */
static void warn_if_shared(int trace_fd, int child_fd, const char *trace_name)
{
	struct stat a, b;

	if (fstat(trace_fd, &a) || fstat(child_fd, &b) ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return;
	warnx("the trace and CMD's stdout both go to %s: they will mix; "
	      "give CMD's stdout its own file with --child-stdout FILE, or "
	      "the trace with -o FILE",
	      trace_name);
}

/* Open what mt-trace writes as the user it works for (mt_user.h). */
static void open_outputs(struct outputs *out, struct mt_tracer_opts *o,
			 const struct mt_user *user)
{
	char why[256];

	out->trace.fd = out->child.fd = -1;
	if (out->trace_path && strcmp(out->trace_path, "-")) {
		if (mt_output_open(&out->trace, user, out->trace_path, why,
				   sizeof(why)))
			errx(MT_EXIT_TRACER_FAILED, "%s: %s", out->trace_path,
			     why);
		o->out_fd = out->trace.fd;
		o->out_name = out->trace_path;
	} else {
		if (isatty(STDOUT_FILENO))
			errx(MT_EXIT_TRACER_FAILED,
			     "refusing to write a binary trace to a terminal; "
			     "pipe it to mt-encode or use -o FILE");
		o->child_stdout_to_stderr = true;
	}
	if (out->child_path) {
		if (mt_output_open(&out->child, user, out->child_path, why,
				   sizeof(why))) {
			warnx("--child-stdout: %s: %s", out->child_path, why);
			mt_output_remove_if_unused(&out->trace, user,
						   out->trace_path);
			exit(MT_EXIT_TRACER_FAILED);
		}
		o->child_stdout_fd = out->child.fd;
	}
	warn_if_shared(out->trace.fd >= 0 ? out->trace.fd : STDOUT_FILENO,
		       out->child.fd >= 0	   ? out->child.fd
		       : o->child_stdout_to_stderr ? STDERR_FILENO
						   : STDOUT_FILENO,
		       out->trace.fd >= 0 ? out->trace_path
					  : "standard output");
}

/* MT_SCAN=FILE:FILE...: after --scan's files, as if named with it (empty
 * entries skipped).  The copy the names point into in *list. */
static void add_env_scan(struct mt_tracer_opts *o, char **list)
{
	const char *env = getenv("MT_SCAN");
	char *save = NULL, *p;

	*list = NULL;
	if (!env || !*env)
		return;
	*list = strdup(env);
	if (!*list)
		err(MT_EXIT_TRACER_FAILED, "MT_SCAN");
	for (p = strtok_r(*list, ":", &save); p;
	     p = strtok_r(NULL, ":", &save)) {
		o->scan = realloc(o->scan, (o->nscan + 1) * sizeof(*o->scan));
		if (!o->scan)
			err(MT_EXIT_TRACER_FAILED, "MT_SCAN");
		o->scan[o->nscan++] = p;
	}
}

/*
 * The files a user names to be read, opened now as that user when acting
 * for one (mt_user_input): a file they may not read fails here, with their
 * errno, before anything runs.  The libraries that confine the probes to
 * the tree (PROBES FOR THE TREE ALONE) are copied and bound by their
 * names, as root, in a mount namespace where set-user-ID programs run: a
 * --libc of the user's is probed for every process instead.
 */
static void open_inputs(struct mt_tracer_opts *o, size_t nscan_opts)
{
	for (size_t i = 0; i < o->nscan; i++) {
		const char *via = mt_user_input(
		    i < nscan_opts ? "--scan" : "MT_SCAN", o->scan[i]);

		if (!via)
			exit(MT_EXIT_TRACER_FAILED);
		o->scan[i] = (char *)via;
	}
	if (o->libc_path && mt_user_acting()) {
		o->libc_path = mt_user_input("--libc", o->libc_path);
		if (!o->libc_path)
			exit(MT_EXIT_TRACER_FAILED);
		o->global_probes = true;
	}
}

/* What lib/ says (mt_log.h), on stderr: "mt-trace: [warning: ]TEXT". */
static void say(const struct mt_log_msg *m, void *arg)
{
	(void)arg;
	if (m->verbatim) {
		fputs(m->text, stderr);
		return;
	}
	fprintf(stderr, "mt-trace: %s%s\n",
		m->level == MT_LOG_WARNING ? "warning: " : "", m->text);
}

int main(int argc, char **argv)
{
	enum {
		OPT_CHILD_STDOUT = 256,
		OPT_RING,
		OPT_TRACK,
		OPT_NO_TRACK,
		OPT_LIBC,
		OPT_CONTROL,
		OPT_START_DISABLED,
		OPT_PHYSICAL,
		OPT_INTERVAL,
		OPT_SCAN,
		OPT_NO_STOP,
		OPT_NO_BACKPRESSURE,
		OPT_WAIT_DETACH,
		OPT_GLOBAL_PROBES,
		OPT_NO_KEEP_COPIES,
		OPT_STACKS,
		OPT_NO_STACKS,
		OPT_STACK_DEPTH,
		OPT_FAST,
		OPT_NO_FAST,
		OPT_VERSION,
	};
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"child-stdout", required_argument, NULL, OPT_CHILD_STDOUT},
	    {"ring-size", required_argument, NULL, OPT_RING},
	    {"track-allocators", optional_argument, NULL, OPT_TRACK},
	    {"no-track-allocators", no_argument, NULL, OPT_NO_TRACK},
	    {"libc", required_argument, NULL, OPT_LIBC},
	    {"control", required_argument, NULL, OPT_CONTROL},
	    {"start-disabled", no_argument, NULL, OPT_START_DISABLED},
	    {"physical", no_argument, NULL, OPT_PHYSICAL},
	    {"interval", required_argument, NULL, OPT_INTERVAL},
	    {"scan", required_argument, NULL, OPT_SCAN},
	    {"no-stop", no_argument, NULL, OPT_NO_STOP},
	    {"no-backpressure", no_argument, NULL, OPT_NO_BACKPRESSURE},
	    {"wait-detach", no_argument, NULL, OPT_WAIT_DETACH},
	    {"global-probes", no_argument, NULL, OPT_GLOBAL_PROBES},
	    /* obsolete: nothing is kept between sessions any more; still
	     * accepted, so that a script that asked for that works */
	    {"no-keep-copies", no_argument, NULL, OPT_NO_KEEP_COPIES},
	    {"stacks", optional_argument, NULL, OPT_STACKS},
	    {"no-stacks", no_argument, NULL, OPT_NO_STACKS},
	    {"stack-depth", required_argument, NULL, OPT_STACK_DEPTH},
	    {"fast", no_argument, NULL, OPT_FAST},
	    {"no-fast", no_argument, NULL, OPT_NO_FAST},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {0},
	};
	struct mt_tracer_opts o = {
	    .out_fd = STDOUT_FILENO,
	    .out_name = "stdout",
	    .child_stdout_fd = -1,
	    .ring_bytes = DEFAULT_RING_BYTES,
	    .track_allocators = true,
	    .rss = true,
	    .interval_ns = 10000000,
	    .stacks = DEFAULT_STACKS,
	    .stack_depth = MT_STACK_DEPTH_MAX,
	};
	struct outputs out = {0};
	struct mt_user user;
	char why[256], *env_scan;
	size_t nscan_opts;
	const char *env;
	int c, fast = -1; /* -1: neither --fast, --no-fast nor MT_FAST */

	/* 0-2 open (on /dev/null where they were closed): a descriptor of
	 * mt-trace's own must never be one of them, which its detacher and
	 * the command take as standard streams */
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF &&
		    open("/dev/null", O_RDWR) != fd)
			err(MT_EXIT_TRACER_FAILED, "/dev/null");
	env = getenv("MT_TRACK_ALLOCATORS");
	if (env && *env)
		o.track_allocators = parse_bool(env, "MT_TRACK_ALLOCATORS");
	env = getenv("MT_STACKS");
	if (env && *env)
		o.stacks = parse_bool(env, "MT_STACKS");
	env = getenv("MT_FAST");
	if (env && *env)
		fast = parse_bool(env, "MT_FAST");
	/* getopt's own messages name the tool as every other message does,
	 * not the path it was run by */
	mt_cli_name(argv);
	mt_log_set_sink(say, NULL);
	mt_log_set_oom_status(MT_EXIT_TRACER_FAILED);
	/* '+': stop at the first non-option, CMD's own options are CMD's */
	while ((c = getopt_long(argc, argv, "+o:vVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out.trace_path = value_of("-o");
			break;
		case OPT_CHILD_STDOUT:
			out.child_path = value_of("--child-stdout");
			break;
		case OPT_RING:
			o.ring_bytes = parse_ring_size(optarg);
			break;
		case OPT_TRACK:
			o.track_allocators =
			    bool_arg("--track-allocators", argc, argv);
			break;
		case OPT_NO_TRACK:
			o.track_allocators = false;
			break;
		case OPT_LIBC:
			o.libc_path = value_of("--libc");
			break;
		case OPT_CONTROL:
			o.control_path = value_of("--control");
			break;
		case OPT_SCAN:
			o.scan =
			    realloc(o.scan, (o.nscan + 1) * sizeof(*o.scan));
			if (!o.scan)
				err(MT_EXIT_TRACER_FAILED, "--scan");
			o.scan[o.nscan++] = (char *)value_of("--scan");
			break;
		case OPT_NO_STOP:
			o.no_stop = true;
			break;
		case OPT_NO_BACKPRESSURE:
			o.no_backpressure = true;
			break;
		case OPT_WAIT_DETACH:
			o.wait_detach = true;
			break;
		case OPT_GLOBAL_PROBES:
			o.global_probes = true;
			break;
		case OPT_NO_KEEP_COPIES:
			break;
		case OPT_STACKS:
			o.stacks = bool_arg("--stacks", argc, argv);
			break;
		case OPT_NO_STACKS:
			o.stacks = false;
			break;
		case OPT_STACK_DEPTH:
			o.stack_depth = parse_stack_depth(optarg);
			break;
		case OPT_FAST:
			fast = true;
			break;
		case OPT_NO_FAST:
			fast = false;
			break;
		case OPT_START_DISABLED:
			o.start_disabled = true;
			break;
		case OPT_PHYSICAL:
			o.physical = true;
			break;
		case OPT_INTERVAL:
			if (mt_parse_duration(optarg, &o.interval_ns) ||
			    o.interval_ns < 1000000)
				usage_error("--interval: '%s' is not a "
					    "duration of at least 1ms",
					    optarg);
			break;
		case 'v':
			o.verbose++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
		case OPT_VERSION:
			mt_print_version(stdout, "mt-trace");
			return 0;
		default:
			/* getopt said which option */
			mt_try_help(MT_EXIT_TRACER_FAILED);
		}
	}
	if (optind >= argc)
		usage_error("no command given (mt-trace [OPTIONS] -- CMD "
			    "[ARGS...])");
	if (o.start_disabled && !o.control_path)
		usage_error("--start-disabled needs --control FIFO: nothing "
			    "else can enable the events, and the trace would "
			    "hold none");
	o.argv = argv + optind;
	if (mt_user_from_env(&user, why, sizeof(why)))
		errx(MT_EXIT_TRACER_FAILED, "%s", why);
	o.user = &user;
	mt_user_act_for(&user);
	/* the recorder where it loads, by default: said or not, and only
	 * where there is one (--fast or MT_FAST=1 insist on it) */
	o.fast = fast > 0 || (fast < 0 && mt_fast_available());
	if (fast < 0 && !o.fast && o.track_allocators)
		warnx("libmt-preload.so not found beside mt-trace (../lib or "
		      "../lib/mt) nor in MT_PRELOAD: allocator calls recorded "
		      "by probes alone, as with --no-fast");
	/* before any file is made: a run that cannot trace leaves none */
	if (!mt_tracer_has_privileges())
		return MT_EXIT_TRACER_FAILED;
	nscan_opts = o.nscan;
	add_env_scan(&o, &env_scan);
	open_inputs(&o, nscan_opts);
	open_outputs(&out, &o, &user);
	c = mt_trace_run(&o);
	/* a run that failed before writing anything leaves no empty trace */
	if (c == MT_EXIT_TRACER_FAILED)
		mt_output_remove_if_unused(&out.trace, &user, out.trace_path);
	free(o.scan);
	free(env_scan);
	mt_user_free(&user);
	return c;
}
