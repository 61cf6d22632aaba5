"""The scheduler's rules in-process, in milliseconds: fakes at the ports (stage processes, the box,
the manifest), a real RunStore and a real event log in a temp dir. The real-daemon tests in
test_chain.py / test_lifecycle.py cover the same behaviours end to end with real processes.
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
from boxagent.engine.store import RunStore
from boxagent.wire.events import EventLog

SETTINGS = {"launch_grace": 1.0, "stop_grace": 2.0, "retry_backoff": 10.0}


class FakeProcs:
    """StageProcesses with no processes: the test says when an attempt ends."""

    def __init__(self) -> None:
        self.launches: List[AttemptRef] = []
        self.exits: Dict[AttemptRef, Dict[str, Any]] = {}
        self.claims: Dict[AttemptRef, float] = {}
        self.states: Dict[AttemptRef, str] = {}
        self.alive: set = set()
        self.signals: List[tuple] = []

    def launch(self, ref, launch, now):
        self.launches.append(ref)
        self.claims[ref], self.states[ref] = now, "alive"
        self.alive.add(ref)

    def exit_info(self, ref):
        return self.exits.get(ref)

    def claimed_for(self, ref, now):
        return now - self.claims[ref] if ref in self.claims else None

    def shim_state(self, ref):
        return self.states.get(ref, "unknown")

    def command_alive(self, ref):
        return ref in self.alive

    def signal(self, ref, sig):
        self.signals.append((ref, sig))

    def release(self, ref):
        pass

    def identity(self, ref):
        return None

    def leftovers(self, ref):
        return []

    def cpu_seconds(self, ref):
        return None

    def reap(self):
        pass

    def pid_alive(self, pid, ticks):
        return False

    def start_ticks(self, pid):
        return None

    def refresh(self, now):
        return False

    def wake_in(self, now):
        return None

    def queue_view(self, run):
        return {}

    def run_ended(self, run):
        pass

    # -- the test's side
    def end(self, ref, code: Optional[int] = 0, sig: Optional[int] = None) -> None:
        self.exits[ref] = {"exit_code": code, "signal": sig, "ended_at": 0}
        self.states[ref] = "gone"
        self.alive.discard(ref)


class FakeBox:
    def __init__(self) -> None:
        self.oom_delta = 0
        self.inventory: List[tuple] = []
        self.faults: List[Dict[str, Any]] = []

    def gpus(self):
        return list(self.inventory)

    def anchor(self, now):
        return {"at": now, "oom_kill": 0}

    def since(self, anchor, now, paths, run=None, stage=None, gpus=None):
        faults = [f for f in self.faults if gpus is None or f["gpu"] in gpus]
        return {"oom_kill_delta": self.oom_delta, "disks": [], "gpu_faults": faults, "cgroup_version": "v2"}

    def cpu_quota_cores(self):
        return None

    def preflight(self, preflight, now, workdir):
        return []


class DoneJob:
    manifest, error, elapsed_s, started_at = {"totals": {"files": 0, "bytes": 0}}, None, 0.0, 0.0

    def done(self):
        return True


class FakeFinisher:
    def start(self, run, spec):
        return DoneJob()

    def summary(self, run):
        return {"files": 0, "bytes": 0, "manifest": None}


class Rig:
    def __init__(self, tmp: Path):
        self.tmp, self.home = tmp, Home(str(tmp / "home"))
        self.home.ensure()
        self.procs, self.box, self.logged = FakeProcs(), FakeBox(), []
        self.sched = self.new_scheduler()

    def new_scheduler(self, boot_id: str = "boot-1") -> Scheduler:
        store = RunStore(self.home, self.logged.append)
        journal = FileJournal(store, EventLog(self.home.events, "box"), lambda e: None, self.logged.append)
        backends = BackendTable({"local": lambda: LocalBackend(self.procs)})
        return Scheduler(store, journal, backends, self.box, FakeFinisher(), dict(SETTINGS), {}, [], {},
                         boot_id, self.logged.append)

    def restart(self, now: float, boot_id: str = "boot-1") -> None:
        """A new daemon on the same files (the old one died without a word)."""
        self.sched = self.new_scheduler(boot_id)
        self.sched.load(now)
        self.sched.adopt_running(now)

    def submit(self, now: float, *stages: Dict[str, Any], **top: Any) -> None:
        job = {"name": "r", "workdir": str(self.tmp), "stage": list(stages)}
        job.update(top)
        self.sched.requests.submit({"spec": job}, now)

    def events(self) -> List[str]:
        try:
            lines = Path(self.home.events).read_text().splitlines()
        except OSError:
            return []
        return [json.loads(line)["type"] for line in lines if line.strip()]

    def run(self):
        return self.sched.runs["r"]

    def write_log(self, ref: AttemptRef, text: str) -> None:
        path = Path(self.home.stage_log(*ref))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def rig(tmp_path):
    return Rig(tmp_path)


def test_a_chain_advances_stage_by_stage_and_marks_each_success(rig):
    rig.submit(0.0, {"name": "a", "run": "x"}, {"name": "b", "run": "y"})
    rig.sched.tick(1.0, 1.0)
    a = AttemptRef("r", "a", 1)
    assert rig.procs.launches == [a]
    rig.procs.end(a, 0)
    rig.sched.tick(2.0, 2.0)
    assert rig.procs.launches == [a, AttemptRef("r", "b", 1)]           # b starts in the same tick
    rig.procs.end(AttemptRef("r", "b", 1), 0)
    rig.sched.tick(3.0, 3.0)
    rig.sched.tick(3.1, 3.1)                                            # the manifest job is collected
    assert rig.run().state == S.SUCCEEDED
    assert rig.sched.store.has_marker("r", "a") and rig.sched.store.has_marker("r", "b")
    assert rig.events() == ["run_queued", "run_started", "stage_started", "stage_succeeded", "stage_started",
                            "stage_succeeded", "run_succeeded"]


def test_a_transient_failure_waits_its_backoff_then_runs_the_same_command_again(rig):
    rig.submit(0.0, {"name": "s", "run": "x", "retries": 2},
               rule=[{"class": "network_transient", "pattern": "ConnectionError", "retryable": True}])
    rig.sched.tick(1.0, 1.0)
    first = AttemptRef("r", "s", 1)
    rig.write_log(first, "ConnectionError: reset by peer\n")
    rig.procs.end(first, 1)
    rig.sched.tick(2.0, 2.0)
    st = rig.run().stage("s")
    assert st.state == S.PENDING and st.retry_at == 12.0 and st.cause["class"] == "network_transient"
    assert rig.sched.views.next_deadline(2.0, 2.0) == pytest.approx(10.0)
    rig.sched.tick(11.9, 11.9)
    assert rig.procs.launches == [first]                               # not before its backoff
    rig.sched.tick(12.0, 12.0)
    assert rig.procs.launches == [first, AttemptRef("r", "s", 2)]
    rig.procs.end(AttemptRef("r", "s", 2), 0)
    rig.sched.tick(13.0, 13.0)
    rig.sched.tick(13.1, 13.1)
    assert rig.run().state == S.SUCCEEDED and "stage_retry" in rig.events()


def test_the_backoff_doubles_and_retries_run_out(rig):
    rig.submit(0.0, {"name": "s", "run": "x", "retries": 1},
               rule=[{"class": "network_transient", "pattern": "ConnectionError", "retryable": True}])
    rig.sched.tick(1.0, 1.0)
    for attempt, when in ((1, 2.0), (2, 13.0)):
        ref = AttemptRef("r", "s", attempt)
        rig.write_log(ref, "ConnectionError\n")
        rig.procs.end(ref, 1)
        rig.sched.tick(when, when)
        if attempt == 1:
            rig.sched.tick(12.0, 12.0)
    assert rig.run().state == S.FAILED and rig.run().stage("s").attempt == 2


def test_cancel_during_the_backoff_cancels_the_waiting_stage_and_the_run(rig):
    rig.submit(0.0, {"name": "s", "run": "x", "retries": 3},
               rule=[{"class": "network_transient", "pattern": "ConnectionError", "retryable": True}])
    rig.sched.tick(1.0, 1.0)
    ref = AttemptRef("r", "s", 1)
    rig.write_log(ref, "ConnectionError\n")
    rig.procs.end(ref, 1)
    rig.sched.tick(2.0, 2.0)
    rig.sched.requests.cancel("r", 3.0, 3.0)
    assert rig.run().state == S.CANCELLED and rig.run().stage("s").state == S.CANCELLED
    rig.sched.tick(20.0, 20.0)
    assert rig.procs.launches == [ref]                                 # the retry never runs
    assert rig.events()[-2:] == ["stage_cancelled", "run_cancelled"]


def test_cancel_of_a_running_stage_terms_it_then_kills_it_after_the_grace(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    ref = AttemptRef("r", "s", 1)
    rig.sched.requests.cancel("r", 2.0, 2.0)
    assert rig.procs.signals == [(ref, signal.SIGTERM)]
    rig.sched.tick(3.0, 3.0)
    assert rig.procs.signals == [(ref, signal.SIGTERM)]
    rig.sched.tick(4.5, 4.5)                                           # stop_grace 2 s passed
    assert rig.procs.signals[-1] == (ref, signal.SIGKILL)
    rig.procs.end(ref, None, 9)
    rig.sched.tick(5.0, 5.0)
    assert rig.run().state == S.CANCELLED and rig.run().stage("s").cause["class"] == "cancelled"


def test_resume_skips_the_stages_with_a_marker(rig):
    rig.submit(0.0, {"name": "a", "run": "x"}, {"name": "b", "run": "y"})
    rig.sched.tick(1.0, 1.0)
    rig.procs.end(AttemptRef("r", "a", 1), 0)
    rig.sched.tick(2.0, 2.0)
    rig.procs.end(AttemptRef("r", "b", 1), 2)
    rig.sched.tick(3.0, 3.0)
    assert rig.run().state == S.FAILED
    rig.sched.requests.resume("r", 4.0)
    rig.sched.tick(5.0, 5.0)
    assert rig.run().stage("a").state == S.SKIPPED
    assert rig.procs.launches[-1] == AttemptRef("r", "b", 2)


def test_a_restarted_daemon_readopts_the_running_attempt_and_never_launches_it_again(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    ref = AttemptRef("r", "s", 1)
    rig.restart(2.0)
    rig.sched.tick(2.0, 2.0)
    assert rig.procs.launches == [ref] and "r" in rig.sched.active
    rig.procs.end(ref, 0)
    rig.sched.tick(3.0, 3.0)
    rig.sched.tick(3.1, 3.1)
    assert rig.run().state == S.SUCCEEDED and rig.procs.launches == [ref]


def test_an_attempt_no_shim_ever_claimed_is_launched_once_after_the_grace(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.procs.launch = lambda ref, launch, now: None                  # the daemon died before Popen
    rig.sched.tick(1.0, 1.0)
    procs = FakeProcs()
    rig.procs = procs
    rig.restart(1.5)
    rig.sched.tick(1.5, 1.5)
    assert procs.launches == []                                        # within the launch grace
    rig.sched.tick(2.5, 2.5)
    assert procs.launches == [AttemptRef("r", "s", 1)]
    rig.sched.tick(3.0, 3.0)
    assert procs.launches == [AttemptRef("r", "s", 1)]


def test_a_cancel_sent_while_the_daemon_was_down_reaches_the_readopted_stage(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    rig.restart(5.0)
    rig.sched.requests.cancel("r", 5.0, 5.0)                                    # handled before the first tick
    assert rig.procs.signals == [(AttemptRef("r", "s", 1), signal.SIGTERM)]
    assert rig.run().state == S.RUNNING                                # cancelled once it has ended


def test_a_failed_stage_in_a_running_run_is_finished_on_load(rig):
    """The daemon died between the stage's transition and the run's."""
    rig.submit(0.0, {"name": "a", "run": "x"}, {"name": "b", "run": "y"})
    rig.sched.tick(1.0, 1.0)
    run = rig.run()
    cause = {"class": "code_error", "summary": "boom", "evidence": []}
    run.stage("a").end_badly(S.FAILED, 2.0, cause, 1, None, None, {})
    rig.sched.store.save(run)                                          # state on disk: stage failed, run running
    queued_after = {"name": "r2", "workdir": str(rig.tmp), "stage": [{"name": "s", "run": "z"}]}
    rig.sched.requests.submit({"spec": queued_after}, 2.0)
    rig.restart(3.0)
    rig.sched.tick(3.0, 3.0)
    assert rig.sched.runs["r"].state == S.FAILED and rig.sched.runs["r"].failed_stage == "a"
    assert rig.sched.runs["r2"].state == S.RUNNING                      # the queue moves on


def test_events_a_crash_kept_out_of_the_log_are_appended_once_on_load(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    rig.procs.end(AttemptRef("r", "s", 1), 3)
    events_path = Path(rig.home.events)
    before = events_path.read_bytes()
    rig.sched.tick(2.0, 2.0)
    events_path.write_bytes(before)                                    # the append never happened
    rig.restart(3.0)
    types = rig.events()
    assert types.count("stage_failed") == 1 and types.count("run_failed") == 1
    rig.restart(4.0)
    assert rig.events().count("run_failed") == 1                       # repaired once, not per start


def test_resume_is_refused_while_the_previous_attempt_lives(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    ref = AttemptRef("r", "s", 1)
    rig.procs.end(ref, 1)
    rig.sched.tick(2.0, 2.0)
    rig.procs.alive.add(ref)                                           # a child of attempt 1 lives on
    rig.sched.requests.resume("r", 3.0)
    assert rig.run().state == S.FAILED and "resume_refused" in rig.events()
    rig.procs.alive.discard(ref)
    rig.sched.requests.resume("r", 4.0)
    assert rig.run().state == S.QUEUED


def test_a_changed_boot_id_interrupts_the_stage_it_finds_running(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    rig.restart(2.0, boot_id="boot-2")
    assert rig.run().state == S.INTERRUPTED
    assert rig.run().stage("s").cause["class"] == "machine_restart"


def test_an_oom_kill_the_box_reports_decides_the_cause(rig):
    rig.submit(0.0, {"name": "s", "run": "x"})
    rig.sched.tick(1.0, 1.0)
    rig.box.oom_delta = 1
    rig.procs.end(AttemptRef("r", "s", 1), None, 9)
    rig.sched.tick(2.0, 2.0)
    assert rig.run().stage("s").cause["class"] == "cgroup_oom"
