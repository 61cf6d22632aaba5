"""SlurmProcesses' rules with a fake at the command seam (boxagent/slurm/cmd.py): the cases the
real cluster cannot show on demand (a job purged after MinJobAge, an sbatch that timed out
after submitting, a controller that does not answer). test_daemon_chain.py runs the rest on
the real cluster."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from boxagent.base.home import Home
from boxagent.engine.ports import AttemptRef
from boxagent.slurm.cmd import RC_TIMEOUT, Result
from boxagent.engine.slurmctl import SlurmProcesses


class FakeCluster:
    """sbatch, squeue, scontrol, scancel as a dict of jobs; `purge(id)` forgets one (MinJobAge)."""

    def __init__(self) -> None:
        self.jobs: Dict[str, Dict[str, str]] = {}
        self.calls: List[List[str]] = []
        self.next_id = 500
        self.sbatch_answer: Optional[Result] = None       # one scripted answer (refusal, timeout)
        self.refuse: Dict[str, Result] = {}                # job name -> sbatch's answer for it
        self.down = False

    def __call__(self, argv, timeout, env=None):
        self.calls.append(list(argv))
        if self.down:
            return Result(RC_TIMEOUT, "", "")
        return getattr(self, argv[0])(argv)

    def sbatch(self, argv):
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        self.next_id += 1
        job = str(self.next_id)
        self.jobs[job] = {"state": "PENDING", "reason": "Dependency" if "dependency" in opts else "Priority",
                          "name": opts["job-name"], "dependency": opts.get("dependency", ""),
                          "submit": time.strftime("%Y-%m-%dT%H:%M:%S"), "exit": "0:0"}
        answer, self.sbatch_answer = self.sbatch_answer, None
        answer = self.refuse.get(opts["job-name"], answer)
        if answer is not None:
            if answer.rc != RC_TIMEOUT:
                del self.jobs[job]                     # refused: nothing exists
            return answer
        return Result(0, job + "\n", "")

    def squeue(self, argv):
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        if "jobs" in opts:
            ids = [i for i in opts["jobs"].split(",") if i in self.jobs]
            if not ids:
                return Result(1, "", "slurm_load_jobs error: Invalid job id specified")
        else:
            ids = [i for i, j in self.jobs.items() if j["name"] in opts["name"].split(",")]
        return Result(0, "".join(self._line(i) for i in ids), "")

    def _line(self, i):
        j = self.jobs[i]
        node = "node7" if j["state"] not in ("PENDING",) and j.get("ran") else ""
        return "|".join([i, j["state"], j["reason"], j["submit"], "N/A", "N/A", node, "debug", "1:00:00",
                         j["dependency"] or "(null)", j["name"]]) + "\n"

    def scontrol(self, argv):
        if argv[1] == "show" and argv[2] == "config":
            return Result(1, "", "no config")
        j = self.jobs.get(argv[-1])
        if j is None:
            return Result(1, "", "Invalid job id specified")
        return Result(0, "JobId=%s JobName=%s JobState=%s ExitCode=%s\n" % (argv[-1], j["name"], j["state"], j["exit"]), "")

    def scancel(self, argv):
        for i in argv[1:]:
            if i in self.jobs:
                self.jobs[i]["state"] = "CANCELLED"
        return Result(0, "", "")

    # -- the test's side
    def end(self, job: str, state: str, exit: str = "0:0") -> None:
        self.jobs[job].update(state=state, exit=exit, ran=True)

    def purge(self, job: str) -> None:
        del self.jobs[job]

    def sbatches(self) -> List[List[str]]:
        return [c for c in self.calls if c[0] == "sbatch"]


@pytest.fixture
def rig(tmp_path):
    home = Home(str(tmp_path / "home"))
    home.ensure()
    cluster = FakeCluster()
    clock = [1000.0]
    procs = SlurmProcesses(home, runner=cluster, python="/usr/bin/python3", poll_s=5.0, exit_grace_s=10.0,
                           clock=lambda: clock[0], sacct=None)
    return home, cluster, procs, clock


def record(home, stage, attempt, chain=()):
    rec = {"command": "true", "workdir": "/tmp", "env": {"TOKEN": "s3cret"}, "slurm": True,
           "log": home.stage_log("r", stage, attempt)}
    rec["sbatch"] = {"options": {"partition": "debug"},
                     "chain": [{"stage": s, "attempt": a, "options": {}, "launch": dict(rec, log=home.stage_log("r", s, a))}
                               for s, a in chain]}
    return rec


def dependency(argv) -> Optional[str]:
    return next((a.split(":", 1)[1] for a in argv if a.startswith("--dependency=")), None)


def test_the_chain_is_submitted_afterok_and_no_secret_reaches_argv_or_script(rig):
    home, cluster, procs, _ = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1), ("c", 1)]), 1000.0)
    calls = cluster.sbatches()
    assert [dependency(c) for c in calls] == [None, "501", "502"]
    assert "--partition=debug" in calls[0] and "--partition=debug" not in calls[1]
    assert all("s3cret" not in " ".join(c) for c in calls)
    script = Path(home.stage_sbatch("r", "b", 1)).read_text()
    assert "s3cret" not in script and "exec /usr/bin/python3 -S" in script
    assert oct(os.stat(home.stage_launch("r", "b", 1)).st_mode & 0o777) == "0o600"
    assert json.loads(Path(home.stage_job("r", "c", 1)).read_text())["after"] == "502"


def test_the_next_stage_binds_to_its_job_never_submits_it_twice(rig):
    home, cluster, procs, _ = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1)]), 1000.0)
    cluster.end("501", "COMPLETED")
    procs.launch(AttemptRef("r", "b", 1), record(home, "b", 1), 1001.0)
    assert len(cluster.sbatches()) == 2
    assert procs.shim_state(AttemptRef("r", "b", 1)) == "alive"


def test_a_stage_after_a_purged_job_follows_the_marker(rig):
    """afterok on a job Slurm forgot runs at once: chain on it only while squeue knows it."""
    home, cluster, procs, _ = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1), 1000.0)      # b was never submitted
    cluster.end("501", "COMPLETED")
    cluster.purge("501")
    for path in (home.stage_claim("r", "a", 1), home.stage_exit("r", "a", 1)):    # as the shim left them
        Path(path).write_text('{"exit_code": 0}')
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1)]), 1001.0)
    assert len(cluster.sbatches()) == 1                                       # no marker: nothing submitted
    home.ensure_run("r")
    Path(home.marker("r", "a")).write_text("{}")
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1)]), 1002.0)
    assert dependency(cluster.sbatches()[-1]) is None and "--job-name=rgt:r:b" in cluster.sbatches()[-1]


def test_a_timed_out_sbatch_is_found_by_name_not_submitted_twice(rig):
    home, cluster, procs, _ = rig
    cluster.sbatch_answer = Result(RC_TIMEOUT, "", "")                       # submitted all the same
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1), 1000.0)
    assert procs.book.job_of(AttemptRef("r", "a", 1)) == "501"
    assert any(c[0] == "squeue" and any(a.startswith("--name=rgt:r:a") for a in c) for c in cluster.calls)
    fresh = SlurmProcesses(home, runner=cluster, sacct=None)                # a daemon that died after sbatch
    Path(home.stage_job("r", "a", 1)).unlink()
    fresh.launch(AttemptRef("r", "a", 1), record(home, "a", 1), 1001.0)
    assert len(cluster.sbatches()) == 1 and fresh.book.job_of(AttemptRef("r", "a", 1)) == "501"


def test_a_refused_stage_ends_with_slurms_words_and_a_refused_later_one_is_shown(rig):
    home, cluster, procs, _ = rig
    cluster.sbatch_answer = Result(1, "", "sbatch: error: Batch job submission failed: Invalid partition name specified")
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1)]), 1000.0)
    info = procs.exit_info(AttemptRef("r", "a", 1))
    assert "Invalid partition name specified" in info["error"] and "sinfo" in info["hint"]
    assert len(cluster.sbatches()) == 1                                       # the chain stopped there
    cluster.refuse["rgt:r:y"] = Result(1, "", "sbatch: error: Batch job submission failed: Invalid account")
    procs.launch(AttemptRef("r", "x", 1), record(home, "x", 1, [("y", 1)]), 1001.0)
    view = procs.queue_view("r")
    assert view["x"]["job_id"] and "Invalid account" in view["y"]["error"] and "sacctmgr" in view["y"]["error"]


def test_an_attempt_ends_when_slurm_names_its_end_and_the_exit_file_is_there(rig):
    home, cluster, procs, clock = rig
    ref = AttemptRef("r", "a", 1)
    procs.launch(ref, record(home, "a", 1), 1000.0)
    procs.refresh(1000.0)
    Path(home.stage_exit(*ref)).write_text(json.dumps({"exit_code": 0, "signal": None, "ended_at": 1000.0}))
    assert procs.exit_info(ref) is None and procs.urgent           # Slurm still says PENDING: ask again soon
    assert procs.wake_in(1000.0) <= 0.25
    cluster.end("501", "COMPLETED")
    procs.refresh(1000.3)
    info = procs.exit_info(ref)
    assert info["exit_code"] == 0 and info["slurm"]["state"] == "COMPLETED"


def test_an_end_without_exit_file_waits_its_grace_then_slurm_says(rig):
    home, cluster, procs, clock = rig
    ref = AttemptRef("r", "a", 1)
    procs.launch(ref, record(home, "a", 1), 1000.0)
    cluster.end("501", "NODE_FAIL", "0:0")
    procs.refresh(1000.0)
    assert procs.exit_info(ref) is None and procs.shim_state(ref) == "alive"
    clock[0] = 1011.0
    info = procs.exit_info(ref)
    assert info["no_exit_file"] and info["slurm"]["state"] == "NODE_FAIL" and info["slurm"]["node"] == "node7"


def test_a_shim_that_found_no_launch_file_says_the_home_must_be_shared(rig):
    home, cluster, procs, clock = rig
    ref = AttemptRef("r", "a", 1)
    procs.launch(ref, record(home, "a", 1), 1000.0)
    cluster.end("501", "FAILED", "76:0")
    procs.refresh(1000.0)
    assert procs.exit_info(ref) is None                              # the shared filesystem may lag
    clock[0] = 1020.0
    info = procs.exit_info(ref)
    assert info["exit_code"] == 76 and "found no launch file" in info["error"]
    assert "must be on a filesystem the compute nodes share" in info["hint"]


def test_a_controller_that_does_not_answer_loses_no_job(rig):
    home, cluster, procs, clock = rig
    ref = AttemptRef("r", "a", 1)
    procs.launch(ref, record(home, "a", 1), 1000.0)
    cluster.down = True
    procs.refresh(1000.0)
    clock[0] = 2000.0
    assert procs.exit_info(ref) is None and procs.command_alive(ref)
    assert procs.next_poll >= 1000.0 + 30.0                         # asked again later, not every tick


def test_run_ended_leaves_to_slurm_what_it_cancels_itself(rig):
    home, cluster, procs, _ = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1), ("c", 1)]), 1000.0)
    cluster.end("501", "FAILED", "3:0")
    procs.refresh(1000.0)
    procs.run_ended("r")
    assert not [c for c in cluster.calls if c[0] == "scancel"]
    procs.launch(AttemptRef("r", "x", 1), record(home, "x", 1, [("y", 1)]), 1001.0)
    cluster.jobs["504"]["state"] = "RUNNING"
    procs.refresh(1010.0)
    procs.run_ended("r")
    assert [c for c in cluster.calls if c[0] == "scancel"] == [["scancel", "504", "505"]]


def test_the_poll_is_one_squeue_call_for_every_job(rig):
    home, cluster, procs, _ = rig
    for i in range(20):
        procs.launch(AttemptRef("r%d" % i, "a", 1), dict(record(home, "a", 1), log=home.stage_log("r%d" % i, "a", 1)),
                     1000.0)
    before = len(cluster.calls)
    procs.refresh(1000.0)
    procs.refresh(1001.0)                                            # not due yet
    assert len(cluster.calls) - before == 1
    assert len([v for r in range(20) for v in procs.queue_view("r%d" % r).values() if v["state"] == "PENDING"]) == 20


def test_a_restarted_daemon_asks_about_its_jobs_at_once(rig):
    home, cluster, procs, clock = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1)]), 1000.0)
    cluster.end("501", "COMPLETED")
    again = SlurmProcesses(home, runner=cluster, poll_s=5.0, sacct=None, clock=lambda: clock[0])
    again.refresh(1000.0)                                            # nothing loaded yet: nothing asked
    assert again.queue_view("r")["a"]["state"] is None               # loaded, not asked
    assert again.wake_in(1000.0) <= 0.25                             # not its 15 s pending cadence
    assert again.refresh(1000.5) and again.queue_view("r")["a"]["state"] == "COMPLETED"
    assert not again.command_alive(AttemptRef("r", "a", 1))


def test_resume_right_after_a_restart_asks_slurm_before_it_refuses(rig):
    home, cluster, procs, _ = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1), 1000.0)
    cluster.end("501", "FAILED", "1:0")
    again = SlurmProcesses(home, runner=cluster, sacct=None)
    assert not again.command_alive(AttemptRef("r", "a", 1))


def test_a_stage_waiting_on_a_job_the_chain_replaced_is_submitted_again(rig):
    """A retry (or a resume) submits the failed stage anew; the stage after it may still wait on
    the old job for a moment (Slurm has not cancelled it yet): it is cancelled and chained anew."""
    home, cluster, procs, _ = rig
    procs.launch(AttemptRef("r", "a", 1), record(home, "a", 1, [("b", 1)]), 1000.0)
    cluster.end("501", "NODE_FAIL")
    procs.refresh(1000.0)
    procs.launch(AttemptRef("r", "a", 2), record(home, "a", 2, [("b", 1)]), 1010.0)
    assert [c for c in cluster.calls if c[0] == "scancel"] == [["scancel", "502"]]
    assert dependency(cluster.sbatches()[-1]) == "503" and procs.book.job_of(AttemptRef("r", "b", 1)) == "504"
