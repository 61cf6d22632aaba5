"""`score --loeo-misses`: the mechanical leave-one-ecosystem-out's misses, fold by fold, with
what a person said, what the fold's engine said, how sure it was and the line that decided;
the list the next row or structure change is chosen from. Both kinds of fold report them: one
run in a fresh interpreter with its rows off, and one re-triaged in-process with its cases
hidden from the known-failure index."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.triage.field import figures as F
from tests.triage.field import loeo
from tests.triage.field import score as S

MISS_KEYS = {"fold", "file", "expected", "got", "confidence", "runner_up", "evidence"}


def _fold_keys(ecosystem):
    rs = S.score(added=F.HELD_OUT, ecosystem=ecosystem)["results"]
    return rs, [loeo.case_key(c) for c in S.load_cases() if F.ecosystem_of(c) == ecosystem]


def _check_misses(fold, ecosystem, rs):
    assert fold["cases"] == len(rs)
    assert len(fold["misses"]) == fold["cases"] - fold["right"]
    held = set(loeo.case_key(r) for r in rs)
    for m in fold["misses"]:
        assert set(m) == MISS_KEYS and m["fold"] == ecosystem and m["file"] in held, m
        assert m["expected"] != m["got"] and m["evidence"], m


@pytest.mark.slow
def test_a_fold_with_its_rows_off_reports_each_miss():
    rs, keys = _fold_keys("shell")
    assert loeo.rows_off_for(keys)
    _check_misses(loeo.score_fold("shell", keys), "shell", rs)


def test_a_fold_rescored_in_process_reports_each_miss():
    rs, keys = _fold_keys("conda-pip")
    assert not loeo.rows_off_for(keys)
    held = [r for r in rs if F.added_of(r) == F.HELD_OUT]
    _check_misses(loeo.rescore_without(held, keys), "conda-pip", held)


def test_the_listing_names_the_fold_the_case_and_the_deciding_line():
    m = {"cases": 3, "right": 2, "groups": 1, "mean_accuracy": 2 / 3, "pooled_accuracy": 2 / 3,
         "folds": {"cloud": {"cases": 3, "right": 2, "rows_off": 1, "misses": [
             {"fold": "cloud", "file": "cases/preempted/x.log", "expected": "preempted",
              "got": "killed", "confidence": "medium", "runner_up": "preempted",
              "evidence": "exit code 143 = 128 + SIGTERM"}]}}}
    text = loeo.render_misses(m)
    assert "(1 of 3 held-out cases)" in text
    assert "[cloud] cases/preempted/x.log" in text
    assert "expected preempted" in text and "got killed (medium, runner-up preempted)" in text
    assert "deciding line: exit code 143 = 128 + SIGTERM" in text


def test_the_listing_refuses_a_partial_corpus():
    out = subprocess.run([sys.executable, "-m", "tests.triage.field.score", "--loeo-misses",
                          "--ecosystem", "shell"], cwd=str(loeo.REPO), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert out.returncode == 2 and "Error:" in out.stderr and "Hint:" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_the_listing_holds_every_miss_of_the_figure():
    out = subprocess.run([sys.executable, "-m", "tests.triage.field.score", "--loeo-misses"],
                         cwd=str(loeo.REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, check=False)
    assert out.returncode in (0, 1), out.stderr
    head = out.stdout.splitlines()[0]
    missed, cases = head.split("(")[1].split(" held-out")[0].split(" of ")
    listed = [ln for ln in out.stdout.splitlines() if ln.startswith("  [")]
    assert len(listed) == int(missed) and int(cases) > 0
    assert "pooled" in out.stdout.splitlines()[-1]
