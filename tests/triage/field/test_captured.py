"""The captured cases (captured/index.toml): real torch/tqdm/kernel output recorded by
capture/capture_torch.py. The field corpus's tests hold them to its format (score.py reads
this index too); these hold them to their provenance and their bytes. Cheap and torch-free:
they read the files, they run nothing."""
from __future__ import annotations

import datetime
import hashlib
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.triage.field import score as S
from tests.triage.field.capture import capture_torch, index_file

CAPTURED = S.CAPTURED_INDEX.parent
INDEX = S.CAPTURED_INDEX
PROVENANCE_KEYS = ("library", "python", "captured_at", "command", "sha256")


def cases() -> List[Dict[str, Any]]:
    return index_file.read(INDEX)


def _problems(case: Dict[str, Any]) -> List[str]:
    out = ["missing %s" % k for k in S.CASE_KEYS + PROVENANCE_KEYS if k not in case]
    if out:
        return out
    for k in S.CASE_KEYS[3:] + PROVENANCE_KEYS:
        if not isinstance(case[k], str) or not case[k].strip():
            out.append("%s is empty" % k)
    if not (CAPTURED / case["file"]).is_file():
        out.append("no such file")
    if case["class"] not in S.DESIGN_CLASSES + (S.INNOCENT,):
        out.append("class %r is not a cause class or %r" % (case["class"], S.INNOCENT))
    if case.get("outcome") == S.WARNED and (case["exit_code"] != 0 or case["class"] == S.INNOCENT):
        out.append("outcome %r is for an exit-0 run with a class" % S.WARNED)
    return out


def test_the_captured_index_is_well_formed():
    assert cases(), "captured/index.toml holds no case"
    problems = ["%s: %s" % (c.get("file"), p) for c in cases() for p in _problems(c)]
    assert not problems, "\n".join(problems)


def test_provenance_says_what_ran_and_when():
    for c in cases():
        assert c["source"].startswith("captured: torch "), c["file"]
        assert c["library"].startswith("torch "), c["file"]
        assert re.fullmatch(r"3\.\d+\.\d+", c["python"]), c["file"]
        datetime.date.fromisoformat(c["captured_at"])
        assert c["command"].split()[0] in ("python", "bash"), c["file"]


def test_each_case_names_its_scenario():
    """url is capture_torch.py#<function>: the code that made the log, and the log's name."""
    scenarios = [s.__name__ for s in capture_torch.SCENARIOS]
    for c in cases():
        path, _, anchor = c["url"].partition("#")
        assert path == "tests/triage/field/capture/capture_torch.py", c["url"]
        assert anchor in scenarios, c["url"]
        assert c["file"] == anchor + ".log"


def test_the_machine_facts_back_the_class():
    """What the log cannot say, the capture measured: an OOM kill counted by the cgroup, and
    which of bytes or inodes ran out (the ENOSPC wording is the same for both)."""
    for c in cases():
        if c["class"] == "cgroup_oom":
            assert c.get("oom_kill_delta", 0) >= 1, c["file"]
        if c["class"] in ("disk_full", "inodes_full"):
            full = {"disk_full": "disk_bytes_used_pct", "inodes_full": "disk_inodes_used_pct"}
            other = {"disk_full": "disk_inodes_used_pct", "inodes_full": "disk_bytes_used_pct"}
            assert c[full[c["class"]]] >= 98 and c[other[c["class"]]] < 98, c["file"]
            assert c["disk_path"] in c["command"], c["file"]


def test_logs_are_byte_for_byte_what_was_captured():
    for c in cases():
        data = (CAPTURED / c["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == c["sha256"], "%s changed since its capture" % c["file"]


def test_every_captured_log_is_indexed_once():
    files = [c["file"] for c in cases()]
    assert len(files) == len(set(files))
    on_disk = sorted(p.name for p in CAPTURED.glob("*.log"))
    assert on_disk == sorted(files)


@pytest.mark.parametrize("name, raw", [
    ("tqdm_glued_exception", b"\rEpoch 1:"),          # tqdm's redraws, each after a bare \r
    ("tqdm_glued_exception", b"]Traceback (most recent call last):"),   # glued to the bar
    ("ansi_colour_innocent", b"\x1b[33m"),           # the warning in yellow
    ("ansi_colour_error", b"\x1b[31m"),              # the error in red
    ("main_process_oom", b" Killed "),               # bash's own line for its killed child
])
def test_the_raw_bytes_that_make_these_cases_hard_are_kept(name, raw):
    entry = next((c for c in cases() if c["file"] == name + ".log"), None)
    if entry is None:
        pytest.skip("%s was not captured (a skipped scenario)" % name)
    assert raw in (CAPTURED / entry["file"]).read_bytes()


def test_the_index_renders_back_to_itself():
    """index_file writes what it reads: a capture session that re-captures nothing keeps the
    file as it is."""
    assert index_file.render(cases()) == INDEX.read_text()
