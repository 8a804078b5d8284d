/* SPDX-License-Identifier: MIT */
/*
 * mt_event.h - the one event record shared by the BPF programs (bpf/),
 * mt-trace, and every reader/writer in lib/.
 *
 * The record is fixed-size (MT_EVENT_SIZE bytes) and little-endian: it is
 * what the kernel side writes into the ring buffer and, unchanged, what the
 * raw stream carries in its batches (see man/mt-format.5).  Keep it free of
 * padding holes so that the bytes on disk are fully defined.
 *
 * This header must compile both under vmlinux.h (BPF, where __u64 and
 * friends come from the kernel's BTF) and in userspace (<linux/types.h>).
 */
#ifndef MT_EVENT_H
#define MT_EVENT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Event kinds.  Values are part of the raw format: never renumber. */
enum mt_event_kind {
	MT_EV_NONE = 0,
	/* allocator calls (uprobes) */
	MT_EV_MALLOC = 1, /* addr, size */
	MT_EV_FREE = 2,	  /* addr */
	MT_EV_CALLOC = 3, /* addr, size = nmemb * size */
	MT_EV_REALLOC =
	    4, /* addr (new), size, old_addr (0 for realloc(NULL, n)) */
	MT_EV_ALIGNED_ALLOC = 5, /* addr, size, old_size = alignment */
	/* address-space system calls (syscall tracepoints), successful only */
	MT_EV_MMAP = 6,	  /* addr, size, aux = MAP_* flags, flags = PROT_* */
	MT_EV_MUNMAP = 7, /* addr, size */
	MT_EV_MREMAP = 8, /* addr (new), size (new), old_addr, old_size */
	MT_EV_BRK = 9,	  /* addr = new break, old_addr = previous break */
	/* process life (sched tracepoints, own ring buffer) */
	MT_EV_FORK = 10, /* pid = new process, old_addr = parent pid */
	/* aux = payload length; the path follows in DATA records, and when
	 * size is not 0, a NUL and the size bytes of the program's arguments
	 * (each ending in a NUL, as the kernel keeps them); old_size = the
	 * argument area's whole length, flags = MT_EXEC_ARGS_CUT when the
	 * record holds only its first MT_ARGS_MAX bytes */
	MT_EV_EXEC = 11,
	MT_EV_EXIT = 12, /* aux = wait(2)-style status of the process */
	/* MT_EV_DATA is never the kind of a stored record: it names the
	 * payload slots that follow an EXEC or MARKER record.  That record's
	 * aux holds the payload length n; the next ceil(n / MT_EVENT_SIZE)
	 * slots of the batch hold the bytes, zero padded, with no header. */
	MT_EV_DATA = 13,
	/* reserved for later event kinds (RSS, physical, markers, toggles) */
	MT_EV_RSS = 14, /* aux = member (0 file, 1 anon, 2 swap, 3 shmem), size
			   = bytes */
	MT_EV_PSS = 15, /* size = Pss, addr = Pss_Anon, old_addr = Pss_File,
			   old_size = Pss_Shmem */
	MT_EV_MARKER = 16, /* aux = name length; name follows in DATA records */
	MT_EV_ENABLE = 17,
	MT_EV_DISABLE = 18,
	/* never produced by BPF: readers turn a batch's lost count into a
	 * LOST record (size = events lost) placed before the batch's events */
	MT_EV_LOST = 19,
	/* an allocator was found and traced in an ELF file: flags = family
	 * (lib/common/mt_allocators.h), aux = path length, the path follows in
	 * DATA slots; pid = the process that mapped it (0: before the start) */
	MT_EV_ALLOCATOR = 20,
	/* never in a stream: the BPF side tells mt-trace that a traced
	 * process mapped code from a file not yet inspected (and stopped it):
	 * addr = where (0 for an exec), old_addr = device, old_size = inode,
	 * aux = the inode's generation (bpf/mt_probe.h, mt_code_seen) */
	MT_EV_NEW_CODE = 21,
	/* Call stacks (man/mt-format.5, "Call stacks").  A STACK_REF
	 * record stands right before the allocation or address-space event
	 * it belongs to (same pid, tid and timestamp): addr = the stack id.
	 * It is never an event of its own: readers hand its id over with
	 * the next record (struct mt_record.stack). */
	MT_EV_STACK_REF = 22,
	/* A distinct call stack, once, before the first STACK_REF to it:
	 * addr = stack id (1, 2, ...), size = number of frames, flags =
	 * MT_STACK_*, aux = payload length (8 bytes a frame); the payload
	 * holds the frames, innermost first, as MT_FRAME() values. */
	MT_EV_STACK = 23,
	/* A file whose code traced processes map, once, before the first
	 * frame in it: addr = file id (1..MT_FRAME_FILE_MAX), old_addr =
	 * device (major << 20 | minor), old_size = inode, flags = build-id
	 * length in bytes (0: none), aux = payload length; the payload holds
	 * the build-id bytes, then the path (aux - flags bytes, no NUL). */
	MT_EV_CODE_FILE = 24,
	/* A process mapped code of a file: addr = start, size = length,
	 * old_addr = offset in the file, old_size = file id. */
	MT_EV_CODE_MAP = 25,
	/* A CPython code object, once, before the first Python frame in it
	 * (MT_FRAME_FILE_PYTHON): addr = code id (1..MT_PYCODE_ID_MAX),
	 * size = its first line, flags = the interpreter's version (major
	 * << 8 | minor: the line table's format), aux = payload length; the
	 * payload: four little-endian u32 lengths (name, qualified name,
	 * file name, line table), then those bytes (man/mt-format.5). */
	MT_EV_PYCODE = 26,
	MT_EV_KIND_MAX
};

/* MT_EV_MMAP flags: beside the PROT_* bits, the mapping is mt-trace's own
 * (the shared memory of the --fast recorder): memory the tracer adds to
 * the process, never counted as the program's (man/mt-format.5). */
#define MT_MMAP_TRACER 0x8000

/* MT_EV_RSS flags: the change was the tracer's (a page fault in memory
 * the tracer added, or of an instruction of the in-process recorder): the
 * pages it added or removed are the tracer's, not the program's
 * (man/mt-format.5, "Rss"). */
#define MT_RSS_TRACER 0x8000

/* MT_EV_EXEC flags: the arguments were cut (at MT_ARGS_MAX bytes; old_size
 * says how long they were). */
#define MT_EXEC_ARGS_CUT 0x1

/* MT_EV_STACK flags.  Truncated: the stack stops short of the thread's
 * first frame (the depth limit, or code the unwinder has no rules for). */
#define MT_STACK_TRUNCATED 0x1

/*
 * A stack frame: a file id (MT_EV_CODE_FILE) in the top 16 bits, the
 * frame's address in that file in the low 48: the ELF virtual address
 * (what addr2line -e FILE and gdb's "info symbol" take; for most shared
 * libraries the same as the file offset).  File 0: code in no known file
 * (the vDSO, JIT code), the address is the process's own.  Every frame is
 * a return address (the instruction after a call, also for the innermost
 * frame: the allocator has returned), so symbolizers look up address - 1.
 */
#define MT_FRAME_FILE_BITS 16
#define MT_FRAME_ADDR_BITS 48
#define MT_FRAME_FILE_MAX  ((1u << MT_FRAME_FILE_BITS) - 2)
#define MT_FRAME_ADDR_MASK ((1ull << MT_FRAME_ADDR_BITS) - 1)
#define MT_FRAME(file, addr)                                                   \
	(((__u64)(file) << MT_FRAME_ADDR_BITS) | ((addr)&MT_FRAME_ADDR_MASK))
#define MT_FRAME_FILE(frame) ((unsigned)((frame) >> MT_FRAME_ADDR_BITS))
#define MT_FRAME_ADDR(frame) ((frame)&MT_FRAME_ADDR_MASK)

/*
 * A Python frame: the file id no file has, the code object's id
 * (MT_EV_PYCODE) in the address's top 28 bits, the offset of the
 * instruction it runs in its low 20 (in 2-byte code units, as CPython's
 * line table counts them).  It stands just inside the native frame of the
 * evaluation loop call that runs it (_PyEval_EvalFrameDefault).
 */
#define MT_FRAME_FILE_PYTHON   ((1u << MT_FRAME_FILE_BITS) - 1)
#define MT_PYFRAME_OFFSET_BITS 20
#define MT_PYFRAME_OFFSET_MAX  ((1u << MT_PYFRAME_OFFSET_BITS) - 1)
#define MT_PYCODE_ID_MAX                                                       \
	((1u << (MT_FRAME_ADDR_BITS - MT_PYFRAME_OFFSET_BITS)) - 1)
#define MT_PYFRAME(code, offset)                                               \
	MT_FRAME(MT_FRAME_FILE_PYTHON,                                         \
		 ((__u64)(code) << MT_PYFRAME_OFFSET_BITS) | (offset))
#define MT_PYFRAME_CODE(frame)                                                 \
	((unsigned)(MT_FRAME_ADDR(frame) >> MT_PYFRAME_OFFSET_BITS))
#define MT_PYFRAME_OFFSET(frame)                                               \
	((unsigned)(MT_FRAME_ADDR(frame) & MT_PYFRAME_OFFSET_MAX))
/* The longest MT_EV_PYCODE payload (a longer line table is cut short:
 * the lines past its end are unknown) */
#define MT_PYCODE_PAYLOAD_MAX 8192

/* Deepest stack recorded (mt-trace --stack-depth). */
#define MT_STACK_DEPTH_MAX 127

struct mt_event {
	__u64 timestamp; /* CLOCK_MONOTONIC, ns (bpf_ktime_get_ns) */
	__u32 pid;	 /* process (thread group) id */
	__u32 tid;	 /* thread id */
	__u16 kind;	 /* enum mt_event_kind */
	__u16 flags;	 /* kind-specific, e.g. PROT_* for mmap */
	__u32 aux;	 /* kind-specific: MAP_* flags, exit status, length */
	__u64 addr;
	__u64 size;
	__u64 old_addr;
	__u64 old_size;
};

#define MT_EVENT_SIZE 56

/* Bytes of payload one MT_EV_DATA record carries. */
#define MT_DATA_PER_RECORD MT_EVENT_SIZE

/* Longest exec path / marker name the kernel side records. */
#define MT_PATH_MAX 4096

/* The most bytes of an exec'd program's argument area recorded (its
 * arguments, each ending in a NUL; the last cut one gets a NUL of its
 * own, so an Exec's arguments are at most MT_ARGS_MAX + 1 bytes). */
#define MT_ARGS_MAX 4096

#endif /* MT_EVENT_H */
