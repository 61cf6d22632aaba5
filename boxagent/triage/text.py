"""What a log line is, for matching and for showing it to a person.

Lines are split at \\n only (line numbers match an editor's). A raw \\r inside a line is a
redraw (tqdm writes `\\r 45%|...` without a newline for hours), so for matching the line is
split into its \\r segments (a rule's ^/$ anchor at segment ends). A line longer than
MAX_LINE keeps its head and its LAST segment (where a traceback printed after a progress
bar lands); the middle is skipped, which keeps memory bounded for multi-megabyte lines.
Invalid UTF-8 becomes U+FFFD, NULs (the zero-filled tail a crash leaves) are dropped, ANSI
colour codes are removed.
"""
from __future__ import annotations

import re
from typing import Optional

MAX_LINE = 8192          # bytes of a line kept for matching: its head, and its last segment
# Characters of a line a USER pattern (job/profile rule, success/fail/progress/wait pattern)
# sees: its first and its last 2 KB. Python's re cannot be interrupted, and a pattern the
# submit check lets through may still be quadratic (`(a|ab)*c`: ~1 s on 5000 "ab"s).
USER_LINE_MAX = 4096
SHOW_CHARS = 300         # a line shown as evidence is cut to this

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def cap_line(raw: bytes) -> bytes:
    """A line (without its \\n) reduced to what matching looks at: head + last segment."""
    if len(raw) <= MAX_LINE:
        return raw
    head = raw[:MAX_LINE]
    r = raw.rfind(b"\r", MAX_LINE)
    if r < 0:
        return head
    return head + b"\r" + raw[r + 1:r + 1 + MAX_LINE]


class CappedLine:
    """A line arriving in pieces, kept as cap_line() would keep it: the first MAX_LINE bytes,
    then (once longer) only the last \r segment, itself capped. Memory stays bounded."""

    __slots__ = ("head", "over", "seg")

    def __init__(self) -> None:
        self.head = bytearray()
        self.over = False
        self.seg: Optional[bytearray] = None

    def __bool__(self) -> bool:
        return bool(self.head) or self.over

    def extend(self, data: bytes) -> None:
        if not data:
            return
        if not self.over:
            room = MAX_LINE - len(self.head)
            if len(data) <= room:
                self.head += data
                return
            self.head += data[:room]
            data = data[room:]
            self.over = True
        r = data.rfind(b"\r")
        if r >= 0:
            self.seg = bytearray(data[r + 1:r + 1 + MAX_LINE])
        elif self.seg is not None and len(self.seg) < MAX_LINE:
            self.seg += data[:MAX_LINE - len(self.seg)]

    def value(self) -> bytes:
        if self.over and self.seg is not None:
            return bytes(self.head) + b"\r" + bytes(self.seg)
        return bytes(self.head)

    def take(self) -> bytes:
        v = self.value()
        self.head, self.over, self.seg = bytearray(), False, None
        return v


def decode(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text


def match_text(raw: bytes) -> str:
    """The text rules are matched against (re.M): \\r segments become lines."""
    text = decode(cap_line(raw))
    if "\r" in text:
        text = text.rstrip("\r").replace("\r", "\n")
    return text


def user_text(text: str) -> str:
    """match_text() cut to USER_LINE_MAX characters: head and tail, a line break between."""
    if len(text) <= USER_LINE_MAX:
        return text
    half = USER_LINE_MAX // 2
    return text[:half] + "\n" + text[-(half - 1):]


def last_segment(raw: bytes) -> bytes:
    """The last non-empty \\r segment of a line: what a terminal would show."""
    raw = raw.rstrip(b"\r")
    r = raw.rfind(b"\r")
    seg = raw[r + 1:] if r >= 0 else raw
    return seg[:MAX_LINE]


def show(raw: bytes, limit: int = SHOW_CHARS, keep_indent: bool = False) -> str:
    """A line as a person should see it: the last segment, clean, short."""
    text = decode(last_segment(raw))
    return clip(text.rstrip() if keep_indent else text.strip(), limit)


def show_match(text: str, start: int, limit: int = SHOW_CHARS) -> str:
    """The segment of a match_text() that holds position `start`, clean and short."""
    s = text.rfind("\n", 0, start) + 1
    e = text.find("\n", start)
    return clip(text[s:e if e >= 0 else len(text)].strip(), limit)


def clip(text: str, limit: int = SHOW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def first_line_of(text: Optional[str]) -> str:
    return (text or "").split("\n", 1)[0]
