"""The daemon's lifetime with real processes: re-adoption after SIGKILL (exactly once), machine
restart (boot_id), SIGTERM preemption, cancel, stop/upgrade, one daemon per home, resume."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.realbox import job, wait_for

# Appends one line per execution: the exactly-once evidence.
COUNTED = "echo ran >> counter; while [ ! -f go ]; do sleep 0.05; done; echo out > out.txt"


def _pidinfo(box, run, stage, attempt=1):
    path = box.home / "runs" / run / "stages" / ("%s.%d.pid" % (stage, attempt))
    wait_for(path.exists, 10, "pid file of %s/%s" % (run, stage))
    return json.loads(path.read_text())


def test_sigkill_daemon_mid_stage_restart_runs_it_exactly_once(box):
    box.submit(job("once", box.workdir, {"name": "a", "run": "true"},
                   {"name": "train", "run": COUNTED, "expect": ["out.txt"]}, {"name": "c", "run": "true"}))
    d1 = box.daemon()
    box.wait_stage("once", "train", "running")
    info = _pidinfo(box, "once", "train")
    d1.send_signal(signal.SIGKILL)
    d1.wait(5)
    assert os.killpg(info["pgid"], 0) is None          # the stage survived its daemon
    box.daemon()                                       # a new daemon re-adopts it
    (box.workdir / "go").write_text("")
    run = box.wait_run("once")
    assert run["state"] == "succeeded", run
    assert (box.workdir / "counter").read_text() == "ran\n"
    assert box.marker("once", "train").exists()
    assert [s["attempt"] for s in run["stages"]] == [1, 1, 1]
    assert len(box.events("stage_started")) == 3


def test_daemon_killed_before_the_shim_claims_the_attempt_launches_it_once(box):
    # The state says `running` attempt 1 but nothing was launched (killed between save and Popen):
    # the next daemon launches that same attempt after launch_grace, exactly once.
    box.submit(job("gap", box.workdir, {"name": "s", "run": "echo ran >> counter"}))
    d1 = box.daemon()
    box.wait_run("gap")
    d1.send_signal(signal.SIGKILL)
    d1.wait(5)
    run_dir = box.home / "runs" / "gap"
    state = json.loads((run_dir / "state.json").read_text())
    state["state"], state["ended_at"] = "running", None
    st = state["stages"][0]
    st.update(state="running", attempt=2, launched_at=time.time(), ended_at=None)
    (run_dir / "state.json").write_text(json.dumps(state))
    (run_dir / "markers" / "s.done").unlink()
    box.daemon()
    run = box.wait_run("gap")
    assert run["state"] == "succeeded" and run["stages"][0]["attempt"] == 2
    assert (box.workdir / "counter").read_text() == "ran\nran\n"   # attempt 1 once, attempt 2 once


def test_a_second_shim_for_the_same_attempt_refuses(box):
    box.submit(job("claim", box.workdir, {"name": "s", "run": "echo ran >> counter"}))
    box.start()
    box.wait_run("claim")
    out = box.agent("exec-stage", "--home", str(box.home), "--run", "claim", "--stage", "s", "--attempt", "1")
    assert out.returncode == 75
    assert (box.workdir / "counter").read_text() == "ran\n"


def test_stop_leaves_the_stage_running_and_the_next_daemon_finishes_it(box):
    box.submit(job("up", box.workdir, {"name": "train", "run": COUNTED}))
    box.start()
    box.wait_stage("up", "train", "running")
    info = _pidinfo(box, "up", "train")
    out = box.agent("stop")
    assert out.returncode == 0, out.stderr
    assert box.daemon_pid() is None
    assert os.killpg(info["pgid"], 0) is None
    assert box.run_state("up")["state"] == "running"
    stopped = box.events("daemon_stopped")[-1]
    assert stopped["reason"] == "stop"
    (box.workdir / "go").write_text("")
    wait_for(lambda: (box.home / "runs/up/stages/train.1.exit").exists(), 10, "exit file with no daemon")
    box.start()
    assert box.wait_run("up")["state"] == "succeeded"
    assert (box.workdir / "counter").read_text() == "ran\n"


@pytest.mark.slow
def test_boot_id_change_interrupts_running_stage_and_resume_requeues_from_marker(box):
    box.submit(job("boot", box.workdir, {"name": "prep", "run": "echo p >> prep-count"},
                   {"name": "train", "run": "echo t >> train-count; sleep 30"}, {"name": "eval", "run": "true"}))
    d1 = box.daemon()
    box.wait_stage("boot", "train", "running")
    info = _pidinfo(box, "boot", "train")
    d1.send_signal(signal.SIGKILL)
    d1.wait(5)
    os.killpg(info["pgid"], signal.SIGKILL)           # a reboot takes the processes with it
    os.killpg(info["shim_pid"], signal.SIGKILL)
    box.boot_id_path.write_text("another-boot\n")
    dead = json.loads(box.agent("status", "--json").stdout)     # before any daemon runs again
    assert dead["agent"]["running"] is False and dead["agent"]["machine_restarted"] is True
    box.daemon()
    run = box.wait_run("boot", "interrupted")
    train = run["stages"][1]
    assert train["state"] == "interrupted" and train["cause"]["class"] == "machine_restart"
    restart = box.wait_event("machine_restart")
    assert restart["severity"] == "critical" and "boot" in restart["runs"]
    assert box.status_file()["agent"]["machine_restarted"] is True
    # resume: prep has a marker and is skipped; train runs again as attempt 2
    out = box.agent("resume", "boot")
    assert out.returncode == 0, out.stderr
    box.wait_stage("boot", "train", "running")
    assert box.stage("boot", "prep")["state"] == "skipped"
    assert box.stage("boot", "train")["attempt"] == 2
    assert (box.workdir / "prep-count").read_text() == "p\n"
    assert box.agent("cancel", "boot").returncode == 0
    assert box.wait_run("boot")["state"] == "cancelled"


def test_start_resume_interrupted_requeues_after_a_reboot(box):
    box.submit(job("reb", box.workdir, {"name": "a", "run": "true"}, {"name": "b", "run": "[ -f go ] || sleep 30"}))
    d1 = box.daemon()
    box.wait_stage("reb", "b", "running")
    info = _pidinfo(box, "reb", "b")
    d1.send_signal(signal.SIGKILL)
    d1.wait(5)
    os.killpg(info["pgid"], signal.SIGKILL)
    os.killpg(info["shim_pid"], signal.SIGKILL)
    box.boot_id_path.write_text("boot-2\n")
    (box.workdir / "go").write_text("")
    box.daemon("--resume-interrupted")
    run = box.wait_run("reb", "succeeded")
    assert [s["state"] for s in run["stages"]] == ["skipped", "succeeded"]


def test_sigterm_preempts_stages_term_then_kill_and_records_it(box):
    box.submit(job("spot", box.workdir, {"name": "train", "run": "trap '' TERM; sleep 30"}))
    d1 = box.daemon()
    box.wait_stage("spot", "train", "running")
    info = _pidinfo(box, "spot", "train")
    t0 = time.monotonic()
    d1.send_signal(signal.SIGTERM)
    assert d1.wait(15) == 0
    assert time.monotonic() - t0 < 8                 # stop_grace is 1 s in tests
    from boxagent.base.procs import group_members
    from boxagent.base.roots import Roots
    assert group_members(Roots(), info["pgid"]) == []
    run = box.run_state("spot")
    assert run["state"] == "interrupted"
    st = run["stages"][0]
    assert st["state"] == "interrupted" and st["cause"]["class"] == "preempted" and st["signal"] == 9
    assert not box.marker("spot", "train").exists()
    types = [e["type"] for e in box.events()]
    assert "preempted" in types and "run_interrupted" in types and types[-1] == "daemon_stopped"
    status = box.status_file()
    assert status["agent"]["running"] is False and status["runs"][0]["state"] == "interrupted"


def test_sigterm_stage_that_exits_on_term_is_recorded_with_signal(box):
    box.submit(job("spot2", box.workdir, {"name": "train", "run": "sleep 30"}))
    d1 = box.daemon()
    box.wait_stage("spot2", "train", "running")
    _pidinfo(box, "spot2", "train")
    d1.send_signal(signal.SIGTERM)
    assert d1.wait(15) == 0
    st = box.run_state("spot2")["stages"][0]
    assert st["state"] == "interrupted" and st["signal"] == 15


def test_cancel_running_and_queued_runs(box):
    box.submit(job("c1", box.workdir, {"name": "s", "run": "sleep 30"}, {"name": "t", "run": "touch t-ran"}))
    box.submit(job("c2", box.workdir, {"name": "s", "run": "touch c2-ran"}))
    box.start()
    box.wait_stage("c1", "s", "running")
    info = _pidinfo(box, "c1", "s")
    out = box.agent("cancel", "c2")
    assert out.returncode == 0 and "cancelled" in out.stdout
    out = box.agent("cancel", "c1")
    assert out.returncode == 0 and "cancelled" in out.stdout, out.stdout + out.stderr
    run = box.run_state("c1")
    assert run["state"] == "cancelled" and run["stages"][0]["state"] == "cancelled"
    assert run["stages"][0]["cause"]["class"] == "cancelled"
    assert not box.marker("c1", "s").exists() and not (box.workdir / "t-ran").exists()
    assert box.run_state("c2")["state"] == "cancelled" and not (box.workdir / "c2-ran").exists()
    from boxagent.base.procs import group_members
    from boxagent.base.roots import Roots
    assert group_members(Roots(), info["pgid"]) == []
    again = box.agent("cancel", "c1")
    assert again.returncode == 0 and "already cancelled" in again.stdout


def test_cancel_unknown_run_is_a_usage_error(box):
    out = box.agent("cancel", "nope")
    assert out.returncode == 2 and out.stderr.startswith("Error: ") and "Hint: " in out.stderr


def test_second_daemon_refuses(box):
    d1 = box.daemon()
    out = box.agent("daemon", timeout=20)
    assert out.returncode == 1
    assert "already runs" in out.stderr and str(d1.pid) in out.stderr and "Traceback" not in out.stderr
    assert box.daemon_pid() == d1.pid
    # `start` is idempotent: it prints the running daemon's pid
    assert box.start() == d1.pid


def test_status_with_the_daemon_dead(box):
    box.submit(job("dead", box.workdir, {"name": "s", "run": "true"}))
    out = box.agent("status", "--json")
    assert out.returncode == 3
    st = json.loads(out.stdout)
    assert st["agent"]["running"] is False and st["runs"][0]["state"] == "queued"
    box.start()
    box.wait_run("dead")
    assert box.agent("stop").returncode == 0
    time.sleep(0.2)
    out = box.agent("status", "--json")
    st = json.loads(out.stdout)
    assert out.returncode == 3 and st["agent"]["running"] is False
    assert st["agent"]["heartbeat_age_s"] >= 0.1 and st["runs"][0]["state"] == "succeeded"
    text = box.agent("status")
    assert "NOT RUNNING" in text.stdout and "succeeded" in text.stdout.lower()


@pytest.mark.slow
def test_status_json_never_partial_under_a_hammering_reader(box):
    box.submit(job("ham", box.workdir, *[{"name": "s%d" % i, "run": "echo %d" % i} for i in range(8)]))
    box.start()
    path = box.home / "status.json"
    reads = 0
    deadline = time.monotonic() + 20
    while box.run_state("ham").get("state") != "succeeded" and time.monotonic() < deadline:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        json.loads(data)                         # raises on a torn file
        reads += 1
    assert box.run_state("ham")["state"] == "succeeded"
    assert reads > 20


@pytest.mark.parametrize("kind", ["run", "wait"])
def test_cancelled_run_can_be_resumed(box, kind):
    stage = {"name": "s", "run": "[ -f go ] || sleep 30"} if kind == "run" else \
        {"name": "s", "wait": {"file": "go"}, "timeout": "30s"}
    box.submit(job("res", box.workdir, {"name": "first", "run": "echo f >> first"}, stage))
    box.start()
    box.wait_stage("res", "s", "running")
    assert box.agent("cancel", "res").returncode == 0
    box.wait_run("res", "cancelled")
    (box.workdir / "go").write_text("")
    assert box.agent("resume", "res").returncode == 0
    run = box.wait_run("res", "succeeded")
    assert [s["state"] for s in run["stages"]] == ["skipped", "succeeded"]
    assert (box.workdir / "first").read_text() == "f\n"


def test_term_to_the_shim_reaches_the_command_and_is_recorded(box):
    # Someone (a human, a watchdog script) TERMs the shim itself: the command gets it, the shim
    # survives to write the exit file, and the stage fails with the signal as evidence.
    box.submit(job("shimterm", box.workdir, {"name": "s", "run": "sleep 30"}))
    box.start()
    box.wait_stage("shimterm", "s", "running")
    info = _pidinfo(box, "shimterm", "s")
    os.kill(info["shim_pid"], signal.SIGTERM)
    run = box.wait_run("shimterm")
    st = run["stages"][0]
    assert run["state"] == "failed" and st["signal"] == 15 and st["cause"]["class"]
    exit_info = json.loads((box.home / "runs/shimterm/stages/s.1.exit").read_text())
    assert exit_info["signal"] == 15


def test_no_zombie_shims_after_stages_end(box):
    box.submit(job("zomb", box.workdir, *[{"name": "s%d" % i, "run": "true"} for i in range(3)]))
    box.start()
    box.wait_run("zomb")
    pid = box.daemon_pid()
    time.sleep(0.3)

    def zombies():
        out = []
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    stat = open("/proc/%s/stat" % p).read()
                except OSError:
                    continue
                rest = stat.rsplit(")", 1)[1].split()
                if rest[0] == "Z" and int(rest[1]) == pid:
                    out.append(p)
        return out
    wait_for(lambda: not zombies(), 5, "the daemon to reap its shims")
