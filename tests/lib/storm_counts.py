#!/usr/bin/python3
"""storm_counts.py ART NAME - what a storm test needs of an artifact,
decoded by python3-msgpack (not mt's reader): one JSON object with the
trailer's lost count, the Lost records' sum, and the processes that exec'd
a program called NAME: how many, and how many of them made each
[malloc(48) calls, frees of those blocks] pair after that exec
({"[100000, 100000]": 20}; the shell's code in a forked child before it
is not the program's).

Streams the file: a storm's artifact holds millions of events.
"""
import collections
import json
import sys

import msgpack

from mtzstd import open_plain


def main():
    mallocs = collections.Counter()
    frees = collections.Counter()
    lost_records = 0
    ran = set()
    live = set()  # (pid, address) of the malloc(48) blocks not freed yet
    trailer = {}
    with open_plain(sys.argv[1]) as f:
        for ev in msgpack.Unpacker(f, raw=False, strict_map_key=False):
            kind = ev.get("type")
            if kind == "Malloc" and ev.get("size") == 48 and ev["pid"] in ran:
                mallocs[ev["pid"]] += 1
                live.add((ev["pid"], ev["addr"]))
            elif kind == "Free" and (ev["pid"], ev.get("addr")) in live:
                frees[ev["pid"]] += 1
                live.discard((ev["pid"], ev["addr"]))
            elif kind == "Exec" and ev.get("path", "").endswith("/" + sys.argv[2]):
                ran.add(ev["pid"])
            elif kind == "Lost":
                lost_records += ev.get("count", 0)
            elif kind == "Trailer":
                trailer = ev
    pairs = collections.Counter(str([mallocs[p], frees[p]]) for p in ran)
    print(json.dumps({"lost": trailer.get("lost_events"),
                      "lost_records": lost_records, "processes": len(ran),
                      "counts": dict(sorted(pairs.items()))}))


if __name__ == "__main__":
    main()
