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
    begins = {}
    events = []
    index = 0
    for rec in records:
        key = (rec.get("pid"), rec.get("tid"))
        if rec.get("mark") == "begin":
            begins[key] = rec["t"]
            events.append({"type": "Malloc", "pid": key[0], "tid": key[1],
                           "timestamp": rec["t"] - 1000, "addr": 0x1000,
                           "size": 4321})
            events.append({"type": "Malloc", "pid": key[0] + 1,
                           "tid": key[1] + 1, "timestamp": rec["t"] + 1,
                           "addr": 0x2000, "size": 4321})
        elif "type" in rec:
            ev = {k: v for k, v in rec.items() if not k.startswith("_")}
            ev["timestamp"] = begins[key] + 10 + index
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
