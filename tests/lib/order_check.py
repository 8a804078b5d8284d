#!/usr/bin/python3
"""order_check.py - facts about a raw stream, read with rawcheck.py's parser
(struct, none of lib/).

  order_check.py RAW
      the order of each process's records: no record of a pid after its
      Exit, none of a forked pid before its Fork.  Prints
      "processes N exits N" and exits 0, or the first offence and exits 1.
  order_check.py times RAW
      prints {"start": header start, "end": trailer end, "last": the latest
      record's timestamp, "root_exit": the root's Exit timestamp} (ns).
"""
import json
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
import rawcheck  # noqa: E402

FORK, EXIT, LOST = 10, 12, 19


def times(header, records, trailer):
    root = header["root_pid"]
    exits = [r["timestamp"] for r in records
             if r["kind"] == EXIT and r["pid"] == root]
    print(json.dumps({"start": header["start_monotonic"],
                      "end": trailer["end_monotonic"],
                      "last": max(r["timestamp"] for r in records),
                      "root_exit": exits[0] if exits else None}))
    return 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 2 else "order"
    with open(sys.argv[-1], "rb") as f:
        header, records, trailer, err = rawcheck.parse_raw(f.read())
    if err or trailer is None:
        print("raw stream incomplete: %s" % err)
        return 1
    if mode == "times":
        return times(header, records, trailer)
    forked, exited, pids = set(), {}, set()
    for i, r in enumerate(records):
        pid, kind = r["pid"], r["kind"]
        if kind == LOST or pid == 0:
            continue
        if pid in exited:
            print("record %d (kind %d, t %d) of pid %d after its Exit "
                  "(record %d, t %d)" % (i, kind, r["timestamp"], pid,
                                         exited[pid][0], exited[pid][1]))
            return 1
        if kind == FORK:
            if pid in pids:
                print("Fork of pid %d (record %d) after its events"
                      % (pid, i))
                return 1
            forked.add(pid)
        pids.add(pid)
        if kind == EXIT:
            exited[pid] = (i, r["timestamp"])
    print("processes %d exits %d" % (len(pids), len(exited)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
