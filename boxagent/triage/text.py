"""What a log line is, for matching and for showing it to a person.

Lines are split at \\n only (line numbers match an editor's). A raw \\r inside a line is a
redraw (tqdm writes `\\r 45%|...` without a newline for hours), so for matching the line is
split into its \\r segments (a rule's ^/$ anchor at segment ends). A line longer than
MAX_LINE keeps its head and its LAST segment (where a traceback printed after a progress
bar lands); the middle is skipped, which keeps memory bounded for multi-megabyte lines.
Invalid UTF-8 becomes U+FFFD, NULs (the zero-filled tail a crash leaves) are dropped, ANSI
colour codes are removed.

For matching only, a segment that carries a prefix (`[rank3]:`, `[default0]:`, a timestamp,
a log level, glog's `E0325 20:57:27.62 2606 api.py:869]`, a rich box edge, indentation) is
followed by a copy without it, and the text glued after a tqdm bar (`…1.28it/s]Killed`: the
bar had no newline when the next message came) by a copy of that text alone: a rule anchored
at ^ then reads `[rank0]: KeyError: 'x'` as an exception line. The copies are extra lines of
the text a rule searches, never a replacement: a pattern written for the whole line still
matches the original, and a hit shows the original line (evidence keeps its text).
"""
from __future__ import annotations

import re
from typing import List, Optional

MAX_LINE = 8192          # bytes of a line kept for matching: its head, and its last segment
# Characters of a line a USER pattern (job/profile rule, success/fail/progress/wait pattern)
# sees: its first and its last 2 KB. Python's re cannot be interrupted, and a pattern the
# submit check lets through may still be quadratic (`(a|ab)*c`: ~1 s on 5000 "ab"s).
USER_LINE_MAX = 4096
SHOW_CHARS = 300         # a line shown as evidence is cut to this

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# One prefix a logging layer puts before a program's own line. Tried again and again at the
# start of a segment (a line may carry several: `[rank1]:[E626 06:24:44 PG.cpp:616] `).
_PREFIX = re.compile(
    r"\[(?:rank|default|Rank ?)?[0-9]+\]:?"                 # torchrun --tee / elastic ranks
    r"|\[[^\]\n]{1,80}\]:?"                                  # [E626 …], [INFO|x.py:1], [uuid]
    r"|[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}[ T][0-9:.,]+(?:Z|[+-][0-9:]{2,5})?"   # timestamps
    r"|[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9:.,]+|[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"
    r"|[IWEF][0-9]{4} [0-9:.]+ +[0-9]+ [^ \]]+:[0-9]+\]"         # glog
    r"|(?:DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)(?::[A-Za-z0-9_.]+:|\b)"
    r"|\([^()\n]*pid=[0-9]+[^()\n]*\)"                       # ray workers: (Worker pid=12)
    r"|#[0-9]+ [0-9]+\.[0-9]+"                                # docker buildkit steps
    r"|<(?:stderr|stdout)>:"                                  # mpirun/horovodrun --tag-output
    r"|##\[[a-z]+\]"                                          # CI logging commands: ##[error]
    r"|[a-z0-9][a-z0-9_.-]*-[0-9]+ +\| "                       # docker compose: trainer-1  |
    r"|[0-9]{1,5}: (?=[A-Za-z_\[])"                           # srun --label: 3: KeyError
    r"|[A-Za-z0-9_.<>-]+:[A-Za-z0-9_.<>-]+:[0-9]+ - "          # loguru's module:function:line -
    r"|[-|:>\u2502\u2503]+")                                 # separators, rich box edges
_BAR_END = re.compile(r"[0-9:]+<[0-9:?]+,? *[^\]\n]*\]")        # tqdm: [00:02<00:03, 1.2it/s]
_EDGES = " \t\u2502\u2503"


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


class MatchText(str):
    """The text rules are matched against; `shown[i]` is what its line i shows as."""

    shown: List[str]


def match_text(raw: bytes) -> str:
    """The text rules are matched against (re.M): \\r segments become lines, each followed
    by its copies without a logging prefix and after a tqdm bar (see the module doc)."""
    text = decode(cap_line(raw))
    segs = text.rstrip("\r").split("\r") if "\r" in text else [text]
    lines: List[str] = []
    shown: List[str] = []
    for seg in segs:
        lines.append(seg)
        shown.append(seg)
        for extra in _copies(seg):
            lines.append(extra)
            shown.append(seg)
    out = MatchText("\n".join(lines))
    out.shown = shown
    return out


def _copies(seg: str) -> List[str]:
    """The segment without its prefixes, and the text glued after a tqdm bar (when either
    differs from the segment)."""
    out = []
    bare = strip_prefixes(seg)
    if bare and bare != seg:
        out.append(bare)
    if "<" in seg:
        m = None
        for m in _BAR_END.finditer(seg):
            pass
        tail = seg[m.end():].strip(_EDGES) if m is not None else ""
        if tail and tail not in out:
            out.append(tail)
    return out


def strip_prefixes(seg: str, rounds: int = 8) -> str:
    """`seg` without the logging prefixes and indentation before its own text."""
    s = seg.strip(_EDGES)
    for _ in range(rounds):
        m = _PREFIX.match(s)
        if m is None or not m.end():
            break
        s = s[m.end():].strip(_EDGES)
    return s


def user_text(text: str) -> str:
    """match_text() cut to USER_LINE_MAX characters: head and tail, a line break between
    (each kept line still shows as the line it came from)."""
    if len(text) <= USER_LINE_MAX:
        return text
    half = USER_LINE_MAX // 2
    head, tail = text[:half], text[-(half - 1):]
    if not isinstance(text, MatchText):
        return head + "\n" + tail
    out = MatchText(head + "\n" + tail)
    out.shown = text.shown[:head.count("\n") + 1] + text.shown[-(tail.count("\n") + 1):]
    return out


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
    """The segment of a match_text() that holds position `start`, clean and short: for a
    copy made for matching, the line it was copied from."""
    if isinstance(text, MatchText):
        return clip(text.shown[text.count("\n", 0, start)].strip(), limit)
    s = text.rfind("\n", 0, start) + 1
    e = text.find("\n", start)
    return clip(text[s:e if e >= 0 else len(text)].strip(), limit)


def clip(text: str, limit: int = SHOW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
