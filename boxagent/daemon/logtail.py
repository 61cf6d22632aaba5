"""What a line of a stage log is, for a human reading it: `logs -n N` here on the box, and the
client's `logs --follow` on the laptop (rgt_client imports this module: one rule, one place).

LF ends a line. Within a line, CR starts a redraw (tqdm, any progress bar) and only the last
redraw counts: what the terminal showed last. `logs -n 5` once split at every CR and showed five
redraws of one bar, none of the `Epoch 2/200 loss …` or `saved ckpt/…` lines around it.

Everything is bounded: a tail reads the file backwards at most SCAN_MAX bytes, and keeps at most
LINE_MAX bytes of one line (its end). A 100 MB log with no newline once made `logs -n 50` read
all of it for 95 s until the client gave up.
"""
from __future__ import annotations

import os
from typing import BinaryIO, List, Optional, Tuple

from boxagent.base import safefile

SCAN_MAX = 8 << 20
LINE_MAX = 16 << 10
CUT = b"[...] "            # marks a line shown only in part (its end)
BLOCK = 65536


def visible(line: bytes) -> bytes:
    """The last redraw of one line (given without its LF); a CRLF line end is just an end."""
    body = line.rstrip(b"\r")
    i = body.rfind(b"\r")
    body = body[i + 1:] if i >= 0 else body
    return CUT + body[-LINE_MAX:] if len(body) > LINE_MAX else body


def _resolved(cur: bytes) -> Optional[bytes]:
    """The visible part of a line read from its end, as soon as the bytes seen decide it."""
    if b"\r" in cur.rstrip(b"\r") or len(cur) > LINE_MAX:
        return visible(cur)
    return None


def tail(path: str, n: int, scan_max: int = SCAN_MAX) -> bytes:
    """The last n lines of the file (each its last redraw, each ending with LF), reading at most
    scan_max bytes from the end. OSError propagates."""
    with os.fdopen(safefile.open_regular(path), "rb") as fh:      # never blocks on a FIFO
        lines, bounded = _backwards(fh, n, scan_max)
    out = b"".join(line + b"\n" for line in reversed(lines))
    if bounded:
        out = b"[rgt: fewer lines than asked: the last %d MiB of the log hold only these]\n" % (scan_max >> 20) + out
    return out


def _backwards(fh: BinaryIO, n: int, scan_max: int) -> Tuple[List[bytes], bool]:
    """(up to n lines, newest first; True when scan_max stopped the read before n were found)."""
    fh.seek(0, os.SEEK_END)
    pos, read = fh.tell(), 0
    lines: List[bytes] = []
    cur, done = b"", None            # the line being read (its right end), its visible part once known
    at_eof = True
    while pos > 0 and read < scan_max:
        step = min(BLOCK, pos)
        pos -= step
        fh.seek(pos)
        parts = fh.read(step).split(b"\n")
        read += step
        for i in range(len(parts) - 1, -1, -1):
            if done is None:
                cur = parts[i] + cur
                done = _resolved(cur)
            if i == 0:
                break                # no LF left of this piece in this block: the line goes on
            if not (at_eof and not cur):      # not the empty "line" after the file's last LF
                lines.append(done if done is not None else visible(cur))
            at_eof, cur, done = False, b"", None
            if len(lines) >= n:
                return lines, False
    if pos == 0:                     # the file's first line: complete
        if cur or done is not None:
            lines.append(done if done is not None else visible(cur))
        return lines, False
    if done is None and cur:         # its start lies beyond scan_max: only its end is known
        done = visible(cur)
        done = done if done.startswith(CUT) else CUT + done
    if done is not None:
        lines.append(done)
    return lines, True


class Lines:
    """The same rule for bytes that arrive in chunks (`logs --follow`): feed() gives the lines a
    chunk completed; pending() the last redraw of the line still being written (a live bar)."""

    def __init__(self) -> None:
        self._cur = b""

    def feed(self, data: bytes) -> List[bytes]:
        parts = (self._cur + data).split(b"\n")
        self._cur = self._trim(parts.pop())
        return [visible(p) for p in parts]

    def pending(self) -> bytes:
        return visible(self._cur)

    def end(self) -> List[bytes]:
        """The unfinished line, if any, as a last line."""
        rest, self._cur = self._cur, b""
        return [visible(rest)] if rest else []

    @staticmethod
    def _trim(cur: bytes) -> bytes:
        # only the last redraw can still show: older ones are dropped, so memory stays bounded
        body = cur.rstrip(b"\r")
        i = body.rfind(b"\r")
        if i >= 0:
            cur = cur[i:]
        return cur if len(cur) <= 2 * LINE_MAX else CUT + cur[-LINE_MAX:]


def copy_all(path: str, out: BinaryIO) -> None:
    """The whole log through the same rule (`logs -n 0`), streamed: memory stays bounded."""
    lines = Lines()
    with os.fdopen(safefile.open_regular(path), "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            for line in lines.feed(block):
                out.write(line + b"\n")
    for line in lines.end():
        out.write(line + b"\n")
