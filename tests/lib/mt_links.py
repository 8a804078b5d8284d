#!/usr/bin/python3
"""The BPF programs of one mt-trace session, and the links that run them.

Other mt-trace sessions may run on the same machine: a test counts only
what its own session loaded.  The kernel (not mt) is the outside truth:
/proc/PID/fdinfo names the program behind each BPF fd a process holds, and
`bpftool -j link show` / `prog show` list every link and loaded program.

  mt_links.py progs PID      ids of the mt programs PID holds, one line
  mt_links.py count ID...    "LINKS LOADED": how many links run one of these
                             programs, how many of them are still loaded
  mt_links.py types ID...    the type of each link that runs one of these
                             programs, one a line (bpftool's name, or its
                             number: 12 is uprobe_multi, which bpftool 7.1
                             does not name)
  mt_links.py named ID...    "TYPE NAME" of each link that runs one of these
                             programs (NAME: the program's), one a line
  mt_links.py runs ID...     "NAME RUN_CNT" of each of these programs (with
                             kernel.bpf_stats_enabled=1)
  mt_links.py sizes ID...    "NAME INSNS" of each of these programs: its
                             instructions as the kernel keeps them
"""
import json
import os
import subprocess
import sys

MT_PROGS = {"alloc_session", "alloc_enter", "alloc_return", "on_sys_exit",
            "session_stacks", "return_stacks", "sys_exit_stacks",
            "on_fork", "on_exec", "on_exit", "on_signal_generate",
            "on_rss_owner", "on_rss_size"}


def bpftool(*args):
    out = subprocess.run(["bpftool", "-j", *args], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else []


def held_prog_ids(pid):
    """Program ids behind the BPF fds (programs and links) of pid."""
    ids = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        return ids  # it exited
    for fd in fds:
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass  # closed meanwhile
    return ids


def main(argv):
    if len(argv) >= 2 and argv[0] == "progs":
        names = {p["id"]: p.get("name", "") for p in bpftool("prog", "show")}
        ids = sorted(i for i in held_prog_ids(int(argv[1])) if names.get(i) in MT_PROGS)
        print(" ".join(map(str, ids)))
        return 0 if ids else 1
    if len(argv) >= 2 and argv[0] == "count":
        ids = {int(a) for a in argv[1:]}
        links = sum(1 for l in bpftool("link", "show") if l.get("prog_id") in ids)
        loaded = sum(1 for p in bpftool("prog", "show") if p["id"] in ids)
        print(links, loaded)
        return 0
    if len(argv) >= 2 and argv[0] == "types":
        ids = {int(a) for a in argv[1:]}
        for l in bpftool("link", "show"):
            if l.get("prog_id") in ids:
                print(l.get("type", "?"))
        return 0
    if len(argv) >= 2 and argv[0] == "named":
        ids = {int(a) for a in argv[1:]}
        names = {p["id"]: p.get("name", "?") for p in bpftool("prog", "show")}
        for l in bpftool("link", "show"):
            if l.get("prog_id") in ids:
                print(l.get("type", "?"), names.get(l["prog_id"], "?"))
        return 0
    if len(argv) >= 2 and argv[0] == "runs":
        ids = {int(a) for a in argv[1:]}
        for p in bpftool("prog", "show"):
            if p["id"] in ids:
                print(p.get("name", "?"), p.get("run_cnt", -1))
        return 0
    if len(argv) >= 2 and argv[0] == "sizes":
        ids = {int(a) for a in argv[1:]}
        for p in bpftool("prog", "show"):
            if p["id"] in ids:
                print(p.get("name", "?"), p.get("bytes_xlated", 0) // 8)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
