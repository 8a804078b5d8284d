/* SPDX-License-Identifier: MIT */
/*
 * mt-encode - turn mt-trace's raw stream into the MessagePack artifact (or
 * JSON Lines).  Streams in constant memory.  See mt-encode(1).
 */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_artifact.h"
#include "mt_input.h"

enum { EXIT_OUTPUT = 1, EXIT_INPUT = 2 };

struct env {
	bool jsonl;
	const char *output; /* NULL: stdout */
	const char *input;  /* NULL: stdin */
};

static void usage(FILE *f)
{
	fprintf(f, "usage: mt-encode [--jsonl] [-o FILE] [FILE]\n"
		   "  Reads an mt raw stream (stdin by default) and writes the "
		   "artifact.\n"
		   "  -j, --jsonl      JSON Lines instead of MessagePack\n"
		   "  -o, --output F   write to F instead of stdout\n"
		   "  -h, --help       this help\n");
}

static void parse_args(int argc, char **argv, struct env *env)
{
	static const struct option opts[] = {
	    {"jsonl", no_argument, NULL, 'j'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env->jsonl = true;
			break;
		case 'o':
			env->output = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(EXIT_INPUT);
		}
	}
	if (argc - optind > 1) {
		usage(stderr);
		exit(EXIT_INPUT);
	}
	if (optind < argc)
		env->input = argv[optind];
}

/* The input's message without its leading "NAME: ": the artifact outlives
 * the name the input had. */
static const char *error_in_stream(struct mt_input *in, const char *name)
{
	const char *msg = mt_input_error(in);
	size_t len = strlen(name);

	if (!strncmp(msg, name, len) && !strncmp(msg + len, ": ", 2))
		return msg + len + 2;
	return msg;
}

/* Copies every record; returns 0 at the trailer, -1 if the input broke. */
static int encode(struct mt_input *in, struct mt_artifact *a)
{
	struct mt_record rec;
	int ret;

	while ((ret = mt_input_next(in, &rec)) > 0)
		if (mt_artifact_record(a, &rec))
			return 0; /* output error: reported by the caller */
	return ret;
}

/* Ctrl-C (or a hangup) in a terminal reaches every process of `mt-trace
 * -- CMD | mt-encode`; mt-trace then finishes the trace, and mt-encode must
 * live to encode its end.  Reading a pipe, it stops when the writer does. */
static bool input_is_pipe(const char *path)
{
	struct stat st;

	if (path && strcmp(path, "-"))
		return !stat(path, &st) && S_ISFIFO(st.st_mode);
	return !fstat(STDIN_FILENO, &st) && S_ISFIFO(st.st_mode);
}

static int open_output(const char *path)
{
	int fd;

	if (!path)
		return STDOUT_FILENO;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		err(EXIT_OUTPUT, "%s", path);
	return fd;
}

int main(int argc, char **argv)
{
	struct env env = {0};
	char msg[1024];
	struct mt_input *in;
	struct mt_artifact *a;
	const char *name;
	int status = 0, fd, werr;

	parse_args(argc, argv, &env);
	/* a closed pipe is a write error (EPIPE) we report, not a signal */
	signal(SIGPIPE, SIG_IGN);
	if (input_is_pipe(env.input)) {
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
	}
	in = mt_input_open(env.input, msg, sizeof(msg));
	if (!in)
		errx(EXIT_INPUT, "%s", msg);
	name = env.input && strcmp(env.input, "-") ? env.input : "<stdin>";
	if (mt_input_format(in) != MT_FMT_RAW)
		errx(EXIT_INPUT,
		     "%s: not a raw stream but %s (mt-encode reads "
		     "what mt-trace writes)",
		     name, mt_format_name(mt_input_format(in)));
	fd = open_output(env.output);
	a = mt_artifact_new(fd, env.jsonl ? MT_ARTIFACT_JSONL
					  : MT_ARTIFACT_MSGPACK);
	if (!a)
		errx(EXIT_OUTPUT, "out of memory");
	mt_artifact_header(a, mt_input_meta(in));
	if (encode(in, a) < 0) {
		warnx("%s", mt_input_error(in));
		status = EXIT_INPUT;
		mt_artifact_trailer(a, mt_input_meta(in), false,
				    error_in_stream(in, name));
	} else {
		mt_artifact_trailer(a, mt_input_meta(in), true, NULL);
	}
	werr = mt_artifact_close(a);
	if (!werr && fd != STDOUT_FILENO && close(fd))
		werr = -errno;
	if (werr) {
		errno = -werr;
		warn("%s", env.output ? env.output : "<stdout>");
		status = EXIT_OUTPUT;
	}
	mt_input_close(in);
	return status;
}
