#!/usr/bin/python3
"""Count the BPF links, system-wide, whose program is one of mt-trace's.

bpftool (not mt) is the outside truth: `bpftool -j link show` lists every
link with its program id, `bpftool -j prog show` names the programs.
Prints the count."""
import json
import subprocess
import sys

MT_PROGS = {"alloc_session", "alloc_enter", "alloc_return", "on_sys_enter", "on_sys_exit",
            "on_fork", "on_exec", "on_exit", "on_rss_owner", "on_rss_size"}


def bpftool(*args):
    out = subprocess.run(["bpftool", "-j", *args], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else []


def main():
    names = {p["id"]: p.get("name", "") for p in bpftool("prog", "show")}
    links = [l for l in bpftool("link", "show")
             if names.get(l.get("prog_id")) in MT_PROGS]
    print(len(links))
    return 0


if __name__ == "__main__":
    sys.exit(main())
