/* SPDX-License-Identifier: MIT */
/*
 * input_buffer.c - the reader's bytes: one growable buffer filled by big
 * fread()s, so that the raw path is a memcpy per record and every error
 * can name the exact byte offset of what was wrong; or, for a regular
 * file read from its start, the whole file mapped, with a SIGBUS guard
 * that turns its shrinking under the reader into an error message.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "input_int.h"
#include "mt_decimal.h"
#include "mt_zstd.h"

int input_fail(struct mt_input *in, uint64_t off, const char *fmt, ...)
{
	char what[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (in->zstd) /* both offsets: the file's and the decoder's */
		snprintf(in->err, sizeof(in->err),
			 "%s: byte %" PRIu64
			 " of the decompressed stream (%" PRIu64
			 " compressed bytes read): %s",
			 in->name, off, mt_zreader_offset(in->zstd), what);
	else
		snprintf(in->err, sizeof(in->err), "%s: byte %" PRIu64 ": %s",
			 in->name, off, what);
	in->state = -1;
	in->meta.has_trailer = false;
	return -1;
}

bool input_grow(struct mt_input *in, size_t size)
{
	size_t cap = in->cap;
	unsigned char *buf;

	if (size <= cap || in->mapped) /* mapped: every byte is there */
		return true;
	while (cap < size)
		cap *= 2;
	buf = realloc(in->buf, cap);
	if (!buf) {
		input_fail(in, offset_now(in), "out of memory");
		return false;
	}
	in->buf = buf;
	in->cap = cap;
	return true;
}

/* The zstd reader's error as the input's; -1. */
static int zstd_failed(struct mt_input *in)
{
	/* the compressed file's offset, not ours */
	snprintf(in->err, sizeof(in->err), "%s: %s", in->name,
		 mt_zreader_error(in->zstd));
	in->state = -1;
	in->meta.has_trailer = false;
	return -1;
}

/* Up to cap bytes of the input, from the file or through the zstd
 * decoder; 0 at its end, -1 on an error (set). */
static ssize_t read_more(struct mt_input *in, unsigned char *dst, size_t cap)
{
	size_t n;

	if (in->zstd) {
		ssize_t got = mt_zreader_read(in->zstd, dst, cap);

		return got < 0 ? zstd_failed(in) : got;
	}
	n = fread(dst, 1, cap, in->f);
	if (n == 0 && ferror(in->f))
		return input_fail(in, in->buf_off + in->end, "read error: %s",
				  strerror(errno));
	return n;
}

int input_start_zstd(struct mt_input *in)
{
	size_t head = in->mapped ? 0 : avail(in);

	if (in->zstd || !mt_zstd_magic(cur(in), avail(in)))
		return 0;
	/* a mapped file was not read through f: the decoder reads it from
	 * its start; else it takes what the buffer holds, then f */
	in->zstd = mt_zreader_new(in->f, cur(in), head);
	if (!in->zstd)
		return input_fail(in, 0, "out of memory");
	if (in->mapped) {
		input_unmap_file(in);
		in->mapped = false;
		in->buf = NULL;
		in->cap = 0;
	}
	/* room for a whole frame of mt's after what is left unread: the
	 * decoder then writes it here in one call (zstd_io.c) */
	if (in->cap < ZBUF_BYTES) {
		unsigned char *buf = realloc(in->buf, ZBUF_BYTES);

		if (!buf)
			return input_fail(in, 0, "out of memory");
		in->buf = buf;
		in->cap = ZBUF_BYTES;
	}
	in->start = in->end = 0;
	in->buf_off = 0;
	in->eof = false;
	return 0;
}

/*
 * Compressed input decoded ahead in the reader's thread: its next block
 * becomes the buffer, the unread bytes copied in front of it, and the old
 * buffer goes back to be decoded into; the block itself is not copied.
 * 1 if taken (or the input ended), 0 if it cannot be (then the bytes are
 * copied), -1 on an error (set).
 */
static int take_block(struct mt_input *in)
{
	uint64_t end_off = in->buf_off + in->end; /* of the block's first */
	size_t start = in->start;
	ssize_t n =
	    mt_zreader_take(in->zstd, &in->buf, &in->cap, &start, avail(in));

	if (n == -2)
		return 0;
	if (n < 0)
		return zstd_failed(in);
	if (n == 0) {
		in->eof = true;
		return 1;
	}
	/* buf[0]'s offset: unsigned arithmetic, it may be "before" 0 */
	in->buf_off = end_off - (start + avail(in));
	in->end = start + avail(in) + n;
	in->start = start;
	return 1;
}

/* fill (input_int.h) when the bytes are not all buffered. */
bool input_refill(struct mt_input *in, size_t need)
{
	while (in->zstd && !in->eof && avail(in) < need) {
		int took = take_block(in);

		if (took < 0)
			return false;
		if (!took)
			break;
	}
	if (avail(in) >= need) /* a block taken: nothing to move */
		return true;
	if (in->start > 0) {
		memmove(in->buf, in->buf + in->start, avail(in));
		in->buf_off += in->start;
		in->end -= in->start;
		in->start = 0;
	}
	if (!input_grow(in, need))
		return false;
	while (avail(in) < need && !in->eof) {
		ssize_t n = read_more(in, in->buf + in->end, in->cap - in->end);

		if (n < 0)
			return false;
		in->end += n;
		in->eof = n == 0;
	}
	return avail(in) >= need;
}

bool input_str_room(struct mt_input *in, size_t len)
{
	if (len + 1 > in->str_cap) {
		char *p = realloc(in->str, len + 1);

		if (!p)
			return false;
		in->str = p;
		in->str_cap = len + 1;
	}
	return true;
}

bool input_keep_str(struct mt_input *in, const void *s, size_t len)
{
	if (!input_str_room(in, len))
		return false;
	memcpy(in->str, s, len);
	in->str[len] = '\0';
	return true;
}
/* ---- a mapped file that shrinks ---------------------------------------- */

/*
 * A mapped file cut shorter while it is read (another process truncating
 * it) makes the next touch of a page past its new end raise SIGBUS.  That
 * must be an error naming the file and the byte, like any other bad
 * input, not a crash: the handler finds the mapping the address is in,
 * says so with write(2) (all it may call) and exits 2.
 */
#define MAPPED_MAX 8

static struct {
	const unsigned char *base;
	size_t len;
	const char *name;
} mapped_files[MAPPED_MAX];

static size_t put_text(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return n;
}

static size_t put_u64(char *p, uint64_t v)
{
	unsigned n = mt_decimal_len(v);

	mt_put_decimal(p, v, n);
	return n;
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	const unsigned char *at = si->si_addr;
	char msg[512];
	size_t n = 0;

	(void)uctx;
	for (int i = 0; i < MAPPED_MAX; i++) {
		if (!mapped_files[i].base || at < mapped_files[i].base ||
		    at >= mapped_files[i].base + mapped_files[i].len)
			continue;
		n += put_text(msg + n, program_invocation_short_name);
		n += put_text(msg + n, ": ");
		if (strlen(mapped_files[i].name) < 256)
			n += put_text(msg + n, mapped_files[i].name);
		n += put_text(msg + n, ": byte ");
		n += put_u64(msg + n, (uint64_t)(at - mapped_files[i].base));
		n += put_text(msg + n, ": the file was cut shorter while "
				       "being read\n");
		if (write(STDERR_FILENO, msg, n) < 0)
			_exit(2);
		_exit(2);
	}
	/* not ours: the default action, as if no handler were there */
	signal(sig, SIG_DFL);
	raise(sig);
}

static bool guard_mapping(const void *base, size_t len, const char *name)
{
	static bool installed;
	struct sigaction sa = {.sa_sigaction = on_sigbus,
			       .sa_flags = SA_SIGINFO};

	if (!installed) {
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL))
			return false;
		installed = true;
	}
	for (int i = 0; i < MAPPED_MAX; i++) {
		if (!mapped_files[i].base) {
			mapped_files[i].name = name;
			mapped_files[i].len = len;
			mapped_files[i].base = base;
			return true;
		}
	}
	return false; /* too many at once: read this one instead */
}

static void unguard_mapping(const void *base)
{
	for (int i = 0; i < MAPPED_MAX; i++)
		if (mapped_files[i].base == base)
			mapped_files[i].base = NULL;
}

/* A regular file read from its start is mapped whole: its bytes are not
 * copied into the buffer, and the buffer never moves.  Anything else
 * (pipes, terminals, a stream already read into) is read with fread. */
void input_map_file(struct mt_input *in)
{
	int fd = fileno(in->f);
	struct stat st;
	void *m;

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX ||
	    ftello(in->f) != 0)
		return;
	m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return;
	if (!guard_mapping(m, st.st_size, in->name)) {
		munmap(m, st.st_size);
		return;
	}
	madvise(m, st.st_size, MADV_SEQUENTIAL);
	free(in->buf);
	in->buf = m;
	in->cap = in->end = st.st_size;
	in->eof = true;
	in->mapped = true;
}

/* A mapped file's pages count in the reader's memory once touched: let
 * go of those read, so that memory stays a few MiB whatever the length
 * of the trace (they stay in the page cache; a later touch reads them
 * again). */
void input_drop_read(struct mt_input *in)
{
	size_t upto = in->start & ~(DROP_STEP - 1);

	madvise(in->buf + in->dropped, upto - in->dropped, MADV_DONTNEED);
	in->dropped = upto;
}

void input_unmap_file(struct mt_input *in)
{
	unguard_mapping(in->buf);
	munmap(in->buf, in->cap);
}
