"""Rows found through field cases (Row.found_via) and the mechanical leave-one-ecosystem-out
built on them: the loader leaves a row out exactly while all its cases are held out, a held-out
row really is gone from the engine a fresh interpreter builds, and every case a row names is
a held-out case of the corpus (a row named after a developed-against case would be fitting)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from boxagent.triage import vocab
from boxagent.triage.vocab.table import found_via, lit
from tests.triage.field import figures as F
from tests.triage.field import loeo
from tests.triage.field import score as S

C_ASSERT = "captured_libs/c_assert.log"


def _row(*cases):
    return found_via(cases, lit("code_error", "Assertion `", "x: Assertion `a' failed.", "glibc 2.36"))[0]


def test_a_row_is_held_out_only_when_all_its_cases_are():
    two = _row("cases/a.log", "cases/b.log")
    assert not vocab.is_held_out(two, frozenset(["cases/a.log"]))
    assert vocab.is_held_out(two, frozenset(["cases/a.log", "cases/b.log", "cases/c.log"]))
    sourced = lit("code_error", "Assertion `", "x: Assertion `a' failed.", "glibc 2.36")
    assert not vocab.is_held_out(sourced, frozenset(["cases/a.log"]))


def test_the_loader_reads_the_held_out_cases_from_the_environment(monkeypatch):
    everything = vocab.rows()
    monkeypatch.setenv(vocab.HOLD_OUT_ENV, "%s,cases/elsewhere.log" % C_ASSERT)
    fewer = vocab.rows()
    gone = [r for r in everything if r not in fewer]
    assert gone and all(r.found_via == (C_ASSERT,) for r in gone)
    monkeypatch.delenv(vocab.HOLD_OUT_ENV)
    assert vocab.rows() == everything


def _rows_in_fresh_engine(env_value):
    env = dict(os.environ)
    env.pop(vocab.HOLD_OUT_ENV, None)
    if env_value:
        env[vocab.HOLD_OUT_ENV] = env_value
    code = ("import boxagent.triage.builtin_rules; from boxagent.triage import vocab; "
            "print(len(vocab.rows()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(loeo.REPO),
                         env=env, stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return int(out.stdout.strip())


def test_a_held_out_row_is_gone_from_the_engine_a_fresh_interpreter_builds():
    # glibc's assert row was found through the captured C abort: holding that case out drops it
    # (the decision's structural reading of C assertions still names the case: tailread.py)
    assert _rows_in_fresh_engine(C_ASSERT) == _rows_in_fresh_engine("") - 1


WAVE4 = "wave4"      # the fourth wave's sets: scored blind first, then rows read for their misses


def test_every_case_a_row_names_is_a_held_out_case_of_the_corpus():
    wave4 = [c for c in S.load_cases(sorted((S.HERE / WAVE4).glob("*.toml")))
             if c.get("added") == WAVE4]
    cases = {loeo.case_key(c): c for c in S.load_cases() + wave4}
    named = sorted(set(f for r in vocab.rows() for f in r.found_via))
    assert named
    missing = [f for f in named if f not in cases]
    developed = [f for f in named if f in cases and F.added_of(cases[f]) != F.HELD_OUT
                 and cases[f].get("added") != WAVE4]
    assert not missing and not developed, (missing, developed)


@pytest.mark.slow
def test_a_fold_scores_without_its_own_rows():
    # the captured CPU cases led to the glibc row only: their fold runs without it
    rs = S.score(added=F.HELD_OUT, ecosystem="captured-cpu")["results"]
    keys = [loeo.case_key(r) for r in rs]
    assert [r for r in loeo.rows_off_for(keys)] and C_ASSERT in keys
    with_rows = sum(int(r["right"]) for r in rs)
    fold = loeo.score_fold("captured-cpu", keys)
    # the decision's structural reading of C assertions (tailread.py) may still name the case
    assert fold["cases"] == len(rs) and fold["right"] <= with_rows
    out = subprocess.run([sys.executable, "-m", "tests.triage.field.score", "--json", "--ecosystem",
                          "captured-cpu", "--added", F.HELD_OUT], cwd=str(loeo.REPO),
                         stdout=subprocess.PIPE, universal_newlines=True, check=False)
    assert json.loads(out.stdout)["total"]["cases"] == len(rs)
