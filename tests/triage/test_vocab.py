"""Every vocabulary row: its pattern is safe and reads the same in Python and grep -E, it
matches the verbatim message it was read from, its keywords are in every match, its class is
a cause class, and it names its source with a version; a row's example gets the row's class
from the whole rule set (or a more specific one that the line also names)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from boxagent.triage import vocab
from boxagent.triage.builtin_rules import CLASS_RANK, REMEDIATION
from boxagent.triage.regexsafe import unsafe_reason
from boxagent.triage.rules import ScanState, build_rules
from boxagent.triage.text import match_text

ROWS = vocab.rows()
IDS = ["%s:%s" % (vocab.table_of(r), r.pattern[:40]) for r in ROWS]
VERSION = re.compile(r"[0-9]+(\.[0-9]+)*|api-version|20[0-9][0-9]")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_row_compiles_safely_and_matches_its_own_example(row):
    assert unsafe_reason(row.pattern) is None, row.pattern
    m = re.search(row.pattern, row.example, re.M)
    assert m is not None, (row.pattern, row.example)
    assert any(k in m.group(0) or k in row.example for k in row.keywords), row.keywords
    assert row.cls in REMEDIATION and row.severity in ("critical", "warning", "info")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_row_names_a_source_with_its_version(row):
    assert len(row.source) >= 10 and VERSION.search(row.source), row.source
    assert vocab.table_of(row)


def test_the_tables_are_big_and_fold_into_few_rules():
    """The vocabulary is hundreds of rows, but the engine sees one rule per class."""
    assert len(ROWS) >= 250
    specs = vocab.rule_specs()
    # a few rows carry a remedy of their own (the NVIDIA hook's mount step, TensorRT's memory,
    # Megatron's NaN grad norm), each one more alternation per line scanned: still few
    assert len(specs) <= 2.5 * len(set(r.cls for r in ROWS))
    assert sum(1 for r in build_rules().rules if r.vocab) == len(specs)


def _classify(line: str):
    state = ScanState()
    state.traceback_line = 0
    h = build_rules().match_line(line.encode("utf-8"), 1, state)
    return h and h["class"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_example_line_gets_its_class_or_a_higher_ranked_one(row):
    got = _classify(row.example)
    assert got is not None, row.example
    rank = CLASS_RANK.index
    assert got == row.cls or (got in CLASS_RANK and row.cls in CLASS_RANK
                              and rank(got) < rank(row.cls)), (got, row.cls, row.example)


def test_the_row_of_a_line_names_its_source():
    row = vocab.row_for("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert row is not None and row.cls == "code_error" and not row.definitive
    assert "driver_types.h" in row.source
    assert vocab.row_for("epoch 3 loss 0.12") is None


def test_the_prefilter_finds_every_example():
    """The literals the rule set searches for hold every row's example line."""
    rs = build_rules()
    for row in ROWS:
        block = b"before\n" + row.example.encode() + b"\nafter\n"
        assert rs.finder.spans(block), row.example
        assert any(r.rx.search(match_text(row.example.encode())) for r in rs.rules if r.vocab)


@pytest.mark.skipif(not shutil.which("grep"), reason="grep is not installed")
def test_grep_reads_every_row_like_python(tmp_path):
    p = tmp_path / "examples.log"
    p.write_text("".join(r.example + "\n" for r in ROWS), encoding="utf-8")
    for row in ROWS:
        out = subprocess.run(["grep", "-a", "-E", "-c", "-e", row.pattern, str(p)],
                             capture_output=True)
        assert out.returncode == 0 and not out.stderr, (row.pattern, out.stderr)
        py = sum(1 for r in ROWS if re.search(row.pattern, r.example))
        assert int(out.stdout) == py, row.pattern
