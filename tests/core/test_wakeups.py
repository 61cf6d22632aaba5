"""With a long tick and no inotify, the daemon still reacts at once: SIGCHLD for its own stages,
SIGUSR1 from the shim (re-adopted stages) and from the commands (requests), and deadlines for
timeouts/retries. An idle daemon sleeps instead of polling (its CPU budget depends on it)."""
from __future__ import annotations

import signal
import time

import pytest

from tests.realbox import job, wait_for

SLOW = {"RGT_TICK": "30", "RGT_SAMPLE_EVERY": "30", "RGT_NO_INOTIFY": "1"}


def test_requests_and_stage_exits_wake_a_sleeping_daemon(box):
    box.env.update(SLOW)
    box.daemon()
    time.sleep(0.3)
    t0 = time.monotonic()
    box.submit(job("fast", box.workdir, {"name": "a", "run": "sleep 0.2"}, {"name": "b", "run": "true"}))
    box.wait_run("fast", timeout=5)
    assert time.monotonic() - t0 < 3          # a 30 s tick would take 30 s


def test_readopted_stage_exit_is_noticed_through_the_shims_poke(box):
    box.env.update(SLOW)
    box.submit(job("poke", box.workdir, {"name": "a", "run": "while [ ! -f go ]; do sleep 0.02; done"}))
    d1 = box.daemon()
    box.wait_stage("poke", "a", "running")
    wait_for((box.home / "runs/poke/stages/a.1.pid").exists, 5)
    d1.send_signal(signal.SIGINT)              # stop: the stage keeps running
    d1.wait(10)
    box.daemon()                               # not the shim's parent: no SIGCHLD for it
    time.sleep(0.5)
    (box.workdir / "go").write_text("")
    t0 = time.monotonic()
    box.wait_run("poke", timeout=10)
    assert time.monotonic() - t0 < 2


def test_timeouts_fire_on_time_with_a_long_tick(box):
    box.env.update(SLOW)
    box.submit(job("to", box.workdir, {"name": "a", "run": "sleep 20", "timeout": "0.5s"}))
    box.daemon()
    t0 = time.monotonic()
    run = box.wait_run("to", timeout=10)
    assert run["stages"][0]["cause"]["class"] == "timeout"
    assert time.monotonic() - t0 < 4


def test_inotify_wakes_the_loop_for_a_request_nobody_signalled(box):
    pytest.importorskip("watchdog")
    box.env.update(RGT_TICK="30", RGT_SAMPLE_EVERY="30")
    box.daemon()
    assert box.events("daemon_started")[0]["inotify"] is True
    time.sleep(0.3)
    from boxagent.base.fsutil import atomic_write_json       # a request written without the poke
    spec = {"name": "quiet", "workdir": str(box.workdir), "stage": [{"name": "a", "run": "true"}]}
    t0 = time.monotonic()
    atomic_write_json(str(box.home / "inbox" / "0000000000000000001-submit-x.json"), {"kind": "submit", "spec": spec})
    box.wait_run("quiet", timeout=10)
    assert time.monotonic() - t0 < 3
