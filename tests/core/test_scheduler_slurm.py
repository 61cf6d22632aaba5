"""The scheduler's Slurm rules in-process: a fake SlurmProcesses at the port (jobs the test moves
through Slurm's states) inside the real SlurmBackend, the real BackendTable with the box's fake
beside it, a real RunStore and event log. tests/slurm/ runs the same rules on a real cluster.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from boxagent.base.home import Home
from boxagent.engine import states as S
from boxagent.engine.backends import BackendTable
from boxagent.engine.journal import FileJournal
from boxagent.engine.localrun import LocalBackend
from boxagent.engine.ports import AttemptRef
from boxagent.engine.scheduler import Scheduler
from boxagent.engine.slurmrun import SlurmBackend
from boxagent.engine.store import RunStore
from boxagent.slurm import states as slurm_states
from boxagent.wire.events import EventLog
from tests.core.test_scheduler import SETTINGS, FakeBox, FakeFinisher, FakeProcs


class FakeSlurm:
    """Jobs without a cluster: launch() records what the scheduler submitted (the stage and its
    chain), binds to an attempt's job that exists; the test ends jobs with a Slurm state."""

    def __init__(self) -> None:
        self.jobs: Dict[AttemptRef, Dict[str, Any]] = {}
        self.launches: List[Dict[str, Any]] = []
        self.exits: Dict[AttemptRef, Dict[str, Any]] = {}
        self.scancelled: List[str] = []
        self.ended_runs: List[str] = []
        self.refused: Dict[str, str] = {}              # stage -> sbatch's refusal (a later stage)
        self.next_id = 100

    def launch(self, ref, launch, now):
        chain = [(ref, launch.get("sbatch", {}).get("options"))] + [
            (AttemptRef(ref.run, c["stage"], c["attempt"]), c["options"]) for c in launch["sbatch"]["chain"]]
        self.launches.append({"ref": ref, "chain": [r for r, _o in chain], "record": launch})
        for r, options in chain:
            job = self.jobs.get(r)
            if job is not None and (job["state"] in ("PENDING", "RUNNING") or r in self.exits):
                continue                                   # bound: never submitted twice
            self.next_id += 1
            self.jobs[r] = {"job_id": str(self.next_id), "state": "PENDING", "reason": "Priority",
                            "submitted_at": now, "options": options, "node": None}

    def exit_info(self, ref):
        job = self.jobs.get(ref)
        if job is None or slurm_states.phase(job["state"]) != "ended":
            return None
        info = dict(self.exits.get(ref) or {"exit_code": None, "signal": None, "ended_at": 0, "no_exit_file": True})
        return dict(info, slurm=dict(job, job_id=job["job_id"]))

    def claimed_for(self, ref, now):
        return 0.0 if ref in self.jobs and self.jobs[ref]["state"] != "PENDING" else None

    def shim_state(self, ref):
        return "alive" if ref in self.jobs else "unknown"

    def command_alive(self, ref):
        return ref in self.jobs and slurm_states.phase(self.jobs[ref]["state"]) in ("pending", "running")

    def signal(self, ref, sig):
        job = self.jobs.get(ref)
        if job and slurm_states.phase(job["state"]) != "ended":
            self.scancelled.append(job["job_id"])

    def run_ended(self, run):
        self.ended_runs.append(run)

    def queue_view(self, run):
        out = {r.stage: {"job_id": j["job_id"], "attempt": r.attempt, "submitted_at": j["submitted_at"],
                         "state": j["state"], "reason": j["reason"], "start_at": 5.0, "node": j["node"]}
               for r, j in sorted(self.jobs.items(), key=lambda rj: rj[0].attempt) if r.run == run}
        out.update({stage: {"job_id": None, "state": None, "reason": None, "error": said}
                    for stage, said in self.refused.items()})
        return out

    def refresh(self, now):
        return True

    def wake_in(self, now):
        return 1.0 if self.jobs else None

    def cpu_seconds(self, ref):
        return None

    def leftovers(self, ref):
        return []

    def release(self, ref):
        pass

    def reap(self):
        pass

    def pid_alive(self, pid, ticks):
        return False

    def start_ticks(self, pid):
        return None

    # -- the test's side
    def set(self, ref: AttemptRef, state: str, reason: Optional[str] = None, **exit: Any) -> None:
        self.jobs[ref].update(state=state, reason=reason, node="node7")
        if exit:
            self.exits[ref] = dict({"signal": None, "ended_at": 0}, **exit)

    def cascade(self, run: str) -> None:
        """What --kill-on-invalid-dep does after a stage failed: the rest is cancelled."""
        for r, job in self.jobs.items():
            if r.run == run and job["state"] == "PENDING":
                job.update(state="CANCELLED", reason="DependencyNeverSatisfied")


class SlurmRig:
    def __init__(self, tmp: Path):
        self.tmp, self.home = tmp, Home(str(tmp / "home"))
        self.home.ensure()
        self.local, self.slurm, self.box, self.logged = FakeProcs(), FakeSlurm(), FakeBox(), []
        self.sched = self.new_scheduler()

    def new_scheduler(self, boot_id: str = "boot-1") -> Scheduler:
        store = RunStore(self.home, self.logged.append)
        journal = FileJournal(store, EventLog(self.home.events, "login1"), lambda e: None, self.logged.append)
        backends = BackendTable({"local": lambda: LocalBackend(self.local), "slurm": lambda: SlurmBackend(self.slurm)})
        return Scheduler(store, journal, backends, self.box, FakeFinisher(), dict(SETTINGS), {}, [], {}, boot_id,
                         self.logged.append)

    def restart(self, now: float, boot_id: str = "boot-1") -> None:
        self.sched = self.new_scheduler(boot_id)
        self.sched.load(now)
        self.sched.adopt_running(now)

    def submit(self, now: float, *stages: Dict[str, Any], name: str = "r", **top: Any) -> None:
        job = {"name": name, "workdir": str(self.tmp), "backend": "slurm", "stage": list(stages)}
        job.update(top)
        self.sched.requests.submit({"spec": job}, now)

    def events(self, full: bool = False) -> List[Any]:
        lines = Path(self.home.events).read_text().splitlines()
        got = [json.loads(line) for line in lines if line.strip()]
        return got if full else [e["type"] for e in got]

    def run(self, name: str = "r"):
        return self.sched.runs[name]

    def tick(self, t: float) -> None:
        self.sched.tick(t, t)


@pytest.fixture
def rig(tmp_path):
    return SlurmRig(tmp_path)


def ref(stage: str, attempt: int = 1, run: str = "r") -> AttemptRef:
    return AttemptRef(run, stage, attempt)


def three(**extra: Any) -> List[Dict[str, Any]]:
    return [dict({"name": n, "run": "echo " + n}, **extra) for n in ("prep", "train", "eval")]


def test_the_first_stage_submits_the_whole_chain_and_status_shows_every_job(rig):
    rig.submit(0.0, *three(), slurm={"partition": "gpu", "time": "2h"})
    rig.tick(1.0)
    (first,) = rig.slurm.launches
    assert first["chain"] == [ref("prep"), ref("train"), ref("eval")]
    record = first["record"]
    assert record["slurm"] is True and record["marker"]["path"] == rig.home.marker("r", "prep")
    assert record["sbatch"]["options"] == {"partition": "gpu", "time": "02:00:00"}
    rig.tick(2.0)
    st = {s.name: s for s in rig.run().stages}
    assert [(st[n].state, st[n].slurm_job_id, st[n].slurm_state, st[n].slurm_reason) for n in ("prep", "train", "eval")] \
        == [("running", "101", "PENDING", "Priority"), ("pending", "102", "PENDING", "Priority"),
            ("pending", "103", "PENDING", "Priority")]
    saved = json.loads(Path(rig.home.run_state("r")).read_text())
    assert saved["stages"][2]["slurm_job_id"] == "103"


def test_the_next_stage_binds_to_its_job_and_the_chain_ends_succeeded(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    for i, name in enumerate(("prep", "train", "eval")):
        rig.slurm.set(ref(name), "COMPLETED", exit_code=0)
        rig.tick(2.0 + i)
    rig.tick(9.0)
    assert rig.run().state == S.SUCCEEDED
    assert len({j["job_id"] for j in rig.slurm.jobs.values()}) == 3          # nothing submitted twice
    assert [l["ref"] for l in rig.slurm.launches] == [ref("prep"), ref("train"), ref("eval")]
    assert rig.events() == ["run_queued", "run_started", "stage_started", "stage_succeeded", "stage_started",
                            "stage_succeeded", "stage_started", "stage_succeeded", "run_succeeded"]


def test_a_failed_middle_stage_cancels_the_stages_left_behind_with_the_reason(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.slurm.set(ref("prep"), "COMPLETED", exit_code=0)
    rig.tick(2.0)
    rig.slurm.set(ref("train"), "FAILED", "NonZeroExitCode", exit_code=3)
    rig.slurm.cascade("r")
    rig.tick(3.0)
    run = rig.run()
    assert run.state == S.FAILED and run.failed_stage == "train"
    ev = run.stage("eval")
    assert ev.state == S.CANCELLED and ev.cause["class"] == "cancelled"
    assert ev.cause["summary"] == "stage train did not succeed"
    assert ev.cause["evidence"] == ["Slurm job 103: CANCELLED, reason DependencyNeverSatisfied"]
    assert rig.events()[-3:] == ["stage_failed", "stage_cancelled", "run_failed"]
    assert rig.slurm.ended_runs == ["r"]                         # whatever still waits is scancel'ed


def test_after_a_purge_nobody_says_why_and_rgt_cancels_the_rest_itself(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.slurm.set(ref("prep"), "FAILED", "NonZeroExitCode", exit_code=1)
    del rig.slurm.jobs[ref("eval")]                              # never submitted / forgotten
    rig.tick(2.0)
    causes = {s.name: s.cause for s in rig.run().stages if s.state == S.CANCELLED}
    assert sorted(causes) == ["eval", "train"]
    assert causes["eval"]["evidence"] == ["never submitted (the chain stopped before it)"]


def test_node_failure_retries_the_stage_and_resubmits_the_rest_of_the_chain(rig):
    rig.submit(0.0, *three(retries=1))
    rig.tick(1.0)
    rig.slurm.set(ref("prep"), "COMPLETED", exit_code=0)
    rig.tick(2.0)
    rig.slurm.set(ref("train"), "NODE_FAIL", "NodeDown")
    rig.slurm.cascade("r")
    rig.tick(3.0)
    train = rig.run().stage("train")
    assert train.state == S.PENDING and train.cause["class"] == "node_failure" and train.cause["retryable"]
    assert "node7" in train.cause["summary"] and "--exclude=node7" in train.cause["remediation"]
    rig.tick(3.0 + SETTINGS["retry_backoff"])
    last = rig.slurm.launches[-1]
    assert last["chain"] == [ref("train", 2), ref("eval", 1)]    # the failed stage and every one after it
    assert rig.slurm.jobs[ref("eval")]["state"] == "PENDING"     # resubmitted, not the cancelled one
    assert rig.events()[-2:] == ["stage_retry", "stage_started"]


def test_preemption_by_slurm_fails_without_retries_with_its_cause(rig):
    rig.submit(0.0, {"name": "train", "run": "x"})
    rig.tick(1.0)
    rig.slurm.set(ref("train"), "PREEMPTED", exit_code=None, signal=15)
    rig.tick(2.0)
    cause = rig.run().stage("train").cause
    assert (cause["class"], cause["retryable"]) == ("preempted", True)
    assert "higher-priority" in cause["remediation"]


def test_slurm_enforces_the_time_limit_not_rgt(rig):
    rig.submit(0.0, {"name": "train", "run": "x", "timeout": "90s"})
    rig.tick(1.0)
    assert rig.slurm.launches[0]["record"]["sbatch"]["options"] == {"time": "00:02:00"}
    rig.tick(500.0)
    assert rig.slurm.scancelled == [] and rig.run().stage("train").state == S.RUNNING
    rig.slurm.set(ref("train"), "TIMEOUT", "TimeLimit", exit_code=None, signal=15)
    rig.tick(501.0)
    cause = rig.run().stage("train").cause
    assert cause["class"] == "timeout" and "slurm.time" in cause["remediation"]


def test_this_hosts_oom_counter_is_never_blamed_on_a_compute_node(rig):
    rig.box.oom_delta = 1                 # the login node's cgroup saw an OOM kill meanwhile
    rig.submit(0.0, {"name": "train", "run": "x"})
    rig.tick(1.0)
    rig.slurm.set(ref("train"), "FAILED", "NonZeroExitCode", exit_code=1)
    rig.tick(2.0)
    assert rig.run().stage("train").cause["class"] == "nonzero_exit"


def test_a_slurm_run_starts_beside_a_run_that_holds_the_whole_box(rig):
    rig.sched.requests.submit({"spec": {"name": "box", "workdir": str(rig.tmp), "stage": [{"name": "s", "run": "x"}]}}, 0.0)
    rig.submit(0.5, {"name": "train", "run": "x"})
    rig.tick(1.0)
    assert rig.local.launches == [AttemptRef("box", "s", 1)] and rig.slurm.launches[0]["ref"] == ref("train")
    assert rig.run().gpus is None and rig.sched.views.gpu_holders() == {}


def test_a_wait_stage_splits_the_chain(rig, tmp_path):
    rig.submit(0.0, {"name": "prep", "run": "x"}, {"name": "gate", "wait": {"file": "go"}},
               {"name": "train", "run": "y"}, {"name": "eval", "run": "z"})
    rig.tick(1.0)
    assert rig.slurm.launches[0]["chain"] == [ref("prep")]
    rig.slurm.set(ref("prep"), "COMPLETED", exit_code=0)
    rig.tick(2.0)
    (tmp_path / "go").write_text("x")
    rig.tick(3.0)
    assert rig.slurm.launches[-1]["chain"] == [ref("train"), ref("eval")]


def test_marked_stages_are_left_out_of_the_chain(rig):
    rig.submit(0.0, *three())
    rig.sched.store.write_marker("r", "train", {"stage": "train"})
    rig.tick(1.0)
    assert rig.slurm.launches[0]["chain"] == [ref("prep"), ref("eval")]


def test_sigterm_to_the_daemon_leaves_slurm_runs_running_and_a_new_daemon_adopts_them(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.sched.frozen = True
    rig.sched.stop_all("preempt", 2.0)
    rig.sched.end_all(2.5, "preempt")
    assert rig.slurm.scancelled == [] and rig.run().state == S.RUNNING and rig.sched.active == {}
    rig.restart(10.0, boot_id="boot-2")                     # even a reboot of the login node
    assert rig.sched.active["r"].stage == "prep" and rig.run().stage("prep").state == S.RUNNING
    rig.slurm.set(ref("prep"), "COMPLETED", exit_code=0)
    rig.tick(11.0)
    assert rig.run().stage("prep").state == S.SUCCEEDED


def test_cancel_scancels_the_running_job_and_cancels_the_rest(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.slurm.set(ref("prep"), "RUNNING")
    rig.sched.requests.cancel("r", 2.0, 2.0)
    assert rig.slurm.scancelled == ["101"]
    rig.slurm.set(ref("prep"), "CANCELLED", exit_code=None, signal=15)
    rig.tick(3.0)
    assert rig.run().state == S.CANCELLED and rig.run().stage("prep").cause["class"] == "cancelled"
    assert [s.state for s in rig.run().stages] == [S.CANCELLED] * 3
    assert rig.slurm.ended_runs == ["r"]


def test_cancelled_from_outside_is_killed_with_who(rig):
    rig.submit(0.0, {"name": "train", "run": "x"})
    rig.tick(1.0)
    rig.slurm.set(ref("train"), "CANCELLED", exit_code=None, signal=15)
    rig.slurm.jobs[ref("train")]["cancelled_by_uid"] = 0
    rig.tick(2.0)
    cause = rig.run().stage("train").cause
    assert cause["class"] == "killed" and "cancelled from outside rgt by root (uid 0)" in cause["summary"]


def test_a_job_that_will_never_start_is_told_once(rig):
    rig.submit(0.0, {"name": "train", "run": "x"})
    rig.tick(1.0)
    rig.slurm.jobs[ref("train")]["reason"] = "PartitionTimeLimit"
    rig.tick(2.0)
    rig.tick(3.0)
    blocked = [e for e in rig.events(full=True) if e["type"] == "slurm_blocked"]
    assert len(blocked) == 1 and "above the partition's limit" in blocked[0]["summary"]


def test_resume_shows_no_job_of_before_the_resume(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.slurm.set(ref("prep"), "FAILED", "NonZeroExitCode", exit_code=1)
    rig.slurm.cascade("r")
    rig.tick(2.0)
    rig.sched.requests.resume("r", 3.0)
    rig.slurm.jobs.clear()                      # (the old jobs are forgotten; none resubmitted yet)
    assert [s.slurm_job_id for s in rig.run().stages] == [None, None, None]
    rig.tick(4.0)
    assert rig.slurm.launches[-1]["chain"] == [ref("prep", 2), ref("train"), ref("eval")]


def test_a_box_runs_sigterm_still_interrupts_it(rig):
    """The box's rules are unchanged beside a Slurm run."""
    rig.sched.requests.submit({"spec": {"name": "box", "workdir": str(rig.tmp), "stage": [{"name": "s", "run": "x"}]}}, 0.0)
    rig.submit(0.5, {"name": "train", "run": "x"})
    rig.tick(1.0)
    rig.sched.frozen = True
    rig.sched.stop_all("preempt", 2.0)
    assert rig.local.signals == [(AttemptRef("box", "s", 1), signal.SIGTERM)]
    rig.sched.end_all(3.0, "preempt")
    assert rig.sched.runs["box"].state == S.INTERRUPTED and rig.run().state == S.RUNNING


def test_a_stage_the_chain_ran_ahead_is_judged_and_reported_not_skipped(rig):
    """The shim writes a Slurm stage's marker itself: a stage that already succeeded when the
    daemon gets to it (it was away, or slower) is its attempt's success, not a skip."""
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.sched.store.write_marker("r", "train", {"stage": "train", "attempt": 1})   # as the shim on the node
    rig.slurm.set(ref("train"), "COMPLETED", exit_code=0)
    rig.slurm.set(ref("prep"), "COMPLETED", exit_code=0)
    rig.tick(2.0)
    rig.tick(3.0)
    assert rig.run().stage("train").state == S.SUCCEEDED and rig.run().stage("train").attempt == 1
    assert "stage_skipped" not in rig.events()
    assert [l["ref"] for l in rig.slurm.launches] == [ref("prep"), ref("train"), ref("eval")]


def test_a_marker_of_an_earlier_attempt_still_skips(rig):
    rig.submit(0.0, *three())
    rig.tick(1.0)
    rig.slurm.set(ref("prep"), "COMPLETED", exit_code=0)
    rig.tick(2.0)
    rig.slurm.set(ref("train"), "FAILED", "NonZeroExitCode", exit_code=1)
    rig.slurm.cascade("r")
    rig.tick(3.0)
    rig.sched.requests.resume("r", 4.0)
    rig.tick(5.0)
    assert rig.run().stage("prep").state == S.SKIPPED
    assert rig.slurm.launches[-1]["chain"] == [ref("train", 2), ref("eval")]


def test_a_later_stage_whose_sbatch_was_refused_is_told_now_not_when_the_chain_gets_there(rig):
    rig.submit(0.0, *three())
    rig.slurm.refused["eval"] = "sbatch refused the job: Invalid qos specification"
    rig.tick(1.0)
    rig.tick(2.0)
    (told,) = [e for e in rig.events(full=True) if e["type"] == "slurm_blocked"]
    assert told["stage"] == "eval" and "Invalid qos" in told["summary"] and told["severity"] == "warning"
