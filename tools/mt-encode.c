/* SPDX-License-Identifier: MIT */
/*
 * mt-encode - turn mt-trace's raw stream into the artifact: MessagePack in
 * zstd frames by default, plain MessagePack, JSON Lines, or CodSpeed
 * memtrack's own artifact.  Streams in constant memory.  See mt-encode(1).
 */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_artifact.h"
#include "mt_cli.h"
#include "mt_human.h"
#include "mt_input.h"
#include "mt_version.h"
#include "mt_zstd.h"

/* 0 ok; 2 unusable input, a usage error, or output that could not be
 * written (mt-encode has no gate, so never 1). */
enum { EXIT_FAIL = 2 };

enum compression { COMPRESS_DEFAULT, COMPRESS_ZSTD, COMPRESS_NONE };

struct env {
	bool jsonl;
	enum compression compression;
	int level;
	int threads; /* zstd's worker threads; 0: compress in the main one */
	size_t frame_bytes;
	const char *codspeed_dir; /* --codspeed DIR */
	const char *output;	  /* NULL: stdout */
	const char *input;	  /* NULL: stdin */
};

enum { OPT_CODSPEED = 256, OPT_LEVEL, OPT_FRAME_SIZE, OPT_THREADS };

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: mt-encode [-o FILE] [--uncompressed | --zstd] [--jsonl] "
	    "[FILE]\n"
	    "       mt-encode --codspeed DIR [FILE]\n"
	    "Reads mt-trace's raw stream (FILE, or stdin) and writes the "
	    "artifact: MessagePack\nmaps in independent zstd frames "
	    "(zstd -dc gives the plain MessagePack).\n"
	    "  -o, --output FILE    write to FILE instead of stdout\n"
	    "  -u, --uncompressed   plain MessagePack (or JSON Lines), no "
	    "zstd frames\n"
	    "  -z, --zstd           compress --jsonl output too (MessagePack "
	    "is by default)\n"
	    "  -j, --jsonl          JSON Lines (uncompressed unless --zstd)\n"
	    "      --codspeed DIR   write DIR/PID.MemtrackArtifact.msgpack "
	    "as CodSpeed's memtrack\n"
	    "                       does (PID: the traced root process) "
	    "instead of the artifact\n"
	    "      --level N        zstd level for every frame, 1 (fastest) to "
	    "19 (default:\n"
	    "                       %d, or a faster search in the frames where "
	    "it does better)\n"
	    "      --frame-size SIZE  uncompressed bytes per zstd frame "
	    "(default %u KiB)\n"
	    "      --threads N      compress in N worker threads of zstd's "
	    "own (default 0: in\n"
	    "                       mt-encode's, one per CPU besides the "
	    "one that encodes)\n"
	    "  -V, --version        print the version and exit\n"
	    "  -h, --help           this help\n"
	    "A binary artifact is never written to a terminal. Exit status: "
	    "0 ok, 2 unusable\ninput, usage error, or output not written. "
	    "See mt-encode(1), mt-format(5).\n",
	    MT_ZSTD_LEVEL, MT_ZSTD_FRAME_BYTES / 1024);
}

static void usage_error(const char *fmt, const char *arg)
{
	fputs("mt-encode: ", stderr);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	mt_try_help(EXIT_FAIL);
}

static int parse_level(const char *s)
{
	uint64_t n;

	if (mt_parse_count(s, &n) || n < 1 || n > 19)
		usage_error("--level: expected 1 to 19, got '%s'", s);
	return (int)n;
}

static int parse_threads(const char *s)
{
	uint64_t n;

	if (mt_parse_count(s, &n) || n > 64)
		usage_error("--threads: expected 0 to 64, got '%s'", s);
	return (int)n;
}

static size_t parse_frame_size(const char *s)
{
	uint64_t n;

	if (mt_parse_size(s, &n) || n < 4096 || n > (256u << 20))
		usage_error("--frame-size: expected 4KiB to 256MiB, got '%s'",
			    s);
	return n;
}

static void parse_args(int argc, char **argv, struct env *env)
{
	static const struct option opts[] = {
	    {"jsonl", no_argument, NULL, 'j'},
	    {"output", required_argument, NULL, 'o'},
	    {"uncompressed", no_argument, NULL, 'u'},
	    {"zstd", no_argument, NULL, 'z'},
	    {"codspeed", required_argument, NULL, OPT_CODSPEED},
	    {"level", required_argument, NULL, OPT_LEVEL},
	    {"frame-size", required_argument, NULL, OPT_FRAME_SIZE},
	    {"threads", required_argument, NULL, OPT_THREADS},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "jo:uzVh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env->jsonl = true;
			break;
		case 'o':
			env->output = optarg;
			break;
		case 'u':
			env->compression = COMPRESS_NONE;
			break;
		case 'z':
			env->compression = COMPRESS_ZSTD;
			break;
		case OPT_CODSPEED:
			env->codspeed_dir = optarg;
			break;
		case OPT_LEVEL:
			env->level = parse_level(optarg);
			break;
		case OPT_THREADS:
			env->threads = parse_threads(optarg);
			break;
		case OPT_FRAME_SIZE:
			env->frame_bytes = parse_frame_size(optarg);
			break;
		case 'V':
			mt_print_version(stdout, "mt-encode");
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		default: /* getopt said what */
			mt_try_help(EXIT_FAIL);
		}
	}
	if (argc - optind > 1)
		usage_error("one input at most, got a second: '%s'",
			    argv[optind + 1]);
	if (optind < argc)
		env->input = argv[optind];
	if (env->codspeed_dir &&
	    (env->output || env->jsonl || env->compression != COMPRESS_DEFAULT))
		usage_error("%s: --codspeed writes its own file, always zstd "
			    "MessagePack (no -o, --jsonl, --uncompressed or "
			    "--zstd)",
			    env->codspeed_dir);
}

/* MessagePack is kept compressed unless asked; JSON Lines are text for
 * jq and eyes, compressed only if asked. */
static bool compressed(const struct env *env)
{
	if (env->compression == COMPRESS_DEFAULT)
		return !env->jsonl;
	return env->compression == COMPRESS_ZSTD;
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

/* The progress line (mt_cli.h) is looked at every PROGRESS_EVERY
 * records: a clock read per 64 Ki events costs nothing next to encoding
 * them. */
#define PROGRESS_EVERY (1u << 16)

/* Copies every record; returns 0 at the trailer, -1 if the input broke. */
static int encode(struct mt_input *in, struct mt_artifact *a,
		  struct mt_progress *p)
{
	struct mt_record rec;
	uint64_t n = 0;
	int ret;

	while ((ret = mt_input_next(in, &rec)) > 0) {
		if (mt_artifact_record(a, &rec))
			return 0; /* output error: reported by the caller */
		if (++n % PROGRESS_EVERY == 0)
			mt_progress_update(p, n, mt_input_offset(in));
	}
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

static bool reads_stdin(const struct env *env)
{
	return !env->input || !strcmp(env->input, "-");
}

/* ---- outputs ---------------------------------------------------------- */

struct output {
	int fd;
	char *path;	/* NULL: stdout */
	char *tmp_path; /* --codspeed: written here, renamed at the end */
};

static void open_fd(struct output *out)
{
	const char *path = out->tmp_path ? out->tmp_path : out->path;

	out->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (out->fd < 0)
		err(EXIT_FAIL, "%s", path);
}

/* DIR/PID.MemtrackArtifact.msgpack, CodSpeed's name for a process's
 * artifact, made in DIR (created if missing) under a temporary name: a
 * CodSpeed artifact cannot say it is incomplete, so it only appears
 * whole. */
static void open_codspeed(struct output *out, const char *dir,
			  const struct mt_meta *meta)
{
	if (mkdir(dir, 0777) && errno != EEXIST)
		err(EXIT_FAIL, "%s", dir);
	if (asprintf(&out->path, "%s/%" PRIu32 ".MemtrackArtifact.msgpack", dir,
		     meta->root_pid) < 0 ||
	    asprintf(&out->tmp_path, "%s/.%" PRIu32 ".MemtrackArtifact.tmp",
		     dir, meta->root_pid) < 0)
		errx(EXIT_FAIL, "out of memory");
	open_fd(out);
}

static void open_output(struct output *out, const struct env *env,
			const struct mt_meta *meta)
{
	*out = (struct output){.fd = STDOUT_FILENO};
	if (env->codspeed_dir)
		open_codspeed(out, env->codspeed_dir, meta);
	else if (env->output && !(out->path = strdup(env->output)))
		errx(EXIT_FAIL, "out of memory");
	else if (env->output)
		open_fd(out);
}

/* Closes the output; a CodSpeed artifact takes its name only if whole. */
static int close_output(struct output *out, int werr, bool whole)
{
	if (out->fd != STDOUT_FILENO && close(out->fd) && !werr)
		werr = -errno;
	if (out->tmp_path) {
		if (!werr && whole && rename(out->tmp_path, out->path))
			werr = -errno;
		if (werr || !whole)
			unlink(out->tmp_path);
		if (!werr && !whole)
			warnx("%s: not written: CodSpeed's format cannot say "
			      "a trace is incomplete",
			      out->path);
	}
	/* a reader that went away (`mt-encode run.raw | head`) is exit 2
	 * without a message, as in every mt tool (mt_cli.h); any other
	 * write error is named */
	if (werr && werr != -EPIPE) {
		errno = -werr;
		warn("%s", out->path ? out->path : "<stdout>");
	}
	free(out->path);
	free(out->tmp_path);
	return werr;
}

/* What CodSpeed's format could not hold, said once, with counts. */
static void codspeed_note(const struct mt_artifact *a, const char *path)
{
	char line[1024], count[32];
	size_t n = 0;

	for (unsigned kind = 0; kind < MT_EV_KIND_MAX; kind++) {
		uint64_t c = mt_artifact_not_held(a, kind);

		if (!c || kind == MT_EV_MREMAP || kind == MT_EV_LOST)
			continue;
		mt_fmt_count(count, sizeof(count), c);
		if (kind == MT_EV_STACK_REF)
			n += snprintf(line + n, sizeof(line) - n,
				      "%sthe call stacks of %s events",
				      n ? ", " : "", count);
		else
			n += snprintf(line + n, sizeof(line) - n, "%s%s %s",
				      n ? ", " : "", count,
				      mt_kind_name(kind) ? mt_kind_name(kind)
							 : "?");
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
	}
	if (n)
		warnx("%s: left out what CodSpeed's format cannot hold: %s",
		      path, line);
	if (mt_artifact_not_held(a, MT_EV_MREMAP)) {
		mt_fmt_count(count, sizeof(count),
			     mt_artifact_not_held(a, MT_EV_MREMAP));
		warnx("%s: %s Mremap written as the Munmap + Mmap they amount "
		      "to",
		      path, count);
	}
	if (mt_artifact_lost(a)) {
		mt_fmt_count(count, sizeof(count), mt_artifact_lost(a));
		warnx("%s: %s event%s lost by the tracer, not in it "
		      "(CodSpeed's format has no record of them)",
		      path, count, mt_plural(mt_artifact_lost(a)));
	}
}

static struct mt_artifact *new_artifact(const struct env *env, int fd)
{
	enum mt_artifact_style style = env->codspeed_dir ? MT_ARTIFACT_CODSPEED
				       : env->jsonl	 ? MT_ARTIFACT_JSONL
							 : MT_ARTIFACT_MSGPACK;
	struct mt_artifact *a = mt_artifact_new(fd, style);

	if (!a || (compressed(env) &&
		   mt_artifact_compress(a, env->level, env->threads,
					env->frame_bytes)))
		errx(EXIT_FAIL, "out of memory");
	return a;
}

/* Refuses what a terminal cannot show, says what a terminal waits for. */
static void check_terminals(const struct env *env)
{
	if (!env->output && !env->codspeed_dir &&
	    (!env->jsonl || compressed(env)) && isatty(STDOUT_FILENO))
		errx(
		    EXIT_FAIL,
		    "not writing a binary artifact to a terminal: give -o FILE "
		    "or redirect stdout (--jsonl -u writes text)");
	if (reads_stdin(env) && isatty(STDIN_FILENO))
		warnx("reading mt-trace's raw stream from the terminal "
		      "(stdin)...  Pipe it in: mt-trace -- CMD | mt-encode");
}

int main(int argc, char **argv)
{
	struct env env = {.level = MT_ZSTD_LEVEL_AUTO,
			  .frame_bytes = MT_ZSTD_FRAME_BYTES};
	struct mt_progress progress;
	struct output out;
	char msg[1024];
	struct mt_input *in;
	struct mt_artifact *a;
	const char *name;
	int status = 0, werr;

	mt_cli_name(argv);
	parse_args(argc, argv, &env);
	check_terminals(&env);
	/* a closed pipe is a write error (EPIPE), exit 2, not a signal */
	signal(SIGPIPE, SIG_IGN);
	if (input_is_pipe(env.input)) {
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
	}
	mt_progress_init(&progress, "mt-encode");
	in = mt_input_open(env.input, msg, sizeof(msg));
	if (!in)
		errx(EXIT_FAIL, "%s", msg);
	name = reads_stdin(&env) ? "<stdin>" : env.input;
	if (mt_input_format(in) != MT_FMT_RAW)
		errx(EXIT_FAIL,
		     "%s: not a raw stream but %s (mt-encode reads "
		     "what mt-trace writes)",
		     name, mt_format_name(mt_input_format(in)));
	open_output(&out, &env, mt_input_meta(in));
	a = new_artifact(&env, out.fd);
	mt_artifact_header(a, mt_input_meta(in));
	if (encode(in, a, &progress) < 0) {
		mt_progress_end(&progress);
		warnx("%s", mt_input_error(in));
		status = EXIT_FAIL;
		mt_artifact_trailer(a, mt_input_meta(in), false,
				    error_in_stream(in, name));
	} else {
		mt_progress_end(&progress);
		mt_artifact_trailer(a, mt_input_meta(in), true, NULL);
	}
	if (env.codspeed_dir && !status)
		codspeed_note(a, out.path);
	werr = mt_artifact_close(a);
	if (close_output(&out, werr, !status))
		status = EXIT_FAIL;
	mt_input_close(in);
	return status;
}
