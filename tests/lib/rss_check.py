#!/usr/bin/python3
"""rss_check.py ARTIFACT LOG [--tolerance BYTES]

For each step a fixture logged ({"rss": STEP, "pid", "t", "anon", "file",
...} read from its own /proc/self/status), compare the traced RSS of that
process at time t -- the last Rss event of each member before t -- with what
/proc said.  The RSS events carry the kernel's exact counters, so they agree
within the few pages the reading itself touches.  Exit 1 on a mismatch.
"""
import bisect
import json
import sys

import msgpack

from mtzstd import open_plain


def main():
    artifact, log = sys.argv[1], sys.argv[2]
    tolerance = 64 * 1024
    if "--tolerance" in sys.argv:
        tolerance = int(sys.argv[sys.argv.index("--tolerance") + 1])
    steps = [json.loads(l) for l in open(log) if '"rss"' in l]
    if not steps:
        print("no steps in the log")
        return 1
    series = {}  # (pid, member) -> ([t], [size])
    with open_plain(artifact) as f:
        for ev in msgpack.Unpacker(f, raw=False):
            if ev.get("type") != "Rss":
                continue
            ts, sizes = series.setdefault((ev["pid"], ev["member"]), ([], []))
            ts.append(ev["timestamp"])
            sizes.append(ev["size"])
    bad = 0
    for step in steps:
        for member in ("anon", "file"):
            ts, sizes = series.get((step["pid"], member), ([], []))
            i = bisect.bisect_right(ts, step["t"])
            traced = sizes[i - 1] if i else 0
            truth = step[member]
            ok = abs(traced - truth) <= tolerance
            bad += not ok
            print("%-14s %-5s /proc %10d  traced %10d  %s"
                  % (step["rss"], member, truth, traced,
                     "ok" if ok else "MISMATCH"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
