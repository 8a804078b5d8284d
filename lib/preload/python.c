// SPDX-License-Identifier: MIT
/*
 * python.c - the Python frames of the recorder's stacks (`mt-trace --fast
 * --stacks` in a CPython process; part of libmt-preload.so).
 *
 * The thread reads its own interpreter state, in its own address space,
 * while it is inside an allocator call: its thread state
 * (PyGILState_GetThisThreadState), the chain of evaluation loop calls
 * (tstate->cframe, _PyCFrame.previous), and in each the frames it runs
 * (cframe->current_frame, _PyInterpreterFrame.previous, up to the entry
 * frame of that call), each frame's code object and the instruction it
 * is at (prev_instr).  No other thread changes them while this one is in
 * the call; every pointer is checked to be a plausible object address
 * before it is read, and an object is taken for a code object, str or
 * bytes only when its type pointer is the interpreter's PyCode_Type,
 * PyUnicode_Type or PyBytes_Type (a debug build, whose objects are laid
 * out otherwise, gets no Python frames).
 *
 * The structures' offsets, for each version, are bpf/mt_python.h's
 * table (the BPF side's walk reads the same); an interpreter of another
 * version gives native frames only, said once on stderr.
 *
 * A code object is read when the thread first meets it: its name,
 * qualified name, file name and line table, sent once as a record of its
 * own (MT_EV_PYCODE) with an id unique in the whole trace (a counter in
 * the shared memory); frames carry the id and the instruction offset
 * (MT_PYFRAME).  Code objects can be freed before the trace is read.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mt_event.h"
#include "mt_fast.h"
#include "mt_python.h"
#include "own_mmap.h"
#include "python.h"

/* PyObject_VAR_HEAD's ob_size and the rest, shared (mt_python.h) */
#define VAR_SIZE	   MT_PY_VAR_SIZE
#define BYTES_DATA	   MT_PY_BYTES_DATA
#define STR_LENGTH	   MT_PY_STR_LENGTH
#define STR_STATE	   MT_PY_STR_STATE
#define STR_COMPACT(state) MT_PY_STR_COMPACT(state)
#define STR_ASCII(state)   MT_PY_STR_ASCII(state)
#define OWNED_BY_GENERATOR MT_PY_OWNED_BY_GENERATOR
#define OWNED_BY_CSTACK	   MT_PY_OWNED_BY_CSTACK

static const struct mt_py_layout *py;
static void *(*this_thread_state)(void);
/* the interpreter's type objects: an object is read as a code object,
 * str or bytes only if its ob_type says it is one */
static uintptr_t code_type, str_type, bytes_type;
#define OB_TYPE MT_PY_OB_TYPE
static uint32_t *code_ids; /* the shared counter (mt_fast_stacks) */

void python_start(const void *stacks, void *(*lookup)(const char *name))
{
	const unsigned long *version = lookup("Py_Version");
	void *get = lookup("PyGILState_GetThisThreadState");
	unsigned v;
	char msg[160];
	int len;

	const char *env = getenv("MT_PYTHON_FRAMES");

	if (!get || (env && strcmp(env, "0") == 0))
		return; /* no interpreter here, or frames not wanted */
	v = version ? (unsigned)(*version >> 16) : 0;
	code_type = (uintptr_t)lookup("PyCode_Type");
	str_type = (uintptr_t)lookup("PyUnicode_Type");
	bytes_type = (uintptr_t)lookup("PyBytes_Type");
	for (size_t i = 0; i < MT_PY_LAYOUTS; i++)
		if (mt_py_layouts[i].version == v)
			py = &mt_py_layouts[i];
	/* a debug build (Py_REF_DEBUG, and with it other layouts) */
	if (lookup("_Py_NegativeRefcount") || !code_type || !str_type ||
	    !bytes_type) {
		py = NULL;
		v = 0;
		len = snprintf(msg, sizeof(msg),
			       "mt-trace: a debug build of CPython: no Python "
			       "frames in its stacks\n");
		if (write(2, msg, len) < 0)
			return;
		return;
	}
	if (!py) {
		if (v)
			len = snprintf(msg, sizeof(msg),
				       "mt-trace: CPython %u.%u: no Python "
				       "frames in its stacks (3.11 and 3.12 "
				       "only)\n",
				       v >> 8, v & 0xff);
		else
			len = snprintf(msg, sizeof(msg),
				       "mt-trace: CPython before 3.11: no "
				       "Python frames in its stacks (3.11 and "
				       "3.12 only)\n");
		if (write(2, msg, len) < 0)
			return;
		return;
	}
	this_thread_state = (void *(*)(void))get;
	code_ids = (uint32_t *)&((struct mt_fast_stacks *)stacks)->code_ids;
}

/* An address an object of the interpreter's can be at. */
static inline bool plausible(uintptr_t p)
{
	return p >= 4096 && p < (1ull << 47) && !(p & 7);
}

static inline uintptr_t word_at(uintptr_t base, unsigned off)
{
	return *(const uintptr_t *)(base + off);
}

/* ---- code objects ------------------------------------------------------ */

#define CODE_SLOTS   1024 /* power of two; cleared when 3/4 full */
#define PENDING_MAX  8
#define NAME_MAX_LEN 512

struct code_slot {
	uintptr_t code; /* 0: empty */
	uintptr_t name, file;
	uint32_t id;
	int32_t first_line;
};

struct pending {
	uint32_t id, len;
	uint64_t extra;
	unsigned char payload[MT_PYCODE_PAYLOAD_MAX];
};

struct py_codes {
	unsigned nused, npending, next_sent;
	struct code_slot slot[CODE_SLOTS];
	struct pending pending[PENDING_MAX];
};

void python_codes_free(struct py_codes *codes)
{
	munmap(codes, sizeof(*codes));
}

/* A str object's text as UTF-8 (ASCII and compact ones; another gives
 * "?"), at most cap bytes. */
static size_t str_text(uintptr_t str, unsigned char *out, size_t cap)
{
	uint32_t state;
	intptr_t len;
	const unsigned char *data = NULL;

	if (!plausible(str) || word_at(str, OB_TYPE) != str_type)
		return 0;
	state = *(const uint32_t *)(str + STR_STATE);
	len = *(const intptr_t *)(str + STR_LENGTH);
	if (STR_COMPACT(state) && STR_ASCII(state)) {
		data = (const unsigned char *)(str + py->str_ascii_data);
	} else if (STR_COMPACT(state) &&
		   word_at(str, py->str_utf8)) { /* its UTF-8, cached */
		data = (const unsigned char *)word_at(str, py->str_utf8);
		len = *(const intptr_t *)(str + py->str_utf8_length);
	}
	if (!data || len < 0) {
		out[0] = '?';
		return 1;
	}
	if ((size_t)len > cap)
		len = cap;
	memcpy(out, data, len);
	return len;
}

static void put_u32(unsigned char *at, uint32_t v)
{
	memcpy(at, &v, sizeof(v)); /* little-endian hosts only */
}

/* The record of code object code (its id given): name, qualified name,
 * file name, line table. */
static void describe(struct pending *p, uintptr_t code, uint32_t id,
		     int32_t first_line)
{
	unsigned char *b = p->payload;
	size_t at = 16, n[4];
	uintptr_t table = word_at(code, py->co_linetable);
	intptr_t table_len;

	n[0] = str_text(word_at(code, py->co_name), b + at, NAME_MAX_LEN);
	at += n[0];
	n[1] = str_text(word_at(code, py->co_qualname), b + at, NAME_MAX_LEN);
	at += n[1];
	n[2] = str_text(word_at(code, py->co_filename), b + at, 2048);
	at += n[2];
	n[3] = 0;
	if (plausible(table) && word_at(table, OB_TYPE) == bytes_type) {
		table_len = *(const intptr_t *)(table + VAR_SIZE);
		if (table_len > 0) {
			n[3] = (size_t)table_len < sizeof(p->payload) - at
				   ? (size_t)table_len
				   : sizeof(p->payload) - at;
			memcpy(b + at, (const void *)(table + BYTES_DATA),
			       n[3]);
			at += n[3];
		}
	}
	for (int i = 0; i < 4; i++)
		put_u32(b + 4 * i, n[i]);
	p->id = id;
	p->len = at;
	p->extra = MT_FAST_STACK_PYCODE | (uint64_t)py->version << 16 |
		   (uint64_t)(uint32_t)first_line << 32;
}

static struct code_slot *code_slot(struct py_codes *c, uintptr_t code)
{
	uint32_t i = ((code * 0x9e3779b97f4a7c15ull) >> 54) & (CODE_SLOTS - 1);

	while (c->slot[i].code && c->slot[i].code != code)
		i = (i + 1) & (CODE_SLOTS - 1);
	return &c->slot[i];
}

/* The id of code object code, described (pending) if new; 0 when it
 * cannot be (no room for its record). */
static uint32_t code_id(struct py_codes *c, uintptr_t code)
{
	uintptr_t name = word_at(code, py->co_name);
	uintptr_t file = word_at(code, py->co_filename);
	int32_t first_line = *(const int32_t *)(code + py->co_firstlineno);
	struct code_slot *s = code_slot(c, code);
	uint32_t id;

	/* the same object, or one made where a freed one was */
	if (s->code == code && s->name == name && s->file == file &&
	    s->first_line == first_line)
		return s->id;
	if (c->npending == PENDING_MAX)
		return 0;
	id = __atomic_add_fetch(code_ids, 1, __ATOMIC_RELAXED);
	if (!id || id > MT_PYCODE_ID_MAX)
		return 0;
	if (!s->code) {
		if (c->nused >= CODE_SLOTS / 4 * 3) {
			memset(c->slot, 0, sizeof(c->slot));
			c->nused = 0;
			s = code_slot(c, code);
		}
		c->nused++;
	}
	*s = (struct code_slot){code, name, file, id, first_line};
	describe(&c->pending[c->npending++], code, id, first_line);
	return id;
}

int python_pending(struct py_codes *c, uint64_t *id, uint64_t *extra,
		   const void **payload, size_t *len)
{
	const struct pending *p;

	if (!c || c->next_sent >= c->npending) {
		if (c)
			c->npending = c->next_sent = 0;
		return 0;
	}
	p = &c->pending[c->next_sent];
	*id = p->id;
	*extra = p->extra;
	*payload = p->payload;
	*len = p->len;
	return 1;
}

void python_sent(struct py_codes *c)
{
	c->next_sent++;
}

/* ---- frames ------------------------------------------------------------ */

/* The frame's code object and instruction offset, or false when it is
 * not one to show: the interpreter's shim of a C call (3.12), or one not
 * yet started (CPython's _PyFrame_IsIncomplete). */
static bool frame_code(uintptr_t frame, uintptr_t *code, uint32_t *offset)
{
	unsigned owner = *(const uint8_t *)(frame + py->fr_owner);
	uintptr_t instr = word_at(frame, py->fr_prev_instr), first;

	*code = word_at(frame, py->fr_code);
	if (owner == OWNED_BY_CSTACK || !plausible(*code) ||
	    word_at(*code, OB_TYPE) != code_type)
		return false;
	first = *code + py->co_code;
	if (owner != OWNED_BY_GENERATOR &&
	    instr <
		first + 2 * (uintptr_t) *
			    (const int32_t *)(*code + py->co_firsttraceable))
		return false;
	*offset = instr >= first ? (instr - first) / 2 : 0;
	if (*offset > MT_PYFRAME_OFFSET_MAX)
		*offset = MT_PYFRAME_OFFSET_MAX;
	return true;
}

/* Is frame the first of its evaluation loop call (its last, walking
 * outwards)?  3.11 marks it; in 3.12 the frame after it is the call's
 * shim (its owner the C stack). */
static bool entry_frame(uintptr_t frame, uintptr_t next)
{
	if (py->fr_is_entry >= 0)
		return *(const uint8_t *)(frame + py->fr_is_entry);
	return !plausible(next) ||
	       *(const uint8_t *)(next + py->fr_owner) == OWNED_BY_CSTACK;
}

void python_frames(struct py_codes **codes, struct py_frames *out)
{
	uintptr_t ts, cf;
	unsigned guard = 0;

	out->ngroups = out->nframes = 0;
	if (!py || !(ts = (uintptr_t)this_thread_state()) || !plausible(ts))
		return;
	if (!*codes) {
		void *m = own_mmap(sizeof(struct py_codes));

		if (m == MAP_FAILED)
			return;
		*codes = m;
	}
	cf = word_at(ts, py->ts_cframe);
	while (plausible(cf) && out->ngroups < PY_GROUPS_MAX &&
	       guard++ < 4 * PY_FRAMES_MAX) {
		struct py_group *g = &out->group[out->ngroups];
		uintptr_t frame = word_at(cf, py->cf_current_frame);

		g->cframe = cf;
		g->first = out->nframes;
		while (plausible(frame) && out->nframes < PY_FRAMES_MAX &&
		       guard++ < 4 * PY_FRAMES_MAX) {
			uintptr_t code, next = word_at(frame, py->fr_previous);
			uint32_t offset;

			if (frame_code(frame, &code, &offset))
				out->frame[out->nframes++] =
				    MT_PYFRAME(code_id(*codes, code), offset);
			if (entry_frame(frame, next))
				break;
			frame = next;
		}
		g->n = out->nframes - g->first;
		if (g->n)
			out->ngroups++;
		cf = word_at(cf, py->cf_previous);
	}
}
