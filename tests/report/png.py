"""A small PNG reader (stdlib zlib) for checking Chromium's screenshots: 8-bit RGB/RGBA,
non-interlaced, which is what Chromium writes. Also writes a crop (to look at a region)."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path


class Image:
    def __init__(self, width: int, height: int, channels: int, rows: list[bytes]):
        self.width, self.height, self.channels, self.rows = width, height, channels, rows

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        i = x * self.channels
        r = self.rows[y]
        return r[i], r[i + 1], r[i + 2]

    def region(self, x0: int, y0: int, x1: int, y1: int):
        for y in range(max(y0, 0), min(y1, self.height)):
            for x in range(max(x0, 0), min(x1, self.width)):
                yield self.pixel(x, y)

    def crop_png(self, x0: int, y0: int, x1: int, y1: int) -> bytes:
        rows = []
        for y in range(y0, y1):
            r = self.rows[y]
            rows.append(b"\x00" + r[x0 * self.channels:x1 * self.channels])
        color = 6 if self.channels == 4 else 2
        ihdr = struct.pack(">IIBBBBB", x1 - x0, y1 - y0, 8, color, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"".join(rows)))
                + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def read(path: Path) -> Image:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert head is not None, "no IHDR"
    width, height, depth, color, _c, _f, interlace = head
    assert depth == 8 and color in (2, 6) and interlace == 0, "unsupported PNG %s" % (head,)
    ch = 4 if color == 6 else 3
    raw = zlib.decompress(b"".join(idat))
    return Image(width, height, ch, _unfilter(raw, width, height, ch))


def _unfilter(raw: bytes, width: int, height: int, ch: int) -> list[bytes]:
    stride = width * ch
    rows: list[bytes] = []
    prev = bytearray(stride)
    pos = 0
    lo = int.from_bytes(b"\x7f" * stride, "little")
    hi = int.from_bytes(b"\x80" * stride, "little")
    for _y in range(height):
        ftype, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if ftype == 1:
            for i in range(ch, stride):
                line[i] = (line[i] + line[i - ch]) & 255
        elif ftype == 2:   # most of Chromium's rows: a bytewise add, done on one big int
            x, y = int.from_bytes(line, "little"), int.from_bytes(prev, "little")
            line = bytearray((((x & lo) + (y & lo)) ^ ((x ^ y) & hi)).to_bytes(stride, "little"))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - ch] if i >= ch else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ftype == 4:
            for i in range(stride):
                a = line[i - ch] if i >= ch else 0
                b, c = prev[i], prev[i - ch] if i >= ch else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return rows
