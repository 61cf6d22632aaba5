"""Human status text and the patrol decision table, from named status scenarios."""
from __future__ import annotations

import copy

import pytest

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.status.fetch import HostStatus
from rgt_client.status.poll import patrol_exit, patrol_verdict
from rgt_client.status.render import render_status, sparkline
from rgt_client.status.render_poll import patrol_detail
from rgt_client.status.render_run import run_line
from rgt_client.box.transport import Target

BASE = {
    "schema": "rgt.status/1", "observed_at": "2025-01-02T10:00:00Z", "host": "box", "profile": "autodl",
    "agent": {"version": "0.1.0", "build_sha256": "a" * 64, "pid": 42, "running": True, "heartbeat_age_s": 3},
    "health": {"memory": {"cgroup": "v1", "used_pct": 41.0, "max_bytes": 16e9, "peak_bytes": 9e9, "oom_kill": 0},
               "cpu": {"quota_cores": 4}, "gpu_source": "none", "gpu_unavailable_reason": "no NVML", "gpus": [],
               "disks": [{"path": "/root/.rgt", "role": "state", "bytes_used_pct": 40.0, "bytes_total": 5e10,
                          "inodes_used_pct": 3.0}]},
    "history": {"mem_used_pct": [10, 20, 40, 80, 100, None, 50]},
    "runs": [], "alerts": [], "notifications": {"sent": 3, "pending": 0, "failed": 1, "last_error": "HTTP 500"},
}


def scenario(runs=(), **agent):
    s = copy.deepcopy(BASE)
    s["runs"] = list(runs)
    s["agent"].update(agent)
    return s


RUNNING = {"name": "a3", "state": "running", "workdir": "/w", "ended_at": None, "stages": [
    {"name": "train", "state": "succeeded", "attempt": 1, "duration_s": 3720},
    {"name": "eval", "state": "running", "attempt": 1, "duration_s": 60,
     "progress": {"done": 45, "total": 100, "fraction": 0.45, "eta_s": 900}},
    {"name": "agg", "state": "pending"}]}
FAILED = {"name": "b1", "state": "failed", "ended_at": "2025-01-02T09:00:00Z", "stages": [
    {"name": "train", "state": "failed", "attempt": 2, "duration_s": 180,
     "cause": {"class": "cgroup_oom", "summary": "killed by the cgroup OOM killer",
               "remediation": "size DataLoader workers against memory.max", "evidence": ["oom_kill 0 -> 1"]}}]}
FULL = {"state": "full", "since": "2025-01-02T09:55:00Z", "error": "[Errno 28] No space left on device", "pending_writes": 3}
DONE = {"name": "c1", "state": "succeeded", "ended_at": "2025-01-02T08:00:00Z",
        "stages": [{"name": "train", "state": "succeeded"}]}


def test_sparkline_scales_0_to_100_and_keeps_gaps():
    assert sparkline([0, 50, 100, None]) == "▁▅█ "
    assert sparkline(range(100), width=5) == sparkline([95, 96, 97, 98, 99])


def test_scenario_running_run_with_progress():
    text = render_status(scenario([RUNNING]), {"host": "box", "local_build_sha256": "a" * 64})
    assert "box · profile autodl · agent 0.1.0 (pid 42, heartbeat 3s ago)" in text
    assert "▶ eval" in text and "45% (45/100) eta 15m00s" in text and "✓ train" in text
    assert "memory  41% of 16.0 GB (cgroup v1" in text and "▁▂▄▇█ ▅" in text
    assert "gpus    none (no NVML)" in text
    assert "notifications sent 3, pending 0, failed 1 (last error: HTTP 500)" in text
    assert "NOT running" not in text and "build" not in text


def test_scenario_failed_stage_shows_cause_and_fix():
    text = render_status(scenario([FAILED]), {"host": "box"})
    assert "cause: cgroup_oom: killed by the cgroup OOM killer" in text
    assert "fix:   size DataLoader workers" in text and "evidence: oom_kill 0 -> 1" in text


def test_scenario_dead_daemon_and_build_mismatch():
    text = render_status(scenario(running=False, state="stopped", heartbeat_age_s=400),
                         {"host": "box", "local_build_sha256": "b" * 64})
    assert "agent NOT running (heartbeat 6m40s ago)" in text
    assert "rgt-client install box" in text and "builds bbbbbbbbbbbb" in text


def hs(status=None, error=None):
    return HostStatus(Target("box"), status=status, error=error)


@pytest.mark.parametrize("host_status, word, code", [
    (hs(error=ClientError("cannot reach box", None, exitcodes.UNREACHABLE)), "UNREACHABLE", 5),
    (hs(error=ClientError("not installed", None, exitcodes.AGENT_DOWN)), "AGENT-DOWN", 3),
    (hs(scenario([RUNNING], running=False)), "AGENT-DOWN", 3),   # an agent older than agent.state
    (hs(scenario([RUNNING], running=False, state="stopped")), "AGENT-DOWN", 3),
    (hs(scenario([RUNNING], state="stale", heartbeat_age_s=1000)), "AGENT-DOWN", 3),
    # the agent decides liveness once: the client never second-guesses it from the heartbeat age
    (hs(scenario([RUNNING], state="running", heartbeat_age_s=1000)), "HEALTHY", 0),
    (hs(scenario([RUNNING, FAILED])), "RUN-FAILED", 4),
    (hs(scenario([RUNNING], storage=FULL)), "STATE-FULL", 7),      # up, serving from memory: not AGENT-DOWN
    (hs(scenario([RUNNING, FAILED], storage=FULL)), "STATE-FULL", 7),
    (hs(scenario([RUNNING], storage={"state": "ok", "since": None, "error": None, "pending_writes": 0})), "HEALTHY", 0),
    (hs(scenario([RUNNING])), "HEALTHY", 0),
    (hs(scenario([DONE])), "DONE", 0),
    (hs(scenario([])), "IDLE", 0),
    (hs(error=ClientError("the agent gave no status")), "ERROR", 1),
])
def test_patrol_decision_table(host_status, word, code):
    v = patrol_verdict(host_status, since_s=86400)
    assert (v.word, v.code) == (word, code), patrol_detail(v, "box")


def test_a_full_state_dir_is_said_in_status_and_patrol_with_the_runs_it_holds_up():
    status = scenario([RUNNING, FAILED], storage=FULL)
    text = render_status(status, {"host": "box"})
    assert "  ! the agent's state dir is FULL since 2025-01-02T09:55:00Z: runs go on, no new\n" in text
    assert "    stage starts; 3 writes kept in memory: free space there (df -h; df -i)" in text
    assert all(len(line) <= 80 for line in text.splitlines() if "workdir" not in line)
    v = patrol_verdict(hs(status), since_s=86400)
    line = patrol_detail(v, "box")
    assert line.startswith("the agent's state dir is FULL since") and "b1 failed at stage train: cgroup_oom" in line
    assert "a3 running stage eval" in line and "\n" not in line
    assert patrol_exit([4, 7, 3]) == 4 and patrol_exit([7, 3, 5]) == 7


def test_patrol_old_failure_expires_after_since():
    later = dict(DONE, ended_at="2025-01-02T09:30:00Z")
    v = patrol_verdict(hs(scenario([FAILED, later])), since_s=1800)
    assert (v.word, v.code) == ("DONE", 0)
    v = patrol_verdict(hs(scenario([FAILED, DONE])), since_s=1800)
    assert (v.word, v.code) == ("IDLE", 0)  # the last run to end failed, long ago: nothing to pull


def test_patrol_exit_priority():
    assert patrol_exit([0, 5, 3, 4]) == 4
    assert patrol_exit([0, 5, 3]) == 3
    assert patrol_exit([0, 5]) == 5
    assert patrol_exit([0, 0]) == 0


def test_run_line_names_where_it_is():
    assert run_line(RUNNING) == "a3 running stage eval (2/3) 45% (45/100) eta 15m00s"
    assert run_line(FAILED) == "b1 failed at stage train: cgroup_oom"


PROBE = {"schema": "rgt.probe/1", "deps": {"psutil": True, "pynvml": True},
         "system": {"memory_total_bytes": 128e9}, "cgroup": {"version": "v2", "max_bytes": 60e9},
         "cpu": {"quota_cores": 8, "host_cores": 96},
         "gpu": {"driver_version": "535.104.05", "cuda_version": "12.2",
                 "gpus": [{"name": "NVIDIA A100"}, {"name": "NVIDIA A100"}]},
         "disks": [{"path": "/root/autodl-tmp", "role": "data", "bytes_used_pct": 62.0, "bytes_total": 5e10,
                    "inodes_used_pct": 12.0}],
         "kernel_log": {"readable": False}, "warnings": ["inode cap 200000 on /root/autodl-tmp"]}


def test_install_box_summary_from_a_probe():
    from rgt_client.install.render import box_summary
    text = "\n".join(box_summary({"python_version": "3.10.12", "python": "/usr/bin/python3", "probe": PROBE}))
    assert "python   3.10.12 (/usr/bin/python3); psutil yes, pynvml yes" in text
    assert "memory   cgroup v2, limit 60.0 GB, host 128.0 GB" in text
    assert "cpu      quota 8 cores, 96 host cores" in text
    assert "gpus     2 x NVIDIA A100 (driver 535.104.05, CUDA 12.2)" in text
    assert "disk     /root/autodl-tmp (data): 62% of 50.0 GB used, inodes 12%" in text
    assert "kernlog  not readable" in text and "note     inode cap 200000" in text
    text = "\n".join(box_summary({"python_version": "3.8.18", "probe": None, "probe_error": "Error: boom"}))
    assert "probe    unavailable: Error: boom" in text


def test_events_are_listed_when_asked():
    st = scenario([RUNNING])
    st["events"] = [{"at": "2025-01-02T09:59:00Z", "severity": "warning", "type": "disk_low", "summary": "91% used"}]
    assert "disk_low" not in render_status(st, {"host": "box"})
    assert "2025-01-02T09:59:00Z warning  disk_low           91% used" in render_status(st, {"host": "box", "show_events": True})


# -- what the user reads must be true --------------------------------------------------------

WARNED = {"name": "nan1", "state": "succeeded", "ended_at": "2025-01-02T09:50:00Z", "stages": [
    {"name": "train", "state": "succeeded", "attempt": 1, "duration_s": 30,
     "progress": {"done": 3, "total": 3, "fraction": 1.0, "eta_s": 0},
     "warnings": ["divergence: loss became NaN at step 1200 (line 88)"]},
    {"name": "eval", "state": "succeeded", "attempt": 1, "duration_s": 5}]}


def test_warned_stage_is_not_a_plain_success_in_status_watch_and_patrol():
    text = render_status(scenario([WARNED]), {"host": "box"})
    assert "⚠ train      succeeded   attempt 1 30s 100% (3/3) 1 warning" in text
    assert "      warning: divergence: loss became NaN at step 1200" in text
    assert "✓ eval" in text and "✓ train" not in text
    line = run_line(WARNED)
    assert line == "nan1 succeeded (2/2 stages done); ⚠ train: divergence: loss became NaN at step 1200 (line 88)"
    v = patrol_verdict(hs(scenario([WARNED])), since_s=86400)
    assert (v.word, v.code) == ("WARNED", 0) and "loss became NaN" in patrol_detail(v, "box")
    v = patrol_verdict(hs(scenario([WARNED, RUNNING])), since_s=86400)
    assert v.word == "WARNED" and "a3 running stage eval" in patrol_detail(v, "box")
    assert patrol_verdict(hs(scenario([WARNED])), since_s=60).word == "DONE"   # an old warning expires


def test_eta_only_for_running_stages():
    failed = copy.deepcopy(FAILED)
    failed["stages"][0]["progress"] = {"done": 45, "total": 100, "fraction": 0.45, "eta_s": 3538}
    text = render_status(scenario([failed]), {"host": "box"})
    assert "45% (45/100)" in text and "eta" not in text
    assert "eta" not in run_line(failed)
    assert "eta 15m00s" in render_status(scenario([RUNNING]), {"host": "box"})


def _runs(n_ended: int) -> list:
    runs = [{"name": "old%02d" % i, "state": "succeeded" if i % 3 else "failed",
             "created_at": "2025-01-01T%02d:00:00Z" % i, "ended_at": "2025-01-01T%02d:30:00Z" % i,
             "stages": [{"name": "s", "state": "succeeded" if i % 3 else "failed"}]} for i in range(n_ended)]
    return runs + [dict(RUNNING, created_at="2025-01-02T09:00:00Z")]


def test_status_shows_active_runs_and_the_last_ended_ones_newest_first():
    text = render_status(scenario(_runs(20)), {"host": "box"})
    shown = [ln.split()[1] for ln in text.splitlines() if ln.startswith("run ")]
    assert shown == ["a3", "old19", "old18", "old17", "old16", "old15"]
    assert "… 15 older ended runs not shown: rgt-client status box --all" in text
    every = render_status(scenario(_runs(20)), {"host": "box", "show_all": True})
    assert len([ln for ln in every.splitlines() if ln.startswith("run ")]) == 21 and "not shown" not in every
    few = render_status(scenario(_runs(3)), {"host": "box"})
    assert "not shown" not in few and len([ln for ln in few.splitlines() if ln.startswith("run ")]) == 4


def test_status_screens_fit_80_columns():
    for runs in ([RUNNING], [FAILED], [WARNED], [DONE]):
        st = scenario(runs)
        st["history"]["disk_used_pct"] = {"/root/.rgt": [40] * 60}
        for line in render_status(st, {"host": "box"}).splitlines():
            assert len(line) <= 80 or "workdir" in line, line


def test_a_dead_daemons_last_eta_is_not_shown():
    text = render_status(scenario([RUNNING], running=False, state="stopped"), {"host": "box"})
    assert "45% (45/100)" in text and "eta" not in text
    assert run_line(RUNNING, live=False) == "a3 running stage eval (2/3) 45% (45/100)"


def test_install_never_says_started_for_a_daemon_that_is_not_running():
    from rgt_client.install.bootstrap import InstallReport
    from rgt_client.install.render import install_summary
    def rep(agent):
        return InstallReport(Target("gpu1"), "a" * 64, {"home": "/r", "replaced": True}, {"status": {"agent": agent}},
                             {"name": "generic-ssh"}, "no marker", [], 0.0, 0.0)
    assert "  daemon   running, pid 42" in install_summary(rep({"state": "running", "pid": 42}))
    assert "  daemon   STALE after the restart: rgt-client status gpu1" in install_summary(rep({"state": "stale"}))
    assert "  daemon   STOPPED after the restart" in "\n".join(install_summary(rep({"running": False})))


def test_a_failed_stage_says_what_decided_its_cause_and_what_it_overruled():
    failed = copy.deepcopy(FAILED)
    failed["stages"][0]["cause"].update(
        decided_by="cgroup oom_kill counter +1 during the stage",
        overruled=["line 41: RuntimeError: DataLoader worker (pid 7) is killed by signal (code_error) overruled: x",
                   "line 50: second (code_error) overruled: x", "line 60: third (code_error) overruled: x"])
    text = render_status(scenario([failed]), {"host": "box"})
    assert "      decided by: cgroup oom_kill counter +1 during the stage" in text
    failed["stages"][0]["cause"]["decided_by"] = "oom_kill 0 -> 1"       # the first evidence: said once
    assert "decided by" not in render_status(scenario([failed]), {"host": "box"})
    over = [ln for ln in text.splitlines() if ln.startswith("      overruled:")]
    assert len(over) == 3 and "line 41: RuntimeError" in over[0]
    assert all(len(ln) <= 80 for ln in text.splitlines() if "workdir" not in ln)
    assert over[2] == "      overruled: … 1 more (rgt-client status --json)"
    plain = render_status(scenario([FAILED]), {"host": "box"})
    assert "decided by" not in plain and "overruled" not in plain


def _gpu(i, run=None):
    g = {"index": i, "name": "NVIDIA A100", "util_pct": 90.0, "memory_used_pct": 50.0,
         "temperature_c": 60, "power_w": 300}
    if run:
        g["run"] = run
    return g


def test_multi_gpu_status_and_patrol_say_which_run_holds_which_gpu():
    st = scenario([RUNNING])
    st["health"].update(gpu_source="nvml", gpus=[_gpu(0, "lr-1"), _gpu(1, "lr-2"), _gpu(2), _gpu(3, "lr-1")])
    text = render_status(st, {"host": "box"})
    assert "  gpus    3/4 GPUs busy: 0 lr-1, 1 lr-2, 3 lr-1" in text
    lines = text.splitlines()
    assert any(ln.startswith("  gpu1 ") and "· run lr-2" in ln for ln in lines)
    assert any(ln.startswith("  gpu2 ") and "· run" not in ln for ln in lines)
    v = patrol_verdict(hs(st), since_s=86400)
    assert patrol_detail(v, "box").endswith(" · 3/4 GPUs busy")
    st["health"]["gpus"] = [_gpu(0), _gpu(1)]   # nobody holds a GPU: no occupancy words at all
    assert "busy" not in render_status(st, {"host": "box"})
    assert "busy" not in patrol_detail(patrol_verdict(hs(st), since_s=86400), "box")


def test_a_slurm_stage_shows_its_job_and_why_it_waits():
    from rgt_client.status.render_run import stage_head
    st = {"name": "eval", "state": "pending", "slurm_job_id": "48213", "slurm_state": "PENDING",
          "slurm_reason": "Dependency", "slurm_waiting": {"text": "waiting for the stage before it", "blocked": False}}
    assert stage_head(st).endswith("slurm job 48213 PENDING (waiting for the stage before it)")
    held = dict(st, slurm_reason="JobHeldAdmin", slurm_waiting={"text": "held by an\x1b[31m admin", "blocked": True})
    line = stage_head(held)
    assert line.endswith(", blocked)") and "\x1b" not in line
    assert "slurm" not in stage_head({"name": "train", "state": "running"})


@pytest.mark.parametrize("run_state", ["failed", "cancelled", "interrupted"])
def test_stages_of_an_ended_run_that_will_not_run_are_not_shown_pending(run_state):
    run = copy.deepcopy(FAILED)
    run["state"] = run_state
    run["stages"] += [{"name": "eval", "state": "pending"}, {"name": "agg", "state": "pending"}]
    text = render_status(scenario([run]), {"host": "box"})
    assert "– eval       not run" in text and "– agg        not run" in text
    assert " pending" not in text.split("notifications")[0]
    live = render_status(scenario([RUNNING]), {"host": "box"})     # a live run's later stages still wait
    assert "· agg        pending" in live


def test_progress_says_its_age_when_status_trails_the_log():
    """`15% (3/20)` while the log was at 12/20: status.json is written every sample_every."""
    run = copy.deepcopy(RUNNING)
    run["stages"][1]["progress"].update(age_s=9.0)
    text = render_status(scenario([run]), {"host": "box"})
    assert "45% (45/100) eta 15m00s (as of 9s ago)" in text
    run["stages"][1]["progress"].update(age_s=1.5)
    assert "as of" not in render_status(scenario([run]), {"host": "box"})


def test_the_agent_adds_the_age_of_a_running_stages_progress(tmp_path):
    import json
    from boxagent.base.home import Home
    from boxagent.base.roots import Roots
    from boxagent.base.units import iso_utc
    from boxagent.wire import status as status_mod
    home = Home(str(tmp_path / "home"))
    home.ensure()
    doc = {"schema": status_mod.SCHEMA, "observed_at": iso_utc(1000.0), "agent": {}, "runs": [
        {"name": "r", "state": "running", "stages": [
            {"name": "train", "state": "running", "started_at": iso_utc(900.0),
             "progress": {"done": 3, "total": 20, "fraction": 0.15, "seen_at": 995.0}}]}]}
    (tmp_path / "home" / "status.json").write_text(json.dumps(doc))
    got = status_mod.read(home, Roots(), now=1004.0, n_events=0)
    assert got["runs"][0]["stages"][0]["progress"]["age_s"] == 9.0


def test_a_full_state_dir_says_the_room_it_needs_and_has_and_a_queued_run_waits_for_it():
    """A small disk stayed FULL at 86 % used: status said "free space there" without saying how
    much, and a queued run waited without a word."""
    queued = {"name": "q9", "state": "queued", "stages": [{"name": "train", "state": "pending"}]}
    full = dict(FULL, need_free_bytes=2 << 20, free_bytes=400 << 10)
    text = render_status(scenario([RUNNING, queued], storage=full), {"host": "box"})
    flat = " ".join(text.split())
    assert "it needs 2.1 MB free and has 409.6 KB: free space there" in flat, flat
    assert "run q9  queued\n  (waits for room in the agent's state dir: no new stage starts while it is full)" in text
    assert "waits for room" not in render_status(scenario([RUNNING, queued]), {"host": "box"})


def test_a_wait_that_lost_the_box_says_the_state_is_unknown_with_the_last_seen_and_its_age():
    import time as _time
    from rgt_client.status.poll import WatchEvent
    from rgt_client.status.render_poll import watch_lines
    ev = WatchEvent("gave_up", run=RUNNING, waited_s=600, seen_age_s=190.0, unknown_since=_time.time() - 185)
    line = watch_lines(ev, "gpu1", "a3")[0]
    assert "no answer from gpu1 since" in line and "the state of run a3 is unknown" in line
    assert "last seen 3m10s ago: a3 running stage eval (2/3)" in line and "still not finished" not in line
    assert "rgt-client status gpu1 --run a3" in line
