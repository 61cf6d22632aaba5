"""The field corpus: failure tails users pasted into public trackers, and the goals triage has
to meet on them. The scorer (score.py) runs every case through `rgt-agent triage`'s own
functions; these tests hold the indexes to their format and the engine to the goals."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.triage.field import figures as F
from tests.triage.field import score as S

GOAL_OVERALL = 0.95
GOAL_PER_CLASS = 0.90


def _index_entries(index: Path) -> List[Dict[str, Any]]:
    with open(index, "rb") as fh:
        return S.tomllib.load(fh).get("case", [])


@pytest.mark.parametrize("index", S.default_indexes(), ids=lambda p: p.parent.name)
def test_the_index_is_well_formed(index):
    problems = []
    for i, case in enumerate(_index_entries(index)):
        where = "case %d (%s)" % (i, case.get("file"))
        missing = [k for k in S.CASE_KEYS if k not in case]
        if missing:
            problems.append("%s: missing %s" % (where, ", ".join(missing)))
            continue
        if not (index.parent / case["file"]).is_file():
            problems.append("%s: no such file" % where)
        if case["class"] not in S.DESIGN_CLASSES + (S.INNOCENT,):
            problems.append("%s: class %r is not a cause class or %r" % (where, case["class"], S.INNOCENT))
        for key in ("source", "url", "why"):
            if not isinstance(case[key], str) or not case[key].strip():
                problems.append("%s: %s is empty" % (where, key))
        ec = case["exit_code"]
        if not isinstance(ec, int) or isinstance(ec, bool):
            problems.append("%s: exit_code %r is not an int" % (where, ec))
        elif case["class"] == S.INNOCENT and ec != 0:
            problems.append("%s: an innocent run exits 0, not %d" % (where, ec))
        elif case["class"] != S.INNOCENT and ec == 0 and case.get("outcome") != S.WARNED:
            # triage never calls an exit-0 run failed: such a case could never be scored right
            # (unless it says it expects a warning)
            problems.append("%s: a failure case needs a nonzero exit code (or outcome = %r)"
                            % (where, S.WARNED))
        if case.get("outcome") not in (None, S.WARNED):
            problems.append("%s: outcome %r is not %r" % (where, case["outcome"], S.WARNED))
        if index == S.INDEX:
            problems += _field_keys_problems(where, case)
    assert not problems, "\n".join(problems)


def _field_keys_problems(where: str, case: Dict[str, Any]) -> List[str]:
    """The public corpus's own keys: the ecosystem a figure is grouped by, and whether the
    rules were developed against the case (a held-out figure needs to know)."""
    out = []
    if not isinstance(case.get("ecosystem"), str) or not case["ecosystem"].strip():
        out.append("%s: ecosystem is missing or empty" % where)
    if case.get("added") not in (F.DEVELOPED,) + F.BLIND_WAVES:
        out.append("%s: added %r is not one of %r" % (where, case.get("added"), (F.DEVELOPED,) + F.BLIND_WAVES))
    if not str(case.get("url", "")).startswith("https://"):
        out.append("%s: url is not an https address" % where)
    return out


def test_no_two_cases_share_a_log():
    seen: Dict[str, str] = {}
    dups = []
    for case in S.load_cases():
        if case["path"] in seen:
            dups.append("%s (in %s and %s)" % (case["path"], seen[case["path"]], case["index"]))
        seen[case["path"]] = case["index"]
    assert not dups, "\n".join(dups)


def test_every_log_in_the_tree_is_indexed():
    """A log added without an index entry would silently never be scored."""
    indexed = set(c["path"] for c in S.load_cases())
    on_disk = set(str(p.resolve()) for p in S.HERE.rglob("*.log"))
    assert sorted(on_disk - indexed) == []


def test_no_innocent_run_is_called_a_failure():
    result = S.score()
    assert result["innocent_called_failed"] == [], S.render(result)


def test_triage_meets_the_field_goals():
    """on the cases the rules were developed against; the held-out ones have their own goals
    (test_field_heldout.py)"""
    result = S.score(added=F.DEVELOPED)
    print(S.render(result))
    low = {cls: c["accuracy"] for cls, c in result["classes"].items()
           if c["accuracy"] < GOAL_PER_CLASS}
    assert result["total"]["accuracy"] >= GOAL_OVERALL and not low \
        and not result["innocent_called_failed"], S.render(result)
