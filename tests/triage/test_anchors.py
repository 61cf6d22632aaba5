"""The literal prefilter is only a speed-up: a block scan (any block size, either engine) gives
exactly the hits of matching every line in order; a progress bar that prints an "Error"
metric on every line is no candidate outside a traceback's window."""
from __future__ import annotations

import random
import shutil

import pytest

from boxagent.triage.anchors import Finder, cut_literals, every_line
from boxagent.triage.hits import HitStore
from boxagent.triage.rules import ScanState, build_rules
from boxagent.triage.scanfile import scan_file
from boxagent.triage.windows import TRACEBACK_WINDOW
from tests.triage.conftest import CORPUS

INNOCENT = [
    "Epoch 3:  45%|####5     | 450/1000 [01:02<01:20, 7.2it/s, val_MeanSquaredError=0.05]",
    "step 120/1000 loss 0.31 val_error 0.12 ErrorRate: 3",
    "MeanAbsoluteError: 0.4",
    "Exception handling enabled",
    "INFO ConnectionPool size 10",
    "{'loss': 0.2, 'grad_norm': 1.3}",
]
CRASH = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
         "ValueError: bad shape", "KeyError: 'x'", "RuntimeError: boom"]


def _corpus_lines():
    out = []
    for p in sorted(CORPUS.glob("*.log")):
        out += [l for l in p.read_bytes().split(b"\n") if l.strip() and b"Traceback" not in l]
    return out


def _random_log(seed: int, n: int = 3500) -> bytes:
    """Tracebacks and generic exception lines just inside and just outside their window."""
    rnd, corpus, lines = random.Random(seed), _corpus_lines(), []
    headers = {5, rnd.randint(300, 600), rnd.randint(2000, 2300)}    # the 2nd overlaps the 1st
    header_at = None
    for i in range(n):
        x = rnd.random()
        if header_at is not None and i - header_at in (TRACEBACK_WINDOW, TRACEBACK_WINDOW + 1):
            lines.append(b"ValueError: at the edge of the window")
        elif i in headers:
            lines.append(CRASH[0].encode())
            header_at = i
        elif x < 0.05:
            lines.append(rnd.choice(CRASH[1:]).encode())
        elif x < 0.10:
            lines.append(rnd.choice(corpus))
        else:
            lines.append(rnd.choice(INNOCENT).encode())
    return b"\n".join(lines) + b"\n"


def _reference(rs, data: bytes):
    state = ScanState()
    hits = [rs.match_line(raw, n, state) for n, raw in every_line(data, 1)]
    return [(h["line_no"], h["class"], h["line"]) for h in hits if h is not None]


def _blocks(data: bytes, rnd: random.Random):
    """data cut at line ends into blocks of random size: (block, first line number)."""
    pos, line_no = 0, 1
    while pos < len(data):
        end = data.find(b"\n", min(len(data) - 1, pos + rnd.randint(1, 200000))) + 1
        yield data[pos:end], line_no
        line_no += data.count(b"\n", pos, end)
        pos = end


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_block_scan_gives_the_hits_of_matching_every_line(seed):
    data, rs = _random_log(seed), build_rules()
    ref = _reference(rs, data)
    assert any(c == "code_error" and "edge of the window" in l for _, c, l in ref)
    state, got = ScanState(), []
    for block, first in _blocks(data, random.Random(seed)):
        got += [(h["line_no"], h["class"], h["line"]) for h in rs.scan(block, first, state)]
    assert got == ref


@pytest.mark.skipif(not shutil.which("grep"), reason="grep is not installed")
@pytest.mark.parametrize("seed", [4, 5])
def test_both_engines_give_the_hits_of_matching_every_line(tmp_path, seed):
    data, rs = _random_log(seed), build_rules()
    p = tmp_path / "train.log"
    p.write_bytes(data)
    state, ref = ScanState(), HitStore()
    for n, raw in every_line(data, 1):
        h = rs.match_line(raw, n, state)
        if h is not None:
            ref.add(h)
    for engine in ("python", "grep"):
        rep = scan_file(str(p), rs, engine)
        assert rep["engine"] == engine
        assert rep["classes"] == ref.classes, engine
        assert rep["hits"] == ref.listing(rep["progress_line_no"]), engine


def test_the_generic_exception_line_counts_exactly_within_the_window():
    rs = build_rules()
    for gap, counted in ((TRACEBACK_WINDOW, True), (TRACEBACK_WINDOW + 1, False)):
        data = b"Traceback (most recent call last):\n" + b"ok\n" * (gap - 1) + b"ShapeMismatchError: x\n"
        hits = rs.scan(data, 1, ScanState())
        assert [h["line_no"] for h in hits if h["class"] == "code_error"][1:] == ([gap + 1] if counted else [])


def test_a_progress_bar_with_an_error_metric_is_no_candidate_line():
    rs = build_rules()
    block = ("\n".join(INNOCENT) + "\n").encode()
    assert rs.finder.spans(block) == {}


def test_every_literal_is_found_after_its_cut():
    rs = build_rules()
    for finder in (rs.finder, rs.window_finder):
        for lit in finder.literals:
            block = b"before\nx " + lit + b" y\nafter\n"
            assert list(finder.spans(block)) == [7], lit
    assert all(any(c in lit for lit in rs.anchors) for c in cut_literals(rs.anchors))


def test_cuts_start_at_rare_bytes_and_keep_few_passes():
    """The point of the cut: ~10 regex passes, never one per literal, never on a space."""
    rs = build_rules()
    assert len(rs.finder.passes) <= 16 < len(rs.anchors)
    assert all(not p.pattern.startswith((b"\\ ", b"0", b"1")) for p in rs.finder.passes)
    assert Finder([b"iostream error"]).passes[0].pattern != b"error"


@pytest.mark.skipif(not shutil.which("grep"), reason="grep is not installed")
@pytest.mark.parametrize("data,lines", [(b"a\nb\n", 2), (b"a\nb", 2), (b"", 0), (b"\n", 1), (b"x", 1)])
def test_both_engines_count_lines_as_an_editor_does(tmp_path, data, lines):
    p = tmp_path / "l.log"
    p.write_bytes(data)
    assert [scan_file(str(p), engine=e)["lines"] for e in ("python", "grep")] == [lines, lines]
