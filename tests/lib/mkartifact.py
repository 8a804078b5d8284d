#!/usr/bin/python3
"""mkartifact.py - write an mt artifact (MessagePack) from a line script.

Tests use it to build inputs whose peaks, totals and leaks are known by
construction.  Run with Debian's /usr/bin/python3 (python3-msgpack).

    mkartifact.py [options] < script > run.msgpack

Script: one event per line, "Type key=value ...", e.g.

    Malloc pid=100 addr=0x1000 size=1MiB
    Free pid=100 addr=0x1000
    Fork pid=101 ppid=100
    Exec pid=101 path=/bin/true
    Exit pid=101 exit_code=0
    Lost count=3
    +5ms                       (advance the clock without an event)

Call stacks (man/mt-format.5, "Call stacks"): maps without pid, tid or
timestamp, and a "stack" key on the events that have one:

    CodeFile file=1 path=/usr/lib/libx.so build_id=0123abcd
    Stack stack=1 frames=1:0x1139,0:0x7fff0010 truncated=1
    Malloc pid=100 addr=0x1000 size=64 stack=1

frames: FILE:ADDRESS pairs, innermost first; truncated defaults to 0.

Values are integers (decimal, 0x hex, or with K/M/G/KiB/MiB/GiB), or
strings for path/name.  Each event advances "timestamp" by --step ns
unless it sets t=NS (ns since start).  Blank lines and #comments are
skipped.
"""
import argparse
import re
import sys

import msgpack

UNITS = {"": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
         "G": 1 << 30, "GiB": 1 << 30}
STRINGS = {"path", "name", "member", "type", "build_id"}
DESCRIPTIONS = {"CodeFile", "Stack"}  # no pid, tid or timestamp
DURATION = {"ns": 1, "us": 1000, "ms": 10**6, "s": 10**9}


def number(text):
    m = re.fullmatch(r"(0x[0-9a-fA-F]+|\d+)([A-Za-z]*)", text)
    if not m or m.group(2) not in UNITS:
        raise ValueError("not a number: " + text)
    return int(m.group(1), 0) * UNITS[m.group(2)]


def duration(text):
    m = re.fullmatch(r"(\d+)(ns|us|ms|s)", text)
    if not m:
        raise ValueError("not a duration: " + text)
    return int(m.group(1)) * DURATION[m.group(2)]


def description(words):
    """A CodeFile or Stack map, keys in the documented order."""
    m = {"type": words[0]}
    for w in words[1:]:
        key, _, val = w.partition("=")
        if key == "frames":
            m[key] = [[number(f), number(a)] for f, a in
                      (pair.split(":") for pair in val.split(",") if pair)]
        elif key == "truncated":
            m[key] = bool(number(val))
        elif key in STRINGS:
            m[key] = val
        else:
            m[key] = number(val)
    if m["type"] == "Stack":
        m.setdefault("frames", [])
        m.setdefault("truncated", False)
    return m


def parse(lines, start, step, default_pid):
    now = start
    for lineno, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("+"):
            now += duration(line[1:])
            continue
        words = line.split()
        if words[0] in DESCRIPTIONS:
            yield description(words)
            continue
        ev = {"type": words[0], "pid": default_pid, "tid": None}
        explicit_t = None
        for w in words[1:]:
            key, _, val = w.partition("=")
            if key == "t":
                explicit_t = start + number(val)
            elif key in STRINGS:
                ev[key] = val
            else:
                ev[key] = number(val)
        if explicit_t is not None:
            now = explicit_t
        else:
            now += step
        ev["timestamp"] = now
        if ev["tid"] is None:
            ev["tid"] = ev["pid"]
        yield ev


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--command", default="prog", help="command line")
    ap.add_argument("--pid", type=int, default=100, help="root pid")
    ap.add_argument("--start", type=int, default=10**9,
                    help="start_monotonic, ns")
    ap.add_argument("--step", type=int, default=1000,
                    help="ns between events")
    ap.add_argument("--end", type=int, default=None,
                    help="end_monotonic - start, ns (default: last + step)")
    ap.add_argument("--no-allocators", action="store_true",
                    help='header says "allocators_tracked": false')
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--signal", type=int, default=None)
    ap.add_argument("--memtrack", action="store_true",
                    help="events only, memtrack style: no header/trailer")
    ap.add_argument("--no-trailer", action="store_true",
                    help="stop without the trailer (a truncated artifact)")
    ap.add_argument("--jsonl", action="store_true",
                    help="write JSON Lines instead of MessagePack")
    args = ap.parse_args()

    events = list(parse(sys.stdin, args.start, args.step, args.pid))
    out = []
    if not args.memtrack:
        out.append({"type": "Header", "format": "mt", "version": 1,
                    "command": args.command.split(), "host": "test",
                    "clock": "CLOCK_MONOTONIC", "page_size": 4096,
                    "root_pid": args.pid, "start_time": 1700000000 * 10**9,
                    "start_monotonic": args.start,
                    "allocators_tracked": not args.no_allocators,
                    "syscalls_tracked": True})
    out.extend(events)
    if not args.memtrack and not args.no_trailer:
        stamped = [e for e in events if "timestamp" in e]
        last = stamped[-1]["timestamp"] if stamped else args.start
        end = args.start + args.end if args.end is not None \
            else last + args.step
        trailer = {"type": "Trailer", "complete": True,
                   "end_monotonic": end, "events": len(events),
                   "lost_events": sum(e.get("count", 0) for e in events
                                      if e["type"] == "Lost"),
                   "batches": 1}
        if args.signal is not None:
            trailer["signal"] = args.signal
        else:
            trailer["exit_code"] = args.exit_code
        out.append(trailer)
    if args.jsonl:
        import json
        sys.stdout.write("".join(json.dumps(o) + "\n" for o in out))
    else:
        sys.stdout.buffer.write(b"".join(msgpack.packb(o) for o in out))


if __name__ == "__main__":
    main()
