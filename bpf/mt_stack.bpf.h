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
 * frame and return address are.  bpf_loop() keeps the verifier's work
 * bounded whatever the depth.
 *
 * Each distinct stack is sent once: its frames are hashed, and only a
 * stack the table did not hold yet (or cannot hold: full) goes to the ring
 * as a STACK record; events carry the hash.  Scratch space is per CPU: BPF
 * programs are not preempted on this kernel (PREEMPT_VOLUNTARY; no helper
 * called here sleeps).
 */
#ifndef MT_STACK_BPF_H
#define MT_STACK_BPF_H

#include "mt_stack.h"

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

/*
 * The user stack is read a chunk at a time, not a word per frame: each
 * bpf_probe_read_user costs ~50 ns whatever its size up to a few hundred
 * bytes (fault handling set up, hardened usercopy checks), and a chunk
 * holds several frames' return addresses.  Aligned, so a chunk never
 * crosses a page: it is readable whenever the word asked for is.
 */
#define STACK_CHUNK 512

struct stack_window {
	__u64 base; /* user address of bytes[0]; 0: nothing read yet */
	__u8 bytes[STACK_CHUNK];
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
};

/*
 * The code mappings a thread's last walks went through, kept while its
 * process's mappings do not change.  Finding a pc's mapping through the
 * kernel (bpf_find_vma, then the file's entry in stack_files) costs
 * ~150 ns, and a walk changes files 3-5 times (program, libraries, libc's
 * start, the program's _start again), every call.  The kernel counts
 * every change of a process's mappings in mm->mm_lock_seq (odd while one
 * is under way): a cache filled under another count is stale.  Per
 * thread, so no two CPUs ever write the same cache; task storage goes
 * away with the thread.
 */
#define MAPPING_CACHE_SLOTS 8

struct mapping_cache {
	__u64 mm;   /* the mm_struct its slots describe */
	__u32 seq;  /* mm->mm_lock_seq when they were found */
	__u32 next; /* the slot to fill next (round robin) */
	struct code_mapping slot[MAPPING_CACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mapping_cache);
} mapping_caches SEC(".maps");

/* The walk's state from frame to frame. */
struct unwind {
	struct task_struct *task;
	struct mt_stack_record *rec;
	struct stack_window *window;
	struct mapping_cache *cache; /* NULL: none usable this walk */
	__u64 pc, sp, bp;
	__u64 trampoline; /* where uretprobes return to, or 0 */
	__u64 hash;
	__u32 nframes;
	bool complete;
	struct code_mapping map; /* the mapping the last pc was in */
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
	if (!file)
		return 0;
	map->to_elf = (__s64)(vma->vm_pgoff * page_size) - vma->vm_start +
		      file->vaddr_minus_offset;
	map->id = file->id;
	map->first_row = file->first_row;
	map->nrows = file->nrows;
	map->first_page = file->first_page;
	map->page_base = file->page_base;
	map->npages = file->npages;
	return 0;
}

/*
 * *map becomes the mapping of pc (id 0: none mt-trace knows): from the
 * cache, else from the kernel's VMA, then kept in the cache.  A global
 * function: the verifier checks it once on its own, and the walk sees only
 * that *map changed (checked inside the walk, the cache's paths took the
 * verifier from 25 k to 450 k instructions, ~4 s of every start).
 */
__attribute__((noinline)) int
find_mapping(struct code_mapping *map, struct mapping_cache *cache, __u64 pc)
{
	struct code_mapping found = {};

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
		cache->slot[cache->next++ % MAPPING_CACHE_SLOTS] = found;
	return 0;
}

/* The current thread's mapping cache, emptied when its process's mappings
 * changed since it was filled; NULL while they are changing, or where the
 * kernel keeps no count of changes (before Linux 6.14). */
static __always_inline struct mapping_cache *
thread_mapping_cache(struct task_struct *task)
{
	struct mm_struct *mm = task->mm;
	struct mapping_cache *cache;
	__u32 seq;

	if (!bpf_core_field_exists(mm->mm_lock_seq))
		return NULL;
	seq = mm->mm_lock_seq.sequence;
	if (seq & 1)
		return NULL;
	cache = bpf_task_storage_get(&mapping_caches, task, NULL,
				     BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!cache)
		return NULL;
	if (cache->mm != (__u64)mm || cache->seq != seq) {
		for (int i = 0; i < MAPPING_CACHE_SLOTS; i++)
			cache->slot[i].end = 0;
		cache->mm = (__u64)mm;
		cache->seq = seq;
	}
	return cache;
}

/* The index of the row in effect at addr among a file's rows, or -1:
 * a binary search between the rows in effect at the start of addr's page
 * and of the next (2-4 steps in libc, against 15 over all its rows).
 * Global, like find_mapping: the verifier walks the search's 22 steps
 * once, not once per path through the frame. */
__attribute__((noinline)) int cfi_row_index(const struct code_mapping *map,
					    __u64 addr)
{
	__u32 lo, hi, mid, page, at;
	struct mt_cfi_row *row;
	__u64 *bound;

	if (!map)
		return -1;
	lo = map->first_row;
	hi = lo + map->nrows;
	page = (addr >> MT_CFI_PAGE_SHIFT) - map->page_base;
	if (addr >> MT_CFI_PAGE_SHIFT >= map->page_base && page < map->npages) {
		at = map->first_page + page;
		bound = bpf_map_lookup_elem(&cfi_pages, &at);
		if (bound)
			lo = map->first_row + *bound;
		at++;
		bound = page + 1 < map->npages
			    ? bpf_map_lookup_elem(&cfi_pages, &at)
			    : NULL;
		if (bound && map->first_row + *bound + 1 < hi)
			hi = map->first_row + *bound + 1;
	}
	for (int i = 0; i < CFI_SEARCH_STEPS && lo < hi; i++) {
		mid = lo + (hi - lo) / 2;
		row = bpf_map_lookup_elem(&cfi_rows, &mid);
		if (!row)
			return -1;
		if (row->addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == map->first_row)
		return -1; /* before the file's first row */
	return lo - 1;
}

static __always_inline struct mt_cfi_row *find_row(const struct unwind *u,
						   __u64 addr)
{
	int at = cfi_row_index(&u->map, addr);

	return at < 0 ? NULL : bpf_map_lookup_elem(&cfi_rows, &at);
}

/* Where the caller's frame starts (its CFA), by the row's rule; 0 when the
 * walk ends here. */
static __always_inline __u64 frame_cfa(struct unwind *u,
				       const struct mt_cfi_row *row)
{
	switch (row->cfa_rule) {
	case MT_CFA_RSP:
		return u->sp + row->cfa_offset;
	case MT_CFA_RBP:
		return u->bp + row->cfa_offset;
	case MT_CFA_PLT:
		return u->sp + row->cfa_offset +
		       ((u->pc & 15) >= row->plt_threshold ? 8 : 0);
	case MT_CFA_END:
		u->complete = true;
		return 0;
	}
	return 0;
}

/*
 * A return address the kernel replaced with its uretprobe trampoline (an
 * allocator call in flight: malloc's own brk or mmap): the real one, from
 * the thread's return instances, matched by the stack slot it was in.
 */
static __always_inline __u64 hijacked_return(const struct unwind *u, __u64 slot)
{
	struct task_struct *task = u->task;
	struct return_instance *ri =
	    BPF_CORE_READ(task, utask, return_instances);

	for (int i = 0; i < 4 && ri; i++) {
		if (BPF_CORE_READ(ri, stack) == slot)
			return BPF_CORE_READ(ri, orig_ret_vaddr);
		ri = BPF_CORE_READ(ri, next);
	}
	return 0;
}

/* The user word at addr, through the window (0 when read). */
static __always_inline long read_stack_word(struct unwind *u, __u64 addr,
					    __u64 *word)
{
	struct stack_window *w = u->window;
	__u64 base = addr & ~(__u64)(STACK_CHUNK - 1);
	__u32 at = addr - base;

	if (at > STACK_CHUNK - sizeof(*word)) /* straddles two chunks */
		return bpf_probe_read_user(word, sizeof(*word), (void *)addr);
	if (w->base != base) {
		if (bpf_probe_read_user(w->bytes, STACK_CHUNK, (void *)base)) {
			w->base = 0;
			return bpf_probe_read_user(word, sizeof(*word),
						   (void *)addr);
		}
		w->base = base;
	}
	*word = *(__u64 *)&w->bytes[at & (STACK_CHUNK - 1)];
	return 0;
}

/* One frame: record pc, then step to the caller.  bpf_loop callback:
 * 1 ends the walk. */
static long unwind_step(__u32 i, void *ctx)
{
	struct unwind *u = ctx;
	struct mt_cfi_row *row;
	__u64 elf_addr, frame, cfa, ra = 0, bp;

	if (u->pc < u->map.start || u->pc >= u->map.end)
		find_mapping(&u->map, u->cache, u->pc);
	elf_addr = u->pc + u->map.to_elf;
	frame = u->map.id ? MT_FRAME(u->map.id, elf_addr) : MT_FRAME(0, u->pc);
	if (i >= MT_STACK_DEPTH_MAX)
		return 1;
	u->rec->frames[i] = frame;
	u->nframes = i + 1;
	u->hash = (u->hash ^ frame) * 0x100000001b3ull; /* FNV-1a */
	if (!u->map.id || !u->map.nrows)
		return 1;
	/* a return address: the call before it is what the rows describe */
	row = find_row(u, elf_addr - 1);
	if (!row)
		return 1;
	cfa = frame_cfa(u, row);
	if (!cfa)
		return 1;
	if (read_stack_word(u, cfa - 8, &ra))
		return 1;
	if (ra && ra == u->trampoline)
		ra = hijacked_return(u, cfa - 8);
	if (!ra)
		return 1;
	if (row->rbp_rule == MT_RBP_SAVED) {
		if (read_stack_word(u, cfa + row->rbp_offset, &bp))
			return 1;
		u->bp = bp;
	}
	u->sp = cfa;
	u->pc = ra;
	return 0;
}

static __always_inline struct mt_stack_record *stack_scratch_record(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stack_scratch, &zero);
}

/* Send a stack the table does not hold (every time, when the table is
 * full: mt-trace keeps one of each). */
static __always_inline void send_new_stack(struct mt_stack_record *rec,
					   __u64 key)
{
	__u64 bytes;

	if (bpf_map_update_elem(&stacks, &key, rec, BPF_NOEXIST) == -EEXIST_)
		return; /* another CPU just sent it */
	bytes = sizeof(rec->ev) + rec->ev.size * sizeof(rec->frames[0]);
	if (bytes > sizeof(*rec))
		bytes = sizeof(*rec);
	/* no room in the ring: not a lost event, mt-trace reads the stack
	 * from the table instead (only a full table loses it) */
	bpf_ringbuf_output(&events, rec, bytes, 0);
}

/*
 * The call stack of the current thread, whose user registers are ip, sp,
 * bp: its key (0 when there is no room).  ip must be a return address or
 * just past a system call instruction.  A global function, so the
 * verifier checks it once on its own, and only when a program can reach
 * it (callers test stacks_enabled first): inlined into each caller it
 * cost ~0.5 s of verification at every start.
 */
__attribute__((noinline)) __u64 capture_stack(__u64 pid_tgid, __u64 ip,
					      __u64 sp, __u64 bp)
{
	struct mt_stack_record *rec;
	struct task_struct *task;
	struct unwind u = {};
	__u32 zero = 0;
	__u64 key;

	rec = stack_scratch_record();
	u.window = bpf_map_lookup_elem(&stack_windows, &zero);
	if (!rec || !u.window)
		return 0;
	u.window->base = 0; /* the stack changed since the last walk */
	task = bpf_get_current_task_btf();
	u.cache = thread_mapping_cache(task);
	u.task = task;
	u.rec = rec;
	u.pc = ip;
	u.sp = sp;
	u.bp = bp;
	u.trampoline = task->mm->uprobes_state.xol_area->vaddr;
	u.hash = 0xcbf29ce484222325ull;
	bpf_loop(stack_depth, unwind_step, &u, 0);
	if (u.nframes == 0)
		return 0;
	key = u.hash ? u.hash : 1;
	if (bpf_map_lookup_elem(&stacks, &key))
		return key; /* sent before */
	fill_event(&rec->ev, MT_EV_STACK, pid_tgid);
	rec->ev.addr = key;
	rec->ev.size = u.nframes;
	rec->ev.flags = u.complete ? 0 : MT_STACK_TRUNCATED;
	rec->ev.aux = u.nframes * sizeof(rec->frames[0]);
	send_new_stack(rec, key);
	return key;
}

/* The stack of a traced allocator call, at its return (ctx: the return's
 * registers, so the innermost frame is the allocator's caller). */
static __always_inline __u64 call_stack(struct pt_regs *ctx, __u64 pid_tgid)
{
	if (!stacks_enabled)
		return 0;
	return capture_stack(pid_tgid, PT_REGS_IP(ctx), PT_REGS_SP(ctx),
			     ctx->bp);
}

/* The stack of a system call, from its user registers. */
static __always_inline __u64 syscall_stack(struct pt_regs *regs, __u64 pid_tgid)
{
	if (!stacks_enabled)
		return 0;
	return capture_stack(pid_tgid, BPF_CORE_READ(regs, ip),
			     BPF_CORE_READ(regs, sp), BPF_CORE_READ(regs, bp));
}

/* Reserve an events-ring record for an event with stack key (0: none). */
static __always_inline struct mt_event *reserve_stacked(__u64 stack_key)
{
	struct mt_stacked_event *se;

	if (!stack_key)
		return reserve_event();
	se = bpf_ringbuf_reserve(&events, sizeof(*se), 0);
	if (!se) {
		ring_full(MT_LOST_EVENTS_RING, events_high_water);
		return NULL;
	}
	se->stack_key = stack_key;
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
