// SPDX-License-Identifier: MIT
/*
 * stack_walk.c - the recorder's walk of its thread's call stack, for
 * `mt-trace --fast --stacks` (part of libmt-preload.so; mt_preload.c
 * records what it finds).
 *
 * The walk is the BPF side's (bpf/mt_stack.bpf.h, unwind_step), with the
 * unwind rows mt-trace built for it (lib/capture/stacks/cfi.c) and shares in
 * the same memory as the rings (struct mt_fast_stacks): the same frames, at a
 * fraction of the cost (man/mt-trace.1, STACKS).  Each thread keeps the
 * code ranges and the rules of the return addresses it met, and the keys
 * of the stacks it sent, so that a stack is sent once and then only its
 * key.  Nothing here allocates through the interposed API: a thread's
 * state is mapped.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <unistd.h>

#include "mt_fast.h"
#include "mt_stack.h"
#include "own_mmap.h"
#include "python.h"
#include "stack_walk.h"

#define unlikely(x) __builtin_expect(!!(x), 0)
#define likely(x)   __builtin_expect(!!(x), 1)

/* The rows mt-trace shares (NULL: no stacks) and the deepest stack. */
const struct mt_fast_stacks *stk;
static const struct mt_fast_file *stk_files;
static const struct mt_cfi_row *stk_rows;
static uint32_t stk_depth;
/* This library's own code: its frames are not the program's. */
static uintptr_t self_start, self_end;
/* Raised by every dlclose: a code range cached before may hold another
 * file now (a library opened where a closed one was). */
static uint32_t code_generation;

/* The main thread's stack ends here (the dynamic loader's). */
extern void *__libc_stack_end;

/* Code ranges a thread's walks went through: a program, its libraries,
 * libc's start (each found once by _dl_find_object and a stat). */
#define CODE_CACHE_SLOTS 16
/* Keys of the stacks a thread sent (power of two; cleared when 3/4
 * full: the stacks are sent again, mt-trace keeps one of each). */
#define SENT_SLOTS 4096
/* The rules of the return addresses a thread's walks met, by address
 * (power of two): a hit is a frame without a file or row lookup. */
#define RULE_SLOTS 1024

struct code_range {
	uintptr_t start, end; /* end 0: an empty slot */
	intptr_t to_elf;      /* pc + to_elf: the ELF address in its file */
	uint64_t dev, ino;    /* its file (ino 0: none: the vDSO) */
	const struct mt_fast_file *file; /* NULL: mt-trace has no rows */
	uint32_t files_seen;		 /* stk->nfiles when looked for */
	uint32_t generation;		 /* code_generation when found */
};

/* The most stack a walk reads: farther from the thread's stack's end, the
 * call runs on another stack. */
#define STACK_SPAN_MAX (1ull << 30)

/* A return address met before: its frame and the row in effect there. */
struct pc_rule {
	uint64_t pc; /* 0: an empty slot */
	uint64_t frame;
	struct mt_cfi_row row;
};

struct stack_state {
	uintptr_t top; /* its stack ends here (0: not known) */
	uint32_t next_slot;
	uint32_t nsent;
	uint32_t rules_generation; /* code_generation of rules[] */
	struct py_codes *py; /* CPython's code objects it met (python.c) */
	struct code_range code[CODE_CACHE_SLOTS];
	uint64_t sent[SENT_SLOTS];
	struct pc_rule rules[RULE_SLOTS];
};

/* The walk's registers from frame to frame, and the stack it may read. */
struct walk {
	uintptr_t pc, sp, bp;
	uintptr_t low, top;
};

void stacks_start(const struct mt_fast_header *shm)
{
	struct dl_find_object me;

	if (!shm->stack_depth || !shm->stacks_offset ||
	    _dl_find_object((void *)stacks_start, &me))
		return;
	stk = (const struct mt_fast_stacks *)((char *)shm + shm->stacks_offset);
	stk_files =
	    (const struct mt_fast_file *)((char *)shm + stk->files_offset);
	stk_rows = (const struct mt_cfi_row *)((char *)shm + stk->rows_offset);
	stk_depth = shm->stack_depth < MT_STACK_DEPTH_MAX ? shm->stack_depth
							  : MT_STACK_DEPTH_MAX;
	self_start = (uintptr_t)me.dlfo_map_start;
	self_end = (uintptr_t)me.dlfo_map_end;
}

void stacks_code_changed(void)
{
	__atomic_fetch_add(&code_generation, 1, __ATOMIC_RELEASE);
}

/* Where the thread's stack ends: the main thread's, at the loader's
 * mark; another's, at its thread descriptor, which glibc keeps at the top
 * of the thread's stack block (a stack the program gave it too). */
static uintptr_t thread_stack_top(void)
{
	if (getpid() == (pid_t)syscall(SYS_gettid))
		return ((uintptr_t)__libc_stack_end | 4095) + 1;
	return (uintptr_t)pthread_self();
}

struct stack_state *stack_state_new(void)
{
	struct stack_state *s = own_mmap(sizeof(struct stack_state));

	if (s == MAP_FAILED)
		return NULL;
	s->top = thread_stack_top();
	return s;
}

void stack_state_free(struct stack_state *s)
{
	if (s->py)
		python_codes_free(s->py);
	munmap(s, sizeof(*s));
}

/* The kernel's device number (major << 20 | minor), as mt-trace keys
 * files, from a user-space dev_t. */
static uint64_t kernel_dev(dev_t dev)
{
	return (uint64_t)major(dev) << 20 | minor(dev);
}

/* The file of a code range among those mt-trace published. */
static void find_file(struct code_range *c)
{
	uint32_t n = __atomic_load_n(&stk->nfiles, __ATOMIC_ACQUIRE);

	c->files_seen = n;
	/* the newest first: a file on a deleted one's inode number */
	for (uint32_t i = n; i-- > 0 && c->ino;) {
		if (stk_files[i].ino == c->ino && stk_files[i].dev == c->dev) {
			c->file = &stk_files[i];
			return;
		}
	}
}

/* A code range newly found: its file by its path's inode, as the
 * kernel's mapping of it has it (the executable's name is empty). */
static void identify(struct code_range *c, const struct link_map *lm)
{
	const char *path =
	    lm->l_name && *lm->l_name ? lm->l_name : "/proc/self/exe";
	struct stat st;

	c->dev = c->ino = 0;
	c->file = NULL;
	if (stat(path, &st) == 0) {
		c->dev = kernel_dev(st.st_dev);
		c->ino = st.st_ino;
	}
	find_file(c);
}

/* The code range of pc (NULL: in no object the loader knows). */
static const struct code_range *code_of(struct stack_state *s, uintptr_t pc)
{
	uint32_t generation =
	    __atomic_load_n(&code_generation, __ATOMIC_ACQUIRE);
	struct dl_find_object found;
	struct code_range *c;

	for (int i = 0; i < CODE_CACHE_SLOTS; i++) {
		c = &s->code[i];
		if (pc < c->start || pc >= c->end ||
		    c->generation != generation)
			continue;
		/* a file mt-trace had not published yet may be now */
		if (unlikely(!c->file) && c->ino &&
		    c->files_seen !=
			__atomic_load_n(&stk->nfiles, __ATOMIC_ACQUIRE))
			find_file(c);
		return c;
	}
	if (_dl_find_object((void *)pc, &found))
		return NULL;
	c = &s->code[s->next_slot++ % CODE_CACHE_SLOTS];
	c->start = (uintptr_t)found.dlfo_map_start;
	c->end = (uintptr_t)found.dlfo_map_end;
	c->to_elf = -(intptr_t)found.dlfo_link_map->l_addr;
	c->generation = generation;
	identify(c, found.dlfo_link_map);
	return c;
}

/* The row in effect at ELF address addr of file f (NULL: none), by a
 * binary search of its rows (a return address's row is looked for once:
 * then the thread's rules[] has it). */
static const struct mt_cfi_row *find_row(const struct mt_fast_file *f,
					 uint64_t addr)
{
	uint32_t lo = f->first_row, hi = lo + f->nrows, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (stk_rows[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == f->first_row ? NULL : &stk_rows[lo - 1];
}

/* A word of the thread's stack, only between the walk's first frame and
 * the stack's end: rules that point elsewhere stop the walk, never fault. */
static bool read_stack_word(const struct walk *w, uintptr_t addr,
			    uintptr_t *word)
{
	if (addr < w->low || addr >= w->top || w->top - addr < sizeof(*word))
		return false;
	__builtin_memcpy(word, (const void *)addr, sizeof(*word));
	return true;
}

/* One step to the caller by the row's rules; false when the walk ends
 * (*complete: at the thread's first frame). */
static bool step(struct walk *w, const struct mt_cfi_row *row, bool *complete)
{
	uintptr_t cfa, ra, bp;

	switch (row->cfa_rule) {
	case MT_CFA_RSP:
		cfa = w->sp + row->cfa_offset;
		break;
	case MT_CFA_RBP:
		cfa = w->bp + row->cfa_offset;
		break;
	case MT_CFA_PLT:
		cfa = w->sp + row->cfa_offset +
		      ((w->pc & 15) >= row->plt_threshold ? 8 : 0);
		break;
	case MT_CFA_END:
		*complete = true;
		return false;
	default:
		return false;
	}
	if (cfa <= w->sp || !read_stack_word(w, cfa - 8, &ra) || !ra)
		return false;
	if (row->rbp_rule == MT_RBP_SAVED) {
		if (!read_stack_word(w, cfa + row->rbp_offset, &bp))
			return false;
		w->bp = bp;
	}
	w->sp = cfa;
	w->pc = ra;
	return true;
}

/*
 * The program's registers where it called into this library: up the
 * chain of this library's own frames (it is built with frame pointers)
 * to the first return address outside it.
 */
static __attribute__((noinline)) bool caller_registers(struct walk *w)
{
	uintptr_t *fp = __builtin_frame_address(0);

	w->low = (uintptr_t)fp;
	for (int i = 0; i < 16 && fp; i++) {
		uintptr_t ra = fp[1];

		if (ra < self_start || ra >= self_end) {
			w->pc = ra;
			w->sp = (uintptr_t)(fp + 2);
			w->bp = fp[0];
			return true;
		}
		fp = (uintptr_t *)fp[0];
	}
	return false;
}

static struct pc_rule *rule_slot(struct stack_state *s, uintptr_t pc)
{
	return &s->rules[((pc * 0x9e3779b97f4a7c15ull) >> 54) &
			 (RULE_SLOTS - 1)];
}

/* The frame at return address pc, and the row in effect at the call
 * before it (NULL: the walk stops at this frame), found through the
 * code range *c (kept from frame to frame) and kept in rules[]. */
static const struct mt_cfi_row *frame_at(struct stack_state *s,
					 const struct code_range **c,
					 uintptr_t pc, uint64_t *frame)
{
	struct pc_rule *rule = rule_slot(s, pc);
	const struct mt_fast_file *f;
	const struct mt_cfi_row *row;
	uint64_t elf;

	if (likely(rule->pc == pc)) {
		*frame = rule->frame;
		return &rule->row;
	}
	/* callers are mostly in the callee's file: look no further */
	if (!*c || pc < (*c)->start || pc >= (*c)->end)
		*c = code_of(s, pc);
	f = *c ? (*c)->file : NULL;
	elf = pc + (*c ? (*c)->to_elf : 0);
	*frame = f ? MT_FRAME(f->id, elf) : MT_FRAME(0, pc);
	/* a return address: the call before it is what rows describe */
	if (!f || !f->nrows || !(row = find_row(f, elf - 1)))
		return NULL;
	*rule = (struct pc_rule){pc, *frame, *row};
	return row;
}

/*
 * The Python frames of evaluation loop call g go just inside its native
 * frame, the last of the n in frames (as many as there is room for in
 * depth); how many frames then.
 */
static unsigned insert_python(uint64_t *frames, unsigned n, unsigned depth,
			      const struct py_frames *py,
			      const struct py_group *g)
{
	uint64_t native = frames[n - 1];
	unsigned k = g->n < depth - n ? g->n : depth - n;

	__builtin_memcpy(&frames[n - 1], &py->frame[g->first],
			 k * sizeof(frames[0]));
	frames[n - 1 + k] = native;
	return n + k;
}

/*
 * The calling thread's stack below the interposed call, innermost frame
 * first, as MT_FRAME values: the BPF side's walk (bpf/mt_stack.bpf.h,
 * unwind_step), its frames, key and flags.  How many frames.  In a
 * CPython process the Python frames each evaluation loop call runs stand
 * just inside that call's native frame: the one whose stack holds its
 * _PyCFrame (python.c).
 */
unsigned capture_stack(struct stack_state *s, uint64_t *frames, uint64_t *key,
		       unsigned *flags)
{
	uint32_t generation =
	    __atomic_load_n(&code_generation, __ATOMIC_ACQUIRE);
	uint64_t hash = 0xcbf29ce484222325ull;
	const struct code_range *c = NULL;
	bool complete = false;
	struct py_frames py;
	unsigned n = 0, group = 0;
	struct walk w;

	if (!caller_registers(&w))
		return 0;
	python_frames(&s->py, &py);
	/* not below the thread's stack's end, or too far below it for its
	 * own stack (a signal stack, a coroutine's): only the first frame */
	w.top = s->top > w.low && s->top - w.low <= STACK_SPAN_MAX ? s->top : 0;
	if (unlikely(s->rules_generation != generation)) { /* a dlclose */
		__builtin_memset(s->rules, 0, sizeof(s->rules));
		s->rules_generation = generation;
	}
	while (n < stk_depth) {
		const struct mt_cfi_row *row =
		    frame_at(s, &c, w.pc, &frames[n]);

		n++;
		if (!row || !step(&w, row, &complete))
			break;
		/* the frame just left (its stack: below w.sp) */
		for (; group < py.ngroups && py.group[group].cframe < w.sp;
		     group++)
			if (py.group[group].cframe >= w.low)
				n = insert_python(frames, n, stk_depth, &py,
						  &py.group[group]);
	}
	for (unsigned i = 0; i < n; i++)
		hash = (hash ^ frames[i]) * 0x100000001b3ull; /* FNV-1a */
	*key = hash ? hash : 1;
	*flags = complete ? 0 : MT_STACK_TRUNCATED;
	return n;
}

static uint32_t sent_slot(uint64_t key)
{
	return (key * 0x9e3779b97f4a7c15ull) >> 52; /* 12 bits */
}
_Static_assert(SENT_SLOTS == 1u << 12, "sent_slot's bits");

/* Has this thread (or its process before a fork) sent the stack? */
struct py_codes *stack_python(struct stack_state *s)
{
	return s->py;
}

bool sent_before(const struct stack_state *s, uint64_t key)
{
	for (uint32_t i = sent_slot(key); s->sent[i];
	     i = (i + 1) & (SENT_SLOTS - 1))
		if (s->sent[i] == key)
			return true;
	return false;
}

void remember_sent(struct stack_state *s, uint64_t key)
{
	uint32_t i;

	if (s->nsent >= SENT_SLOTS / 4 * 3) {
		__builtin_memset(s->sent, 0, sizeof(s->sent));
		s->nsent = 0;
	}
	for (i = sent_slot(key); s->sent[i]; i = (i + 1) & (SENT_SLOTS - 1))
		;
	s->sent[i] = key;
	s->nsent++;
}
