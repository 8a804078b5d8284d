#!/usr/bin/python3
"""probe_hits.py: how often a tracer's allocator program ran while a command
ran, and what a process's code bytes are, for tests/confine.bats.

  probe_hits.py runs TRACER_PID -- CMD...
      Turns on the kernel's BPF run statistics (BPF_ENABLE_STATS, held only
      while this runs), runs CMD, and prints one JSON line:
      {"runs": N, "programs": [names], "status": S}: N is how many times
      the allocator programs (alloc_*) that TRACER_PID holds ran meanwhile.
      A uprobe that traps a process runs its program, whoever the process
      is, so N counts the traps the tracer's probes caused.

  probe_hits.py code PID FUNC
      The first 8 bytes of FUNC (a libc function) in PID's memory and in
      the file PID maps libc from, and that file's dev:ino as PID sees it:
      {"mem": HEX, "file": HEX, "dev_ino": "MAJ:MIN INO"}.  A uprobe writes
      an int3 (cc) into the process's copy of the page.
"""
import ctypes
import json
import os
import re
import subprocess
import sys

NR_BPF = 321          # x86_64
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


def enable_stats():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(8)  # union bpf_attr.enable_stats.type
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(NR_BPF), ctypes.c_long(BPF_ENABLE_STATS),
                      attr, ctypes.c_uint(4))
    if fd < 0:
        sys.exit("BPF_ENABLE_STATS: " + os.strerror(ctypes.get_errno()))
    return fd


def fdinfo(pid, fd):
    info = {}
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as f:
            for line in f:
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def prog_name(prog_id):
    out = subprocess.run(["bpftool", "prog", "show", "id", prog_id, "-j"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out).get("name", "")


def alloc_runs(pid):
    """{prog_id: (name, run_cnt)} of the allocator programs pid holds
    (alloc_*, or session_stacks and return_stacks under --stacks)."""
    progs = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
        except OSError:
            continue
        info = fdinfo(pid, fd)
        prog_id = info.get("prog_id")
        if not prog_id or prog_id in progs:
            continue
        name = prog_name(prog_id)
        if name.startswith("alloc_") or name in ("session_stacks",
                                                  "return_stacks"):
            progs[prog_id] = (name, int(info.get("run_cnt", "0")), fd)
    return progs


def runs(pid, cmd):
    stats = enable_stats()
    before = alloc_runs(pid)
    if not before:
        sys.exit(f"pid {pid} holds no allocator BPF program")
    status = subprocess.run(cmd).returncode
    total = 0
    for prog_id, (name, count, fd) in before.items():
        total += int(fdinfo(pid, fd).get("run_cnt", "0")) - count
    os.close(stats)
    print(json.dumps({"runs": total,
                      "programs": sorted(n for n, _, _ in before.values()),
                      "status": status}))


def libc_mappings(pid):
    """pid's libc mappings: [(path, dev:ino, start, end, file offset)]."""
    found = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and re.search(r"/libc\.so\.6$", fields[5]):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                found.append((fields[5], fields[3] + " " + fields[4], start,
                              end, int(fields[2], 16)))
    if not found:
        sys.exit(f"pid {pid} maps no libc.so.6")
    return found


def symbol_offset(path, func):
    """File offset of func's code in the ELF file path (readelf -Ws)."""
    syms = subprocess.run(["readelf", "-Ws", path], capture_output=True,
                          text=True, check=True).stdout
    for line in syms.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[7].split("@")[0] == func:
            vaddr = int(f[1], 16)
            break
    else:
        sys.exit(f"{path}: no function {func}")
    heads = subprocess.run(["readelf", "-Wl", path], capture_output=True,
                           text=True, check=True).stdout
    for line in heads.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, size = int(f[1], 16), int(f[2], 16), int(f[5], 16)
            if va <= vaddr < va + size:
                return vaddr - va + off
    sys.exit(f"{path}: {func} in no PT_LOAD")


def code(pid, func):
    maps = libc_mappings(pid)
    path, dev_ino = maps[0][0], maps[0][1]
    # the file as pid sees it (its mount namespace), and pid's bytes
    file_path = f"/proc/{pid}/root{path}"
    off = symbol_offset(file_path, func)
    with open(file_path, "rb") as f:
        f.seek(off)
        file_bytes = f.read(8)
    for _, _, start, end, map_off in maps:
        if map_off <= off < map_off + (end - start):
            with open(f"/proc/{pid}/mem", "rb") as m:
                m.seek(start + off - map_off)
                mem_bytes = m.read(8)
            break
    else:
        sys.exit(f"pid {pid}: {func} at file offset {off:#x} is not mapped")
    print(json.dumps({"mem": mem_bytes.hex(), "file": file_bytes.hex(),
                      "dev_ino": dev_ino}))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "runs" and sys.argv[3] == "--":
        runs(int(sys.argv[2]), sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "code":
        code(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
