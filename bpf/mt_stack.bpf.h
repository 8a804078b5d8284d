// SPDX-License-Identifier: GPL-2.0
/*
 * mt_stack.bpf.h - user call stacks for mt_trace.bpf.c, without frame
 * pointers (Debian's binaries have none: a frame-pointer walk stops after
 * one or two frames).
 *
 * The walk follows the DWARF call frame information of each frame's code,
 * reduced by mt-trace to sorted rows (struct mt_cfi_row) per code file
 * when the file is first mapped by a traced process.  Per frame: the
 * kernel's own VMA of the pc says which file and where in it (so nothing
 * per process has to be kept current: exec, dlopen, fork all just work),
 * a bounded binary search finds the row, the row says where the caller's
 * frame and return address are; what a return address gave is kept per
 * process by pc (struct pc_rule), so a pc met again, in whatever stack,
 * costs no search.  bpf_loop() keeps the verifier's work
 * bounded whatever the depth.  A walk that starts where one of the
 * process's last few started, on a stack whose words that walk read are
 * unchanged, is not made again (struct walk_memo): a loop that allocates
 * from one place pays one read of its stack a call.
 *
 * Each distinct stack is sent once: its frames are hashed, and only a
 * stack the table did not hold yet (or cannot hold: full) goes to the ring
 * as a STACK record; events carry the hash.
 *
 * Scratch space (the record, the stack windows) and the walk caches are
 * per CPU.  Uprobe and raw tracepoint programs run with migration
 * disabled, not preemption: on a kernel that preempts (preempt=full or
 * lazy) another thread can start a walk on the same CPU while one is
 * half done, and would overwrite its state.  So a walk takes the CPU's
 * stack_walking flag first (an atomic exchange); a walk that finds it
 * taken takes no stack (its event is recorded without one, and counted:
 * MT_DROP_STACK_BUSY, shown by mt-trace -v) rather than one mixed from
 * two threads' stacks.
 */
#ifndef MT_STACK_BPF_H
#define MT_STACK_BPF_H

#include "mt_python.h"
#include "mt_stack.h"

/* An event's stacks: native (0: none) and Python (0: none). */
struct stack_keys {
	__u64 native, python;
};

/* Set by mt-trace before load (--stacks, --stack-depth). */
const volatile bool stacks_enabled = false;
const volatile __u32 stack_depth = MT_STACK_DEPTH_MAX;

/* Unwind rows of every known code file (mt-trace writes them through a
 * mapping of the array; sized by mt-trace). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_cfi_row);
} cfi_rows SEC(".maps");

/* Each file's page index (struct mt_stack_file), written like the rows;
 * 8-byte entries: an array's elements are 8-byte aligned, in a mapping
 * too. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cfi_pages SEC(".maps");

/* Code files by device and inode: their ids and rows. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_FRAME_FILE_MAX);
	__type(key, struct mt_code_key);
	__type(value, struct mt_stack_file);
} stack_files SEC(".maps");

/* Stacks already sent, by key.  Not preallocated: an entry is 1 KiB. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct mt_stack_record);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_stack_record);
} stack_scratch SEC(".maps");

/* 1 while a walk is under way on the CPU (see the top of this file). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64); /* 64 bits: BPF's exchange (v1..v3) */
} stack_walking SEC(".maps");

/*
 * Walks remembered.  A walk is a function of where it starts (pc, sp, and
 * bp when a rule reads it before a frame restores it), of the stack words
 * it uses (return addresses; a saved bp only once a rule reads it), and of
 * the code mappings and their rows: from the same start,
 * under the same mappings (mm_lock_seq) and rows (files_published), the
 * same values in the same words give the same stack.  So a process's
 * last few walks are kept with the words each read, and a walk starting
 * where one of them started re-reads those words (one read of the stack)
 * instead of walking: all equal, the stack is the remembered one.  A walk
 * that took a return address from the kernel (the uretprobe trampoline's
 * slot) or met an unreadable word is not kept.
 */
#define MEMO_WALKS 4
#define MEMO_WORDS 64

struct walk_memo {
	__u64 pc, sp, bp; /* where the walk started */
	__u64 key;	  /* its stack's key, in the stacks table; 0: none */
	__u32 span;	  /* its words lie in [sp, sp + span) */
	__u16 nwords;	  /* while walking: may pass MEMO_WORDS */
	__u8 bp_used;	  /* a rule read the starting bp */
	__u8 keep;	  /* while walking: it can be kept */
	__u16 off[MEMO_WORDS]; /* each word read, as its offset from sp */
	__u64 val[MEMO_WORDS]; /* and its value */
};

/* A code mapping of the walked process, as the walk needs it. */
struct code_mapping {
	__u64 start, end; /* its addresses */
	__s64 to_elf;	  /* pc + to_elf: the ELF address in its file */
	__u32 id;	  /* the file's id; 0: no file mt-trace knows */
	__u32 first_row;  /* its rows in cfi_rows */
	__u32 nrows;
	__u32 first_page; /* its page index (struct mt_stack_file) */
	__u32 page_base;
	__u32 npages;
	__u64 py_runtime; /* the file's, as struct mt_stack_file says */
	__u32 py_file;
};

/*
 * What a walk needs of a return address (pc), found once per process and
 * CPU and kept in a direct-mapped table of PC_RULES: the frame it makes and the
 * rules of its row.  A fresh walk mostly meets return addresses walked
 * before, in other stacks (one function, many callers; one caller, many
 * stack pointers), so a table by pc saves the row search (two page index
 * reads, a binary search over the rows, each a map access) at almost
 * every frame, where a remembered whole walk only helps a stack seen
 * before.  Valid while the mappings and the published files are those it
 * was found under: an entry counts only at the walk cache's epoch.
 */
#define PC_RULES 256

struct pc_rule {
	__u64 pc;	       /* the return address (or first ip) */
	__u64 epoch;	       /* the walk cache's epoch it was found at */
	__u64 frame;	       /* its frame, an MT_FRAME() value */
	struct mt_cfi_row row; /* its row; cfa_rule MT_CFA_NONE: none */
};

/*
 * The user stack is read a window at a time, not a word per frame: a
 * bpf_probe_read_user costs ~100 ns here whatever its size up to a few
 * hundred bytes (the checks of both ends, hardened usercopy's among them),
 * +30 ns a KiB, and one 8 KiB window usually holds every frame's words
 * (tar's 13 frames lie 4-7 KiB above sp: with 4 KiB windows a walk read
 * two).  A read that runs into an unmapped (or never touched) page fails
 * whole: a window ends where the thread's stack does, else at the page's
 * end.  Windows go no further above sp than the process's last walk read
 * and half as much again (each KiB not read saves ~30 ns; a walk that
 * needs more reads on from there, without that bound).
 */
#define STACK_WINDOW 8192
#define KNOWN_STACKS 256

/* key's place among the known stacks: the high bits of a multiplicative
 * hash (the key is a hash already, but of frames that differ little) */
static __always_inline __u32 known_slot(__u64 key)
{
	return (key * 0x9e3779b97f4a7c15ull) >> (64 - 8);
}

struct stack_window {
	__u64 base;  /* user address of words[0], 8-byte aligned */
	__u64 len;   /* bytes read there, a multiple of 8; 0: none */
	__u64 limit; /* windows end there (the last walk's extent); 0: none */
	/* the end of the highest word the walk read (here, not in the
	 * walk's state on the stack: a value the verifier would follow) */
	__u64 words_end;
	/* the walk's state that the verifier need not follow from frame to
	 * frame (in struct unwind, on the stack, each value it took was
	 * another state to check: 10% more instructions verified) */
	__u64 hash; /* of the frames so far (FNV-1a) */
	/* where bp was restored from (0: it is the starting one), until a
	 * rule reads it: only then does the walk depend on its value */
	__u64 bp_slot;
	__u64 read_word; /* stack_word()'s word */
	__u64 memo_slot; /* start_memo()'s slot, through memory */
	__u32 nframes;
	bool complete;
	/* words, not bytes: a word at a variable offset of a byte array
	 * is loaded a byte at a time (22 instructions, not 1) */
	__u64 words[STACK_WINDOW / 8];
	/* where the walk is: here too, not on the stack, so that the
	 * verifier checks a frame's step once, whatever values they take */
	__u64 pc, sp, bp;
	__u64 start_sp;		 /* sp where the walk started */
	__u64 trampoline;	 /* where uretprobes return to, or 0 */
	struct code_mapping map; /* the mapping the last pc was in */
	/* the walked process's CPython runtime (walk_cache.py_runtime) */
	__u64 py_runtime;
	__u32 py_file;
	/* keys the stacks table holds, direct-mapped (known_slot()): it
	 * never forgets one, so a key found here needs no lookup there (a
	 * hash table's lookup, ~40 ns of every walk) */
	__u64 known[KNOWN_STACKS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_window);
} stack_windows SEC(".maps");

#define EEXIST_ 17 /* include/uapi/asm-generic/errno-base.h */

/* Longest binary search: 2^22 rows per file. */
#define CFI_SEARCH_STEPS 22

/*
 * What the last walks in a process found, kept while its mappings do not
 * change: the code mappings they went through (finding a pc's mapping
 * through the kernel, bpf_find_vma then the file's entry in stack_files,
 * costs ~150 ns, and a walk changes files 3-5 times: program, libraries,
 * libc's start, the program's _start again), the stack mapping last
 * walked, what each return address gave (struct pc_rule), and the walks
 * themselves (struct walk_memo).  All of it is a function of the
 * process's mappings and the rows, whichever thread walked: the kernel
 * counts every change of a process's mappings in mm->mm_lock_seq (odd
 * while one is under way), and mt-trace counts the files it published
 * rows of: a cache filled under other counts, or for another address
 * space (the x86 context id, never reused, unlike an mm's address), is
 * stale.  Per CPU, WALK_CACHES of them chosen by the address space (a
 * task's storage cost ~85 ns a lookup, more than a walk's frames): no
 * two CPUs ever write the same cache, and two processes running by turns
 * on one CPU mostly keep theirs.
 */
#define MAPPING_CACHE_SLOTS 8
#define WALK_CACHES	    4

/* pc's place in the table: the high bits of a multiplicative hash */
static __always_inline __u32 pc_rule_slot(__u64 pc)
{
	return (pc * 0x9e3779b97f4a7c15ull) >> (64 - 8);
}

/* Bumped by mt-trace after each code file it adds to stack_files. */
volatile __u32 files_published = 0;

struct walk_cache {
	__u64 mm_id;	/* the address space it describes (its context id) */
	__u32 seq;	/* mm->mm_lock_seq when it was filled */
	__u32 files;	/* files_published then */
	__u32 next_map; /* the slot to fill next (round robin) */
	__u32 next_walk;
	__u64 stack_start, stack_end; /* a thread's stack; end 0: unknown */
	__u64 epoch;	   /* bumped at each emptying (so >= 1 once in use) */
	__u64 extent_hint; /* how far above sp the next walk's windows go */
	__u64 words_top;   /* where the last walk's highest word ended */
	/* the process's CPython runtime (_PyRuntime), found through the
	 * mapping of a frame in the interpreter's file, and its layout (1 +
	 * index in py_layouts); 0: none met since the cache was emptied */
	__u64 py_runtime;
	__u32 py_file;
	struct code_mapping slot[MAPPING_CACHE_SLOTS];
	struct walk_memo walk[MEMO_WALKS];
	struct pc_rule rule[PC_RULES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WALK_CACHES);
	__type(key, __u32);
	__type(value, struct walk_cache);
} walk_caches SEC(".maps");

/* Where a walk keeps its state (its values are in the window). */
struct unwind {
	struct mt_stack_record *rec;
	struct stack_window *window;
	struct walk_cache *cache;
	struct walk_memo *memo; /* the walk under way, in the cache */
	__u64 epoch;		/* the cache's */
};

static long read_vma(struct task_struct *task, struct vm_area_struct *vma,
		     void *ctx)
{
	struct code_mapping *map = ctx;
	struct mt_code_key key = {};
	struct mt_stack_file *file;
	struct file *f = vma->vm_file;

	map->start = vma->vm_start;
	map->end = vma->vm_end;
	map->id = 0;
	if (!f)
		return 0;
	key.ino = BPF_CORE_READ(f, f_inode, i_ino);
	key.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	file = bpf_map_lookup_elem(&stack_files, &key);
	if (!file ||
	    (file->generation_known &&
	     file->generation != BPF_CORE_READ(f, f_inode, i_generation)))
		return 0; /* not a file mt-trace knows, or not that file */
	map->to_elf = (__s64)(vma->vm_pgoff * page_size) - vma->vm_start +
		      file->vaddr_minus_offset;
	map->id = file->id;
	map->first_row = file->first_row;
	map->nrows = file->nrows;
	map->first_page = file->first_page;
	map->page_base = file->page_base;
	map->npages = file->npages;
	map->py_runtime = file->py_runtime;
	map->py_file = file->py_file;
	return 0;
}

/* *map becomes the mapping of pc from the kernel's VMA (id 0: none
 * mt-trace knows), kept in the cache when it has rows.  Global, so that
 * the verifier checks read_vma once, not once per way the cache's search
 * ended. */
__attribute__((noinline)) int kernel_mapping(struct code_mapping *map,
					     struct walk_cache *cache, __u64 pc)
{
	struct code_mapping found = {};

	if (!map)
		return 0;
	/* bpf_find_vma wants its callback's context on the stack */
	if (bpf_find_vma(bpf_get_current_task_btf(), pc, read_vma, &found, 0) ||
	    pc < found.start || pc >= found.end) {
		map->start = map->end = 0;
		map->id = 0;
		return 0;
	}
	*map = found;
	/* only files with rows: a file not inspected yet may get them */
	if (cache && found.id && found.nrows)
		cache->slot[cache->next_map++ % MAPPING_CACHE_SLOTS] = found;
	return 0;
}

/*
 * *map becomes the mapping of pc (id 0: none mt-trace knows): from the
 * cache, else from the kernel's VMA, then kept in the cache.  A global
 * function: the verifier checks it once on its own, and the walk sees only
 * that *map changed (checked inside the walk, the cache's paths took the
 * verifier from 25 k to 450 k instructions, ~4 s of every start).
 */
__attribute__((noinline)) int find_mapping(struct code_mapping *map,
					   struct walk_cache *cache, __u64 pc)
{
	if (!map)
		return 0;
	if (cache) {
		for (int i = 0; i < MAPPING_CACHE_SLOTS; i++) {
			if (pc >= cache->slot[i].start &&
			    pc < cache->slot[i].end) {
				*map = cache->slot[i];
				return 0;
			}
		}
	}
	return kernel_mapping(map, cache, pc);
}

/*
 * The current process's cache on this CPU, emptied when it described
 * another process or its mappings or the published files changed since
 * it was filled.  While the mappings are changing (or where the kernel
 * keeps no count of changes, before Linux 6.14) it serves this walk
 * alone: it describes no address space then (mm_id 0; context ids start
 * at 1), so the next walk empties it.  A walk always has a cache: the
 * frame's step tests for none nowhere.
 */
static __always_inline struct walk_cache *
current_walk_cache(struct mm_struct *mm)
{
	__u32 seq = 1, files = files_published, at;
	struct walk_cache *cache;
	__u64 mm_id;

	if (bpf_core_field_exists(mm->mm_lock_seq))
		seq = mm->mm_lock_seq.sequence;
	mm_id = mm->context.ctx_id;
	at = (mm_id * 0x9e3779b97f4a7c15ull) >> 62; /* WALK_CACHES: 4 */
	cache = bpf_map_lookup_elem(&walk_caches, &at);
	if (!cache)
		return NULL;
	if (seq & 1)
		mm_id = 0;
	if (!mm_id || cache->mm_id != mm_id || cache->seq != seq ||
	    cache->files != files) {
		for (int i = 0; i < MAPPING_CACHE_SLOTS; i++)
			cache->slot[i].end = 0;
		for (int i = 0; i < MEMO_WALKS; i++)
			cache->walk[i].key = 0;
		cache->stack_end = 0;
		cache->py_runtime = 0;
		cache->py_file = 0;
		cache->epoch++; /* every pc_rule kept so far is stale */
		cache->mm_id = mm_id;
		cache->seq = seq;
		cache->files = files;
	}
	return cache;
}

/* A binary search among rows [lo, hi) for the last row at or before
 * addr: hi ends as the first row after it (lo == hi), failed when a row
 * could not be read. */
struct row_search {
	__u64 addr;
	__u32 lo, hi;
	bool failed;
};

/* bpf_loop callback: one step of the search (1: it is over). */
static long row_search_step(__u32 i, void *ctx)
{
	struct row_search *s = ctx;
	struct mt_cfi_row *row;
	__u32 mid;

	if (s->lo >= s->hi)
		return 1;
	mid = s->lo + (s->hi - s->lo) / 2;
	row = bpf_map_lookup_elem(&cfi_rows, &mid);
	if (!row) {
		s->failed = true;
		return 1;
	}
	if (row->addr <= s->addr)
		s->lo = mid + 1;
	else
		s->hi = mid;
	return 0;
}

/* The index of the row in effect at addr among a file's rows, or -1:
 * a binary search between the rows in effect at the start of addr's page
 * and of the next (2-4 steps in libc, against 15 over all its rows).
 * Global, like find_mapping, and its steps a bpf_loop callback: the
 * verifier checks one step (unrolled, the search's 22 steps took 2.1 k
 * instructions of each program's verification). */
__attribute__((noinline)) int cfi_row_index(const struct code_mapping *map,
					    __u64 addr)
{
	struct row_search search = {.addr = addr};
	__u32 page, at;
	__u64 *bound;

	if (!map)
		return -1;
	search.lo = map->first_row;
	search.hi = search.lo + map->nrows;
	page = (addr >> MT_CFI_PAGE_SHIFT) - map->page_base;
	if (addr >> MT_CFI_PAGE_SHIFT >= map->page_base && page < map->npages) {
		at = map->first_page + page;
		bound = bpf_map_lookup_elem(&cfi_pages, &at);
		if (bound)
			search.lo = map->first_row + *bound;
		at++;
		bound = page + 1 < map->npages
			    ? bpf_map_lookup_elem(&cfi_pages, &at)
			    : NULL;
		if (bound && map->first_row + *bound + 1 < search.hi)
			search.hi = map->first_row + *bound + 1;
	}
	bpf_loop(CFI_SEARCH_STEPS, row_search_step, &search, 0);
	if (search.failed || search.lo == map->first_row)
		return -1; /* before the file's first row */
	return search.lo - 1;
}

/*
 * What the walk needs of pc (frame always; row MT_CFA_NONE when it has
 * none), found through *map (the mapping the last pc was in, changed to
 * pc's) and the rows, becomes pc's entry of the cache's table.  Global,
 * like find_mapping: the walk's fast path, the table's hit, stays free of
 * calls.
 */
__attribute__((noinline)) int find_rule(struct code_mapping *map,
					struct walk_cache *cache, __u64 pc)
{
	struct mt_cfi_row *row;
	struct pc_rule *rule;
	__u64 elf_addr;
	int at;

	if (!map || !cache)
		return 0;
	if (pc < map->start || pc >= map->end)
		find_mapping(map, cache, pc);
	rule = &cache->rule[pc_rule_slot(pc)];
	elf_addr = pc + map->to_elf;
	rule->pc = pc;
	rule->epoch = cache->epoch;
	rule->frame = map->id ? MT_FRAME(map->id, elf_addr) : MT_FRAME(0, pc);
	rule->row.cfa_rule = MT_CFA_NONE;
	/* every rule kept at this epoch was found here: a walk through the
	 * interpreter's code finds its runtime set */
	if (map->id && map->py_file) {
		cache->py_runtime = map->py_runtime - map->to_elf;
		cache->py_file = map->py_file;
	}
	if (!map->id || !map->nrows)
		return 0;
	/* a return address: the call before it is what the rows describe */
	at = cfi_row_index(map, elf_addr - 1);
	row = at < 0 ? NULL : bpf_map_lookup_elem(&cfi_rows, &at);
	if (row)
		rule->row = *row;
	return 0;
}

/* pc's rule, in the walk cache's table: kept there, else found; NULL if
 * not even found. */
static __always_inline const struct pc_rule *pc_rule(struct unwind *u, __u64 pc)
{
	struct walk_cache *cache = u->cache;
	struct pc_rule *rule = &cache->rule[pc_rule_slot(pc)];

	if (rule->pc == pc && rule->epoch == u->epoch)
		return rule;
	find_rule(&u->window->map, cache, pc);
	return rule->pc == pc ? rule : NULL;
}

/* Keep word, read at addr, with the walk.  The walk cannot be kept when a
 * word lies below its start, too far above it or not on a word's
 * boundary (one test: off a multiple of 8 below STACK_WINDOW), or when
 * its words are too many (remember_walk() sees nwords); the slots wrap
 * meanwhile, so that a frame's step tests nothing else. */
static __always_inline void memo_word(struct unwind *u, __u64 addr, __u64 word)
{
	struct walk_memo *m = u->memo;
	__u64 off = addr - u->window->start_sp;
	__u32 n = m->nwords;

	if (off & ~(__u64)(STACK_WINDOW - sizeof(word)))
		m->keep = 0;
	m->off[n & (MEMO_WORDS - 1)] = off;
	m->val[n & (MEMO_WORDS - 1)] = word;
	m->nwords = n + 1;
}

/* Where the caller's frame starts (its CFA), by the row's rule; 0 when the
 * walk ends here. */
static __always_inline __u64 frame_cfa(struct unwind *u,
				       const struct mt_cfi_row *row)
{
	struct stack_window *w = u->window;

	switch (row->cfa_rule) {
	case MT_CFA_RSP:
		return w->sp + row->cfa_offset;
	case MT_CFA_RBP:
		if (!w->bp_slot)
			u->memo->bp_used = 1;
		else
			memo_word(u, w->bp_slot, w->bp);
		w->bp_slot = 0;
		return w->bp + row->cfa_offset;
	case MT_CFA_PLT:
		return w->sp + row->cfa_offset +
		       ((w->pc & 15) >= row->plt_threshold ? 8 : 0);
	case MT_CFA_END:
		w->complete = true;
		return 0;
	}
	return 0;
}

/*
 * A return address the kernel replaced with its uretprobe trampoline (an
 * allocator call in flight: malloc's own brk or mmap): the real one, from
 * the thread's return instances, matched by the stack slot it was in.
 */
__attribute__((noinline)) __u64 hijacked_return(__u64 slot)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct return_instance *ri =
	    BPF_CORE_READ(task, utask, return_instances);

	for (int i = 0; i < 4 && ri; i++) {
		if (BPF_CORE_READ(ri, stack) == slot)
			return BPF_CORE_READ(ri, orig_ret_vaddr);
		ri = BPF_CORE_READ(ri, next);
	}
	return 0;
}

static long read_stack_vma(struct task_struct *task, struct vm_area_struct *vma,
			   void *ctx)
{
	__u64 *bounds = ctx;

	bounds[0] = vma->vm_start;
	bounds[1] = vma->vm_end;
	return 0;
}

/* The kernel's answer to stack_end(), kept in the cache.  Global, like
 * kernel_mapping(). */
__attribute__((noinline)) __u64 kernel_stack_end(struct walk_cache *cache,
						 __u64 sp)
{
	__u64 bounds[2] = {};

	if (!cache ||
	    bpf_find_vma(bpf_get_current_task_btf(), sp, read_stack_vma, bounds,
			 0) ||
	    sp < bounds[0] || sp >= bounds[1])
		return 0;
	cache->stack_start = bounds[0];
	cache->stack_end = bounds[1];
	return bounds[1];
}

/* Where the thread's stack mapping, the one sp is in, ends (0: not
 * known): from the cache, else from the kernel's VMA. */
static __always_inline __u64 stack_end(struct walk_cache *cache, __u64 sp)
{
	if (!cache)
		return 0;
	if (cache->stack_end && sp >= cache->stack_start &&
	    sp < cache->stack_end)
		return cache->stack_end;
	return kernel_stack_end(cache, sp);
}

/*
 * Read w's window at addr, of a walk that started at sp: up to
 * STACK_WINDOW bytes, to the end of the stack, else to the end of addr's
 * page; 0 when read.  Global, like find_mapping.
 */
__attribute__((noinline)) int fill_window(struct stack_window *w,
					  struct walk_cache *cache, __u64 sp,
					  __u64 addr)
{
	__u64 base = addr & ~7ull, page_end = (addr | 4095) + 1;
	__u64 end, len;

	if (!w)
		return -1;
	w->len = 0;
	end = stack_end(cache, sp);
	if (end <= addr)
		end = page_end;
	else if (end - base > STACK_WINDOW)
		end = base + STACK_WINDOW;
	if (w->limit && addr + sizeof(__u64) > w->limit)
		w->limit = 0; /* a walk longer than the last: all there is */
	if (w->limit && end > w->limit)
		end = w->limit;
	len = (end - base) & ~7ull;
	if (len > STACK_WINDOW)
		return -1;
	if (bpf_probe_read_user(w->words, len, (void *)base)) {
		if (end <= page_end)
			return -1;
		/* a page in between never touched */
		len = page_end - base;
		if (len > STACK_WINDOW ||
		    bpf_probe_read_user(w->words, len, (void *)base))
			return -1;
	}
	w->base = base;
	w->len = len;
	return 0;
}

/* How far above its sp a walk like one that read extent bytes there may
 * need to read: half as much again and 256 bytes. */
static __always_inline __u64 extent_hint(__u64 extent)
{
	return extent < (1 << 20) ? (extent + extent / 2 + 256 + 63) & ~63ull
				  : 0;
}

/*
 * Where a walk from sp on the cache's process may stop reading (0: no
 * bound).  On the stack the last walk went through (a thread's own:
 * main and what called it stay where they are), where that walk's
 * highest word ended: a fresh stack mostly differs from the last below
 * its outer frames, which lie there, and each cache line not read is a
 * miss saved (a 2.3 KiB window read ~100 ns slower when its lines were
 * not in the cache than when they were).  Else by the last walk's
 * extent.
 */
static __always_inline __u64 window_limit(const struct walk_cache *cache,
					  __u64 sp)
{
	__u64 top = cache->words_top;

	if (top > sp && top - sp <= STACK_WINDOW && sp >= cache->stack_start &&
	    top <= cache->stack_end)
		return top;
	return cache->extent_hint ? sp + cache->extent_hint : 0;
}

/* Whether w's window holds the word at offset at (a word's boundary: an
 * address off one is read on its own).  The window's length is a
 * multiple of 8, at most STACK_WINDOW. */
static __always_inline bool in_window(const struct stack_window *w, __u64 at)
{
	return at < w->len && !(at & 7);
}

/* The word at offset at of w's window (in_window() said it is there; the
 * mask is for the verifier) */
static __always_inline __u64 window_word(const struct stack_window *w, __u64 at)
{
	return w->words[(at >> 3) & (STACK_WINDOW / 8 - 1)];
}

/* The user word at addr, through w's window, of a walk that started at
 * sp, into w->read_word (0 when read).  Global, like find_mapping. */
__attribute__((noinline)) int stack_word(struct stack_window *w,
					 struct walk_cache *cache, __u64 sp,
					 __u64 addr)
{
	__u64 at;

	if (!w)
		return -1;
	at = addr - w->base;
	if (!in_window(w, at) && (fill_window(w, cache, sp, addr) ||
				  !in_window(w, at = addr - w->base))) {
		/* not in the window, not even on its own: the walk ends */
		if (bpf_probe_read_user(&w->read_word, sizeof(w->read_word),
					(void *)addr))
			return -1;
	} else {
		w->read_word = window_word(w, at);
	}
	return 0;
}

/* The user word at addr (0 when read: an unreadable word ends the walk,
 * which cannot be kept then).  The word is returned through a pointer
 * only by the slow path, so that the fast one keeps it in a register. */
static __always_inline long read_stack_word(struct unwind *u, __u64 addr,
					    __u64 *word)
{
	struct stack_window *w = u->window;
	__u64 at = addr - w->base;

	if (addr + sizeof(*word) > w->words_end)
		w->words_end = addr + sizeof(*word);
	if (in_window(w, at)) {
		*word = window_word(w, at);
		return 0;
	}
	if (stack_word(w, u->cache, w->start_sp, addr)) {
		u->memo->keep = 0;
		return -1;
	}
	*word = w->read_word;
	return 0;
}

/*
 * One frame: record pc, then step to the caller; 1 ends the walk.  Its
 * state all in memory (the window), none on the stack: the verifier
 * checks the step once or twice, not once for each set of values the
 * walk's state took from frame to frame (14.5 k instructions a program
 * with the state on the stack).  Inlined into the bpf_loop callback: as
 * a global function of its own, the call cost ~200 ns a fresh 21-frame
 * stack (bpf_stats).
 */
static __always_inline int unwind_frame(struct unwind *u, __u32 i)
{
	struct stack_window *w = u->window;
	const struct pc_rule *rule;
	__u64 frame, cfa, ra, bp;

	rule = pc_rule(u, w->pc);
	if (!rule)
		return 1;
	frame = rule->frame;
	barrier_var(i); /* the test on the index used, not on a copy */
	if (i >= MT_STACK_DEPTH_MAX)
		return 1;
	u->rec->frames[i] = frame;
	w->nframes = i + 1;
	w->hash = (w->hash ^ frame) * 0x100000001b3ull; /* FNV-1a */
	cfa = frame_cfa(u, &rule->row);
	if (!cfa || read_stack_word(u, cfa - 8, &ra))
		return 1;
	memo_word(u, cfa - 8, ra);
	if (!ra)
		return 1;
	if (ra == w->trampoline) {
		ra = hijacked_return(cfa - 8);
		u->memo->keep = 0; /* not the stack's word */
		if (!ra)
			return 1;
	}
	if (rule->row.rbp_rule == MT_RBP_SAVED) {
		if (read_stack_word(u, cfa + rule->row.rbp_offset, &bp))
			return 1;
		w->bp = bp;
		w->bp_slot = cfa + rule->row.rbp_offset;
	}
	w->sp = cfa;
	w->pc = ra;
	return 0;
}

/* bpf_loop callback: frame i. */
static long unwind_step(__u32 i, void *ctx)
{
	struct unwind *u = ctx;

	/* 0 or 1, as the verifier wants a callback's result */
	return unwind_frame(u, i);
}

static __always_inline struct mt_stack_record *stack_scratch_record(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stack_scratch, &zero);
}

/* Send a stack the table does not hold (every time, when the table is
 * full: mt-trace keeps one of each); true when the table holds it now. */
static __always_inline bool send_new_stack(struct mt_stack_record *rec,
					   __u64 key)
{
	__u64 bytes;
	long err = bpf_map_update_elem(&stacks, &key, rec, BPF_NOEXIST);

	if (err == -EEXIST_)
		return true; /* another CPU just sent it */
	bytes = sizeof(rec->ev) + rec->ev.size * sizeof(rec->frames[0]);
	if (bytes > sizeof(*rec))
		bytes = sizeof(*rec);
	/* no room in the ring: not a lost event, mt-trace reads the stack
	 * from the table instead (only a full table loses it) */
	bpf_ringbuf_output(&events, rec, bytes, 0);
	return err == 0;
}

/* Which of the remembered walks started at (pc, sp, bp), or -1.
 * (An index, not a pointer: the verifier follows one pointer with a
 * variable offset through what comes next, not one per slot.) */
static __always_inline int memo_index(const struct walk_cache *cache, __u64 pc,
				      __u64 sp, __u64 bp)
{
	for (int i = 0; i < MEMO_WALKS; i++) {
		const struct walk_memo *m = &cache->walk[i];

		if (m->key && m->pc == pc && m->sp == sp &&
		    (!m->bp_used || m->bp == bp))
			return i;
	}
	return -1;
}

struct memo_check {
	const struct walk_memo *memo;
	const struct stack_window *window;
	bool differs;
};

/* bpf_loop callback: does word i of the memo still hold its value? */
static long check_memo_word(__u32 i, void *ctx)
{
	struct memo_check *c = ctx;
	__u32 off;

	if (i >= MEMO_WORDS)
		return 1;
	off = c->memo->off[i];
	if (window_word(c->window, off) != c->memo->val[i]) {
		c->differs = true;
		return 1;
	}
	return 0;
}

/*
 * The key of the stack the remembered walk at (one from sp) found, if
 * every word it read still holds what it read; else 0.  The words are
 * read again as one window, which a walk that follows reads through.
 * Global, like find_mapping.
 */
__attribute__((noinline)) __u64 remembered_stack(struct walk_cache *cache,
						 struct stack_window *w,
						 __u32 at, __u64 sp)
{
	struct memo_check check = {};
	struct walk_memo *m;
	__u32 span;

	if (!cache || !w)
		return 0;
	m = &cache->walk[at & (MEMO_WALKS - 1)];
	span = m->span;
	if (span > STACK_WINDOW ||
	    bpf_probe_read_user(w->words, span, (void *)sp))
		return 0;
	w->base = sp;
	w->len = span;
	check.memo = m;
	check.window = w;
	bpf_loop(m->nwords, check_memo_word, &check, 0);
	return check.differs ? 0 : m->key;
}

/* Keep the walk just made, whose stack the table holds under key: it was
 * written in its place among the remembered ones as it went, all but
 * where it started and what it found. */
static __always_inline void remember_walk(struct unwind *u, __u64 pc, __u64 bp,
					  __u64 key)
{
	struct walk_memo *m = u->memo;
	__u64 span = u->window->words_end - u->window->start_sp;

	if (!m->keep || !m->nwords || m->nwords > MEMO_WORDS)
		return;
	/* every word kept lies below words_end (and below STACK_WINDOW:
	 * memo_word()); a word read but not kept may lie further */
	m->span = span < STACK_WINDOW ? span : STACK_WINDOW;
	m->pc = pc;
	m->sp = u->window->start_sp;
	m->bp = bp;
	m->key = key;
}

/*
 * The remembered walk a walk from (pc, sp, bp) is written to: one from
 * there whose words changed, else the oldest; no walk to match while it
 * is made (key 0).  Its stack's key, when one from there still holds.
 */
static __always_inline __u64 start_memo(struct unwind *u, __u64 pc, __u64 sp,
					__u64 bp)
{
	struct walk_cache *cache = u->cache;
	struct walk_memo *m;
	int at = memo_index(cache, pc, sp, bp);
	__u64 key;

	if (at >= 0) {
		key = remembered_stack(cache, u->window, at, sp);
		if (key)
			return key;
	} else {
		at = cache->next_walk++;
	}
	/* the slot through memory, whose values the verifier does not
	 * follow: it checks the walk once, not once for each slot
	 * memo_index() gave (~600 more instructions a program) */
	*(volatile __u64 *)&u->window->memo_slot = at;
	m = &cache->walk[*(volatile __u64 *)&u->window->memo_slot &
			 (MEMO_WALKS - 1)];
	m->key = 0;
	/* a walk from sp off a word's boundary is not kept: its words are
	 * checked again at whole-word offsets from sp; nor one in a cache
	 * that serves one walk */
	m->keep = cache->mm_id && !(sp & 7);
	m->nwords = 0;
	m->bp_used = 0;
	u->memo = m;
	return 0;
}

/* The walk of capture_stack(), on this CPU's scratch space. */
static __always_inline __u64 walk_stack(__u64 pid_tgid, __u64 ip, __u64 sp,
					__u64 bp, struct mm_struct *mm)
{
	struct mt_stack_record *rec;
	struct unwind u = {};
	__u32 zero = 0;
	__u64 key, *known;

	rec = stack_scratch_record();
	u.window = bpf_map_lookup_elem(&stack_windows, &zero);
	u.cache = current_walk_cache(mm);
	if (!rec || !u.window || !u.cache)
		return 0;
	u.window->len = 0; /* the stack changed since the last walk */
	u.window->nframes = 0;
	u.window->complete = false;
	u.window->bp_slot = 0;
	u.window->limit = 0;
	u.window->words_end = 0;
	/* the process's interpreter, as its cache knows it (a walk through
	 * the interpreter's code at this epoch set it): for python_stack */
	u.window->py_runtime = u.cache->py_runtime;
	u.window->py_file = u.cache->py_file;
	key = start_memo(&u, ip, sp, bp);
	if (key || !u.memo)
		return key;
	u.window->limit = window_limit(u.cache, sp);
	u.rec = rec;
	u.epoch = u.cache->epoch;
	u.window->pc = ip;
	u.window->sp = u.window->start_sp = sp;
	u.window->bp = bp;
	u.window->trampoline = mm->uprobes_state.xol_area->vaddr;
	u.window->hash = 0xcbf29ce484222325ull;
	bpf_loop(stack_depth, unwind_step, &u, 0);
	if (u.window->nframes == 0)
		return 0;
	u.window->py_runtime = u.cache->py_runtime;
	u.window->py_file = u.cache->py_file;
	/* how far the next walk's windows read */
	u.cache->extent_hint =
	    extent_hint(u.window->words_end - u.window->start_sp);
	u.cache->words_top = u.window->words_end;
	key = u.window->hash ? u.window->hash : 1;
	known = &u.window->known[known_slot(key)];
	if (*known != key && !bpf_map_lookup_elem(&stacks, &key)) {
		fill_event(&rec->ev, MT_EV_STACK, pid_tgid);
		rec->ev.addr = key;
		rec->ev.size = u.window->nframes;
		rec->ev.flags = u.window->complete ? 0 : MT_STACK_TRUNCATED;
		rec->ev.aux = u.window->nframes * sizeof(rec->frames[0]);
		if (!send_new_stack(rec, key))
			return key; /* not in the table: sent each time */
	}
	*known = key; /* the table holds it now */
	remember_walk(&u, ip, bp, key);
	return key;
}

/* ---- Python frames (CPython 3.11, 3.12) ------------------------------- */

/*
 * In a process whose walk went through a CPython interpreter's code
 * (walk_cache.py_runtime), the Python frames its thread runs, read after
 * the native walk: the thread's PyThreadState (in 3.11 the one holding
 * the GIL, else found in the interpreter's list of threads by its
 * pthread_self(), which is the thread's fs base), its current frame
 * (tstate->cframe->current_frame), then each frame's previous, across
 * evaluation loop calls, each frame one read.  What a frame holds is the
 * traced command's memory: only its code object's address and
 * instruction pointer are kept, mt-trace checks the object when it reads
 * it.  The list is sent once per distinct list (py_stacks), like a
 * native stack, and events carry both keys.  Offsets: mt_py_layouts,
 * given by mt-trace (py_layouts).
 */
const volatile bool python_frames = false;

/* mt_py_layouts, written by mt-trace after the load */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MT_PY_LAYOUTS);
	__type(key, __u32);
	__type(value, struct mt_py_layout);
} py_layouts SEC(".maps");
/* threads of one interpreter searched for the current one */
#define PY_THREADS_MAX 32

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct mt_py_stack_record);
} py_stacks SEC(".maps");

/* Interpreter files (struct mt_py_file), written by mt-trace. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MT_PY_FILES_MAX);
	__type(key, __u32);
	__type(value, struct mt_py_file);
} py_files SEC(".maps");

/* Code objects sent, by process and address, and what tells one from
 * another made where a freed one was: its name's and file name's objects
 * and its first line (as the recorder tells them).  The least recently
 * met go first: one met again is sent again, under a new id. */
struct py_code_key {
	__u64 tgid;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_code_key);
	__type(value, __u64);
} py_codes_sent SEC(".maps");

/* A code object's record being made, and the object's first bytes. */
struct py_code_scratch {
	struct mt_py_code_record rec;
	union {
		__u64 words[32];
		__u32 ints[64];
	} head;
	union {
		__u64 words[8];
		__u32 ints[16];
	} obj; /* a str's or bytes' first bytes */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_code_scratch);
} py_code_scratches SEC(".maps");

/* The first 64 bytes of the object at addr into c->obj, if its type is
 * type: 0, else -1. */
static __always_inline long py_object(struct py_code_scratch *c, __u64 addr,
				      __u64 type)
{
	if (!addr ||
	    bpf_probe_read_user(c->obj.words, sizeof(c->obj), (void *)addr) ||
	    c->obj.words[MT_PY_OB_TYPE / 8] != type)
		return -1;
	return 0;
}

/* The text of the str at addr (compact ones; another gives "?"), at
 * most cap - 1 bytes, into dst: its length. */
static __always_inline __u32 py_str(struct py_code_scratch *c,
				    const struct mt_py_layout *l, __u64 addr,
				    __u64 type, char *dst, __u32 cap)
{
	__u32 state;
	__u64 len, data = 0;

	if (py_object(c, addr, type))
		return 0;
	state = c->obj.ints[MT_PY_STR_STATE / 4];
	len = c->obj.words[MT_PY_STR_LENGTH / 8];
	if (MT_PY_STR_COMPACT(state) && MT_PY_STR_ASCII(state)) {
		data = addr + l->str_ascii_data;
	} else if (MT_PY_STR_COMPACT(state)) {
		data = c->obj.words[(l->str_utf8 >> 3) & 7];
		len = c->obj.words[(l->str_utf8_length >> 3) & 7];
	}
	if (!data) {
		dst[0] = '?';
		return 1;
	}
	if (len > cap - 1)
		len = cap - 1;
	barrier_var(len);
	if (len == 0 || bpf_probe_read_user(dst, len & (cap - 1), (void *)data))
		return 0;
	return len & (cap - 1);
}

/*
 * Send the code object at code of the current process (its interpreter's
 * runtime at runtime, file entry slot) unless sent already: its name,
 * qualified name, file name and line table, read now, while the frame
 * running it holds it.  Taken for a code object, str or bytes only when
 * its type is the interpreter's.  Global: checked once.
 */
__attribute__((noinline)) int send_pycode(__u64 pid_tgid, __u64 code,
					  __u64 runtime, __u32 slot)
{
	struct py_code_key k = {pid_tgid >> 32, code};
	const struct mt_py_layout *l;
	const struct mt_py_file *f;
	struct py_code_scratch *c;
	__u32 zero = 0, at, len;
	__u64 bytes, table, identity, *sent;

	c = bpf_map_lookup_elem(&py_code_scratches, &zero);
	at = slot - 1;
	f = bpf_map_lookup_elem(&py_files, &at);
	if (!c || !f)
		return 0;
	l = bpf_map_lookup_elem(&py_layouts, &f->layout);
	if (!l ||
	    bpf_probe_read_user(c->head.words, sizeof(c->head), (void *)code) ||
	    c->head.words[MT_PY_OB_TYPE / 8] != runtime + f->code_type)
		return 0;
	identity = (c->head.words[(l->co_name >> 3) & 31] ^
		    c->head.words[(l->co_filename >> 3) & 31] << 1) *
		       0x100000001b3ull ^
		   c->head.ints[(l->co_firstlineno >> 2) & 63];
	sent = bpf_map_lookup_elem(&py_codes_sent, &k);
	if (sent && *sent == identity)
		return 0;
	bpf_map_update_elem(&py_codes_sent, &k, &identity, BPF_ANY);
	fill_event(&c->rec.ev, MT_EV_STACK, pid_tgid);
	c->rec.ev.flags = MT_STACK_RING_PYCODE;
	c->rec.ev.addr = code;
	c->rec.ev.old_addr = f->layout + 1;
	c->rec.ev.size = c->head.ints[(l->co_firstlineno >> 2) & 63];
	c->rec.firsttraceable = c->head.ints[(l->co_firsttraceable >> 2) & 63];
	c->rec.co_code = l->co_code;
	c->rec.len[0] =
	    py_str(c, l, c->head.words[(l->co_name >> 3) & 31],
		   runtime + f->str_type, c->rec.name, MT_PY_NAME_MAX);
	c->rec.len[1] =
	    py_str(c, l, c->head.words[(l->co_qualname >> 3) & 31],
		   runtime + f->str_type, c->rec.qualname, MT_PY_QUALNAME_MAX);
	c->rec.len[2] =
	    py_str(c, l, c->head.words[(l->co_filename >> 3) & 31],
		   runtime + f->str_type, c->rec.file, MT_PY_FILE_MAX);
	c->rec.len[3] = 0;
	table = c->head.words[(l->co_linetable >> 3) & 31];
	if (!py_object(c, table, runtime + f->bytes_type)) {
		len = c->obj.words[MT_PY_VAR_SIZE / 8];
		if (len > MT_PY_TABLE_MAX - 1)
			len = MT_PY_TABLE_MAX - 1; /* longer: cut short */
		barrier_var(len);
		if (len && !bpf_probe_read_user(
			       c->rec.table, len & (MT_PY_TABLE_MAX - 1),
			       (void *)table + MT_PY_BYTES_DATA))
			c->rec.len[3] = len;
	}
	bytes =
	    __builtin_offsetof(struct mt_py_code_record, table) + c->rec.len[3];
	if (bytes > sizeof(c->rec))
		bytes = sizeof(c->rec);
	c->rec.ev.aux = bytes;
	bpf_ringbuf_output(&events, &c->rec, bytes, 0);
	return 0;
}

/* A Python walk's state, per CPU (taken with stack_walking). */
struct py_walk {
	struct mt_py_stack_record rec;
	__u64 frame;  /* the next frame to read; 0: none */
	__u64 fsbase; /* the thread's pthread_self() */
	__u64 ts;     /* while searching: a thread state */
	__u64 found;  /* the current thread's state, 0: not found */
	__u64 hash;
	__u32 n;       /* frames in rec */
	__u32 layout;  /* index in py_layouts */
	__u32 slot;    /* 1 + entry in py_files */
	__u64 runtime; /* _PyRuntime's address */
	__u64 pid_tgid;
	__u64 word; /* py_word()'s */
	union {
		__u64 words[16];
		__u8 bytes[128];
	} fr;			   /* the frame being read */
	__u64 known[KNOWN_STACKS]; /* keys py_stacks holds (known_slot) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_walk);
} py_walks SEC(".maps");

/* bpf_loop's context (on the stack, as it wants): the walk. */
struct py_ctx {
	struct py_walk *w;
};

/* The user word at addr into w->word; 0 when read. */
static __always_inline long py_word(struct py_walk *w, __u64 addr)
{
	return bpf_probe_read_user(&w->word, sizeof(w->word), (void *)addr);
}

/* bpf_loop callback: is thread state w->ts the current thread's?  (1:
 * found, or the list is over) */
static long py_thread_step(__u32 i, void *ctx)
{
	struct py_walk *w = ((struct py_ctx *)ctx)->w;
	const struct mt_py_layout *l =
	    bpf_map_lookup_elem(&py_layouts, &w->layout);

	if (!l || !w->ts || py_word(w, w->ts + l->ts_thread_id))
		return 1;
	if (w->word == w->fsbase) {
		w->found = w->ts;
		return 1;
	}
	if (py_word(w, w->ts + l->ts_next))
		return 1;
	w->ts = w->word;
	return 0;
}

/* bpf_loop callback: frame w->frame into the record (1: the list is
 * over, or the record full). */
static long py_frame_step(__u32 i, void *ctx)
{
	struct py_walk *w = ((struct py_ctx *)ctx)->w;
	const struct mt_py_layout *l =
	    bpf_map_lookup_elem(&py_layouts, &w->layout);
	__u64 code, instr, previous;
	__u32 n = w->n;
	__u8 owner;

	if (!l || !w->frame || n >= MT_PY_FRAMES_MAX ||
	    bpf_probe_read_user(w->fr.words, MT_PY_FRAME_READ,
				(void *)w->frame))
		return 1;
	code = w->fr.words[(l->fr_code >> 3) & 15];
	previous = w->fr.words[(l->fr_previous >> 3) & 15];
	instr = w->fr.words[(l->fr_prev_instr >> 3) & 15];
	owner = w->fr.bytes[l->fr_owner & 127];
	w->frame = previous;
	if (owner == MT_PY_OWNED_BY_CSTACK) {
		/* 3.12's shim of an evaluation loop call: the frame before
		 * it was that call's first */
		if (n > 0)
			w->rec.frames[(n - 1) & (MT_PY_FRAMES_MAX - 1)].code |=
			    MT_PY_GROUP_END;
		return 0;
	}
	if (l->fr_is_entry >= 0 && w->fr.bytes[l->fr_is_entry & 127])
		code |= MT_PY_GROUP_END; /* 3.11 marks a call's first */
	w->rec.frames[n & (MT_PY_FRAMES_MAX - 1)].code = code;
	/* the owner in the top byte: mt-trace tells a frame not yet
	 * started by it (user addresses have 47 bits) */
	instr = (instr & ((1ull << 56) - 1)) | (__u64)owner << 56;
	w->rec.frames[n & (MT_PY_FRAMES_MAX - 1)].prev_instr = instr;
	w->hash = ((w->hash ^ code) * 0x100000001b3ull ^ instr) *
		  0x100000001b3ull; /* FNV-1a */
	w->n = n + 1;
	return 0;
}

/* bpf_loop callback: frame i's code object sent, if new. */
static long py_code_step(__u32 i, void *ctx)
{
	struct py_walk *w = ((struct py_ctx *)ctx)->w;

	send_pycode(w->pid_tgid,
		    w->rec.frames[i & (MT_PY_FRAMES_MAX - 1)].code &
			~MT_PY_GROUP_END,
		    w->runtime, w->slot);
	return 0;
}

/*
 * The key of the current thread's Python frames (0: none, or no room), in
 * a process whose CPython runtime is at runtime (its interpreter's file:
 * 1 + its entry in py_files).
 * Global, like capture_stack: checked once, on its own.
 */
__attribute__((noinline)) __u64 python_stack(__u64 pid_tgid, __u64 runtime,
					     __u32 slot)
{
	const struct mt_py_layout *l;
	const struct mt_py_file *f;
	struct py_ctx ctx = {};
	struct py_walk *w;
	__u32 zero = 0, at = slot - 1;
	__u64 key, *known, bytes;
	long err;

	w = bpf_map_lookup_elem(&py_walks, &zero);
	f = bpf_map_lookup_elem(&py_files, &at);
	if (!w || !f || !runtime)
		return 0;
	w->layout = f->layout;
	w->runtime = runtime;
	w->slot = slot;
	l = bpf_map_lookup_elem(&py_layouts, &w->layout);
	if (!l)
		return 0;
	w->fsbase = bpf_get_current_task_btf()->thread.fsbase;
	w->found = 0;
	/* 3.11: the thread holding the GIL, mostly the one allocating */
	if (l->rt_tstate_current &&
	    !py_word(w, runtime + l->rt_tstate_current) && w->word) {
		w->ts = w->word;
		ctx.w = w;
		py_thread_step(0, &ctx);
	}
	if (!w->found) {
		if (py_word(w, runtime + l->rt_interp_head) || !w->word ||
		    py_word(w, w->word + l->interp_threads_head))
			return 0;
		w->ts = w->word;
		ctx.w = w;
		bpf_loop(PY_THREADS_MAX, py_thread_step, &ctx, 0);
	}
	if (!w->found || py_word(w, w->found + l->ts_cframe) || !w->word ||
	    py_word(w, w->word + l->cf_current_frame))
		return 0;
	w->frame = w->word;
	w->n = 0;
	/* the process in the key too: its code objects are its own */
	w->hash = (0xcbf29ce484222325ull ^ (pid_tgid >> 32)) * 0x100000001b3ull;
	ctx.w = w;
	bpf_loop(MT_PY_FRAMES_MAX + 16, py_frame_step, &ctx, 0);
	if (w->n == 0)
		return 0;
	key = w->hash ? w->hash : 1;
	known = &w->known[known_slot(key)];
	if (*known == key || bpf_map_lookup_elem(&py_stacks, &key)) {
		*known = key;
		return key;
	}
	/* a new list: its code objects, before it */
	w->pid_tgid = pid_tgid;
	ctx.w = w;
	bpf_loop(w->n, py_code_step, &ctx, 0);
	fill_event(&w->rec.ev, MT_EV_STACK, pid_tgid);
	w->rec.ev.addr = key;
	w->rec.ev.size = w->n;
	w->rec.ev.flags = MT_STACK_RING_PYTHON;
	w->rec.ev.old_addr = w->layout + 1;
	w->rec.ev.aux = w->n * sizeof(w->rec.frames[0]);
	err = bpf_map_update_elem(&py_stacks, &key, &w->rec, BPF_NOEXIST);
	if (err == -EEXIST_) { /* another CPU just sent it */
		*known = key;
		return key;
	}
	bytes = sizeof(w->rec.ev) + w->n * sizeof(w->rec.frames[0]);
	if (bytes > sizeof(w->rec))
		bytes = sizeof(w->rec);
	/* no room in the ring: mt-trace reads the table instead; no room in
	 * the table: sent each time */
	bpf_ringbuf_output(&events, &w->rec, bytes, 0);
	if (!err)
		*known = key;
	return key;
}

/* The Python frames' key of the current process, whose interpreter the
 * native walk just found (walk_stack: 0, none met). */
static __always_inline __u64 python_stack_of(__u64 pid_tgid)
{
	struct stack_window *w;
	__u32 zero = 0;

	w = bpf_map_lookup_elem(&stack_windows, &zero);
	if (!w || !w->py_file)
		return 0;
	return python_stack(pid_tgid, w->py_runtime, w->py_file);
}

/*
 * The call stack of the current thread, whose user registers are ip, sp,
 * bp: its key (0 when there is no room, or when a walk is under way on
 * this CPU), and the key of its Python frames into *py_key (0: none).  ip must
 * be a return address or just past a system call instruction.  A global
 * function, so the verifier checks it once on its own, and only when a program
 * can reach it (callers test stacks_enabled first): inlined into each caller it
 * cost ~0.5 s of verification at every start.
 */
__attribute__((noinline)) __u64 capture_stack(__u64 pid_tgid, __u64 ip,
					      __u64 sp, __u64 bp, __u64 *py_key)
{
	/* the walk's one load through the task: at each load of a pointer
	 * through a trusted one (the current task), the verifier searches
	 * the kernel's BTF for its rules, four times over (~0.4 ms each
	 * here); one through mm is not such a load */
	struct mm_struct *mm = bpf_get_current_task_btf()->mm;
	__u32 zero = 0;
	__u64 *walking = bpf_map_lookup_elem(&stack_walking, &zero);
	__u64 key;

	if (!walking)
		return 0;
	/* one instruction: no preemption between the test and the set */
	if (__sync_lock_test_and_set(walking, 1)) {
		count_lost(MT_DROP_STACK_BUSY);
		return 0;
	}
	key = walk_stack(pid_tgid, ip, sp, bp, mm);
	if (python_frames && key && py_key)
		*py_key = python_stack_of(pid_tgid);
	/* after every write of the walk (a compiler barrier is enough: the
	 * flag is this CPU's own, no other CPU reads it) */
	asm volatile("" ::: "memory");
	*(volatile __u64 *)walking = 0;
	return key;
}

/* The stack of a traced allocator call, at its return (ctx: the return's
 * registers, so the innermost frame is the allocator's caller). */
static __always_inline struct stack_keys call_stack(struct pt_regs *ctx,
						    __u64 pid_tgid)
{
	struct stack_keys k = {};

	if (!stacks_enabled)
		return k;
	k.native = capture_stack(pid_tgid, PT_REGS_IP(ctx), PT_REGS_SP(ctx),
				 ctx->bp, &k.python);
	return k;
}

/* The stack of a system call, from its user registers. */
static __always_inline struct stack_keys syscall_stack(struct pt_regs *regs,
						       __u64 pid_tgid)
{
	struct stack_keys k = {};

	if (!stacks_enabled)
		return k;
	k.native = capture_stack(pid_tgid, BPF_CORE_READ(regs, ip),
				 BPF_CORE_READ(regs, sp),
				 BPF_CORE_READ(regs, bp), &k.python);
	return k;
}

/* Reserve an events-ring record for an event with stack keys (native 0:
 * none). */
static __always_inline struct mt_event *reserve_stacked(struct stack_keys k)
{
	struct mt_py_stacked_event *pe;
	struct mt_stacked_event *se;

	if (!k.native)
		return reserve_event();
	if (k.python) {
		pe = bpf_ringbuf_reserve(&events, sizeof(*pe), 0);
		if (!pe) {
			ring_full(MT_LOST_EVENTS_RING, events_high_water);
			return NULL;
		}
		pe->stack_key = k.native;
		pe->py_key = k.python;
		return &pe->ev;
	}
	se = bpf_ringbuf_reserve(&events, sizeof(*se), 0);
	if (!se) {
		ring_full(MT_LOST_EVENTS_RING, events_high_water);
		return NULL;
	}
	se->stack_key = k.native;
	return &se->ev;
}

/* ---- where code files are mapped (CODE_MAP events) ------------------- */

struct code_vma {
	__u64 start, end, offset, dev, ino;
};

static long read_code_vma(struct task_struct *task, struct vm_area_struct *vma,
			  void *ctx)
{
	struct code_vma *cv = ctx;
	struct file *f = BPF_CORE_READ(vma, vm_file);

	cv->start = BPF_CORE_READ(vma, vm_start);
	cv->end = BPF_CORE_READ(vma, vm_end);
	cv->offset = BPF_CORE_READ(vma, vm_pgoff) * page_size;
	cv->dev = f ? BPF_CORE_READ(f, f_inode, i_sb, s_dev) : 0;
	cv->ino = f ? BPF_CORE_READ(f, f_inode, i_ino) : 0;
	return 0;
}

/* The code mapping at addr of the current process, as a CODE_MAP event
 * naming its file by device (aux) and inode (old_size): mt-trace turns
 * them into the file's id.  Global, like capture_stack. */
__attribute__((noinline)) int emit_code_map(__u64 pid_tgid, __u64 addr)
{
	struct code_vma cv = {};
	struct mt_event *e;

	if (bpf_find_vma(bpf_get_current_task_btf(), addr, read_code_vma, &cv,
			 0) ||
	    !cv.ino)
		return 0;
	e = reserve_event();
	if (!e)
		return 0;
	fill_event(e, MT_EV_CODE_MAP, pid_tgid);
	e->addr = cv.start;
	e->size = cv.end - cv.start;
	e->old_addr = cv.offset;
	e->aux = cv.dev;
	e->old_size = cv.ino;
	submit_event(e);
	return 0;
}

/* After an exec: the code the kernel mapped itself, the program's and the
 * dynamic loader's (where the new program starts: its entry point). */
static __always_inline void emit_exec_code_maps(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 start_code = BPF_CORE_READ(task, mm, start_code);
	__u64 entry = BPF_CORE_READ(regs, ip);

	if (!stacks_enabled)
		return;
	emit_code_map(pid_tgid, start_code);
	if (entry < start_code || entry >= BPF_CORE_READ(task, mm, end_code))
		emit_code_map(pid_tgid, entry);
}

#endif /* MT_STACK_BPF_H */
