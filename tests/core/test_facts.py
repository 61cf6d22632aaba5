"""Success as DESIGN.md defines it, the facts handed to diagnose(), and the shipped examples."""
from __future__ import annotations

import glob
import os

import pytest

from boxagent.engine import facts as outcome
from boxagent.engine import jobspec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakeWatch:
    """Stands in for the StageWatch at its seam: the facts it hands over."""
    def __init__(self, success_seen=False, fail_line=None):
        self.success_seen, self.fail_line = success_seen, fail_line

    def facts(self):
        return {"success_seen": self.success_seen, "fail_line": self.fail_line, "hits": [],
                "last_lines": ["l1", "l2"]}


def facts(tmp_path, exit_code=0, signal=None, watch=None, stop=None, **stage):
    st = dict({"name": "s", "run": "x", "expect": []}, **stage)
    state = {"kind": "wait" if "wait" in st else "run", "attempt": 1, "started_at": 100.0,
             "log": str(tmp_path / "s.log")}
    return outcome.build_facts(st, state, str(tmp_path), {"exit_code": exit_code, "signal": signal},
                               watch or FakeWatch(), 160.0, stop, reading={"oom_kill_delta": 1, "cgroup_version": "v1"})


def test_exit_zero_is_success_only_with_everything_else(tmp_path):
    assert outcome.succeeded(facts(tmp_path))
    assert not outcome.succeeded(facts(tmp_path, exit_code=1))
    assert not outcome.succeeded(facts(tmp_path, exit_code=None, signal=9))
    assert not outcome.succeeded(facts(tmp_path, expect=["missing.pt"]))
    (tmp_path / "empty.pt").write_bytes(b"")
    assert not outcome.succeeded(facts(tmp_path, expect=["empty.pt"]))
    (tmp_path / "full.pt").write_bytes(b"x")
    (tmp_path / "dir").mkdir()
    assert not outcome.succeeded(facts(tmp_path, expect=["full.pt", "dir"]))
    (tmp_path / "dir" / "f").write_text("x")
    assert outcome.succeeded(facts(tmp_path, expect=["full.pt", "dir"]))
    assert not outcome.succeeded(facts(tmp_path, success_pattern="done"))
    assert outcome.succeeded(facts(tmp_path, success_pattern="done", watch=FakeWatch(success_seen=True)))
    assert not outcome.succeeded(facts(tmp_path, watch=FakeWatch(fail_line="loss is nan")))
    assert not outcome.succeeded(facts(tmp_path, stop="timeout"))


def test_facts_carry_every_documented_key(tmp_path):
    f = facts(tmp_path, exit_code=137, signal=None, expected_duration=600.0)
    for key in ("exit_code", "signal", "timed_out", "cancelled", "preempted", "boot_changed", "vanished",
                "expect_missing", "success_pattern", "success_seen", "fail_line", "oom_kill_delta", "gpu_faults",
                "disks", "hits", "last_lines", "duration_s", "expected_duration_s", "hangup", "cgroup_version"):
        assert key in f
    assert f["oom_kill_delta"] == 1 and f["duration_s"] == 60.0 and f["expected_duration_s"] == 600.0
    assert f["last_lines"] == ["l1", "l2"]
    assert facts(tmp_path, exit_code=None, signal=1)["hangup"] is True


def test_without_a_tailer_the_log_itself_decides(tmp_path):
    (tmp_path / "s.log").write_text("epoch 1\nTraining completed\n")
    st = {"name": "s", "run": "x", "expect": [], "success_pattern": "Training completed"}
    state = {"kind": "run", "attempt": 1, "started_at": 1.0, "log": str(tmp_path / "s.log")}
    f = outcome.build_facts(st, state, str(tmp_path), {"exit_code": 0}, None, 2.0)
    assert f["success_seen"] is True and outcome.succeeded(f)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "examples", "*.*"))))
def test_examples_are_valid_jobs(path):
    if path.endswith(".toml"):
        pytest.importorskip("tomllib")
    with open(path) as fh:
        spec = jobspec.validate(jobspec.parse_text(fh.read(), path), path)
    assert spec["stage"]
