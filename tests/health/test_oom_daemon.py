"""End to end: the real daemon started INSIDE a small memory cgroup, a stage that allocates past
the limit. The stage's cause says cgroup_oom with oom_kill in the evidence; the first status that
shows the run failed already shows the kill (the box is read when the stage ends, not from the
last periodic sample); and the kill gives exactly one critical message, not an alert plus a
stage failure."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.health import realcg
from tests.health.test_oom_real import HOG

REPO = Path(__file__).resolve().parents[2]
LIMIT = 160 << 20   # room for the daemon and the shim; the stage's hog is still the biggest


def _wait(fn, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def _json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def _events(home):
    try:
        return [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines() if line.strip()]
    except OSError:
        return []


def _ended_status(env, tmp_path):
    out = subprocess.run([sys.executable, "-m", "boxagent", "status", "--json"], env=env, capture_output=True,
                         text=True, timeout=30, cwd=str(tmp_path))
    try:
        st = json.loads(out.stdout)
    except ValueError:
        return None
    runs = st.get("runs") or []
    return st if runs and runs[0].get("state") in ("succeeded", "failed") else None


def _sink(path):
    try:
        return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    except OSError:
        return []


def _stacks(daemon, tmp_path):
    """Where a stuck daemon sits: faulthandler (PYTHONFAULTHANDLER=1) prints every thread's
    stack on SIGABRT into its log."""
    if daemon.poll() is None:
        os.kill(daemon.pid, signal.SIGABRT)
        try:
            daemon.wait(5)
        except subprocess.TimeoutExpired:
            pass
    return (tmp_path / "daemon.log").read_text(errors="replace")[-6000:]


@pytest.mark.root
@pytest.mark.slow
def test_daemon_in_small_cgroup_diagnoses_cgroup_oom(tmp_path):
    version, why = realcg.usable()
    if version is None:
        pytest.skip(why)
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "hog.py").write_text(HOG)
    env = dict(os.environ, RGT_HOME=str(home), PYTHONPATH=str(REPO), RGT_TICK="0.05", RGT_SAMPLE_EVERY="0.3",
               RGT_STOP_GRACE="1", RGT_LAUNCH_GRACE="2", RGT_HEARTBEAT_EVERY="3600",
               RGT_KMSG_PATH=str(tmp_path / "no-kmsg"), RGT_NVML_LIB=str(tmp_path / "no-nvml.so"), PYTHONFAULTHANDLER="1")
    job = {"name": "oomrun", "workdir": str(work),
           "stage": [{"name": "train", "run": "%s hog.py" % sys.executable}]}
    sink = tmp_path / "sink.jsonl"
    for args, stdin in ((["notify-set"], json.dumps({"notify": [{"url": "file://%s" % sink}]})),
                        (["submit", "-"], json.dumps(job))):
        sub = subprocess.run([sys.executable, "-m", "boxagent", *args], input=stdin, env=env,
                             capture_output=True, text=True, timeout=30, cwd=str(tmp_path))
        assert sub.returncode == 0, sub.stderr
    cg = realcg.ChildCgroup(version, LIMIT)
    daemon = None
    try:
        log = open(tmp_path / "daemon.log", "wb")
        daemon = subprocess.Popen(["sh", "-c", 'echo $$ > "%s" && exec "%s" -m boxagent daemon' % (cg.procs_file, sys.executable)],
                                  env=env, stdout=log, stderr=log, cwd=str(tmp_path), start_new_session=True)
        try:
            st = _wait(lambda: _ended_status(env, tmp_path), 60, "status to show the run ended")
        except AssertionError:
            raise AssertionError("run did not end; daemon rc=%s\n%s" % (daemon.poll(), _stacks(daemon, tmp_path)))
        run = st["runs"][0]
        assert run["state"] == "failed", run
        cause = run["stages"][0]["cause"]
        assert cause["class"] == "cgroup_oom", cause
        assert any("oom_kill" in e for e in cause["evidence"]), cause
        # the very status read that first shows the failure shows the kill too
        assert st["health"]["memory"]["oom_kill"] >= 1, st["health"]["memory"]
        assert st["health"]["memory"]["cgroup"] == version and st["health"]["memory"]["max_bytes"] == LIMIT
        time.sleep(7)      # past the alert's hold (oom_defer_s) and many samples: no second message
        assert [e for e in _events(home) if e["type"] == "oom_kill"] == []
        critical = _wait(lambda: [m for m in _sink(sink) if m["severity"] == "critical"], 10, "the message")
        time.sleep(1)
        critical = [m for m in _sink(sink) if m["severity"] == "critical"]
        assert [m["type"] for m in critical] == ["stage_failed"], critical
    finally:
        if daemon is not None and daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(daemon.pid, signal.SIGKILL)
                daemon.wait(5)
        cg.destroy()
    assert not cg.dir.exists()
