/* SPDX-License-Identifier: MIT */
/*
 * mt_stack.h - what the BPF side's stack unwinder shares with mt-trace:
 * the unwind rows mt-trace builds from each code file's .eh_frame
 * (lib/capture/stacks/cfi.c) and the kernel side walks, the table telling which
 * rows belong to which file, and the ring records carrying stacks.  Not
 * a stream format: the raw stream's stack records are in mt_event.h.
 */
#ifndef MT_STACK_H
#define MT_STACK_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "mt_event.h"

/* How a row finds the canonical frame address (CFA, the caller's stack
 * pointer before the call; the return address sits at CFA - 8). */
enum mt_cfa_rule {
	MT_CFA_NONE = 0, /* no rule here: code without unwind information,
			  * or one mt cannot follow (an expression) */
	MT_CFA_RSP = 1,	 /* CFA = rsp + cfa_offset */
	MT_CFA_RBP = 2,	 /* CFA = rbp + cfa_offset */
	MT_CFA_PLT = 3,	 /* a PLT stub: rsp + 8, + 8 more when
			  * (rip & 15) >= plt_threshold */
	MT_CFA_END = 4,	 /* the return address is undefined: the thread's
			  * first frame (_start, clone's child) */
};

/* Where the caller's rbp is. */
enum mt_rbp_rule {
	MT_RBP_SAME = 0,  /* unchanged by this frame */
	MT_RBP_SAVED = 1, /* at CFA + rbp_offset */
	MT_RBP_LOST = 2,  /* unknown (a rule mt cannot follow) */
};

/*
 * One unwind row: the rules that hold from addr (an ELF virtual address
 * of its file) up to the next row's addr.  A file's rows are sorted by
 * addr; a gap between functions gets an MT_CFA_NONE row.  16 bytes, so a
 * million rows (libc has 28 k, python3.11 65 k) take 16 MiB.
 */
struct mt_cfi_row {
	__u32 addr;
	__u8 cfa_rule;	     /* enum mt_cfa_rule */
	__u8 rbp_rule;	     /* enum mt_rbp_rule */
	__u16 plt_threshold; /* MT_CFA_PLT only */
	__s32 cfa_offset;
	__s32 rbp_offset;
};

/*
 * A code file known to the unwinder (key: struct mt_code_key).  Its page
 * index narrows the binary search for an address to the rows of the
 * address's 4 KiB page: entry i is the row (counted from first_row) in
 * effect at ELF address (page_base + i) << MT_CFI_PAGE_SHIFT.
 */
#define MT_CFI_PAGE_SHIFT 12

struct mt_stack_file {
	__u32 id;	  /* the CODE_FILE id frames in it carry */
	__u32 first_row;  /* its rows in the rows array */
	__u32 nrows;	  /* 0: no unwind rows (frames still named) */
	__u32 first_page; /* its page index in the pages array */
	__u32 page_base;  /* the ELF page number of the index's entry 0 */
	__u32 npages;	  /* 0: no index */
	/* the inode's i_generation, when the file system says
	 * (FS_IOC_GETVERSION): a new file on a deleted one's inode number
	 * has another, and is not this file */
	__u32 generation;
	__u32 generation_known;
	/* ELF virtual address minus file offset of its code: the kernel
	 * knows where a mapping comes from in the file, the rows and the
	 * frames speak ELF addresses */
	__s64 vaddr_minus_offset;
	/* a CPython interpreter's file (its _PyRuntime symbol): the ELF
	 * address of _PyRuntime, and 1 + the index of its version in
	 * mt_py_layouts (bpf/mt_python.h); 0: none, or a version mt does
	 * not know */
	__u64 py_runtime;
	__u32 py_file; /* 1 + its entry in py_files (struct mt_py_file) */
	__u32 py_pad;
};

/* An interpreter's file, as the BPF side's Python walk needs it: its
 * version's layout and where its type objects are, from its _PyRuntime
 * (the same file: the same distance in every process). */
#define MT_PY_FILES_MAX 64
struct mt_py_file {
	__u32 layout; /* index in mt_py_layouts */
	__u32 pad;
	__s64 code_type, str_type, bytes_type;
};

/* Ring record of an event that has a call stack: the event, then the
 * stack's key (a hash of its frames); mt-trace writes a STACK_REF record
 * with the stack's id before the event. */
struct mt_stacked_event {
	struct mt_event ev;
	__u64 stack_key;
};

/* Ring record (kind MT_EV_STACK, addr = key, size = frames, flags =
 * MT_STACK_*) describing a stack the first time it is seen, and the value
 * of the BPF side's stack table. */
struct mt_stack_record {
	struct mt_event ev;
	__u64 frames[MT_STACK_DEPTH_MAX];
};

/*
 * The Python frames a thread was running (CPython 3.11, 3.12), as the BPF
 * side reads them: a ring record (kind MT_EV_STACK, flags
 * MT_STACK_RING_PYTHON, addr = key, size = frames) sent once per distinct
 * list, like a native stack, and the value of its table.  Each frame is
 * its code object's address and where its instruction pointer is
 * (prev_instr); MT_PY_GROUP_END in code marks the last (outermost) frame
 * of an evaluation loop call, whose native frame
 * (_PyEval_EvalFrameDefault) mt-trace puts them in.  mt-trace reads the
 * code objects from the process (lib/capture/stacks/tracer_python.c).
 */
#define MT_STACK_RING_PYTHON 0x8000
#define MT_PY_FRAMES_MAX     64
#define MT_PY_GROUP_END	     (1ull << 63)

struct mt_py_frame {
	__u64 code;	  /* | MT_PY_GROUP_END */
	__u64 prev_instr; /* an address in the code object */
};

struct mt_py_stack_record {
	struct mt_event ev;
	struct mt_py_frame frames[MT_PY_FRAMES_MAX];
};

/*
 * A code object, read by the BPF side the first time a process's stack
 * has a frame of it (while it surely exists): a ring record (kind
 * MT_EV_STACK, flags MT_STACK_RING_PYCODE, addr = its address, old_addr
 * = 1 + layout index, size = its first line, aux = bytes sent: the
 * record up to its line table's end).  Each part's length in len[].
 */
#define MT_STACK_RING_PYCODE 0x4000
#define MT_PY_NAME_MAX	     256
#define MT_PY_QUALNAME_MAX   512
#define MT_PY_FILE_MAX	     1024
#define MT_PY_TABLE_MAX	     4096

struct mt_py_code_record {
	struct mt_event ev;
	__u32 len[4]; /* name, qualified name, file name, line table */
	__s32 firsttraceable;
	__u32 co_code; /* where its instructions start in the object */
	char name[MT_PY_NAME_MAX];
	char qualname[MT_PY_QUALNAME_MAX];
	char file[MT_PY_FILE_MAX];
	__u8 table[MT_PY_TABLE_MAX];
};

/* Ring record of an event whose stack has Python frames too. */
struct mt_py_stacked_event {
	struct mt_event ev;
	__u64 stack_key;
	__u64 py_key; /* of its mt_py_stack_record */
};

#endif /* MT_STACK_H */
