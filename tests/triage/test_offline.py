"""Offline triage (`rgt-agent triage LOG`, `rgt-client triage LOG`) says what it did not look
at, checks the filesystems a person names (--path, --workdir), names the OOM killer as the
usual sender of a SIGKILL, and speaks the box's cgroup vocabulary."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from boxagent.triage import diagnose
from rgt_client.cli import cli
from tests.mounts import tmpfs
from tests.triage.conftest import CORPUS, corpus_facts

ENOSPC = "Traceback (most recent call last):\nOSError: [Errno 28] No space left on device\n"


def _json(out):
    assert out.returncode in (0, 4), out.stderr
    return json.loads(out.stdout)


def test_offline_killed_line_says_the_counter_was_not_checked(agent):
    rep = _json(agent("triage", str(CORPUS / "cgroup_oom__bash_killed.log"), "--exit-code", "137", "--json"))
    ev = " | ".join(rep["cause"]["evidence"])
    assert rep["cause"]["class"] == "cgroup_oom"
    assert "not checked (offline triage)" in ev and "not readable" not in ev
    assert "dmesg -T | grep -i -e oom -e killed" in ev


@pytest.mark.parametrize("code", ["-9", "137"])
def test_sigkill_names_the_oom_killer_as_the_usual_cause(agent, code):
    """nobody asks for a SIGKILL: unless the log says who sent it, the memory killer did"""
    rep = _json(agent("triage", str(CORPUS / "innocent.log"), "--exit-code", code, "--json"))
    c = rep["cause"]
    assert c["class"] == "cgroup_oom"
    assert "most likely by the OOM killer" in c["summary"] and "not checked (offline triage)" in c["summary"]
    assert "dmesg -T | grep -i -e oom -e killed" in c["remediation"]
    assert "oom_kill counter" in c["remediation"]


def test_sigkill_with_the_counter_unmoved_is_not_the_oom_killer():
    c = diagnose(corpus_facts("innocent.log", exit_code=137, oom_kill_delta=0))
    assert c["class"] == "killed" and "not the OOM killer" in c["summary"]


def test_offline_enospc_without_a_path_says_the_filesystem_was_not_checked(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(ENOSPC)
    r = CliRunner().invoke(cli, ["triage", str(log), "--exit-code", "1", "--json"])
    assert r.exit_code == 4, r.output
    ev = json.loads(r.output)["cause"]["evidence"]
    assert any("filesystem not checked (offline triage): give --path DIR" in e for e in ev)


@pytest.mark.root
def test_path_tells_full_inodes_from_a_full_disk(agent, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(ENOSPC)
    with tmpfs(tmp_path / "data", "size=4m,nr_inodes=64") as mnt:
        n = 0
        try:
            while True:
                (mnt / ("f%d" % n)).write_bytes(b"")
                n += 1
        except OSError:
            pass
        rep = _json(agent("triage", str(log), "--exit-code", "1", "--path", str(mnt), "--json"))
        assert rep["cause"]["class"] == "inodes_full"
        assert any(str(mnt) in e and "inodes used" in e for e in rep["cause"]["evidence"])
        r = CliRunner().invoke(cli, ["triage", str(log), "--exit-code", "1", "--workdir", str(mnt), "--json"])
        assert r.exit_code == 4 and json.loads(r.output)["cause"]["class"] == "inodes_full"


def test_a_path_that_does_not_exist_is_bad_input(agent, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(ENOSPC)
    out = agent("triage", str(log), "--path", str(tmp_path / "nope"))
    assert out.returncode == 2 and out.stderr.startswith(b"Error: no such file or directory")
    assert b"Hint: " in out.stderr
    r = CliRunner().invoke(cli, ["triage", str(log), "--workdir", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "Error: no such file or directory" in r.output


@pytest.mark.parametrize("version,limit,counter", [
    ("v2", "memory.max", "memory.events"),
    ("v1", "memory.limit_in_bytes", "memory.oom_control"),
    (None, "memory.max on cgroup v2, memory.limit_in_bytes on v1", "memory.events on cgroup v2"),
])
def test_cgroup_oom_remediation_speaks_the_boxs_cgroup_version(version, limit, counter):
    c = diagnose(corpus_facts("cgroup_oom__dataloader.log", exit_code=1, oom_kill_delta=2,
                              cgroup_version=version))
    assert c["class"] == "cgroup_oom" and "(%s)" % limit in c["remediation"]
    if version == "v1":
        assert "memory.max" not in c["remediation"]
    c = diagnose(corpus_facts("innocent.log", exit_code=137, cgroup_version=version))
    assert counter in c["remediation"]
