#!/usr/bin/python3
"""pngstat.py PNG [RRGGBB...]: print "WIDTHxHEIGHT COLORS NONWHITE_PERMILLE"
for an 8-bit RGB/RGBA PNG (what Chromium's --screenshot writes), then for
each RRGGBB given the number of pixels near that colour (each channel within
48), decoded with the standard library only, so a test can tell a drawn
picture from a blank one and see that a line of a given colour is there.
"""
import struct
import sys
import zlib


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("only 8-bit RGB/RGBA, not interlaced")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                line[i] = (line[i] + paeth(a, b, c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    width, height, bpp, rows = decode(open(sys.argv[1], "rb").read())
    wanted = [bytes.fromhex(h) for h in sys.argv[2:]]
    near = [0] * len(wanted)
    colors, nonwhite = {}, 0
    for row in rows:
        for x in range(0, len(row), bpp):
            px = row[x:x + 3]
            colors[px] = colors.get(px, 0) + 1
            if px != b"\xff\xff\xff":
                nonwhite += 1
    for px, n in colors.items():
        for i, w in enumerate(wanted):
            if all(abs(px[c] - w[c]) <= 48 for c in range(3)):
                near[i] += n
    print(" ".join(["%dx%d %d %d" % (width, height, len(colors),
                                     nonwhite * 1000 // (width * height))]
                   + [str(n) for n in near]))


if __name__ == "__main__":
    main()
