"""The shipped single file: runs a chain on a bare interpreter (-S), on Python 3.8, reports its
own sha256; and vermin proves the agent's sources stay Python 3.8 compatible."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.realbox import REPO, job

PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"


def _pyz_agent(box, python, pyz):
    env = {k: v for k, v in box.env.items() if k != "PYTHONPATH"}   # nothing but the file itself

    def run(*args, stdin=None):
        return subprocess.run(python + [str(pyz), *args], input=stdin, capture_output=True, text=True,
                              env=env, timeout=60, cwd=str(box.tmp))
    return run


def _chain_through(box, agent):
    j = job("pyz", box.workdir, {"name": "a", "run": "echo a > a.txt", "expect": ["a.txt"]},
            {"name": "b", "run": "python3 -c 'print(42)' > b.txt", "expect": ["b.txt"]},
            {"name": "c", "run": "echo done", "success_pattern": "done"})
    out = agent("submit", "-", "--json", stdin=json.dumps(j))
    assert out.returncode == 0, out.stderr
    start = agent("start")
    assert start.returncode == 0, start.stderr + (box.home / "daemon.log").read_text()
    run = box.wait_run("pyz")
    assert run["state"] == "succeeded", run
    status = json.loads(agent("status", "--json").stdout)
    assert agent("stop").returncode == 0
    return status


@pytest.mark.slow
def test_pyz_runs_a_chain_on_a_bare_interpreter(box, agent_pyz):
    agent = _pyz_agent(box, [sys.executable, "-S"], agent_pyz)
    status = _chain_through(box, agent)
    sha = hashlib.sha256(agent_pyz.read_bytes()).hexdigest()
    assert status["agent"]["build_sha256"] == sha
    assert status["agent"]["deps"]["psutil"] is False and status["agent"]["deps"]["watchdog"] is False
    assert json.loads((box.home / "runs/pyz/stages/a.1.pid").read_text())["shim_pid"]   # the shim ran
    version = json.loads(agent("version", "--json").stdout)
    assert version["build_sha256"] == sha and version["pyz"] == str(agent_pyz)


@pytest.mark.slow
@pytest.mark.skipif(not os.access(PY38, os.X_OK), reason="Python 3.8 not installed at %s" % PY38)
def test_python38_really_runs_the_pyz(box, agent_pyz):
    agent = _pyz_agent(box, [PY38], agent_pyz)
    out = agent("--version")
    assert out.returncode == 0 and out.stdout.startswith("rgt-agent ")
    status = _chain_through(box, agent)
    assert status["agent"]["python"].startswith("3.8.")


def _vermin(*paths):
    # The venv's own vermin, next to the interpreter running the tests: CI never activates the
    # venv, so a PATH lookup missed it and the test skipped in every CI run, proving nothing.
    vermin = Path(sys.executable).parent / "vermin"
    if not vermin.exists():
        pytest.skip("vermin is not installed next to %s (./install.sh --dev installs it)" % sys.executable)
    return subprocess.run([str(vermin), "-t=3.8-", "--no-tips", "--violations", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_vermin_says_python38_for_the_agent():
    out = _vermin(REPO / "boxagent")
    assert out.returncode == 0, out.stdout + out.stderr


def test_vermin_fails_on_a_python39_call(tmp_path):
    # The same flags must still fail on a violation, or the test above proves nothing.
    (tmp_path / "newer.py").write_text("import math\n\nprint(math.lcm(2, 3))\n")
    out = _vermin(tmp_path)
    assert out.returncode != 0 and "math.lcm" in out.stdout, out.stdout + out.stderr


def test_agent_imports_without_site_packages():
    code = "import boxagent.cli, boxagent.daemon.loop, boxagent.daemon.control; boxagent.cli.build_parser(); print('ok')"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")}, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# What the client's one-round-trip commands must not load: from the .pyz every module is compiled
# from source on each call (no .pyc in the zip), so each one is paid for on every `rgt-client status`.
NOT_FOR_READERS = {"boxagent.daemon.control", "boxagent.engine.jobspec", "boxagent.engine.shim", "boxagent.base.config",
                   "boxagent.daemon.loop", "boxagent.engine.scheduler", "boxagent.engine.records", "boxagent.daemon.bus",
                   "boxagent.notify",
                   "boxagent.health", "boxagent.triage", "boxagent.artifacts", "boxagent.base.profile",
                   "subprocess", "secrets", "tempfile", "socket"}


def _imports(agent_pyz, home, *args):
    env = {"PATH": os.environ.get("PATH", ""), "RGT_HOME": str(home)}
    out = subprocess.run([sys.executable, "-S", "-X", "importtime", str(agent_pyz), *args],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode in (0, 3), out.stderr[-2000:]   # 3: the daemon is not running
    return {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_status_and_version_import_only_what_they_need(tmp_path, agent_pyz):
    home = tmp_path / "home"
    home.mkdir()
    # no status.json yet: `status` builds it from the files (state, events, deps, the build sha256)
    assert not _imports(agent_pyz, home, "status", "--json") & NOT_FOR_READERS
    (home / "status.json").write_text(json.dumps({"schema": "rgt.status/1", "agent": {}, "runs": []}))
    for args in (["status", "--json"], ["status", "--json", "--events", "0"], ["status"]):
        loaded = _imports(agent_pyz, home, *args)
        # typing: the agent's modules use it for annotations only; importing it cost each status ~3 ms
        assert "boxagent.wire.status" in loaded and not loaded & (NOT_FOR_READERS | {"boxagent.engine.store", "hashlib",
                                                                                    "typing"}), args
    loaded = _imports(agent_pyz, home, "version", "--json")
    assert "boxagent.daemon.control" in loaded and not loaded & (NOT_FOR_READERS - {"boxagent.daemon.control"}
                                                         | {"boxagent.wire.status"})


def test_status_from_the_pyz_ends_at_once_with_its_whole_answer_and_exit_code(tmp_path, agent_pyz):
    """The .pyz ends a `status` as soon as its answer is flushed (no teardown of its modules): an
    answer far bigger than a pipe's buffer still arrives whole, and "daemon not running" is still 3."""
    home = tmp_path / "home"
    home.mkdir()
    runs = [{"name": "r%d" % i, "state": "succeeded",
             "stages": [{"name": "s%d" % j, "state": "succeeded", "log": "x" * 200} for j in range(30)]}
            for i in range(40)]
    (home / "status.json").write_text(json.dumps({"schema": "rgt.status/1", "agent": {}, "runs": runs}))
    out = subprocess.run([sys.executable, "-S", str(agent_pyz), "status", "--json"], capture_output=True, text=True,
                         env={"PATH": os.environ.get("PATH", ""), "RGT_HOME": str(home)}, timeout=60)
    assert out.returncode == 3, out.stderr
    assert len(out.stdout) > 256 * 1024
    got = json.loads(out.stdout)
    assert [r["name"] for r in got["runs"]] == ["r%d" % i for i in range(40)]
    assert all(len(r["stages"]) == 30 for r in got["runs"]) and got["agent"]["running"] is False
