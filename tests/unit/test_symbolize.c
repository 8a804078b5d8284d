// SPDX-License-Identifier: MIT
/*
 * test_symbolize.c - the offline symbolizer against binutils' addr2line
 * (-f -i: function names with inlined frames, file:line) on the fixtures
 * built -O2 -g with inlining (tests/fixtures/sym/inlined.c); and finding
 * the DWARF elsewhere: a --debug-dir copy by build-id once the binary is
 * gone, .gnu_debuglink, a sysroot; never a file with another build-id.
 *
 * Build-ids come from readelf, symbol ranges from nm:
 * tools outside the project.  Needs MT_FIXTURES (tests/run sets it).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_symbolize.h"
#include "formats_test.h"

/* a truncated path or frame list can only make a check fail */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define MAX_FRAMES 8

/* One location as addr2line -f -i prints it. */
struct truth {
	uint64_t addr;
	unsigned n;
	char function[MAX_FRAMES][64];
	char where[MAX_FRAMES][64]; /* "basename:line", "?" for none */
};

static char fixtures[4096];

static FILE *run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static FILE *run(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return popen(cmd, "r");
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* The build-id readelf -n reports, into hex. */
static void build_id_of(const char *path, char *hex, size_t len)
{
	FILE *p = run("readelf -n '%s' | sed -n 's/.*Build ID: //p'", path);

	hex[0] = '\0';
	if (p && fgets(hex, (int)len, p))
		hex[strcspn(hex, "\n")] = '\0';
	if (p)
		pclose(p);
}

/* Declare path with the build-id readelf gave (hex). */
static void add_file(struct mt_symbolizer *s, uint32_t id, const char *path,
		     const char *hex)
{
	uint8_t bytes[64];
	size_t n = strlen(hex) / 2;

	for (size_t i = 0; i < n && i < sizeof(bytes); i++)
		sscanf(hex + 2 * i, "%2hhx", &bytes[i]);
	CHECK_INT(mt_sym_add_file(s, id, path, bytes, n), 0);
}

/* Start and size of a function, from nm -S. */
static int symbol_range(const char *path, const char *name, uint64_t *start,
			uint64_t *size)
{
	FILE *p = run("nm -S '%s'", path);
	char line[512], sym[256], type;
	int found = -1;

	while (p && fgets(line, sizeof(line), p))
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %255s", start,
			   size, &type, sym) == 4 &&
		    !strcmp(sym, name)) {
			found = 0;
			break;
		}
	if (p)
		pclose(p);
	return found;
}

/* "/a/b/c.c:19 (discriminator 3)" -> "c.c:19"; "??:0", "x:?" -> "?" */
static void normalize_where(const char *in, char *out, size_t len)
{
	const char *base = strrchr(in, '/');
	char *sp;

	snprintf(out, len, "%s", base ? base + 1 : in);
	out[strcspn(out, " \n")] = '\0';
	if (!strncmp(out, "??", 2) ||
	    ((sp = strrchr(out, ':')) &&
	     (!strcmp(sp, ":?") || !strcmp(sp, ":0"))))
		snprintf(out, len, "?");
}

/* addr2line -a -f -i for every address of [start, start + size). */
static size_t addr2line(const char *path, uint64_t start, uint64_t size,
			bool demangle, struct truth *t)
{
	char list[64], line[1024];
	size_t n = 0;
	FILE *f, *p;

	snprintf(list, sizeof(list), "/tmp/test_symbolize.%d", getpid());
	f = fopen(list, "w");
	for (uint64_t a = start; f && a < start + size; a++)
		fprintf(f, "0x%" PRIx64 "\n", a);
	if (f)
		fclose(f);
	p = run("addr2line -a -f -i %s -e '%s' < %s", demangle ? "-C" : "",
		path, list);
	while (p && fgets(line, sizeof(line), p)) {
		if (!strncmp(line, "0x", 2)) {
			t[n].addr = strtoull(line, NULL, 16);
			t[n++].n = 0;
			continue;
		}
		struct truth *cur = &t[n - 1];

		if (n == 0 || cur->n == MAX_FRAMES)
			continue;
		snprintf(cur->function[cur->n], 64, "%.*s",
			 (int)strcspn(line, "\n"), line);
		if (!fgets(line, sizeof(line), p))
			break;
		normalize_where(line, cur->where[cur->n], 64);
		cur->n++;
	}
	if (p)
		pclose(p);
	unlink(list);
	return n;
}

static void where_of(const struct mt_sym_frame *fr, char *out, size_t len)
{
	if (!fr->file || !fr->line) {
		snprintf(out, len, "?");
		return;
	}
	const char *base = strrchr(fr->file, '/');

	snprintf(out, len, "%s:%u", base ? base + 1 : fr->file, fr->line);
}

/* Every address of func in the fixture, looked up as a return address, must
 * give addr2line's frames: names and lines, innermost first. */
static void check_against_addr2line(const char *fixture, const char *func,
				    bool demangle)
{
	char path[4200], id[200], where[128];
	struct mt_symbolizer *s = mt_sym_new(NULL);
	uint64_t start, size;
	static struct truth t[4096];
	size_t n, mismatches = 0, inlined_seen = 0;

	snprintf(path, sizeof(path), "%s/%s", fixtures, fixture);
	build_id_of(path, id, sizeof(id));
	CHECK(strlen(id) == 40);
	add_file(s, 1, path, id);
	CHECK_INT(symbol_range(path, func, &start, &size), 0);
	CHECK(size > 0 && size < 4096);
	n = addr2line(path, start, size, demangle, t);
	CHECK_INT(n, size);
	for (size_t i = 0; i < n; i++) {
		const struct mt_sym_loc *loc;
		bool same;

		/* as a return address: the byte after */
		loc = mt_sym_lookup(s, 1, t[i].addr + 1);
		same = loc->nframes == t[i].n;
		for (unsigned k = 0; same && k < t[i].n; k++) {
			where_of(&loc->frames[k], where, sizeof(where));
			same = !strcmp(loc->frames[k].function,
				       t[i].function[k]) &&
			       !strcmp(where, t[i].where[k]) &&
			       loc->frames[k].resolved &&
			       loc->frames[k].inlined == (k + 1 < t[i].n);
		}
		inlined_seen += t[i].n > 1;
		if (!same && mismatches++ < 3) {
			fprintf(stderr, "%s 0x%" PRIx64 ": got", fixture,
				t[i].addr);
			for (unsigned k = 0; k < loc->nframes; k++) {
				where_of(&loc->frames[k], where, sizeof(where));
				fprintf(stderr, " %s@%s",
					loc->frames[k].function, where);
			}
			fprintf(stderr, ", addr2line:");
			for (unsigned k = 0; k < t[i].n; k++)
				fprintf(stderr, " %s@%s", t[i].function[k],
					t[i].where[k]);
			fputc('\n', stderr);
		}
	}
	CHECK_INT(mismatches, 0);
	if (!strcmp(func, "make_table"))
		CHECK(inlined_seen > 0); /* the fixture inlines, as meant */
	/* each location once: asking again gives the cached answer */
	CHECK_INT(mt_sym_locations(s), n);
	CHECK(mt_sym_lookup(s, 1, start + 1) == mt_sym_lookup(s, 1, start + 1));
	CHECK_INT(mt_sym_locations(s), n);
	mt_sym_free(s);
}

/* The frames at the fixture's malloc call, as "a@x.c:1 b@x.c:2 ...". */
static void frames_text(const struct mt_sym_loc *loc, char *out, size_t len)
{
	size_t at = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < loc->nframes && at < len; k++) {
		char where[128];

		where_of(&loc->frames[k], where, sizeof(where));
		at += (size_t)snprintf(out + at, len - at, "%s%s@%s",
				       k ? " " : "", loc->frames[k].function,
				       where);
	}
}

/* The return address of make_table's call to malloc. */
static uint64_t malloc_return(const char *path)
{
	FILE *p =
	    run("objdump -d --no-show-raw-insn '%s' | "
		"sed -n '/<make_table>:/,/^$/p' | "
		"sed -n 's/^ *\\([0-9a-f]*\\):.*call.*<malloc@plt>.*/\\1/p'",
		path);
	char line[64] = "";
	uint64_t addr = 0;

	if (p && fgets(line, sizeof(line), p))
		addr = strtoull(line, NULL, 16);
	if (p)
		pclose(p);
	CHECK(addr != 0);
	return addr + 5; /* call rel32 */
}

static const char *expected_chain =
    "new_cell@inlined.c:19 fill_row@inlined.c:24 "
    "make_table@inlined.c:30";

/* Symbolize path (as traced, with build-id id) at addr with the given
 * debug dirs and sysroot; the frames as text into out.  Returns whether
 * the file was found. */
static bool lookup_text(const char *path, const char *id, uint64_t addr,
			const char *debug_dir, const char *sysroot, char *out,
			size_t len)
{
	const char *dirs[] = {debug_dir};
	struct mt_sym_opts opts = {dirs, debug_dir ? 1 : 0, sysroot};
	struct mt_symbolizer *s = mt_sym_new(&opts);
	bool found;

	add_file(s, 7, path, id);
	found = mt_sym_file_found(s, 7);
	frames_text(mt_sym_lookup(s, 7, addr), out, len);
	mt_sym_free(s);
	return found;
}

static void check_offline(void)
{
	char dir[] = "/tmp/test_symbolize.XXXXXX", bin[4200], id[200],
	     other_id[200], orig[4200], other[4200], text[1024], want[1024];
	uint64_t call;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	snprintf(orig, sizeof(orig), "%s/sym/inlined", fixtures);
	snprintf(other, sizeof(other), "%s/sym/inlined_otherid", fixtures);
	build_id_of(orig, id, sizeof(id));
	build_id_of(other, other_id, sizeof(other_id));
	CHECK(strcmp(id, other_id) != 0);
	call = malloc_return(orig);

	/* in place: the chain, inlined frames included */
	CHECK(lookup_text(orig, id, call, NULL, NULL, text, sizeof(text)));
	CHECK_STR(text, expected_chain);

	/* the binary moved away, its debug file kept by build-id */
	snprintf(bin, sizeof(bin), "%s/bin/inlined", dir);
	CHECK_INT(
	    sh("mkdir -p %s/bin %s/dbg/.build-id/%.2s && "
	       "objcopy --only-keep-debug %s %s/dbg/.build-id/%.2s/%s.debug",
	       dir, dir, id, orig, dir, id, id + 2),
	    0);
	CHECK(!lookup_text(bin, id, call, NULL, NULL, text, sizeof(text)));
	snprintf(want, sizeof(want), "%s+0x%" PRIx64 "@?", bin, call);
	CHECK_STR(text, want);
	snprintf(want, sizeof(want), "%s/dbg", dir);
	CHECK(lookup_text(bin, id, call, want, NULL, text, sizeof(text)));
	CHECK_STR(text, expected_chain);

	/* a file with another build-id at the traced path is not used, with
	 * or without debug dirs: the debug file by build-id is */
	CHECK(!lookup_text(other, id, call, NULL, NULL, text, sizeof(text)));
	snprintf(want, sizeof(want), "%s+0x%" PRIx64 "@?", other, call);
	CHECK_STR(text, want);
	snprintf(want, sizeof(want), "%s/dbg", dir);
	CHECK(lookup_text(other, id, call, want, NULL, text, sizeof(text)));
	CHECK_STR(text, expected_chain);
	/* nor a debug file of another build-id under the right name */
	CHECK_INT(sh("mkdir -p %s/bad/.build-id/%.2s && objcopy "
		     "--only-keep-debug %s %s/bad/.build-id/%.2s/%s.debug",
		     dir, id, other, dir, id, id + 2),
		  0);
	snprintf(want, sizeof(want), "%s/bad", dir);
	CHECK(!lookup_text(bin, id, call, want, NULL, text, sizeof(text)));
	snprintf(want, sizeof(want), "%s+0x%" PRIx64 "@?", bin, call);
	CHECK_STR(text, want);

	/* stripped, DWARF found through .gnu_debuglink */
	snprintf(bin, sizeof(bin), "%s/link/inlined", dir);
	CHECK_INT(sh("mkdir -p %s/link/.debug && objcopy --only-keep-debug "
		     "%s %s/link/.debug/inlined.dbg && objcopy --strip-debug "
		     "--add-gnu-debuglink=%s/link/.debug/inlined.dbg %s %s",
		     dir, orig, dir, dir, orig, bin),
		  0);
	CHECK(lookup_text(bin, id, call, NULL, NULL, text, sizeof(text)));
	CHECK_STR(text, expected_chain);
	/* without it, symbols only: the function, no inlined frames */
	CHECK_INT(sh("rm %s/link/.debug/inlined.dbg", dir), 0);
	CHECK(lookup_text(bin, id, call, NULL, NULL, text, sizeof(text)));
	CHECK_STR(text, "make_table@?");

	/* a saved trace on another machine: the files under a sysroot */
	CHECK_INT(sh("mkdir -p %s/root/usr/bin && cp %s %s/root/usr/bin/", dir,
		     orig, dir),
		  0);
	CHECK(!lookup_text("/usr/bin/inlined", id, call, NULL, NULL, text,
			   sizeof(text)));
	snprintf(want, sizeof(want), "%s/root", dir);
	CHECK(lookup_text("/usr/bin/inlined", id, call, NULL, want, text,
			  sizeof(text)));
	CHECK_STR(text, expected_chain);

	/* a FIFO named by a (corrupt) trace: refused, never waited on */
	snprintf(bin, sizeof(bin), "%s/fifo", dir);
	CHECK_INT(sh("mkfifo %s", bin), 0);
	CHECK(!lookup_text(bin, "", call, NULL, NULL, text, sizeof(text)));
	snprintf(want, sizeof(want), "%s+0x%" PRIx64 "@?", bin, call);
	CHECK_STR(text, want);

	/* no file at all: the address */
	{
		struct mt_symbolizer *s = mt_sym_new(NULL);

		frames_text(mt_sym_lookup(s, 0, 0x7f00001234), text,
			    sizeof(text));
		CHECK_STR(text, "0x7f00001234@?");
		CHECK(!mt_sym_lookup(s, 0, 0x7f00001234)->frames[0].resolved);
		uint8_t long_id[65] = {0};

		CHECK_INT(mt_sym_add_file(s, 3, "/x", long_id, 65), -1);
		CHECK_INT(mt_sym_add_file(s, 0, "/x", long_id, 20), -1);
		mt_sym_free(s);
	}
	sh("rm -rf %s", dir);
}

int main(void)
{
	const char *env = getenv("MT_FIXTURES");

	snprintf(fixtures, sizeof(fixtures), "%s",
		 env ? env : "build/fixtures");
	check_against_addr2line("sym/inlined", "make_table", false);
	check_against_addr2line("sym/inlined", "main", false);
	check_against_addr2line("sym/inlined_exec", "make_table", false);
	check_against_addr2line("sym/inlined_exec", "main", false);
	/* C++: names demangled as addr2line -C prints them */
	check_against_addr2line("alloc/cxx_operators", "_ZL10expect_newPvm",
				true);
	check_against_addr2line("alloc/cxx_operators", "main", true);
	check_offline();
	return test_summary("test_symbolize");
}
