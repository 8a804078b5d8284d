#!/usr/bin/python3
"""trace_check.py - check an mt artifact against what is known to be true.

Decodes the artifact with python3-msgpack (a decoder mt did not write), so
run it with /usr/bin/python3.

  trace_check.py dump ART [--pid P] [--tid T] [--type T1,T2]
      the events as JSON lines (addresses in decimal)
  trace_check.py meta ART
      {"header": {...}, "trailer": {...}, "events": N, "lost": N}
  trace_check.py expect ART LOG [--kinds alloc|mem|all|T1,T2] [--window N]
      compare the fixture log LOG (tests/fixtures/fixture.h) with the
      trace: in each begin/end window of a thread, the trace's events of
      that pid and tid, of the chosen kinds, must be exactly the logged
      ones, in order, field by field (--window N: only the Nth window, from
      0, in the order the windows begin)
  trace_check.py counts ART COUNTS [--root-after-exec] [--tolerance N]
                 [--thread-exit-frees]
      compare per-pid allocator event counts with mtcount.so's output

Exit status: 0 match, 1 mismatch (a readable diff on stdout), 2 unusable
input.
"""
import argparse
import collections
import difflib
import json
import sys

import msgpack

from mtzstd import open_plain

ALLOC_KINDS = ("Malloc", "Free", "Calloc", "Realloc", "AlignedAlloc")
MEM_KINDS = ("Mmap", "Munmap", "Mremap", "Brk")
ADDRESS_KEYS = ("addr", "old_addr")


class Unusable(Exception):
    pass


def load(path):
    """Returns (header, events, trailer) of an artifact; trailer may be None."""
    try:
        with open_plain(path) as f:
            maps = list(msgpack.Unpacker(f, raw=False, strict_map_key=False))
    except (OSError, ValueError, msgpack.UnpackException) as e:
        raise Unusable(f"{path}: cannot decode: {e}")
    if not maps or not isinstance(maps[0], dict) or maps[0].get("type") != "Header":
        raise Unusable(f"{path}: does not start with a Header map")
    header, trailer = maps[0], None
    events = maps[1:]
    if events and isinstance(events[-1], dict) and events[-1].get("type") == "Trailer":
        trailer = events.pop()
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or "type" not in ev:
            raise Unusable(f"{path}: object {i + 1} is not an event map")
    return header, absolute_times(header, events), trailer


def absolute_times(header, events):
    """Timestamps as CLOCK_MONOTONIC ns, whether the artifact stores them
    absolute or relative to the header's start_monotonic."""
    start = header.get("start_monotonic")
    stamped = [ev["timestamp"] for ev in events if "timestamp" in ev]
    if start and stamped and max(stamped) < start:
        for ev in events:
            if "timestamp" in ev:
                ev["timestamp"] += start
    return events


def kinds_option(text):
    if text == "alloc":
        return set(ALLOC_KINDS)
    if text == "mem":
        return set(MEM_KINDS)
    if text == "all":
        return set(ALLOC_KINDS) | set(MEM_KINDS)
    return set(text.split(","))


def show(ev):
    """One event on one line, addresses in hex, timestamp left out."""
    parts = []
    for key in ("type", "pid", "tid", "addr", "size", "old_addr", "old_size"):
        if key in ev:
            value = ev[key]
            if key in ADDRESS_KEYS and isinstance(value, int):
                value = hex(value)
            parts.append(f"{key}={value}")
    for key in sorted(ev):
        if key not in ("type", "pid", "tid", "addr", "size", "old_addr",
                       "old_size", "timestamp") and not key.startswith("_"):
            parts.append(f"{key}={ev[key]}")
    return " ".join(parts)


# ---- dump / meta -------------------------------------------------------

def cmd_dump(args):
    _, events, _ = load(args.artifact)
    kinds = kinds_option(args.type) if args.type else None
    for ev in events:
        if args.pid is not None and ev.get("pid") != args.pid:
            continue
        if args.tid is not None and ev.get("tid") != args.tid:
            continue
        if kinds and ev["type"] not in kinds:
            continue
        print(json.dumps(ev, default=repr))
    return 0


def cmd_meta(args):
    header, events, trailer = load(args.artifact)
    delivered = sum(1 for ev in events if ev["type"] != "Lost")
    lost_records = sum(ev.get("count", 0) for ev in events if ev["type"] == "Lost")
    by_type = collections.Counter(ev["type"] for ev in events)
    print(json.dumps({"header": header, "trailer": trailer,
                      "events": delivered, "lost_records": lost_records,
                      "by_type": by_type}, default=repr))
    return 0


# ---- expect ------------------------------------------------------------

def read_log(path):
    """The fixture's windows: [{pid, tid, t0, t1, expected: [...]}]."""
    open_windows = {}
    windows = []
    try:
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise Unusable(f"{path}: {e}")
    for rec in lines:
        if "error" in rec:
            raise Unusable(f"{path}: the fixture failed: {rec['error']}")
        key = (rec.get("pid"), rec.get("tid"))
        if rec.get("mark") == "begin":
            open_windows[key] = {"pid": key[0], "tid": key[1], "t0": rec["t"],
                                 "expected": []}
        elif rec.get("mark") == "end":
            window = open_windows.pop(key, None)
            if window is None:
                raise Unusable(f"{path}: end without begin for {key}")
            window["t1"] = rec["t"]
            windows.append(window)
        elif "type" in rec:
            if key not in open_windows:
                raise Unusable(f"{path}: event outside a window: {rec}")
            open_windows[key]["expected"].append(rec)
    if open_windows:
        raise Unusable(f"{path}: windows never closed: {list(open_windows)}")
    if not windows:
        raise Unusable(f"{path}: no window: the fixture logged nothing")
    return windows


def differences(expected, got):
    """The keys of expected whose value got does not have."""
    wrong = []
    for key, value in expected.items():
        if key.startswith("_"):
            continue
        if key not in got:
            wrong.append(f"{key} missing")
        elif got[key] != value:
            shown = hex(got[key]) if key in ADDRESS_KEYS and isinstance(got[key], int) else got[key]
            wrong.append(f"{key}={shown}")
    return wrong


def check_window(window, events, kinds):
    """Prints the comparison of one window; returns True if it matches."""
    got = [ev for ev in events
           if ev.get("pid") == window["pid"] and ev.get("tid") == window["tid"]
           and ev["type"] in kinds
           and window["t0"] <= ev.get("timestamp", -1) <= window["t1"]]
    got.sort(key=lambda ev: ev["timestamp"])  # stable: file order on ties
    expected = window["expected"]
    ok = True
    lines = []
    # Align on (type, addr) so one missing or extra event shows as one line.
    want_keys = [(e["type"], e.get("addr")) for e in expected]
    got_keys = [(g["type"], g.get("addr")) for g in got]
    if want_keys == got_keys:
        # what the matcher would say, without its search: on 10,000 calls
        # that reuse a few addresses it took 12 s of CPU a window
        opcodes = [("equal", 0, len(want_keys), 0, len(got_keys))]
    else:
        opcodes = difflib.SequenceMatcher(None, want_keys, got_keys,
                                          autojunk=False).get_opcodes()
    for op, i1, i2, j1, j2 in opcodes:
        if op in ("equal", "replace") and i2 - i1 == j2 - j1:
            for want, have in zip(expected[i1:i2], got[j1:j2]):
                wrong = differences(want, have)
                if wrong:
                    ok = False
                    lines.append(f"  ! expected    {show(want)}")
                    lines.append(f"    got         {show(have)}  ({', '.join(wrong)})")
                else:
                    lines.append(f"    ok          {show(have)}")
            continue
        ok = False
        for want in expected[i1:i2]:
            lines.append(f"  - missing     {show(want)}")
        for have in got[j1:j2]:
            lines.append(f"  + unexpected  {show(have)}")
    title = (f"window pid={window['pid']} tid={window['tid']} "
             f"[{window['t0']}, {window['t1']}]: {len(expected)} expected, "
             f"{len(got)} traced: {'match' if ok else 'MISMATCH'}")
    print(title)
    if not ok or len(lines) <= 12:
        print("\n".join(lines))
    return ok


def cmd_expect(args):
    _, events, trailer = load(args.artifact)
    windows = read_log(args.log)
    if args.window is not None:
        windows.sort(key=lambda w: w["t0"])
        if not 0 <= args.window < len(windows):
            raise Unusable(f"{args.log}: no window {args.window} "
                           f"({len(windows)} windows)")
        windows = [windows[args.window]]
    kinds = kinds_option(args.kinds)
    ok = True
    if trailer is None:
        print("the artifact has no Trailer map: it is truncated")
        ok = False
    for window in windows:
        ok = check_window(window, events, kinds) and ok
    traced_pids = {ev.get("pid") for ev in events}
    for pid in sorted({w["pid"] for w in windows} - traced_pids):
        print(f"pid {pid}: no event at all in the trace")
    return 0 if ok else 1


# ---- counts ------------------------------------------------------------

def read_counts(path):
    totals = collections.defaultdict(collections.Counter)
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    totals[rec["pid"]].update(rec["events"])
                    totals[rec["pid"]]["realloc_null"] += rec.get("realloc_null", 0)
    except (OSError, ValueError, KeyError) as e:
        raise Unusable(f"{path}: {e}")
    if not totals:
        raise Unusable(f"{path}: no counts (did the program run with the preload?)")
    return totals


def traced_counts(header, events, root_after_exec, thread_exit_frees):
    """Allocator events per pid and kind.  With thread_exit_frees, a Free
    by a thread (tid != pid) of a block never allocated in the trace is
    counted apart as "thread_exit_free": glibc frees each thread's tcache
    at thread exit with an internal call to free, and that block came from
    malloc's internals, never from a malloc call."""
    since = {}
    if root_after_exec:
        root = header.get("root_pid")
        execs = [ev["timestamp"] for ev in events
                 if ev["type"] == "Exec" and ev.get("pid") == root]
        if not execs:
            raise Unusable(f"no Exec event of the root pid {root}")
        since[root] = max(execs)
    totals = collections.defaultdict(collections.Counter)
    allocated = collections.defaultdict(set)
    for ev in events:
        kind, pid = ev["type"], ev.get("pid")
        if kind not in ALLOC_KINDS:
            continue
        if kind != "Free":
            allocated[pid].add(ev.get("addr"))
        if ev.get("timestamp", 0) < since.get(pid, 0):
            continue
        if (kind == "Free" and thread_exit_frees and ev.get("tid") != pid
                and ev.get("addr") not in allocated[pid]):
            kind = "thread_exit_free"
        totals[pid][kind] += 1
    return totals


def cmd_counts(args):
    header, events, trailer = load(args.artifact)
    counted = read_counts(args.counts)
    traced = traced_counts(header, events, args.root_after_exec,
                           args.thread_exit_frees)
    ok = trailer is not None
    if not ok:
        print("the artifact has no Trailer map: it is truncated")
    lost = (trailer or {}).get("lost_events", 0)
    if lost:
        print(f"the trace lost {lost} events: counts cannot be compared")
        ok = False
    print(f"{'pid':>8} {'kind':<13} {'counted':>9} {'traced':>9}")
    for pid in sorted(set(counted) | set(traced)):
        for kind in ALLOC_KINDS:
            want, have = counted[pid][kind], traced[pid][kind]
            if pid not in counted and have == 0:
                continue
            bad = pid not in counted or abs(have - want) > args.tolerance
            ok = ok and not bad
            mark = "!!" if bad else "  "
            print(f"{pid:>8} {kind:<13} {want:>9} {have:>9} {mark}")
        if traced[pid]["thread_exit_free"]:
            print(f"{pid:>8} thread_exit_free {traced[pid]['thread_exit_free']} "
                  "(left out: glibc's own free of a thread's tcache)")
        if counted[pid]["realloc_null"]:
            print(f"{pid:>8} (of the Realloc counted, "
                  f"{counted[pid]['realloc_null']} were realloc(NULL, n))")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dump")
    p.add_argument("artifact")
    p.add_argument("--pid", type=int)
    p.add_argument("--tid", type=int)
    p.add_argument("--type")
    p.set_defaults(run=cmd_dump)
    p = sub.add_parser("meta")
    p.add_argument("artifact")
    p.set_defaults(run=cmd_meta)
    p = sub.add_parser("expect")
    p.add_argument("artifact")
    p.add_argument("log")
    p.add_argument("--kinds", default="alloc")
    p.add_argument("--window", type=int)
    p.set_defaults(run=cmd_expect)
    p = sub.add_parser("counts")
    p.add_argument("artifact")
    p.add_argument("counts")
    p.add_argument("--root-after-exec", action="store_true")
    p.add_argument("--tolerance", type=int, default=0)
    p.add_argument("--thread-exit-frees", action="store_true")
    p.set_defaults(run=cmd_counts)
    args = parser.parse_args()
    try:
        return args.run(args)
    except Unusable as e:
        print(f"trace_check.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
