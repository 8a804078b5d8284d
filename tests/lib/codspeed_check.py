#!/usr/bin/python3
"""A strict checker of CodSpeed memtrack's artifact ({pid}.MemtrackArtifact.msgpack).

The shape, from CodSpeed's runner (crates/runner-shared/src/artifacts/
memtrack.rs): zstd frames around a sequence of MessagePack maps, one per
MemtrackEvent, serialized by rmp-serde: pid, tid (pid_t), timestamp, addr
(u64), then the tag "type" and the variant's fields in declaration order:

    Malloc, Calloc, AlignedAlloc, Mmap, Munmap, Brk:  size
    Realloc:                                          old_addr (optional), size
    Free:                                             (none)

Integers in their smallest MessagePack form, strings as str.  Checked by
re-packing each map with python3-msgpack and comparing the bytes.

  codspeed_check.py check FILE           the shape; prints the event count
  codspeed_check.py compare FILE MT_ARTIFACT
      the allocation events one by one against mt's own artifact of the same
      trace (read after zstd -dc if compressed): Mremap as Munmap(old) +
      Mmap(new), Brk with size 0, the rest field for field.
"""
import sys

import msgpack

from mtzstd import open_plain

VARIANT_KEYS = {
    "Malloc": [["size"]],
    "Calloc": [["size"]],
    "AlignedAlloc": [["size"]],
    "Mmap": [["size"]],
    "Munmap": [["size"]],
    "Brk": [["size"]],
    "Realloc": [["old_addr", "size"], ["size"]],
    "Free": [[]],
}
HEAD_KEYS = ["pid", "tid", "timestamp", "addr", "type"]
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def fail(msg):
    sys.exit(f"codspeed_check: {msg}")


def plain_bytes(path):
    """The file's MessagePack: through the zstd CLI if it is compressed."""
    with open_plain(path) as f:
        return f.read()


def codspeed_events(path):
    with open(path, "rb") as f:
        if f.read(4) != ZSTD_MAGIC:
            fail(f"{path}: not zstd (CodSpeed's artifact always is)")
    data = plain_bytes(path)
    unpacker = msgpack.Unpacker(raw=False, object_pairs_hook=list,
                                strict_map_key=True)
    unpacker.feed(data)
    events, start = [], 0
    for i, pairs in enumerate(unpacker):
        end = unpacker.tell()
        where = f"{path}: event {i} (byte {start})"
        if not isinstance(pairs, list):
            fail(f"{where}: not a map: {pairs!r}")
        keys = [k for k, _ in pairs]
        ev = dict(pairs)
        if keys[:5] != HEAD_KEYS:
            fail(f"{where}: keys {keys}, expected {HEAD_KEYS} first")
        kind = ev["type"]
        if kind not in VARIANT_KEYS:
            fail(f"{where}: type {kind!r} is not one memtrack knows")
        if keys[5:] not in VARIANT_KEYS[kind]:
            fail(f"{where}: {kind} keys {keys[5:]}, expected one of "
                 f"{VARIANT_KEYS[kind]}")
        for k in ("pid", "tid"):
            if not isinstance(ev[k], int) or not 0 <= ev[k] < 2**31:
                fail(f"{where}: {k} {ev[k]!r} is not a pid_t")
        for k in keys[2:]:
            if k != "type" and (not isinstance(ev[k], int) or
                                not 0 <= ev[k] < 2**64):
                fail(f"{where}: {k} {ev[k]!r} is not a u64")
        if kind == "Brk" and ev["size"] != 0:
            fail(f"{where}: Brk size {ev['size']}: memtrack records 0")
        if msgpack.packb(dict(pairs), use_bin_type=True) != data[start:end]:
            fail(f"{where}: bytes differ from the smallest encoding")
        events.append(ev)
        start = end
    if start != len(data):
        fail(f"{path}: {len(data) - start} bytes after the last event")
    return events


def expected_from_mt(path):
    """mt's artifact's allocation events as CodSpeed's memtrack holds them."""
    out = []
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(plain_bytes(path))
    for m in unpacker:
        kind = m.get("type")
        head = {"pid": m.get("pid"), "tid": m.get("tid"),
                "timestamp": m.get("timestamp")}
        if kind in ("Malloc", "Calloc", "AlignedAlloc", "Mmap", "Munmap"):
            out.append({**head, "addr": m["addr"], "type": kind,
                        "size": m["size"]})
        elif kind == "Free":
            out.append({**head, "addr": m["addr"], "type": kind})
        elif kind == "Realloc":
            out.append({**head, "addr": m["addr"], "type": kind,
                        "old_addr": m["old_addr"], "size": m["size"]})
        elif kind == "Brk":
            out.append({**head, "addr": m["addr"], "type": kind, "size": 0})
        elif kind == "Mremap":
            out.append({**head, "addr": m["old_addr"], "type": "Munmap",
                        "size": m["old_size"]})
            out.append({**head, "addr": m["addr"], "type": "Mmap",
                        "size": m["size"]})
    return out


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        print(len(codspeed_events(sys.argv[2])))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        got = codspeed_events(sys.argv[2])
        want = expected_from_mt(sys.argv[3])
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                fail(f"event {i}: CodSpeed {g} != mt {w}")
        if len(got) != len(want):
            fail(f"{len(got)} events, mt's artifact has {len(want)}")
        print(len(got))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
