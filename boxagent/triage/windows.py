"""Where a traceback's window lies in a block of lines (byte ranges).

A generic exception line (`ValueError: ...`) counts as a crash only within TRACEBACK_WINDOW
lines after a `Traceback (most recent call last):` header; the literals that find it
("Error", "Exception") are in every metric name (`val_MeanSquaredError=0.05`), so they are
searched only inside these ranges. Cost: one bytes.find per line of window.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

TRACEBACK_WINDOW = 1000   # an exception line counts as a crash this many lines after a header


def window_ranges(block: bytes, first_line_no: int, carried: Optional[int],
                  headers: List[Tuple[int, int]]) -> List[Tuple[int, int, int]]:
    """(start, end, line_no at start) of the parts of `block` within a window: after `carried`
    (a header before this block) and after `headers` ((line_no, end of that line) in this
    block, in order). Overlapping windows are merged."""
    out: List[List[int]] = []
    if carried is not None and carried + TRACEBACK_WINDOW >= first_line_no:
        out.append([0, 0, first_line_no, first_line_no - 1])       # start, end, line, last line
        _extend(block, out[-1], carried + TRACEBACK_WINDOW)
    for line_no, le in headers:
        if out and out[-1][3] >= line_no:
            _extend(block, out[-1], line_no + TRACEBACK_WINDOW)
            continue
        out.append([le + 1, le + 1, line_no + 1, line_no])
        _extend(block, out[-1], line_no + TRACEBACK_WINDOW)
    return [(s, e, n) for s, e, n, _ in out if e > s]


def line_range(block: bytes, first_line_no: int, lo: int, hi: int) -> Optional[Tuple[int, int, int]]:
    """(start, end, lo) of lines lo..hi of `block` (clipped to it), or None when outside."""
    lo = max(lo, first_line_no)
    rng = [0, 0, first_line_no, first_line_no - 1]
    _extend(block, rng, lo - 1)
    start = rng[1]
    _extend(block, rng, hi)
    if rng[1] <= start:
        return None
    return start, rng[1], lo


def merge_headers(headers: List[Tuple[int, int]]) -> List[Tuple[int, int, int]]:
    """(first header, its byte offset, last line of the merged windows) from (line_no, offset)
    of every header in a file, in order."""
    groups: List[List[int]] = []
    for line_no, offset in headers:
        if groups and line_no <= groups[-1][2]:
            groups[-1][2] = line_no + TRACEBACK_WINDOW
        else:
            groups.append([line_no, offset, line_no + TRACEBACK_WINDOW])
    return [(a, b, c) for a, b, c in groups]


def _extend(block: bytes, rng: List[int], last_line: int) -> None:
    """Move rng's end (rng[1], after line rng[3]) to the end of line last_line (or the block)."""
    end, line = rng[1], rng[3]
    while line < last_line and end < len(block):
        nl = block.find(b"\n", end)
        end = len(block) if nl < 0 else nl + 1
        line += 1
    rng[1], rng[3] = end, line
