"""A stage's processes are contained: children that leave its process group (`setsid`,
`os.setpgid(0, 0)`) end with it on cancel, timeout, preemption and `stop --kill`; one left behind by
a stage that exits 0 is named in a warning; requests reach the stage whenever they arrive."""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from boxagent.base.roots import Roots
from boxagent.base.procs import proc_state
from tests.realbox import job, wait_for

# Two children that leave the stage's process group: one in a new session, one in a new group.
ESCAPERS = ("setsid sh -c 'echo $$ > sid.pid; exec sleep 300' & "
            "%s -c \"import os, time; os.setpgid(0, 0); open('pg.pid', 'w').write(str(os.getpid())); "
            "time.sleep(300)\" & "
            "while [ ! -s sid.pid ] || [ ! -s pg.pid ]; do sleep 0.05; done; echo ready; sleep 300" % sys.executable)


def _escapers(box):
    pids = []
    for name in ("sid.pid", "pg.pid"):
        path = box.workdir / name
        wait_for(lambda: path.exists() and path.read_text().strip(), 10, name)
        pids.append(int(path.read_text().strip()))
    roots = Roots()
    assert all(proc_state(roots, p) not in (None, "Z", "X") for p in pids)
    assert all(os.getpgid(p) != os.getpgid(pids[0]) or p == pids[0] for p in pids)
    return pids


def _gone(pids):
    roots = Roots()
    return all(proc_state(roots, p) in (None, "Z", "X") for p in pids)


def _started(box, name, **stage):
    box.submit(job(name, box.workdir, dict({"name": "s", "run": ESCAPERS}, **stage)))
    box.start()
    box.wait_stage(name, "s", "running")
    return _escapers(box)


def test_setsid_and_setpgid_children_end_with_a_cancel(box):
    pids = _started(box, "c")
    out = box.agent("cancel", "c", "--wait", "10")
    assert out.returncode == 0, out.stderr
    box.wait_run("c", "cancelled")
    wait_for(lambda: _gone(pids), 10, "the escaped children to end")


def test_setsid_and_setpgid_children_end_with_a_timeout(box):
    pids = _started(box, "t", timeout="3s")
    run = box.wait_run("t", timeout=30)
    assert run["stages"][0]["cause"]["class"] == "timeout"
    wait_for(lambda: _gone(pids), 10, "the escaped children to end")


def test_setsid_and_setpgid_children_end_with_a_preemption(box):
    box.submit(job("p", box.workdir, {"name": "s", "run": ESCAPERS}))
    d = box.daemon()
    box.wait_stage("p", "s", "running")
    pids = _escapers(box)
    d.send_signal(signal.SIGTERM)
    d.wait(20)
    assert box.run_state("p")["state"] == "interrupted"
    wait_for(lambda: _gone(pids), 10, "the escaped children to end")


def test_stop_kill_ends_every_stage_and_its_escaped_children(box):
    pids = _started(box, "k")
    out = box.agent("stop", "--kill", "--timeout", "20")
    assert out.returncode == 0, out.stderr
    assert box.run_state("k")["state"] == "cancelled"
    wait_for(lambda: _gone(pids), 10, "the escaped children to end")


def test_a_stage_that_exits_0_leaving_a_child_gets_a_warning_naming_it(box):
    cmd = "setsid sh -c 'echo $$ > left.pid; exec sleep 300' & while [ ! -s left.pid ]; do sleep 0.05; done"
    box.submit(job("w", box.workdir, {"name": "s", "run": cmd}))
    box.start()
    run = box.wait_run("w")
    pid = int((box.workdir / "left.pid").read_text())
    try:
        st = run["stages"][0]
        assert run["state"] == "succeeded" and len(st["warnings"]) == 1, st
        assert "left 1 process(es) running" in st["warnings"][0] and str(pid) in st["warnings"][0]
        assert "sleep 300" in st["warnings"][0]
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_cancel_sent_while_the_daemon_is_down_kills_the_readopted_stage(box):
    box.submit(job("down", box.workdir, {"name": "s", "run": ESCAPERS}, {"name": "next", "run": "touch next-ran"}))
    d = box.daemon()
    box.wait_stage("down", "s", "running")
    pids = _escapers(box)
    d.send_signal(signal.SIGINT)                  # stop: the stage keeps running
    d.wait(10)
    out = box.agent("cancel", "down")             # queued in the inbox: nobody reads it yet
    assert out.returncode == 3, out.stdout + out.stderr
    assert not _gone(pids)
    box.daemon()
    run = box.wait_run("down", timeout=20)
    assert run["state"] == "cancelled" and run["stages"][1]["state"] == "pending"
    wait_for(lambda: _gone(pids), 10, "the stage's processes to end")
    assert not (box.workdir / "next-ran").exists()


def test_resume_refuses_while_a_process_of_the_previous_attempt_lives(box):
    cmd = "setsid sh -c 'echo $$ > left.pid; exec sleep 300' & while [ ! -s left.pid ]; do sleep 0.05; done; exit 3"
    box.submit(job("r", box.workdir, {"name": "s", "run": cmd}))
    box.start()
    assert box.wait_run("r")["state"] == "failed"
    pid = int((box.workdir / "left.pid").read_text())
    try:
        out = box.agent("resume", "r")
        assert out.returncode == 1 and "still runs" in out.stderr and str(pid) in out.stderr, out.stderr
        assert box.run_state("r")["state"] == "failed"
    finally:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _gone([pid]), 5, "the leftover to end")
    assert box.agent("resume", "r").returncode == 0


def test_a_stop_request_older_than_the_daemon_is_dropped(box):
    inbox = box.home / "inbox"
    inbox.mkdir(parents=True)
    stale = {"kind": "stop", "kill": False, "posted_at": time.time() - 60}
    (inbox / ("%019d-stop-aaaaaa.json" % (time.time_ns() - 60 * 10 ** 9))).write_text(json.dumps(stale))
    box.submit(job("after", box.workdir, {"name": "s", "run": "sleep 0.5"}))
    d = box.daemon()
    assert box.wait_run("after")["state"] == "succeeded"
    assert d.poll() is None, "a stale stop request stopped the new daemon"
    assert not list(inbox.glob("*-stop-*.json"))
    assert "dropped a stop request older than this daemon" in (box.tmp / "daemon-0.log").read_text()
