#!/usr/bin/python3
"""rawcheck.py - an outside truth for mt-encode's tests, written without any
of lib/: it reads and writes the raw stream with struct (man/mt-format.5),
maps raw records to the artifact maps the man page promises, and compares
them with what python3-msgpack (or json) decodes from mt-encode's output.

  rawcheck.py check RAW ARTIFACT [--jsonl] [--expect EXPECT.jsonl]
      RAW parsed here; ARTIFACT must hold exactly the maps it implies.
      With --expect, mt-gen's own list of records must agree too.
  rawcheck.py check-partial RAW ARTIFACT ERROR_SUBSTRING
      RAW is cut or corrupt: ARTIFACT must hold the maps of the records
      before the damage, then a Trailer with complete false and the error.
  rawcheck.py write OUT [--packed]
      writes a hand-made raw stream (exec paths across slots, a lost-only
      batch, exit statuses); --packed: version 2, its batches packed here
      (man/mt-format.5, "Packed batches").
  rawcheck.py dump RAW
      prints each record the raw stream holds, as JSON (slots unpacked).
Exit 0 when all agree; otherwise prints the first difference, exit 1.
"""
import json
import struct
import sys
import zlib

import msgpack

from mtzstd import open_plain

MAGIC = b"\x89MTRAW\r\n"
BATCH_MAGIC = 0x3142544D
PACKED_MAGIC = 0x3242544D  # "MTB2": a packed batch (version 2 on)
TRAILER_MAGIC = 0x3145544D
HEADER = struct.Struct("<8sIIIIIIII QQ II".replace(" ", ""))
BATCH = struct.Struct("<IIII QQ".replace(" ", ""))
TRAILER = struct.Struct("<IIiI QQQQ".replace(" ", ""))
EVENT = struct.Struct("<QIIHHI QQQQ".replace(" ", ""))
NAMES = {1: "Malloc", 2: "Free", 3: "Calloc", 4: "Realloc", 5: "AlignedAlloc",
         6: "Mmap", 7: "Munmap", 8: "Mremap", 9: "Brk", 10: "Fork",
         11: "Exec", 12: "Exit", 14: "Rss", 15: "Pss", 16: "Marker",
         17: "Enable", 18: "Disable", 19: "Lost", 20: "Allocator"}
EXEC, DATA, MARKER, LOST, ALLOCATOR = 11, 13, 16, 19, 20
STACK, CODE_FILE = 23, 24  # call stacks: their payload too
FAMILIES = {1: "libc", 2: "libstdc++", 3: "jemalloc", 4: "mimalloc",
            5: "tcmalloc"}
MEMBERS = ["file", "anon", "swap", "shmem"]


class Cut(Exception):
    """The raw stream ends or breaks here; records before it are good."""


PAYLOAD_KINDS = (EXEC, MARKER, ALLOCATOR, STACK, CODE_FILE)
FIELDS = ("timestamp", "pid", "tid", "kind", "flags", "aux", "addr", "size",
          "old_addr", "old_size")
M64 = (1 << 64) - 1


def varint(body, pos):
    v, shift = 0, 0
    while True:
        if pos >= len(body) or shift > 63:
            raise Cut("packed varint")
        b = body[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            if v > M64:
                raise Cut("packed varint")
            return v, pos
        shift += 7


def unzigzag(z):
    return (z >> 1) ^ (-(z & 1) & M64)


def unpack(body, count):
    """A packed batch body -> its count slots as 56-byte records."""
    out, pos, ts, pid, tid, addr, i = [], 0, 0, 0, 0, 0, 0
    while i < count:
        if pos >= len(body):
            raise Cut("packed record")
        h = body[pos]
        pos += 1
        x = 0
        if h & 0x80:
            x = body[pos]
            pos += 1
        kind = h & 0x1F
        if kind == 0x1F:
            kind, pos = varint(body, pos)
        d, pos = varint(body, pos)
        ts = (ts + unzigzag(d)) & M64
        if x & 1:
            pid, pos = varint(body, pos)
        if x & 2:
            d, pos = varint(body, pos)
            tid = (pid + unzigzag(d)) & M64
        r = dict.fromkeys(FIELDS, 0)
        r.update(timestamp=ts, pid=pid, tid=tid, kind=kind)
        if x & 4:
            r["flags"], pos = varint(body, pos)
        if x & 8:
            r["aux"], pos = varint(body, pos)
        if h & 0x20:
            d, pos = varint(body, pos)
            addr = (addr + unzigzag(d)) & M64
            r["addr"] = addr
        if h & 0x40:
            r["size"], pos = varint(body, pos)
        if x & 0x10:
            d, pos = varint(body, pos)
            r["old_addr"] = (r["addr"] + unzigzag(d)) & M64
        if x & 0x20:
            r["old_size"], pos = varint(body, pos)
        out.append(EVENT.pack(*(r[k] for k in FIELDS)))
        i += 1
        n = (r["aux"] + 55) // 56
        if kind in PAYLOAD_KINDS and r["aux"] and n <= count - i:
            mode = body[pos]
            pos += 1
            size = n * 56 if mode == 1 else r["aux"]
            pay = body[pos:pos + size].ljust(n * 56, b"\0")
            pos += size
            out += [pay[k * 56:(k + 1) * 56] for k in range(n)]
            i += n
    if pos != len(body):
        raise Cut("packed body")
    return b"".join(out)


def zigzag(v):
    v &= M64
    return ((v << 1) ^ (M64 if v >> 63 else 0)) & M64


def put_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pack(slots):
    """56-byte records (payload slots after theirs) -> a packed body."""
    out, ts, pid, tid, addr, i = bytearray(), 0, 0, 0, 0, 0
    count = len(slots) // 56
    while i < count:
        r = dict(zip(FIELDS, EVENT.unpack_from(slots, i * 56)))
        x = ((r["pid"] != pid) | (r["tid"] != tid) << 1
             | bool(r["flags"]) << 2 | bool(r["aux"]) << 3
             | bool(r["old_addr"]) << 4 | bool(r["old_size"]) << 5)
        h = (min(r["kind"], 0x1F) | bool(r["addr"]) << 5
             | bool(r["size"]) << 6 | bool(x) << 7)
        out.append(h)
        if x:
            out.append(x)
        if h & 0x1F == 0x1F:
            out += put_varint(r["kind"])
        out += put_varint(zigzag(r["timestamp"] - ts))
        ts = r["timestamp"]
        if x & 1:
            out += put_varint(r["pid"])
        if x & 2:
            out += put_varint(zigzag(r["tid"] - r["pid"]))
        pid, tid = r["pid"], r["tid"]
        for bit, key in ((4, "flags"), (8, "aux")):
            if x & bit:
                out += put_varint(r[key])
        if r["addr"]:
            out += put_varint(zigzag(r["addr"] - addr))
            addr = r["addr"]
        if r["size"]:
            out += put_varint(r["size"])
        if r["old_addr"]:
            out += put_varint(zigzag(r["old_addr"] - r["addr"]))
        if r["old_size"]:
            out += put_varint(r["old_size"])
        i += 1
        n = (r["aux"] + 55) // 56
        if r["kind"] in PAYLOAD_KINDS and r["aux"] and n <= count - i:
            pay = slots[i * 56:(i + n) * 56]
            if any(pay[r["aux"]:]):
                out += b"\1" + pay
            else:
                out += b"\0" + pay[:r["aux"]]
            i += n
    return bytes(out)


def packed_batch(count, body, seq, lost):
    head = BATCH.pack(PACKED_MAGIC, count, len(body), 0, seq, lost)
    crc = zlib.crc32(head + body)
    return BATCH.pack(PACKED_MAGIC, count, len(body), crc, seq, lost) + body


def parse_raw(data):
    """-> (header dict, [record dict], trailer dict or None, error or None)"""
    if len(data) < HEADER.size:
        raise Cut("header")
    (magic, version, header_size, event_size, page_size, clock_id, root_pid,
     flags, argc, start_mono, start_real, strings_size, _) = \
        HEADER.unpack_from(data, 0)
    assert magic == MAGIC and version in (1, 2)
    strings = data[HEADER.size:HEADER.size + strings_size].split(b"\0")
    header = {"type": "Header", "format": "mt", "version": 1,
              "command": [s.decode() for s in strings[1:1 + argc]],
              "host": strings[0].decode(), "clock": "CLOCK_MONOTONIC",
              "page_size": page_size, "root_pid": root_pid,
              "start_time": start_real, "start_monotonic": start_mono,
              "allocators_tracked": bool(flags & 1),
              "syscalls_tracked": bool(flags & 2),
              "rss_tracked": bool(flags & 4),
              "physical_tracked": bool(flags & 8)}
    if flags & 16:
        header["stacks_tracked"] = True
    if flags & 1:
        header["allocators_recorder"] = bool(flags & 64)
    records, off, seq, last_ts = [], header_size, 0, 0
    try:
        while True:
            if off + 4 > len(data):
                raise Cut("no trailer")
            (magic,) = struct.unpack_from("<I", data, off)
            if magic == TRAILER_MAGIC:
                if off + TRAILER.size > len(data):
                    raise Cut("trailer")
                t = TRAILER.unpack_from(data, off)
                trailer = {"exit_kind": t[1], "exit_value": t[2],
                           "end_monotonic": t[4], "events": t[5],
                           "lost": t[6], "batches": t[7]}
                return header, records, trailer, None
            if magic not in (BATCH_MAGIC, PACKED_MAGIC) or \
                    off + BATCH.size > len(data):
                raise Cut("batch header")
            _, count, nbytes, check, bseq, lost = BATCH.unpack_from(data,
                                                                    off)
            assert bseq == seq
            head = data[off:off + BATCH.size]
            off += BATCH.size
            body = data[off:off + nbytes]
            if magic == PACKED_MAGIC:
                assert version >= 2 and event_size == 56
                if len(body) < nbytes:
                    raise Cut("packed body")
                if zlib.crc32(head[:12] + b"\0" * 4 + head[16:] + body) \
                        != check:
                    raise Cut("packed batch CRC")
                off += nbytes
                body, nbytes = unpack(body, count), 0
            else:
                assert nbytes == count * event_size
            if lost:
                ts = EVENT.unpack_from(body, 0)[0] if len(body) >= 8 \
                    else last_ts
                records.append({"kind": LOST, "pid": 0, "tid": 0,
                                "timestamp": ts, "size": lost})
            i = 0
            while i < count:
                if (i + 1) * event_size > len(body):
                    raise Cut("body")
                f = EVENT.unpack_from(body, i * event_size)
                r = dict(zip(("timestamp", "pid", "tid", "kind", "flags",
                              "aux", "addr", "size", "old_addr", "old_size"),
                             f))
                i += 1
                if r["kind"] in (EXEC, MARKER, ALLOCATOR, STACK, CODE_FILE):
                    n = (r["aux"] + 55) // 56
                    if (i + n) * event_size > len(body):
                        raise Cut("payload")
                    payload = b"".join(
                        body[(i + k) * event_size:(i + k) * event_size + 56]
                        for k in range(n))
                    r["str"] = payload[:r["aux"]]
                    i += n
                records.append(r)
                last_ts = r["timestamp"]
            off += nbytes
            seq += 1
    except Cut as cut:
        return header, records, None, str(cut)


def text(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b  # mt-encode writes non-UTF-8 paths as bin


def to_map(r):
    """What mt-format(5) says the artifact holds for raw record r."""
    k = r["kind"]
    m = {"type": NAMES[k], "pid": r["pid"], "tid": r["tid"],
         "timestamp": r["timestamp"]}
    if k == LOST:
        m["count"] = r["size"]
    elif k in (1, 3, 7):
        m.update(addr=r["addr"], size=r["size"])
    elif k == 2:
        m["addr"] = r["addr"]
    elif k == 4:
        m.update(addr=r["addr"], size=r["size"], old_addr=r["old_addr"])
    elif k == 5:
        m.update(addr=r["addr"], size=r["size"], alignment=r["old_size"])
    elif k == 6:
        m.update(addr=r["addr"], size=r["size"], prot=r["flags"],
                 flags=r["aux"])
    elif k == 8:
        m.update(addr=r["addr"], size=r["size"], old_addr=r["old_addr"],
                 old_size=r["old_size"])
    elif k == 9:
        m.update(addr=r["addr"], old_addr=r["old_addr"],
                 size=abs(r["addr"] - r["old_addr"]))
    elif k == 10:
        m["ppid"] = r["old_addr"]
    elif k == EXEC:
        # the path; with size, a NUL and the arguments, each ending in a
        # NUL; flags 1: cut, old_size their whole length (argv_bytes)
        if r["size"]:
            cut = r["aux"] - r["size"]
            m["path"] = text(r["str"][:cut - 1])
            args = r["str"][cut:]
            if args.endswith(b"\0"):
                args = args[:-1]
            m["argv"] = [text(a) for a in args.split(b"\0")]
            if r["flags"] & 1:  # cut
                m["argv_bytes"] = r["old_size"]
        else:
            m["path"] = text(r["str"])
    elif k == MARKER:
        m["name"] = text(r["str"])
    elif k == ALLOCATOR:
        m["kind"] = FAMILIES.get(r["flags"], "none")
        m["path"] = text(r["str"])
    elif k == 12:
        st = r["aux"]
        if st & 0x7F == 0:
            m["exit_code"] = (st >> 8) & 0xFF
        elif st & 0x7F != 0x7F:
            m["signal"] = st & 0x7F
        else:
            m["status"] = st
    elif k == 14:
        m["member"] = MEMBERS[r["aux"]] if r["aux"] < 4 else r["aux"]
        m["size"] = r["size"]
        if r["flags"] & 0x8000:
            m["tracer"] = True
    elif k == 15:
        m.update(pss=r["size"], pss_anon=r["addr"], pss_file=r["old_addr"],
                 pss_shmem=r["old_size"])
    return m


def load_artifact(path, jsonl):
    with open_plain(path) as f:
        if jsonl:
            return [json.loads(line) for line in f]
        return list(msgpack.Unpacker(f, raw=False, strict_map_key=True))


def compare(got, want, what):
    if got != want:
        print(f"{what} differs:\n  got  {got}\n  want {want}")
        sys.exit(1)


def jsonable(m):
    """JSON strings hold text: non-UTF-8 bytes become U+FFFD."""
    def fix(v):
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return {k: fix(v) for k, v in m.items()}


def check(raw_path, art_path, jsonl, expect_path=None, partial=None):
    with open(raw_path, "rb") as f:
        header, records, trailer, cut = parse_raw(f.read())
    maps = load_artifact(art_path, jsonl)
    want = [to_map(r) for r in records]
    if jsonl:
        want = [jsonable(m) for m in want]
    compare(maps[0], header, "header")
    if partial is None:
        assert cut is None, f"raw stream is cut: {cut}"
        compare(len(maps) - 2, len(want), "number of event maps")
    for i, (g, w) in enumerate(zip(maps[1:-1], want)):
        compare(g, w, f"event {i}")
    t = maps[-1]
    if partial is None:
        exit_key = {1: "exit_code", 2: "signal"}.get(trailer["exit_kind"])
        want_t = {"type": "Trailer", "complete": True,
                  "end_monotonic": trailer["end_monotonic"],
                  "events": len(want),
                  "lost_events": trailer["lost"],
                  "batches": trailer["batches"]}
        if exit_key:
            want_t[exit_key] = trailer["exit_value"]
        compare(t, want_t, "trailer")
        compare(sum(m.get("count", 0) for m in maps if m["type"] == "Lost"),
                trailer["lost"], "sum of Lost counts")
    else:
        compare(t["type"], "Trailer", "last map")
        compare(t["complete"], False, "complete")
        compare(t["events"], len(maps) - 2, "trailer events")
        if partial not in t["error"]:
            print(f"trailer error {t['error']!r} lacks {partial!r}")
            sys.exit(1)
        # exactly the records before the damage, none invented or dropped
        compare(len(maps) - 2, len(want), "event maps before the damage")
    if expect_path:
        with open(expect_path) as f:
            gen = [json.loads(line) for line in f]
        mine = [{k: (v.decode("utf-8", "replace") if isinstance(v, bytes)
                     else v) for k, v in r.items()} for r in records]
        compare(len(gen), len(mine), "mt-gen records vs raw parse")
        for i, (g, w) in enumerate(zip(gen, mine)):
            compare(g, w, f"mt-gen record {i}")


def event(kind, ts, pid=10, tid=11, flags=0, aux=0, addr=0, size=0,
          old_addr=0, old_size=0):
    return EVENT.pack(ts, pid, tid, kind, flags, aux, addr, size, old_addr,
                      old_size)


def payload(b):
    slots = b"".join(b[i:i + 56].ljust(56, b"\0")
                     for i in range(0, len(b), 56))
    return slots


def write(out, packed=False):
    """A raw stream written by hand, independent of lib/raw.c."""
    strings = b"hand\0/bin/prog\0arg 1\0"
    size = (HEADER.size + len(strings) + 7) // 8 * 8
    head = HEADER.pack(MAGIC, 2 if packed else 1, size, 56, 4096, 1, 10,
                       0x3, 2, 5000, 1700000000123456789, len(strings), 0)
    data = (head + strings).ljust(size, b"\0")
    path = "/usr/lib/very/long/path/that/spans/two/slots/of/56/bytes/x".encode()
    odd = b"/tmp/\xff\xfe"
    b0 = (event(1, 100, addr=0x1000, size=24)
          + event(EXEC, 101, aux=len(path)) + payload(path)
          + event(4, 102, addr=0x2000, size=48, old_addr=0x1000)
          + event(9, 103, addr=0x9000, old_addr=0x8000)
          + event(6, 104, flags=3, aux=0x22, addr=0x7f00, size=8192)
          + event(MARKER, 105, aux=len(odd)) + payload(odd)
          + event(12, 106, aux=3 << 8)
          + event(ALLOCATOR, 107, flags=3, aux=len(path)) + payload(path))
    n0 = len(b0) // 56
    # an exec with its arguments (mt-format(5)): one with a space, an
    # empty one, one not UTF-8, across slots, cut (flags 1, old_size)
    args = b"prog\0a b\0\0\xff" + b"x" * 60 + b"\0"
    cmd = b"/bin/prog\0" + args
    b2 = (event(12, 200, pid=12, aux=9)
          + event(5, 201, addr=64, size=512, old_size=64)
          + event(EXEC, 202, pid=12, tid=12, flags=1, aux=len(cmd),
                  size=len(args), old_size=9000) + payload(cmd))
    n2 = len(b2) // 56
    if packed:
        data += packed_batch(n0, pack(b0), 0, 0)
        data += packed_batch(0, b"", 1, 4)  # lost only
        data += packed_batch(n2, pack(b2), 2, 2)
    else:
        data += BATCH.pack(BATCH_MAGIC, n0, len(b0), 0, 0, 0) + b0
        data += BATCH.pack(BATCH_MAGIC, 0, 0, 0, 1, 4)  # lost only
        data += BATCH.pack(BATCH_MAGIC, n2, len(b2), 0, 2, 2) + b2
    data += TRAILER.pack(TRAILER_MAGIC, 2, 15, 0, 300, n0 + n2, 6, 3)
    with open(out, "wb") as f:
        f.write(data)


def main(argv):
    if argv[1] == "check":
        exp = argv[argv.index("--expect") + 1] if "--expect" in argv else None
        check(argv[2], argv[3], "--jsonl" in argv, exp)
    elif argv[1] == "check-partial":
        check(argv[2], argv[3], "--jsonl" in argv, None, partial=argv[4])
    elif argv[1] == "write":
        write(argv[2], "--packed" in argv)
    elif argv[1] == "dump":
        with open(argv[2], "rb") as f:
            header, records, trailer, cut = parse_raw(f.read())
        for r in records:
            print(json.dumps({k: (v.decode("latin-1") if isinstance(v, bytes)
                                  else v) for k, v in r.items()}))
        if cut:
            sys.exit(f"cut: {cut}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
