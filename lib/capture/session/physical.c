// SPDX-License-Identifier: MIT
/*
 * physical.c - how --physical can be measured on this kernel.
 *
 * The exact way is to count pages as the kernel's reverse map adds and
 * removes them (folio_add_*_rmap_*, folio_remove_rmap_*), which only fentry
 * reaches.  Where fentry is refused (kernel lockdown), mt-trace
 * samples each live traced process's /proc/PID/smaps_rollup instead.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "mt_tracer.h"

/* Can a trivial fentry program be loaded on the rmap function? */
static int probe_fentry(const char *func)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = BPF_TRACE_FENTRY);
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int id, fd;

	if (!vmlinux)
		return -ENOENT;
	id = btf__find_by_name_kind(vmlinux, func, BTF_KIND_FUNC);
	btf__free(vmlinux);
	if (id < 0)
		return -ENOENT;
	opts.attach_btf_id = id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "mt_rmap_probe", "GPL", insns,
			   2, &opts);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

const char *mt_physical_method_note(bool probe)
{
	static char note[256];
	int err;

	/* the probe parses the kernel's 5 MB BTF (4.6 MB of peak RSS, ~20 ms)
	 * to say why the exact method is not used: only when asked (-v) */
	if (!probe)
		return "sampling /proc/PID/smaps_rollup (PSS)";
	err = probe_fentry("folio_add_anon_rmap_ptes");
	if (err == 0)
		snprintf(note, sizeof(note),
			 "the kernel allows fentry on its rmap functions, but "
			 "mt-trace does not count pages from them yet; "
			 "sampling /proc/PID/smaps_rollup (PSS)");
	else
		snprintf(note, sizeof(note),
			 "fentry on the kernel's rmap functions is refused "
			 "(%s); sampling /proc/PID/smaps_rollup (PSS)",
			 strerror(-err));
	return note;
}
