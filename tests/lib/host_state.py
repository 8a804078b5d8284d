#!/usr/bin/python3
"""What one mt-trace session holds on the host, and whether any of it is
left once the session is over (tests/host.bats).

Other mt-trace sessions may run on the same machine: everything here is
tied to one session's own pid, namespace or descriptors.  The kernel is the
outside truth: /proc/PID/fdinfo names the BPF object behind each
descriptor (prog_id, link_id, map_id), /proc/PID/ns/mnt the mount
namespace, `bpftool -j prog|link|map show` every object still alive.

  host_state.py held PID       JSON: the ids of the BPF programs, links and
                               maps PID holds, and its mount namespace
  host_state.py left FILE      what of FILE's (held's output) objects still
                               exists, one "KIND ID" a line; exit 1 if any
  host_state.py in_ns NS       pids of the processes in mount namespace NS
                               ("mnt:[INODE]"), one a line
  host_state.py mounts         /proc/self/mountinfo, "ID MOUNTPOINT FSTYPE"
                               a line
"""
import json
import os
import subprocess
import sys

KINDS = {"prog_id:": "progs", "link_id:": "links", "map_id:": "maps"}


def held(pid):
    got = {"progs": set(), "links": set(), "maps": set()}
    fdinfo = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    word = line.split()
                    if word and word[0] in KINDS:
                        got[KINDS[word[0]]].add(int(word[1]))
        except OSError:
            pass  # closed meanwhile
    out = {k: sorted(v) for k, v in got.items()}
    out["ns"] = os.readlink(f"/proc/{pid}/ns/mnt")
    return out


def alive(kind):
    out = subprocess.run(["bpftool", "-j", kind, "show"], check=True,
                         capture_output=True, text=True).stdout
    return {o["id"] for o in (json.loads(out) if out.strip() else [])}


def in_ns(ns):
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/mnt") == ns:
                pids.append(int(name))
        except OSError:
            pass  # gone, or a zombie (its namespaces are released)
    return pids


def main(argv):
    if len(argv) == 2 and argv[0] == "held":
        print(json.dumps(held(int(argv[1]))))
        return 0
    if len(argv) == 2 and argv[0] == "left":
        with open(argv[1]) as f:
            was = json.load(f)
        left = 0
        for kind, name in (("prog", "progs"), ("link", "links"),
                           ("map", "maps")):
            for i in sorted(alive(kind) & set(was[name])):
                print(kind, i)
                left += 1
        return 1 if left else 0
    if len(argv) == 2 and argv[0] == "in_ns":
        for pid in in_ns(argv[1]):
            print(pid)
        return 0
    if len(argv) == 1 and argv[0] == "mounts":
        with open("/proc/self/mountinfo") as f:
            for line in f:
                word = line.split()
                fstype = word[word.index("-") + 1]
                print(word[0], word[4], fstype)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
