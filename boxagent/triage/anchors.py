"""The lines of a block that hold one of a set of literals, found at C speed.

Every rule has literal keywords, one of which is in every line it can match; only lines that
hold one are decoded and matched. How the literals are searched decides the speed of a whole
scan (measured on 32 MB of training log, Python 3.11, one core):
- bytes.find once per literal: ~2.5 GB/s a pass, but the rule table has ~110 literals: ~20 MB/s;
- one regex alternation of all of them: sre then tests every byte against the set of first
  characters, ~100-170 MB/s however small that set is;
- one regex per FIRST BYTE (`E(?:rror|NOSPC|DQUOT)`): sre's literal-prefix loop, ~1.3-1.6 GB/s
  a pass while that byte is rare in the text.
So each literal is cut to its longest suffix that starts at a byte rare in training logs (a
line holding the literal holds the suffix: the candidates only grow, the rules still decide),
and the suffixes are grouped by that byte: about ten passes instead of a hundred.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

MIN_SUFFIX = 5     # a shorter cut finds too many innocent lines
DISTINCT_LEN = 8   # ... and so does a cut shorter than this made only of frequent bytes
RARE = 3.0         # (see _weight)
PASS_COST = 16.0   # one more pass over the block, in the per-mille units of _weight()

# How often a byte appears in training logs, per mille (tqdm bars, step lines, tracebacks and
# prose); everything else counts as rare (0.5). The cut prefers the rare ones.
_BUCKETS = ((130.0, b" "), (60.0, b"0"), (30.0, b"etaoinsrl1234,:/."),
            (15.0, b"56789chdpumv|=_#[]-"), (8.0, b"`<>%Egfybkw\t"),
            (3.0, b"()\"'xISTCNPOLFAR"))
_WEIGHT = dict((b, w) for w, chars in _BUCKETS for b in chars)


def _weight(byte: int) -> float:
    if byte >= 0x80:
        return 20.0               # UTF-8 of tqdm's blocks and of CJK text: common
    return _WEIGHT.get(byte, 0.5)


def minimal_anchors(keywords: Iterable[bytes]) -> Tuple[bytes, ...]:
    """Drop a keyword that contains another one: the shorter finds every such line anyway.
    (One C-speed find per kept keyword over all of them joined: a vocabulary of hundreds of
    rows made the pairwise `in` test the bulk of building a rule set.)"""
    ks = sorted(set(keywords), key=lambda k: (len(k), k))
    if not ks:
        return ()
    sep = b"\0" if isinstance(ks[0], bytes) else "\0"
    starts, pos = [], 0
    for k in ks:
        starts.append(pos)
        pos += len(k) + 1
    joined = sep.join(ks)
    out: List[bytes] = []
    dropped = set()
    for i, a in enumerate(ks):
        if i in dropped:
            continue
        out.append(a)
        at = joined.find(a, starts[i] + len(a))
        while at >= 0:
            dropped.add(bisect_right(starts, at) - 1)
            at = joined.find(a, at + 1)
    return tuple(out)


def _cuts(lit: bytes) -> Dict[int, bytes]:
    """first byte -> the longest suffix of `lit` starting with it. A cut keeps DISTINCT_LEN
    bytes, or MIN_SUFFIX with a rare byte among them: "SSLError" never becomes the "Error"
    of every `val_MeanSquaredError=0.05`, nor "iostream error" the "error" of `val_error`."""
    out: Dict[int, bytes] = {lit[0]: lit}
    for i in range(1, len(lit) - MIN_SUFFIX + 1):
        suffix = lit[i:]
        if len(suffix) >= DISTINCT_LEN or min(_weight(b) for b in suffix) <= RARE:
            out.setdefault(lit[i], suffix)
    return out


_EXC_TAIL = re.compile(rb"[a-z0-9_]{1,3}(Error|Exception)")


def cut_literals(literals: Iterable[bytes]) -> Tuple[bytes, ...]:
    """One suffix per literal, their first bytes few and rare (a greedy weighted set cover)."""
    cuts = dict((lit, _cuts(lit)) for lit in set(literals) if lit)
    todo, chosen = set(cuts), []
    while todo:
        count: Dict[int, int] = {}
        for lit in todo:
            for b in cuts[lit]:
                count[b] = count.get(b, 0) + 1
        best = max(count, key=lambda b: (count[b] / (PASS_COST + _weight(b)), -b))
        chosen.append(best)
        todo = set(lit for lit in todo if best not in cuts[lit])
    # a byte chosen early whose literals all got another chosen byte later is a wasted pass
    for b in list(chosen):
        if all(any(o in cuts[lit] for o in chosen if o != b) for lit in cuts):
            chosen.remove(b)
    out = []
    for lit, c in cuts.items():
        # a cut a few letters before the end of an exception's name last: "AttributeError:"
        # cut to "uteError:" finds every `MeanAbsoluteError: 0.4` of a metrics line
        b = min((b for b in c if b in chosen), key=lambda b: (
            _EXC_TAIL.match(c[b]) is not None, _weight(b), -len(c[b])))
        out.append(c[b])
    return minimal_anchors(out)


def trie_pattern(words: List[bytes]) -> bytes:
    """`E(?:DQUOT|NOSPC|rror)` for [EDQUOT, ENOSPC, Error]: one alternation per shared prefix."""
    root: Dict[Optional[int], dict] = {}
    for w in words:
        node = root
        for b in w:
            node = node.setdefault(b, {})
        node[None] = {}

    def emit(node: Dict[Optional[int], dict]) -> bytes:
        if None in node:          # a word ends here: any longer word holds it (minimal anchors)
            return b""
        alts = [re.escape(bytes([b])) + emit(node[b]) for b in sorted(k for k in node if k is not None)]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
    return emit(root)


class Finder:
    """Lines holding any of `literals`: spans(block) -> {line start: line end}."""

    def __init__(self, literals: Iterable[bytes]):
        self.literals = minimal_anchors(literals)
        self.cuts = cut_literals(self.literals)   # grep -F is ~2x faster with these too
        groups: Dict[int, List[bytes]] = {}
        for s in self.cuts:
            groups.setdefault(s[0], []).append(s)
        self.passes = [re.compile(trie_pattern(groups[b])) for b in sorted(groups)]

    def __bool__(self) -> bool:
        return bool(self.literals)

    def spans(self, block: bytes, start: int = 0, end: Optional[int] = None) -> Dict[int, int]:
        """Lines of block[start:end] (start at a line start) holding a literal: their start ->
        their end (the index of their \\n, or of the end)."""
        stop = len(block) if end is None else end
        found: Dict[int, int] = {}
        for rx in self.passes:
            m = rx.search(block, start, stop)
            while m is not None:
                i = m.start()
                ls = block.rfind(b"\n", 0, i) + 1
                le = block.find(b"\n", i, stop)
                if le < 0:
                    le = stop
                found[ls] = le
                m = rx.search(block, le, stop)
        return found


def numbered(block: bytes, spans: Dict[int, int], first_line_no: int,
             start: int = 0) -> Iterator[Tuple[int, int, int]]:
    """(line_no, start, end) of the spans in order; block[start] is line first_line_no."""
    pos, line_no = start, first_line_no
    for ls in sorted(spans):
        line_no += block.count(b"\n", pos, ls)
        pos = ls
        yield line_no, ls, spans[ls]


def every_line(block: bytes, first_line_no: int) -> Iterator[Tuple[int, bytes]]:
    lines = block.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    for i, raw in enumerate(lines):
        yield first_line_no + i, raw


def candidate_lines(block: bytes, finder: Optional[Finder], first_line_no: int) -> Iterator[Tuple[int, bytes]]:
    """(line_no, raw line) of the lines holding a literal, in order; every line without a finder."""
    if not finder:
        yield from every_line(block, first_line_no)
        return
    for line_no, ls, le in numbered(block, finder.spans(block), first_line_no):
        yield line_no, block[ls:le]
