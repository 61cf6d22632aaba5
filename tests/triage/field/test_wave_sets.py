"""The later waves' field sets (wave4/*.toml, wave5/*.toml, ...): logs from ecosystems the main
corpus barely has, collected blind. These tests hold the sets to the main index's format, and
keep them apart from it and from each other: a thread already in index.toml (or in an earlier
wave's set) must not come back as a "new" case, or the blind figure would be measured on logs
the rules were written against."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from tests.triage.field import score as S

WAVE_KEYS = S.CASE_KEYS + ("ecosystem", "added")


def _wave_dirs() -> List[Path]:
    return sorted(p for p in S.HERE.glob("wave*") if p.is_dir())


def _wave_indexes() -> List[Path]:
    return [p for d in _wave_dirs() for p in sorted(d.glob("*.toml"))]


def _entries(index: Path) -> List[Dict[str, Any]]:
    with open(index, "rb") as fh:
        return S.tomllib.load(fh).get("case", [])


def _main_sources() -> set:
    return set(str(c.get("source")) for c in _entries(S.INDEX))


def _case_problems(index: Path, i: int, case: Dict[str, Any]) -> List[str]:
    where = "%s/%s case %d (%s)" % (index.parent.name, index.name, i, case.get("file"))
    missing = [k for k in WAVE_KEYS if k not in case]
    if missing:
        return ["%s: missing %s" % (where, ", ".join(missing))]
    out = []
    log = index.parent / case["file"]
    if not log.is_file():
        out.append("%s: no such file" % where)
    elif not log.read_bytes().strip():
        out.append("%s: the log is empty" % where)
    if case["class"] not in S.DESIGN_CLASSES + (S.INNOCENT,):
        out.append("%s: class %r is not a cause class or %r" % (where, case["class"], S.INNOCENT))
    for key in ("source", "url", "why", "ecosystem"):
        if not isinstance(case[key], str) or not case[key].strip():
            out.append("%s: %s is empty" % (where, key))
    if not str(case["url"]).startswith("https://"):
        out.append("%s: url is not an https address" % where)
    # the folder names the wave: a case filed under another wave's folder would be scored as
    # blind (or developed) when it is not
    if case["added"] != index.parent.name:
        out.append("%s: added %r is not its folder's %r" % (where, case["added"], index.parent.name))
    ec = case["exit_code"]
    if not isinstance(ec, int) or isinstance(ec, bool):
        out.append("%s: exit_code %r is not an int" % (where, ec))
    elif case["class"] == S.INNOCENT and ec != 0:
        out.append("%s: an innocent run exits 0, not %d" % (where, ec))
    elif case["class"] != S.INNOCENT and ec == 0 and case.get("outcome") != S.WARNED:
        # an exit-0 failure could never be scored right unless it expects a warning
        out.append("%s: a failure case needs a nonzero exit code (or outcome = %r)"
                   % (where, S.WARNED))
    if case.get("outcome") not in (None, S.WARNED):
        out.append("%s: outcome %r is not %r" % (where, case["outcome"], S.WARNED))
    return out


@pytest.mark.parametrize("wave", S.WAVE_SETS)
def test_every_wave_the_scorer_knows_has_a_set(wave):
    assert sorted((S.HERE / wave).glob("*.toml")), "no %s/*.toml under %s" % (wave, S.HERE)


def test_every_wave_folder_is_scored_by_default():
    """A wave folder the scorer does not list would never count in the figures."""
    assert sorted(d.name for d in _wave_dirs()) == sorted(S.WAVE_SETS)


@pytest.mark.parametrize("index", _wave_indexes(), ids=lambda p: "%s/%s" % (p.parent.name, p.name))
def test_the_wave_set_is_well_formed(index):
    problems: List[str] = []
    for i, case in enumerate(_entries(index)):
        problems += _case_problems(index, i, case)
    assert not problems, "\n".join(problems)


def test_one_case_per_thread_across_the_wave_sets():
    """Two logs from one thread (in one set, in two, or in two waves) would let a single report
    count twice."""
    seen: Dict[str, str] = {}
    dups = []
    for index in _wave_indexes():
        for case in _entries(index):
            src = str(case.get("source"))
            where = "%s/%s:%s" % (index.parent.name, index.name, case.get("file"))
            if src in seen:
                dups.append("%s: %s and %s" % (src, seen[src], where))
            seen[src] = where
    assert not dups, "\n".join(dups)


def test_no_wave_thread_is_already_in_the_main_corpus():
    main = _main_sources()
    reused: List[Tuple[str, str]] = []
    for index in _wave_indexes():
        for case in _entries(index):
            if str(case.get("source")) in main:
                reused.append(("%s/%s" % (index.parent.name, index.name), str(case.get("source"))))
    assert not reused, "\n".join("%s: %s is in index.toml" % r for r in reused)


def test_no_two_wave_cases_share_a_log():
    seen: Dict[Path, str] = {}
    dups = []
    for index in _wave_indexes():
        for case in _entries(index):
            path = (index.parent / str(case.get("file"))).resolve()
            if path in seen:
                dups.append("%s (in %s and %s)" % (path, seen[path], index.name))
            seen[path] = index.name
    assert not dups, "\n".join(dups)


def test_every_wave_log_is_indexed_by_its_own_wave():
    """A log added without an index entry would silently never be scored; one indexed from
    another wave's folder would be counted under the wrong wave."""
    problems = []
    for d in _wave_dirs():
        indexed = set()
        for index in sorted(d.glob("*.toml")):
            indexed |= set((index.parent / str(c.get("file"))).resolve() for c in _entries(index))
        on_disk = set(p.resolve() for p in d.rglob("*.log"))
        problems += sorted(str(p) for p in on_disk - indexed)
        problems += sorted("%s (outside %s)" % (p, d.name) for p in indexed
                           if d.resolve() not in p.parents)
    assert problems == []
