#!/usr/bin/env python3
"""Python frames of an mt trace (issue 34), read without lib/: the JSON
Lines of mt-encode --jsonl on stdin; prints, for every allocation of
exactly SIZE bytes, its stack's Python frames, innermost first, as
"qualname file:line" joined by " < ", one line per allocation.

Lines come from each PyCode's line table, decoded as CPython 3.11 and
3.12 lay it out (Objects/locations.md): an independent reading of what
lib/analysis does.  Frames of file 65535 are Python frames: the code id
in the address's top 28 bits, the instruction offset (code units) in the
low 20 (man/mt-format.5).

usage: pyframes.py SIZE... < trace.jsonl  (more than one SIZE: each line
starts with its allocation's size and a colon)
"""
import json
import os
import sys

PYTHON_FILE = 65535


def varint(data, i):
    shift = val = 0
    while True:
        b = data[i]
        i += 1
        val |= (b & 63) << shift
        shift += 6
        if not b & 64:
            return val, i


def svarint(data, i):
    val, i = varint(data, i)
    return (-(val >> 1) if val & 1 else val >> 1), i


def line_at(table, first_line, offset):
    """The line of the instruction at offset (code units), or None."""
    data = bytes.fromhex(table)
    i, addr, line = 0, 0, first_line
    while i < len(data):
        head = data[i]
        i += 1
        code, length = (head >> 3) & 15, (head & 7) + 1
        this = line
        if code == 15:
            this = None
        elif code == 14:
            delta, i = svarint(data, i)
            line += delta
            this = line
            _, i = varint(data, i)
            _, i = varint(data, i)
            _, i = varint(data, i)
        elif code == 13:
            delta, i = svarint(data, i)
            line += delta
            this = line
        elif code >= 10:
            line += code - 10
            this = line
            i += 2
        else:
            i += 1
        if addr <= offset < addr + length:
            return this
        addr += length
    return None


def main():
    sizes = [int(a) for a in sys.argv[1:]]
    codes, stacks, out = {}, {}, []
    for raw in sys.stdin:
        m = json.loads(raw)
        t = m["type"]
        if t == "PyCode":
            codes[m["code"]] = m
        elif t == "Stack":
            stacks[m["stack"]] = m["frames"]
        elif t in ("Malloc", "Calloc", "Realloc") and m.get("size") in sizes:
            names = []
            for file, addr in stacks.get(m.get("stack"), []):
                if file != PYTHON_FILE:
                    continue
                code = codes.get(addr >> 20)
                if code is None:
                    names.append("?")
                    continue
                line = line_at(code["linetable"], code["first_line"],
                               addr & 0xFFFFF)
                names.append("%s %s:%s" % (code["qualname"],
                                           os.path.basename(code["path"]),
                                           line))
            line = " < ".join(names)
            out.append("%d: %s" % (m["size"], line) if len(sizes) > 1
                       else line)
    for line in out:
        print(line)


main()
