#!/usr/bin/python3
"""synth_artifact.py LOG OUT [--drop N | --duplicate N | --bump N]

Writes an artifact OUT that holds exactly the events of the fixture log LOG
(each stamped inside its window), plus noise a real trace has: ld.so-like
allocations of the same pid before the first window, and an event of
another pid inside it.  --drop / --duplicate / --bump (size + 1) spoil the
N-th expected event, so the tests can show trace_check.py catches each.
"""
import argparse
import json

import msgpack


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("out")
    parser.add_argument("--drop", type=int)
    parser.add_argument("--duplicate", type=int)
    parser.add_argument("--bump", type=int)
    args = parser.parse_args()

    with open(args.log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    # each thread's windows, [begin, end], in order: the noise and the
    # stamps below must fall where the log says, however close two windows
    # of one thread are (a fixture's end and next begin can be < 1 us apart)
    ends = {}
    for rec in records:
        if rec.get("mark") == "end":
            ends.setdefault((rec.get("pid"), rec.get("tid")), []).append(rec["t"])
    begins = {}
    last_end = {}
    window_end = {}
    in_window = {}
    events = []
    index = 0
    for rec in records:
        key = (rec.get("pid"), rec.get("tid"))
        if rec.get("mark") == "begin":
            t = rec["t"]
            begins[key] = t
            window_end[key] = ends[key].pop(0)
            in_window[key] = 0
            # same thread, before the window (ld.so-like), after its
            # previous window
            before = t - 1000
            if key in last_end:
                before = max(before, last_end[key] + 1)
            if before < t:
                events.append({"type": "Malloc", "pid": key[0], "tid": key[1],
                               "timestamp": before, "addr": 0x1000,
                               "size": 4321})
            events.append({"type": "Malloc", "pid": key[0] + 1,
                           "tid": key[1] + 1, "timestamp": t + 1,
                           "addr": 0x2000, "size": 4321})
        elif rec.get("mark") == "end":
            last_end[key] = rec["t"]
        elif "type" in rec:
            ev = {k: v for k, v in rec.items() if not k.startswith("_")}
            # in order, strictly inside [begin, end]
            in_window[key] += 1
            ev["timestamp"] = min(begins[key] + 10 * in_window[key],
                                  window_end[key] - 1)
            if index == args.bump and "size" in ev:
                ev["size"] += 1
            if index != args.drop:
                events.append(ev)
            if index == args.duplicate:
                events.append(dict(ev))
            index += 1
    root = records[0]["pid"]
    with open(args.out, "wb") as f:
        f.write(msgpack.packb({"type": "Header", "format": "mt", "version": 1,
                               "root_pid": root}))
        for ev in events:
            f.write(msgpack.packb(ev))
        f.write(msgpack.packb({"type": "Trailer", "complete": True,
                               "events": len(events), "lost_events": 0,
                               "exit_code": 0}))


if __name__ == "__main__":
    main()
