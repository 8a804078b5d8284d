#!/usr/bin/python3
"""stacks_check.py - the call stacks of an mt artifact, named by tools mt
did not write: python3-msgpack decodes the artifact, binutils' addr2line
names each frame from the file's own debug information, readelf gives a
program's entry point (run it with /usr/bin/python3).

  stacks_check.py chain ART SIZE [--files]
      the stack of the allocation of SIZE bytes (exactly one): one line per
      frame, innermost first, the function addr2line names at address - 1
      (frames are return addresses; --files: then the file's base name),
      then "truncated: true|false"
  stacks_check.py chains ART SIZE
      every allocation of SIZE bytes: for each distinct chain (function
      names as for chain, ";"-separated, then " truncated" if so), how many
      allocations had it: "COUNT CHAIN", one line each, most first
  stacks_check.py leaf-file ART SIZE
      "BUILD_ID PATH" of the file the innermost frame of that allocation's
      stack (exactly one) is in, as its CodeFile map says ("-" for no
      build-id)
  stacks_check.py leaf-files ART SIZE
      every allocation of SIZE bytes: how many have their innermost frame
      in each file, "COUNT NAME" (the file's base name), one line each
  stacks_check.py depth ART SIZE
      "FRAMES TRUNCATED" of that allocation's stack
  stacks_check.py complete ART
      "COMPLETE TOTAL": of the allocator events (Malloc, Calloc, Realloc,
      AlignedAlloc) with a stack, how many end in the entry code of a
      program (its _start, at readelf's entry point) or of a thread
      (clone3's child, in libc)
  stacks_check.py windows ART LOG
      "CALLS WITHOUT": of the allocation and address-space calls (Malloc,
      Calloc, Realloc, AlignedAlloc, Mmap, Munmap, Mremap, Brk) inside a
      fixture's begin/end windows (its MT_FIXTURE_LOG, tests/fixtures/
      fixture.h), how many, and how many of them have no "stack"
  stacks_check.py gdb-chain
      reads gdb's "bt" from stdin: the function names of its frames, but
      malloc's own

Exit status: 0, or 2 when the artifact cannot be used.
"""
import json
import os
import re
import subprocess
import sys

import msgpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mtzstd import open_plain  # noqa: E402  (mt-encode compresses)

ALLOCATIONS = ("Malloc", "Calloc", "Realloc", "AlignedAlloc")


def load(path, build_ids=None):
    with open_plain(path) as f:
        maps = list(msgpack.Unpacker(f, raw=False, strict_map_key=False))
    files, stacks, events = {}, {}, []
    for m in maps:
        t = m.get("type")
        if t == "CodeFile":
            files[m["file"]] = m["path"]
            if build_ids is not None:
                build_ids[m["file"]] = m.get("build_id", "-")
        elif t == "Stack":
            stacks[m["stack"]] = m
        elif "stack" in m:
            if m["stack"] not in stacks:
                sys.exit(f"{path}: stack {m['stack']} used before its Stack map")
            events.append(m)
    return files, stacks, events


def names(path, addrs):
    """addr2line's function names for addresses of one file."""
    out = subprocess.run(
        ["addr2line", "-f", "-e", path] + [hex(a) for a in addrs],
        capture_output=True, text=True, check=True).stdout.split("\n")
    return out[0:2 * len(addrs):2]


def stack_of(art, size):
    files, stacks, events = load(art)
    found = [e for e in events if e["type"] in ALLOCATIONS and e.get("size") == size]
    if len(found) != 1:
        sys.exit(f"{art}: {len(found)} allocations of {size} bytes with a stack")
    return files, stacks[found[0]["stack"]]


def chain(art, size, with_files):
    files, stack = stack_of(art, size)
    for file, addr in stack["frames"]:
        if file == 0:
            print(f"?? {addr:#x}")
        elif with_files:
            print(names(files[file], [addr - 1])[0], files[file].split("/")[-1])
        else:
            print(names(files[file], [addr - 1])[0])
    print("truncated:", "true" if stack["truncated"] else "false")


def chains(art, size):
    files, stacks, events = load(art)
    count = {}
    for e in events:
        if e["type"] in ALLOCATIONS and e.get("size") == size:
            count[e["stack"]] = count.get(e["stack"], 0) + 1
    named = {}
    for key, n in count.items():
        stack = stacks[key]
        frames = [f"?? {addr:#x}" if file == 0 else
                  names(files[file], [addr - 1])[0]
                  for file, addr in stack["frames"]]
        chain = ";".join(frames) + (" truncated" if stack["truncated"] else "")
        named[chain] = named.get(chain, 0) + n
    for chain, n in sorted(named.items(), key=lambda kv: -kv[1]):
        print(n, chain)


def leaf_file(art, size):
    build_ids = {}
    files, stacks, events = load(art, build_ids)
    found = [e for e in events if e["type"] in ALLOCATIONS and e.get("size") == size]
    if len(found) != 1:
        sys.exit(f"{art}: {len(found)} allocations of {size} bytes with a stack")
    file, _ = stacks[found[0]["stack"]]["frames"][0]
    print(build_ids.get(file, "-"), files.get(file, "?"))


def leaf_files(art, size):
    """How many allocations of size have their innermost frame in each
    file (by its name)."""
    files, stacks, events = load(art)
    count = {}
    for e in events:
        if e["type"] in ALLOCATIONS and e.get("size") == size:
            file, _ = stacks[e["stack"]]["frames"][0]
            name = files.get(file, "?").split("/")[-1]
            count[name] = count.get(name, 0) + 1
    for name, n in sorted(count.items()):
        print(n, name)


def depth(art, size):
    _, stack = stack_of(art, size)
    print(len(stack["frames"]), "true" if stack["truncated"] else "false")


def entry_point(path, cache={}):
    if path not in cache:
        out = subprocess.run(["readelf", "-h", path], capture_output=True,
                             text=True).stdout
        m = re.search(r"Entry point address:\s+0x([0-9a-f]+)", out)
        cache[path] = int(m.group(1), 16) if m else None
    return cache[path]


def thread_start(path, cache={}):
    """[start, end) of libc's clone3 (a thread's first frame)."""
    if path not in cache:
        cache[path] = None
        out = subprocess.run(["readelf", "-sW", path], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 8 and f[7].split("@")[0] in ("__clone3", "clone3"):
                cache[path] = (int(f[1], 16), int(f[1], 16) + int(f[2], 0))
    return cache[path]


def complete(art):
    files, stacks, events = load(art)
    total = done = 0
    for e in events:
        if e["type"] not in ALLOCATIONS:
            continue
        total += 1
        file, addr = stacks[e["stack"]]["frames"][-1]
        if file == 0:
            continue
        path = files[file]
        entry, clone = entry_point(path), thread_start(path)
        # _start calls __libc_start_main within its first ~40 bytes
        if entry is not None and entry < addr <= entry + 64:
            done += 1
        elif clone and clone[0] < addr <= clone[1]:
            done += 1
    print(done, total)


CALLS = ALLOCATIONS + ("Mmap", "Munmap", "Mremap", "Brk")


def windows(path, log):
    spans = {}
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            key = (r.get("pid"), r.get("tid"))
            if r.get("mark") == "begin":
                spans.setdefault(key, []).append([r["t"], None])
            elif r.get("mark") == "end":
                spans[key][-1][1] = r["t"]
    calls = without = 0
    with open_plain(path) as f:
        for m in msgpack.Unpacker(f, raw=False, strict_map_key=False):
            if m.get("type") not in CALLS:
                continue
            for t0, t1 in spans.get((m["pid"], m["tid"]), []):
                if t0 <= m["timestamp"] <= (t1 if t1 is not None else t0):
                    calls += 1
                    without += "stack" not in m
    print(calls, without)


def logged_calls(log):
    """How many of the fixture's logged events are stack-taking calls."""
    with open(log) as f:
        print(sum(json.loads(line).get("type") in CALLS for line in f))


def gdb_chain():
    for line in sys.stdin:
        m = re.match(r"#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+) \(", line)
        if m and "malloc" not in m.group(2):
            print(m.group(2))


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "chain":
        chain(sys.argv[2], int(sys.argv[3]), "--files" in sys.argv[4:])
    elif cmd == "chains":
        chains(sys.argv[2], int(sys.argv[3]))
    elif cmd == "leaf-file":
        leaf_file(sys.argv[2], int(sys.argv[3]))
    elif cmd == "leaf-files":
        leaf_files(sys.argv[2], int(sys.argv[3]))
    elif cmd == "logged-calls":
        logged_calls(sys.argv[2])
    elif cmd == "depth":
        depth(sys.argv[2], int(sys.argv[3]))
    elif cmd == "complete":
        complete(sys.argv[2])
    elif cmd == "windows":
        windows(sys.argv[2], sys.argv[3])
    elif cmd == "gdb-chain":
        gdb_chain()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
