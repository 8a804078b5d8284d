// SPDX-License-Identifier: MIT
/*
 * tracer_python.c - the Python frames of the BPF side's stacks (mt-trace
 * --no-fast --stacks, and processes the recorder is not in): CPython 3.11
 * and 3.12.
 *
 * At a code file's inspection: a file that defines _PyRuntime and
 * Py_Version of a version bpf/mt_python.h knows is an interpreter's; the
 * BPF side is told where its runtime is (struct mt_stack_file) and reads,
 * with each stack of a process running it, the code object address and
 * instruction pointer of each Python frame (bpf/mt_stack.bpf.h,
 * python_stack), sent once per distinct list.
 *
 * Each code object is read by the BPF side the first time a process's
 * stack has a frame of it (send_pycode: while the frame holds it; a
 * module's body is freed once imported, a process may be gone by the
 * drain): its name, qualified name, file name and line table, checked to
 * be of the interpreter's types, made here into the PyCode record of a
 * new code id (the recorders' count when they run, so ids stay unique in
 * the stream).  Should that record be lost (a full ring), the object is
 * read here from the process (process_vm_readv), if it still exists:
 * that memory is the traced command's, so every object is taken for a
 * code object, str or bytes only when its type's tp_name says so, every
 * length is bounded, and a read that fails drops the frame.
 *
 * When an event's stack is first written, the Python frames go just
 * inside the native frames of the evaluation loop calls that ran them
 * (_PyEval_EvalFrameDefault, found by its symbol): the n-th such frame
 * from the innermost ran the n-th group of Python frames, as each call
 * pushes one _PyCFrame (CPython's ceval.c) -- the same shape as the
 * recorder's walk, so readers merge both alike.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <bpf/bpf.h>

#include "mt_elf.h"
#include "mt_log.h"
#include "mt_python.h"
#include "mt_stack.h"
#include "mt_xalloc.h"
#include "tracer_python.h"

#define NAME_MAX_LEN 512
#define PATH_MAX_LEN 2048

/* An interpreter's file: its frames' file id, its evaluation loop. */
struct py_file {
	uint32_t id;
	uint64_t eval_lo, eval_hi; /* ELF addresses [lo, hi) */
};

/* A code object of a process, read. */
struct py_code {
	pid_t pid; /* 0: empty slot */
	uint64_t addr;
	uint32_t id; /* 0: not a code object */
	uint32_t co_code;
	int32_t firsttraceable;
};

/* A PyCode record not written yet. */
struct py_pending {
	uint32_t id; /* 0: empty slot */
	uint32_t len;
	uint16_t version;
	int32_t first_line;
	unsigned char *payload; /* NULL once written */
};

/* A list of Python frames, translated: MT_PYFRAME values by group. */
struct py_stack {
	uint64_t key;
	uint16_t n, ngroups;
	uint8_t group_len[MT_PY_FRAMES_MAX];
	uint64_t frames[MT_PY_FRAMES_MAX];
};

/* The type objects of a process found to be code, str and bytes. */
struct py_types {
	pid_t pid;
	uint64_t code, str, bytes;
};

struct mt_python {
	struct py_file *files;
	size_t nfiles;
	bool said_version[256];
	struct py_code *codes; /* open addressing by (pid, addr) */
	size_t ncodes, used_codes;
	struct py_pending *pending; /* open addressing by id */
	size_t npending, used_pending;
	struct py_stack **stacks; /* open addressing by key */
	size_t nstacks, used_stacks;
	struct py_types types[8];
	unsigned next_types;
};

static uint64_t mix(uint64_t a)
{
	return a * 0x9e3779b97f4a7c15ull;
}

/* ---- files ------------------------------------------------------------ */

void mt_python_file(struct mt_python **pyp, const char *via, const char *path,
		    struct mt_stack_file *file, bool say, int py_files_fd)
{
	struct mt_elf_symbol syms[] = {
	    {.name = "_PyRuntime"},
	    {.name = "Py_Version"},
	    {.name = "_PyEval_EvalFrameDefault"},
	    {.name = "_Py_NegativeRefcount"},
	    {.name = "PyCode_Type"},
	    {.name = "PyUnicode_Type"},
	    {.name = "PyBytes_Type"},
	};
	struct mt_py_file entry = {0};
	uint32_t slot;
	struct mt_python *py;
	uint64_t version = 0;
	unsigned v;
	char err[128];
	int layout = -1;

	if (mt_elf_find_symbols(via, syms, 7, err, sizeof(err)) < 3 ||
	    !syms[0].vaddr || !syms[1].vaddr || !syms[2].vaddr ||
	    mt_elf_read_vaddr(via, syms[1].vaddr, &version, sizeof(version)))
		return; /* not an interpreter */
	v = (unsigned)(version >> 16) & 0xffff;
	for (int i = 0; i < MT_PY_LAYOUTS; i++)
		if (mt_py_layouts[i].version == v)
			layout = i;
	if (!*pyp)
		*pyp = mt_xcalloc(1, sizeof(**pyp));
	py = *pyp;
	if (layout < 0 || syms[3].vaddr || !syms[4].vaddr || !syms[5].vaddr ||
	    !syms[6].vaddr) {
		if (say && !py->said_version[v & 0xff]) {
			if (syms[3].vaddr)
				mt_warning("%s: a debug build of CPython: no "
					   "Python frames in its stacks",
					   path);
			else
				mt_warning("%s: CPython %u.%u: no Python "
					   "frames in its stacks (3.11 and "
					   "3.12 only)",
					   path, v >> 8, v & 0xff);
		}
		py->said_version[v & 0xff] = true;
		return;
	}
	slot = py->nfiles;
	entry.layout = layout;
	entry.code_type = (int64_t)(syms[4].vaddr - syms[0].vaddr);
	entry.str_type = (int64_t)(syms[5].vaddr - syms[0].vaddr);
	entry.bytes_type = (int64_t)(syms[6].vaddr - syms[0].vaddr);
	if (slot >= MT_PY_FILES_MAX ||
	    bpf_map_update_elem(py_files_fd, &slot, &entry, BPF_ANY))
		return;
	file->py_runtime = syms[0].vaddr;
	file->py_file = slot + 1;
	py->files =
	    mt_xreallocarray(py->files, py->nfiles + 1, sizeof(*py->files));
	py->files[py->nfiles++] =
	    (struct py_file){.id = file->id,
			     .eval_lo = syms[2].vaddr,
			     .eval_hi = syms[2].vaddr + syms[2].size};
}

/* ---- the process's memory ------------------------------------------------ */

static int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {buf, len};
	struct iovec remote = {(void *)(uintptr_t)addr, len};

	if (addr < 4096 || addr >= (1ull << 47) || addr + len < addr)
		return -1;
	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len
		   ? 0
		   : -1;
}

static uint64_t remote_word(pid_t pid, uint64_t addr, bool *ok)
{
	uint64_t w = 0;

	if (remote_read(pid, addr, &w, sizeof(w)))
		*ok = false;
	return w;
}

static struct py_types *types_of(struct mt_python *py, pid_t pid)
{
	for (size_t i = 0; i < sizeof(py->types) / sizeof(py->types[0]); i++)
		if (py->types[i].pid == pid)
			return &py->types[i];
	py->types[py->next_types % 8] = (struct py_types){.pid = pid};
	return &py->types[py->next_types++ % 8];
}

/* Is the object at obj of the type named name (its ob_type's tp_name)?
 * Each type found is remembered for the process (*known). */
static bool of_type(pid_t pid, uint64_t obj, const char *name, uint64_t *known)
{
	bool ok = true;
	uint64_t type = remote_word(pid, obj + MT_PY_OB_TYPE, &ok), tp_name;
	char text[8] = {0};
	size_t len = strlen(name) + 1;

	if (!ok || !type)
		return false;
	if (*known)
		return type == *known;
	tp_name = remote_word(pid, type + MT_PY_TP_NAME, &ok);
	if (!ok || len > sizeof(text) || remote_read(pid, tp_name, text, len) ||
	    memcmp(text, name, len))
		return false;
	*known = type;
	return true;
}

/* A str object's text as UTF-8 (compact ones; another gives "?"), at
 * most cap bytes, into out: its length. */
static size_t remote_str(pid_t pid, const struct mt_py_layout *l,
			 struct py_types *types, uint64_t str,
			 unsigned char *out, size_t cap)
{
	unsigned char head[64];
	uint32_t state;
	int64_t len;
	uint64_t data = 0;

	if (!of_type(pid, str, "str", &types->str) ||
	    remote_read(pid, str, head, sizeof(head)))
		return 0;
	memcpy(&state, head + MT_PY_STR_STATE, sizeof(state));
	memcpy(&len, head + MT_PY_STR_LENGTH, sizeof(len));
	if (MT_PY_STR_COMPACT(state) && MT_PY_STR_ASCII(state)) {
		data = str + l->str_ascii_data;
	} else if (MT_PY_STR_COMPACT(state)) {
		memcpy(&data, head + l->str_utf8, sizeof(data));
		memcpy(&len, head + l->str_utf8_length, sizeof(len));
	}
	if (!data || len < 0) {
		out[0] = '?';
		return 1;
	}
	if ((uint64_t)len > cap)
		len = cap;
	return remote_read(pid, data, out, len) ? 0 : (size_t)len;
}

static void put_u32(unsigned char *at, uint32_t v)
{
	memcpy(at, &v, sizeof(v));
}

/* ---- code objects -------------------------------------------------------- */

static struct py_code *code_slot(struct mt_python *py, pid_t pid, uint64_t addr)
{
	size_t mask = py->ncodes - 1,
	       i = mix(addr ^ (uint64_t)pid << 48) & mask;

	while (py->codes[i].pid &&
	       (py->codes[i].pid != pid || py->codes[i].addr != addr))
		i = (i + 1) & mask;
	return &py->codes[i];
}

static void grow_codes(struct mt_python *py)
{
	struct py_code *old = py->codes;
	size_t nold = py->ncodes;

	py->ncodes = nold ? nold * 2 : 1024;
	py->codes = mt_xcalloc(py->ncodes, sizeof(*py->codes));
	for (size_t i = 0; i < nold; i++)
		if (old[i].pid)
			*code_slot(py, old[i].pid, old[i].addr) = old[i];
	free(old);
}

static struct py_pending *pending_slot(struct mt_python *py, uint32_t id)
{
	size_t mask = py->npending - 1, i = mix(id) & mask;

	while (py->pending[i].id && py->pending[i].id != id)
		i = (i + 1) & mask;
	return &py->pending[i];
}

static void keep_pending(struct mt_python *py, const struct py_pending *p)
{
	if ((py->used_pending + 1) * 2 > py->npending) {
		struct py_pending *old = py->pending;
		size_t nold = py->npending;

		py->npending = nold ? nold * 2 : 1024;
		py->pending = mt_xcalloc(py->npending, sizeof(*py->pending));
		for (size_t i = 0; i < nold; i++)
			if (old[i].id)
				*pending_slot(py, old[i].id) = old[i];
		free(old);
	}
	*pending_slot(py, p->id) = *p;
	py->used_pending++;
}

/* Read the code object at addr of process pid (layout l): its entry,
 * with id 0 when it is not one (or cannot be read). */
static struct py_code *read_code(struct mt_python *py, pid_t pid,
				 const struct mt_py_layout *l, uint64_t addr,
				 uint32_t (*next_id)(void *), void *ctx)
{
	struct py_types *types = types_of(py, pid);
	unsigned char head[256], *b;
	struct py_pending p = {0};
	struct py_code *c;
	uint64_t table, w[4];
	int64_t table_len;
	size_t at = 16, n[4] = {0};
	int32_t first_line;

	if ((py->used_codes + 1) * 2 > py->ncodes)
		grow_codes(py);
	c = code_slot(py, pid, addr);
	if (c->pid)
		return c;
	*c = (struct py_code){.pid = pid, .addr = addr};
	py->used_codes++;
	if (l->co_code > sizeof(head) ||
	    !of_type(pid, addr, "code", &types->code) ||
	    remote_read(pid, addr, head, l->co_code))
		return c;
	memcpy(&first_line, head + l->co_firstlineno, sizeof(first_line));
	memcpy(&c->firsttraceable, head + l->co_firsttraceable,
	       sizeof(c->firsttraceable));
	memcpy(&w[0], head + l->co_name, 8);
	memcpy(&w[1], head + l->co_qualname, 8);
	memcpy(&w[2], head + l->co_filename, 8);
	memcpy(&table, head + l->co_linetable, 8);
	c->co_code = l->co_code;
	b = p.payload = mt_xmalloc(MT_PYCODE_PAYLOAD_MAX);
	n[0] = remote_str(pid, l, types, w[0], b + at, NAME_MAX_LEN);
	at += n[0];
	n[1] = remote_str(pid, l, types, w[1], b + at, NAME_MAX_LEN);
	at += n[1];
	n[2] = remote_str(pid, l, types, w[2], b + at, PATH_MAX_LEN);
	at += n[2];
	if (of_type(pid, table, "bytes", &types->bytes) &&
	    !remote_read(pid, table + MT_PY_VAR_SIZE, &table_len,
			 sizeof(table_len)) &&
	    table_len > 0) {
		n[3] = (uint64_t)table_len < MT_PYCODE_PAYLOAD_MAX - at
			   ? (size_t)table_len
			   : MT_PYCODE_PAYLOAD_MAX - at;
		if (remote_read(pid, table + MT_PY_BYTES_DATA, b + at, n[3]))
			n[3] = 0;
		at += n[3];
	}
	for (int i = 0; i < 4; i++)
		put_u32(b + 4 * i, n[i]);
	p.id = next_id(ctx);
	if (!p.id || p.id > MT_PYCODE_ID_MAX) {
		free(p.payload);
		return c;
	}
	p.len = at;
	p.version = l->version;
	p.first_line = first_line;
	keep_pending(py, &p);
	c->id = p.id;
	return c;
}

void mt_python_code_seen(struct mt_python *py, const void *data, size_t size,
			 uint32_t (*next_code_id)(void *), void *ctx)
{
	const struct mt_py_code_record *rec = data;
	const char *part[4];
	size_t n[4], cap[4] = {MT_PY_NAME_MAX, MT_PY_QUALNAME_MAX,
			       MT_PY_FILE_MAX, MT_PY_TABLE_MAX};
	size_t at = 16, table_at = offsetof(struct mt_py_code_record, table);
	struct py_pending p = {0};
	struct py_code *c;

	if (!py || size < table_at || rec->ev.old_addr < 1 ||
	    rec->ev.old_addr > MT_PY_LAYOUTS)
		return;
	part[0] = rec->name;
	part[1] = rec->qualname;
	part[2] = rec->file;
	part[3] = (const char *)rec->table;
	for (int i = 0; i < 4; i++)
		n[i] = rec->len[i] < cap[i] ? rec->len[i] : cap[i];
	if (n[3] > size - table_at)
		n[3] = size - table_at;
	p.id = next_code_id(ctx);
	if (!p.id || p.id > MT_PYCODE_ID_MAX)
		return;
	p.payload = mt_xmalloc(MT_PYCODE_PAYLOAD_MAX);
	for (int i = 0; i < 4; i++) {
		if (n[i] > MT_PYCODE_PAYLOAD_MAX - at)
			n[i] = MT_PYCODE_PAYLOAD_MAX - at;
		memcpy(p.payload + at, part[i], n[i]);
		put_u32(p.payload + 4 * i, n[i]);
		at += n[i];
	}
	p.len = at;
	p.version = mt_py_layouts[rec->ev.old_addr - 1].version;
	p.first_line = (int32_t)rec->ev.size;
	keep_pending(py, &p);
	/* the process's code object at that address from now on */
	if ((py->used_codes + 1) * 2 > py->ncodes)
		grow_codes(py);
	c = code_slot(py, rec->ev.pid, rec->ev.addr);
	if (!c->pid)
		py->used_codes++;
	*c = (struct py_code){.pid = rec->ev.pid,
			      .addr = rec->ev.addr,
			      .id = p.id,
			      .co_code = rec->co_code,
			      .firsttraceable = rec->firsttraceable};
}

/* ---- lists of frames ----------------------------------------------------- */

static struct py_stack **stack_slot(struct mt_python *py, uint64_t key)
{
	size_t mask = py->nstacks - 1, i = mix(key) & mask;

	while (py->stacks[i] && py->stacks[i]->key != key)
		i = (i + 1) & mask;
	return &py->stacks[i];
}

void mt_python_seen(struct mt_python *py, const void *data, size_t size,
		    uint32_t (*next_code_id)(void *), void *ctx)
{
	const struct mt_py_stack_record *rec = data;
	const struct mt_py_layout *l;
	size_t n = (size - sizeof(rec->ev)) / sizeof(rec->frames[0]);
	struct py_stack *s, **slot;

	if (!py || size < sizeof(rec->ev) || !rec->ev.addr ||
	    rec->ev.old_addr < 1 || rec->ev.old_addr > MT_PY_LAYOUTS)
		return;
	l = &mt_py_layouts[rec->ev.old_addr - 1];
	if (rec->ev.size < n)
		n = rec->ev.size;
	if (n > MT_PY_FRAMES_MAX)
		n = MT_PY_FRAMES_MAX;
	if ((py->used_stacks + 1) * 2 > py->nstacks) {
		struct py_stack **old = py->stacks;
		size_t nold = py->nstacks;

		py->nstacks = nold ? nold * 2 : 1024;
		py->stacks = mt_xcalloc(py->nstacks, sizeof(*py->stacks));
		for (size_t i = 0; i < nold; i++)
			if (old[i])
				*stack_slot(py, old[i]->key) = old[i];
		free(old);
	}
	slot = stack_slot(py, rec->ev.addr);
	if (*slot)
		return; /* sent again (its table was full) */
	s = *slot = mt_xcalloc(1, sizeof(*s));
	py->used_stacks++;
	s->key = rec->ev.addr;
	for (size_t i = 0; i < n; i++) {
		uint64_t code = rec->frames[i].code & ~MT_PY_GROUP_END;
		uint64_t instr = rec->frames[i].prev_instr & ((1ull << 56) - 1);
		unsigned owner = rec->frames[i].prev_instr >> 56;
		struct py_code *c =
		    read_code(py, rec->ev.pid, l, code, next_code_id, ctx);
		uint64_t first = code + c->co_code, offset;

		/* a frame not yet started (CPython's _PyFrame_IsIncomplete)
		 * is none to show */
		if (c->id &&
		    (owner == MT_PY_OWNED_BY_GENERATOR ||
		     instr >=
			 first + 2 * (uint64_t)(int64_t)c->firsttraceable) &&
		    s->n < MT_PY_FRAMES_MAX) {
			offset = instr >= first ? (instr - first) / 2 : 0;
			if (offset > MT_PYFRAME_OFFSET_MAX)
				offset = MT_PYFRAME_OFFSET_MAX;
			s->frames[s->n++] = MT_PYFRAME(c->id, offset);
			s->group_len[s->ngroups]++;
		}
		if ((rec->frames[i].code & MT_PY_GROUP_END) &&
		    s->ngroups + 1 < MT_PY_FRAMES_MAX)
			s->ngroups++;
	}
	if (s->group_len[s->ngroups])
		s->ngroups++; /* the last call's, its end not read */
}

/* Is frame (a return address) in an evaluation loop's code? */
static bool eval_frame(const struct mt_python *py, uint64_t frame)
{
	uint64_t addr = MT_FRAME_ADDR(frame);

	for (size_t i = 0; i < py->nfiles; i++)
		if (py->files[i].id == MT_FRAME_FILE(frame) &&
		    addr > py->files[i].eval_lo && addr <= py->files[i].eval_hi)
			return true;
	return false;
}

size_t mt_python_merge(struct mt_python *py, uint64_t key, const __u64 *native,
		       size_t n, __u64 *out, size_t cap, bool *truncated)
{
	const struct py_stack *s;
	size_t m = 0, group = 0, from = 0;

	if (!py || !py->nstacks || !(s = *stack_slot(py, key)))
		return 0;
	for (size_t i = 0; i < n && m < cap; i++) {
		if (group < s->ngroups && eval_frame(py, native[i])) {
			size_t k = s->group_len[group++];

			if (k > cap - m - 1) {
				k = cap - m - 1;
				*truncated = true;
			}
			memcpy(out + m, s->frames + from, k * sizeof(*out));
			m += k;
			from += s->group_len[group - 1];
		}
		out[m++] = native[i];
		if (m == cap && i + 1 < n)
			*truncated = true;
	}
	return m;
}

int mt_python_codes(struct mt_python *py, const uint64_t *frames, size_t n,
		    const struct mt_event *use,
		    int (*write)(void *ctx, const struct mt_event *recs,
				 size_t nrecs),
		    void *ctx)
{
	struct mt_event recs[1 + (MT_PYCODE_PAYLOAD_MAX + MT_EVENT_SIZE - 1) /
				     MT_EVENT_SIZE];

	if (!py || !py->npending)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct py_pending *p;
		size_t nrecs;

		if (MT_FRAME_FILE(frames[i]) != MT_FRAME_FILE_PYTHON)
			continue;
		p = pending_slot(py, MT_PYFRAME_CODE(frames[i]));
		if (!p->id || !p->payload)
			continue; /* written, or not ours (the recorder's) */
		nrecs = 1 + (p->len + MT_EVENT_SIZE - 1) / MT_EVENT_SIZE;
		memset(recs, 0, nrecs * sizeof(recs[0]));
		recs[0].timestamp = use->timestamp;
		recs[0].pid = use->pid;
		recs[0].tid = use->tid;
		recs[0].kind = MT_EV_PYCODE;
		recs[0].addr = p->id;
		recs[0].size = (uint32_t)p->first_line;
		recs[0].flags = p->version;
		recs[0].aux = p->len;
		memcpy(&recs[1], p->payload, p->len);
		free(p->payload);
		p->payload = NULL;
		if (write(ctx, recs, nrecs))
			return -1;
	}
	return 0;
}

void mt_python_exited(struct mt_python *py, pid_t pid)
{
	if (!py)
		return;
	for (size_t i = 0; i < sizeof(py->types) / sizeof(py->types[0]); i++)
		if (py->types[i].pid == pid)
			py->types[i].pid = 0;
}

void mt_python_free(struct mt_python *py)
{
	if (!py)
		return;
	for (size_t i = 0; i < py->npending; i++)
		free(py->pending[i].payload);
	for (size_t i = 0; i < py->nstacks; i++)
		free(py->stacks[i]);
	free(py->pending);
	free(py->stacks);
	free(py->codes);
	free(py->files);
	free(py);
}
