/* SPDX-License-Identifier: MIT */
/*
 * input_fields.c - the maps of the artifact, JSON Lines and memtrack
 * streams, once decoded into struct fields (whatever the encoding): their
 * keys, and the one reading of them into event records, the Header and
 * the Trailer, with the checks and error messages every map format
 * shares.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_int.h"
#include "mt_allocators.h"

const char *const key_names[K_MAX] = {
    [K_TYPE] = "type",
    [K_PID] = "pid",
    [K_TID] = "tid",
    [K_TIMESTAMP] = "timestamp",
    [K_ADDR] = "addr",
    [K_SIZE] = "size",
    [K_OLD_ADDR] = "old_addr",
    [K_OLD_SIZE] = "old_size",
    [K_ALIGNMENT] = "alignment",
    [K_PROT] = "prot",
    [K_FLAGS] = "flags",
    [K_PPID] = "ppid",
    [K_PATH] = "path",
    [K_NAME] = "name",
    [K_EXIT_CODE] = "exit_code",
    [K_SIGNAL] = "signal",
    [K_STATUS] = "status",
    [K_MEMBER] = "member",
    [K_PSS] = "pss",
    [K_PSS_ANON] = "pss_anon",
    [K_PSS_FILE] = "pss_file",
    [K_PSS_SHMEM] = "pss_shmem",
    [K_COUNT] = "count",
    [K_KIND] = "kind",
    [K_STACK] = "stack",
    [K_FRAMES] = "frames",
    [K_TRUNCATED] = "truncated",
    [K_FILE] = "file",
    [K_BUILD_ID] = "build_id",
    [K_OFFSET] = "offset",
    [K_CODE] = "code",
    [K_FIRST_LINE] = "first_line",
    [K_PYTHON] = "python",
    [K_QUALNAME] = "qualname",
    [K_LINETABLE] = "linetable",
    [K_TRACER] = "tracer",
    [K_ARGV] = "argv",
    [K_ARGV_BYTES] = "argv_bytes",
    [K_FORMAT] = "format",
    [K_VERSION] = "version",
    [K_COMMAND] = "command",
    [K_HOST] = "host",
    [K_CLOCK] = "clock",
    [K_PAGE_SIZE] = "page_size",
    [K_ROOT_PID] = "root_pid",
    [K_START_TIME] = "start_time",
    [K_START_MONOTONIC] = "start_monotonic",
    [K_ALLOCATORS_TRACKED] = "allocators_tracked",
    [K_SYSCALLS_TRACKED] = "syscalls_tracked",
    [K_RSS_TRACKED] = "rss_tracked",
    [K_PHYSICAL_TRACKED] = "physical_tracked",
    [K_STACKS_TRACKED] = "stacks_tracked",
    [K_ALLOCATORS_RECORDER] = "allocators_recorder",
    [K_COMPLETE] = "complete",
    [K_END_MONOTONIC] = "end_monotonic",
    [K_EVENTS] = "events",
    [K_LOST_EVENTS] = "lost_events",
    [K_BATCHES] = "batches",
    [K_ERROR] = "error",
};

const struct value absent; /* type V_NONE */

/* Keys are found through a small open-addressing table, built once at
 * start-up: a map's keys are looked up for every event. */
uint8_t key_lengths[K_MAX];
uint8_t key_slots[KEY_SLOTS];

__attribute__((constructor)) static void key_table(void)
{
	for (int k = 0; k < K_MAX; k++) {
		unsigned h;

		key_lengths[k] = strlen(key_names[k]);
		h = key_hash(key_names[k], key_lengths[k]);
		while (key_slots[h])
			h = (h + 1) & (KEY_SLOTS - 1);
		key_slots[h] = k + 1;
	}
}

/* Reads key k as an unsigned integer into *out (left alone if absent). */
static int get_uint(struct mt_input *in, uint64_t off, const struct fields *f,
		    enum key k, uint64_t *out)
{
	const struct value *v = val(f, k);

	if (v->type == V_NONE)
		return 0;
	if (v->type != V_UINT)
		return input_fail(in, off,
				  "\"%s\": expected an unsigned integer",
				  key_names[k]);
	*out = v->u;
	return 0;
}

/* The same into a field of struct mt_event (__u64 is not uint64_t). */
static int get_ev(struct mt_input *in, uint64_t off, const struct fields *f,
		  enum key k, __u64 *out)
{
	uint64_t u = *out;

	if (get_uint(in, off, f, k, &u))
		return -1;
	*out = u;
	return 0;
}

static int get_u32f(struct mt_input *in, uint64_t off, const struct fields *f,
		    enum key k, uint32_t *out)
{
	uint64_t u = *out;

	if (get_uint(in, off, f, k, &u))
		return -1;
	if (u > UINT32_MAX)
		return input_fail(in, off,
				  "\"%s\": %" PRIu64 " is out of range",
				  key_names[k], u);
	*out = u;
	return 0;
}

static int get_bool(struct mt_input *in, uint64_t off, const struct fields *f,
		    enum key k, bool *out)
{
	const struct value *v = val(f, k);

	if (v->type == V_NONE)
		return 0;
	if (v->type != V_BOOL)
		return input_fail(in, off, "\"%s\": expected true or false",
				  key_names[k]);
	*out = v->b;
	return 0;
}

static int get_str(struct mt_input *in, uint64_t off, const struct fields *f,
		   enum key k, const char **s, size_t *len)
{
	const struct value *v = val(f, k);

	if (v->type == V_NONE)
		return 0;
	if (v->type != V_STR)
		return input_fail(in, off, "\"%s\": expected a string",
				  key_names[k]);
	*s = v->s;
	*len = v->len;
	return 0;
}

static int require(struct mt_input *in, uint64_t off, const struct fields *f,
		   const char *type, enum key k)
{
	if (has(f, k))
		return 0;
	return input_fail(in, off, "%s: missing \"%s\"", type, key_names[k]);
}

const char *const rss_members[4] = {"file", "anon", "swap", "shmem"};

static int fields_rss_member(struct mt_input *in, uint64_t off,
			     const struct fields *f, struct mt_event *ev)
{
	const struct value *v = val(f, K_MEMBER);

	if (v->type == V_UINT && v->u <= UINT32_MAX) {
		ev->aux = v->u;
		return 0;
	}
	for (unsigned i = 0; i < 4; i++) {
		if (str_is(v, rss_members[i])) {
			ev->aux = i;
			return 0;
		}
	}
	return input_fail(in, off,
			  "Rss: \"member\" is not file, anon, swap or shmem");
}

static int fields_exit_status(struct mt_input *in, uint64_t off,
			      const struct fields *f, struct mt_event *ev)
{
	uint64_t code = 0, sig = 0, status = 0;

	if (get_uint(in, off, f, K_EXIT_CODE, &code) ||
	    get_uint(in, off, f, K_SIGNAL, &sig) ||
	    get_uint(in, off, f, K_STATUS, &status))
		return -1;
	if (has(f, K_EXIT_CODE))
		ev->aux = (code & 0xff) << 8;
	else if (has(f, K_SIGNAL))
		ev->aux = sig & 0x7f;
	else
		ev->aux = status;
	return 0;
}

/*
 * An Exec map back into its record: the path, and with "argv" a NUL and
 * each argument with its NUL (mt_exec_args); "argv_bytes", written when
 * the arguments were cut, is the whole area's length.
 */
static int fields_exec(struct mt_input *in, uint64_t off,
		       const struct fields *f, struct mt_record *rec)
{
	const struct value *argv = val(f, K_ARGV);
	const char *path = NULL, *s;
	size_t path_len = 0, total, len;
	uint64_t whole = 0;
	char *p;

	if (get_str(in, off, f, K_PATH, &path, &path_len) ||
	    get_uint(in, off, f, K_ARGV_BYTES, &whole))
		return -1;
	if (argv->type != V_NONE && (argv->type != V_ARRAY || !argv->str_at))
		return input_fail(in, off,
				  "Exec: \"argv\": expected an array of "
				  "strings");
	total = path_len;
	for (size_t i = 0; argv->type == V_ARRAY && i < argv->n; i++) {
		if (!argv->str_at(argv->arr, i, &s, &len))
			return input_fail(in, off,
					  "Exec: \"argv\": element %zu is not "
					  "a string",
					  i);
		total += len + 1 + (i == 0);
		if (total > MAX_PAYLOAD)
			return input_fail(in, off,
					  "Exec: path and \"argv\" longer "
					  "than %u bytes",
					  MAX_PAYLOAD);
	}
	if (!input_str_room(in, total))
		return input_fail(in, off, "out of memory");
	p = in->str;
	memcpy(p, path ? path : "", path_len);
	p += path_len;
	for (size_t i = 0; argv->type == V_ARRAY && i < argv->n; i++) {
		argv->str_at(argv->arr, i, &s, &len);
		if (i == 0)
			*p++ = '\0';
		memcpy(p, s, len);
		p += len;
		*p++ = '\0';
	}
	in->str[path_len] = '\0';
	in->str[total] = '\0';
	rec->str = in->str;
	rec->str_len = path_len;
	rec->ev.aux = total;
	rec->ev.size = total > path_len ? total - path_len - 1 : 0;
	/* "argv_bytes" says they were cut, and how long they were */
	rec->ev.old_size = has(f, K_ARGV_BYTES) ? whole : rec->ev.size;
	rec->ev.flags = has(f, K_ARGV_BYTES) ? MT_EXEC_ARGS_CUT : 0;
	return 0;
}

/* The per-kind keys of an event map, back into an event record. */
static int fields_kind_values(struct mt_input *in, uint64_t off,
			      const struct fields *f, struct mt_record *rec)
{
	struct mt_event *ev = &rec->ev;
	uint64_t u;
	const char *s = NULL;
	size_t len = 0;

	switch (ev->kind) {
	case MT_EV_ALIGNED_ALLOC:
		return get_ev(in, off, f, K_ALIGNMENT, &ev->old_size);
	case MT_EV_MMAP:
		u = 0;
		if (get_uint(in, off, f, K_PROT, &u))
			return -1;
		ev->flags = u;
		return get_u32f(in, off, f, K_FLAGS, &ev->aux);
	case MT_EV_FORK:
		return get_ev(in, off, f, K_PPID, &ev->old_addr);
	case MT_EV_ALLOCATOR:
		if (get_str(in, off, f, K_KIND, &s, &len))
			return -1;
		ev->flags = mt_alloc_family_from_name(s ? s : "", len);
		/* its path is a payload like a marker's name */
		__attribute__((fallthrough));
	case MT_EV_MARKER:
		if (get_str(in, off, f,
			    ev->kind == MT_EV_MARKER ? K_NAME : K_PATH, &s,
			    &len))
			return -1;
		if (!input_keep_str(in, s ? s : "", len))
			return input_fail(in, off, "out of memory");
		rec->str = in->str;
		rec->str_len = len;
		ev->aux = len;
		return 0;
	case MT_EV_EXEC:
		return fields_exec(in, off, f, rec);
	case MT_EV_EXIT:
		return fields_exit_status(in, off, f, ev);
	case MT_EV_RSS: {
		bool tracer = false;

		if (require(in, off, f, "Rss", K_MEMBER) ||
		    get_bool(in, off, f, K_TRACER, &tracer))
			return -1;
		ev->flags = tracer ? MT_RSS_TRACER : 0;
		return fields_rss_member(in, off, f, ev);
	}
	case MT_EV_PSS:
		return get_ev(in, off, f, K_PSS, &ev->size) ||
		       get_ev(in, off, f, K_PSS_ANON, &ev->addr) ||
		       get_ev(in, off, f, K_PSS_FILE, &ev->old_addr) ||
		       get_ev(in, off, f, K_PSS_SHMEM, &ev->old_size);
	case MT_EV_LOST:
		return get_ev(in, off, f, K_COUNT, &ev->size);
	case MT_EV_CODE_MAP:
		return get_ev(in, off, f, K_FILE, &ev->old_size) ||
		       get_ev(in, off, f, K_OFFSET, &ev->old_addr);
	default:
		return 0;
	}
}

/* A Stack map's frames: [[file, address], ...], innermost first. */
static int fields_frames(struct mt_input *in, uint64_t off,
			 const struct value *v, struct mt_record *rec)
{
	if (v->type != V_ARRAY || v->n == 0 || !v->pair_at)
		return input_fail(in, off,
				  "Stack: \"frames\": expected a non-empty "
				  "array");
	if (v->n > in->frames_cap) {
		uint64_t *frames = realloc(in->frames, v->n * sizeof(*frames));

		if (!frames)
			return input_fail(in, off, "out of memory");
		in->frames = frames;
		in->frames_cap = v->n;
	}
	for (size_t i = 0; i < v->n; i++) {
		uint64_t file, addr;

		if (!v->pair_at(v->arr, i, &file, &addr) ||
		    file > MT_FRAME_FILE_PYTHON || addr > MT_FRAME_ADDR_MASK)
			return input_fail(in, off,
					  "Stack: \"frames\": element %zu is "
					  "not [file, address]",
					  i);
		in->frames[i] = MT_FRAME(file, addr);
	}
	rec->frames = in->frames;
	rec->ev.size = v->n;
	return 0;
}

static int fields_stack(struct mt_input *in, uint64_t off,
			const struct fields *f, struct mt_record *rec)
{
	bool truncated = false;

	if (require(in, off, f, "Stack", K_STACK) ||
	    require(in, off, f, "Stack", K_FRAMES) ||
	    get_ev(in, off, f, K_STACK, &rec->ev.addr) ||
	    get_bool(in, off, f, K_TRUNCATED, &truncated))
		return -1;
	if (rec->ev.addr != in->stacks_seen + 1)
		return input_fail(
		    in, off, "Stack: id %" PRIu64 " (expected %" PRIu64 ")",
		    (uint64_t)rec->ev.addr, in->stacks_seen + 1);
	if (rec->ev.addr > UINT32_MAX)
		return input_fail(
		    in, off, "Stack: more than %" PRIu32 " stacks", UINT32_MAX);
	if (fields_frames(in, off, val(f, K_FRAMES), rec))
		return -1;
	rec->ev.flags = truncated ? MT_STACK_TRUNCATED : 0;
	in->stacks_seen++;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int fields_code_file(struct mt_input *in, uint64_t off,
			    const struct fields *f, struct mt_record *rec)
{
	const char *path = NULL, *hex = NULL;
	size_t path_len = 0, hex_len = 0;

	if (require(in, off, f, "CodeFile", K_FILE) ||
	    require(in, off, f, "CodeFile", K_PATH) ||
	    get_ev(in, off, f, K_FILE, &rec->ev.addr) ||
	    get_str(in, off, f, K_PATH, &path, &path_len) ||
	    get_str(in, off, f, K_BUILD_ID, &hex, &hex_len))
		return -1;
	if (rec->ev.addr == 0 || rec->ev.addr > MT_FRAME_FILE_MAX)
		return input_fail(in, off,
				  "CodeFile: \"file\" %" PRIu64
				  " is not from 1 to %u",
				  (uint64_t)rec->ev.addr, MT_FRAME_FILE_MAX);
	if (hex_len % 2 || hex_len / 2 > sizeof(in->build_id))
		return input_fail(in, off,
				  "CodeFile: \"build_id\": expected up to %zu "
				  "bytes in hex",
				  sizeof(in->build_id));
	for (size_t i = 0; i < hex_len / 2; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return input_fail(in, off,
					  "CodeFile: \"build_id\": not "
					  "lowercase hex");
		in->build_id[i] = hi << 4 | lo;
	}
	if (!input_keep_str(in, path, path_len))
		return input_fail(in, off, "out of memory");
	rec->str = in->str;
	rec->str_len = path_len;
	rec->build_id = hex_len ? in->build_id : NULL;
	rec->ev.flags = hex_len / 2;
	return 0;
}

/* A PyCode map back into its record: the payload (four lengths, then
 * name, qualified name, file name and line table) made again. */
static int fields_pycode(struct mt_input *in, uint64_t off,
			 const struct fields *f, struct mt_record *rec)
{
	const char *part[4] = {NULL}, *python = NULL;
	size_t len[4] = {0}, python_len = 0, total;
	unsigned major, minor;
	char version[16];
	uint32_t n[4];
	char *payload;

	if (require(in, off, f, "PyCode", K_CODE) ||
	    require(in, off, f, "PyCode", K_PYTHON) ||
	    get_ev(in, off, f, K_CODE, &rec->ev.addr) ||
	    get_ev(in, off, f, K_FIRST_LINE, &rec->ev.size) ||
	    get_str(in, off, f, K_PYTHON, &python, &python_len) ||
	    get_str(in, off, f, K_NAME, &part[0], &len[0]) ||
	    get_str(in, off, f, K_QUALNAME, &part[1], &len[1]) ||
	    get_str(in, off, f, K_PATH, &part[2], &len[2]) ||
	    get_str(in, off, f, K_LINETABLE, &part[3], &len[3]))
		return -1;
	snprintf(version, sizeof(version), "%.*s",
		 (int)(python_len < 15 ? python_len : 15), python);
	if (rec->ev.addr == 0 || rec->ev.addr > MT_PYCODE_ID_MAX ||
	    sscanf(version, "%u.%u", &major, &minor) != 2 || major > 255 ||
	    minor > 255 || len[3] % 2)
		return input_fail(in, off,
				  "PyCode: expected a \"code\" from 1 to %u, "
				  "\"python\" as MAJOR.MINOR and a "
				  "\"linetable\" in hex",
				  MT_PYCODE_ID_MAX);
	rec->ev.flags = major << 8 | minor;
	total = 16 + len[0] + len[1] + len[2] + len[3] / 2;
	payload = malloc(total);
	if (!payload)
		return input_fail(in, off, "out of memory");
	for (int i = 0; i < 4; i++)
		n[i] = i < 3 ? len[i] : len[3] / 2;
	memcpy(payload, n, sizeof(n));
	memcpy(payload + 16, part[0], len[0]);
	memcpy(payload + 16 + len[0], part[1], len[1]);
	memcpy(payload + 16 + len[0] + len[1], part[2], len[2]);
	for (size_t i = 0; i < len[3] / 2; i++) {
		int hi = hex_digit(part[3][2 * i]);
		int lo = hex_digit(part[3][2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(payload);
			return input_fail(in, off,
					  "PyCode: \"linetable\": not "
					  "lowercase hex");
		}
		payload[16 + len[0] + len[1] + len[2] + i] = hi << 4 | lo;
	}
	if (!input_keep_str(in, payload, total)) {
		free(payload);
		return input_fail(in, off, "out of memory");
	}
	free(payload);
	rec->str = in->str;
	rec->str_len = total;
	rec->ev.aux = total;
	return 0;
}

/* An event's "stack": a Stack map before it described it. */
static int fields_stack_ref(struct mt_input *in, uint64_t off,
			    const struct fields *f, struct mt_record *rec)
{
	uint64_t stack = 0;

	if (get_uint(in, off, f, K_STACK, &stack))
		return -1;
	if (stack == 0 || stack > in->stacks_seen)
		return input_fail(in, off,
				  "%s: \"stack\" %" PRIu64
				  " names no Stack before it",
				  mt_kind_name(rec->ev.kind), stack);
	rec->stack = stack; /* stacks_seen stays below 2^32 */
	return 0;
}

int fields_to_record(struct mt_input *in, uint64_t off, const struct fields *f,
		     unsigned kind, struct mt_record *rec)
{
	struct mt_event *ev = &rec->ev;
	uint32_t pid = 0, tid = 0;

	memset(rec, 0, sizeof(*rec));
	ev->kind = kind;
	if (kind == MT_EV_STACK || kind == MT_EV_CODE_FILE ||
	    kind == MT_EV_PYCODE) {
		/* what the ids mean: their pid, tid and time are only when
		 * they were first used */
		if ((kind == MT_EV_STACK ? fields_stack(in, off, f, rec)
		     : kind == MT_EV_CODE_FILE
			 ? fields_code_file(in, off, f, rec)
			 : fields_pycode(in, off, f, rec)) ||
		    get_u32f(in, off, f, K_PID, &pid) ||
		    get_u32f(in, off, f, K_TID, &tid) ||
		    get_ev(in, off, f, K_TIMESTAMP, &ev->timestamp))
			return -1;
		ev->pid = pid;
		ev->tid = tid;
		return 0;
	}
	if (has(f, K_STACK) && fields_stack_ref(in, off, f, rec))
		return -1;
	if (require(in, off, f, mt_kind_name(kind), K_PID) ||
	    require(in, off, f, mt_kind_name(kind), K_TIMESTAMP) ||
	    get_u32f(in, off, f, K_PID, &pid) ||
	    get_u32f(in, off, f, K_TID, &tid) ||
	    get_ev(in, off, f, K_TIMESTAMP, &ev->timestamp) ||
	    get_ev(in, off, f, K_ADDR, &ev->addr) ||
	    get_ev(in, off, f, K_SIZE, &ev->size) ||
	    get_ev(in, off, f, K_OLD_ADDR, &ev->old_addr) ||
	    get_ev(in, off, f, K_OLD_SIZE, &ev->old_size))
		return -1;
	ev->pid = pid;
	ev->tid = tid;
	return fields_kind_values(in, off, f, rec);
}

static int header_command(struct mt_input *in, uint64_t off,
			  const struct value *v)
{
	if (v->type == V_NONE)
		return 0;
	if (v->type != V_ARRAY)
		return input_fail(in, off,
				  "Header: \"command\": expected an array");
	in->meta.argv = calloc(v->n + 1, sizeof(char *));
	if (!in->meta.argv)
		return input_fail(in, off, "out of memory");
	for (size_t i = 0; i < v->n; i++) {
		const char *s;
		size_t len;

		if (!v->str_at(v->arr, i, &s, &len))
			return input_fail(
			    in, off,
			    "Header: \"command\": element %zu is not "
			    "a string",
			    i);
		in->meta.argv[i] = strndup(s, len);
		if (!in->meta.argv[i])
			return input_fail(in, off, "out of memory");
		in->meta.argc = i + 1;
	}
	return 0;
}

static int header_clock(struct mt_input *in, uint64_t off,
			const struct value *v)
{
	static const struct {
		const char *name;
		uint32_t id;
	} clocks[] = {{"CLOCK_REALTIME", 0},
		      {"CLOCK_MONOTONIC", 1},
		      {"CLOCK_MONOTONIC_RAW", 4},
		      {"CLOCK_BOOTTIME", 7}};

	if (v->type == V_NONE)
		return 0;
	for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
		if (str_is(v, clocks[i].name)) {
			in->meta.clock_id = clocks[i].id;
			return 0;
		}
	}
	return input_fail(in, off, "Header: unknown \"clock\"");
}

static int header_flag(struct mt_input *in, uint64_t off,
		       const struct fields *f, enum key k, uint32_t bit)
{
	bool b = false;

	if (get_bool(in, off, f, k, &b))
		return -1;
	if (b)
		in->meta.flags |= bit;
	return 0;
}

int fields_to_header(struct mt_input *in, uint64_t off, const struct fields *f)
{
	struct mt_meta *m = &in->meta;
	uint64_t version = 0;
	const char *host = NULL;
	size_t host_len = 0;

	if (require(in, off, f, "Header", K_VERSION) ||
	    get_uint(in, off, f, K_VERSION, &version))
		return -1;
	if (version != 1)
		return input_fail(
		    in, off,
		    "Header: unsupported artifact version %" PRIu64
		    " (this reader knows 1)",
		    version);
	m->version = version;
	if (get_str(in, off, f, K_HOST, &host, &host_len) ||
	    get_u32f(in, off, f, K_PAGE_SIZE, &m->page_size) ||
	    get_u32f(in, off, f, K_ROOT_PID, &m->root_pid) ||
	    get_uint(in, off, f, K_START_TIME, &m->start_realtime_ns) ||
	    get_uint(in, off, f, K_START_MONOTONIC, &m->start_monotonic_ns) ||
	    header_clock(in, off, val(f, K_CLOCK)) ||
	    header_flag(in, off, f, K_ALLOCATORS_TRACKED, MT_HDR_ALLOCATORS) ||
	    header_flag(in, off, f, K_SYSCALLS_TRACKED, MT_HDR_SYSCALLS) ||
	    header_flag(in, off, f, K_RSS_TRACKED, MT_HDR_RSS) ||
	    header_flag(in, off, f, K_PHYSICAL_TRACKED, MT_HDR_PHYSICAL) ||
	    header_flag(in, off, f, K_STACKS_TRACKED, MT_HDR_STACKS) ||
	    header_flag(in, off, f, K_ALLOCATORS_RECORDER, MT_HDR_RECORDER) ||
	    header_command(in, off, val(f, K_COMMAND)))
		return -1;
	/* 0: not known (the writer's page_size for a Header that had none) */
	if (m->page_size && (m->page_size < MT_PAGE_SIZE_MIN ||
			     m->page_size > MT_PAGE_SIZE_MAX ||
			     (m->page_size & (m->page_size - 1))))
		return input_fail(in, off,
				  "Header: \"page_size\" %" PRIu32
				  " is not a power of two from %u to %u",
				  m->page_size, MT_PAGE_SIZE_MIN,
				  MT_PAGE_SIZE_MAX);
	m->host = strndup(host ? host : "", host_len);
	if (!m->host)
		return input_fail(in, off, "out of memory");
	return 0;
}

/* The trailer of an artifact: checks it against what was read. */
static int fields_to_trailer(struct mt_input *in, uint64_t off,
			     const struct fields *f)
{
	struct mt_meta *m = &in->meta;
	bool complete = false;
	uint64_t code = 0, sig = 0;
	const char *error = NULL;
	size_t error_len = 0;

	if (require(in, off, f, "Trailer", K_COMPLETE) ||
	    require(in, off, f, "Trailer", K_EVENTS) ||
	    get_bool(in, off, f, K_COMPLETE, &complete) ||
	    get_uint(in, off, f, K_EXIT_CODE, &code) ||
	    get_uint(in, off, f, K_SIGNAL, &sig) ||
	    get_uint(in, off, f, K_END_MONOTONIC, &m->end_monotonic_ns) ||
	    get_uint(in, off, f, K_EVENTS, &m->events) ||
	    get_uint(in, off, f, K_LOST_EVENTS, &m->lost) ||
	    get_uint(in, off, f, K_BATCHES, &m->batches) ||
	    get_str(in, off, f, K_ERROR, &error, &error_len))
		return -1;
	m->exit_kind = MT_EXIT_UNKNOWN;
	if (has(f, K_EXIT_CODE)) {
		m->exit_kind = MT_EXIT_CODE;
		m->exit_value = code;
	} else if (has(f, K_SIGNAL)) {
		m->exit_kind = MT_EXIT_SIGNAL;
		m->exit_value = sig;
	}
	if (!complete)
		return input_fail(in, off, "the artifact is incomplete: %.*s",
				  (int)(error_len > 512 ? 512 : error_len),
				  error ? error : "(no reason given)");
	if (m->events != in->maps_seen)
		return input_fail(in, off,
				  "trailer says %" PRIu64
				  " events, artifact had %" PRIu64,
				  m->events, in->maps_seen);
	if (m->lost != in->map_lost)
		return input_fail(in, off,
				  "trailer says %" PRIu64
				  " lost events, Lost records had %" PRIu64,
				  m->lost, in->map_lost);
	return 0;
}

int fields_role(struct mt_input *in, uint64_t off, const struct fields *f,
		enum object_role *role, unsigned *kind)
{
	const struct value *t = val(f, K_TYPE);

	if (t->type != V_STR)
		return input_fail(in, off, "map without a string \"type\"");
	if (str_is(t, "Header")) {
		*role = OBJ_HEADER;
		return 0;
	}
	if (str_is(t, "Trailer")) {
		*role = OBJ_TRAILER;
		return 0;
	}
	*role = OBJ_EVENT;
	*kind = mt_kind_from_name(t->s, t->len);
	if (*kind == MT_EV_NONE)
		return input_fail(in, off, "unknown event type \"%.*s\"",
				  (int)(t->len > 64 ? 64 : t->len), t->s);
	return 0;
}

int object_next(struct mt_input *in, uint64_t off, const struct fields *f,
		struct mt_record *rec)
{
	enum object_role role;
	unsigned kind = MT_EV_NONE;

	if (fields_role(in, off, f, &role, &kind))
		return -1;
	if (role == OBJ_HEADER)
		return input_fail(in, off, "unexpected second Header");
	if (role == OBJ_TRAILER) {
		if (in->fmt == MT_FMT_MEMTRACK)
			return input_fail(in, off,
					  "Trailer in a memtrack stream");
		if (fields_to_trailer(in, off, f))
			return -1;
		return 0;
	}
	if (fields_to_record(in, off, f, kind, rec))
		return -1;
	in->maps_seen++;
	if (kind == MT_EV_LOST)
		in->map_lost += rec->ev.size;
	return 1;
}
