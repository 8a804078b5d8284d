/* SPDX-License-Identifier: MIT */
/*
 * mt_trace_btf.S - the kernel types mt_trace.bpf.c reads, carried inside
 * mt-trace so it need not parse the kernel's own 5 MB BTF at every start.
 *
 * mt_trace.min.btf is cut from the build kernel's BTF by `bpftool gen
 * min_core_btf` (only the types and fields the program's CO-RE reads name);
 * kernel.notes is that kernel's /sys/kernel/notes (its GNU build ID).  The
 * types are only right for that kernel, so lib/core_btf.c uses them only
 * when the running kernel's notes are the same bytes.  Either file may be
 * empty (bpftool could not cut, no notes): then the kernel's BTF is used.
 */
	.section .rodata
	.balign 8
	.globl mt_core_btf
	.globl mt_core_btf_end
	.globl mt_core_btf_notes
	.globl mt_core_btf_notes_end
mt_core_btf:
	.incbin "mt_trace.min.btf"
mt_core_btf_end:
	.balign 8
mt_core_btf_notes:
	.incbin "kernel.notes"
mt_core_btf_notes_end:

	.section .note.GNU-stack,"",@progbits
