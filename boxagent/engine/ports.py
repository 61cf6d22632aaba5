"""The engine's ports: what the scheduler needs from the world, passed in (supervisor's `options`,
honcho's `_process_ctor`). The real implementations are engine/shimctl.py (stage processes on this box),
engine/slurmctl.py (stage attempts as Slurm jobs), engine/localrun.py and engine/slurmrun.py (the
backends: each one's processes and its rules), engine/journal.py (state + events on disk) and the
health part (the box). Tests pass small fakes, so retry, backoff, cancel-during-backoff, marker skip
and re-adoption run in-process in milliseconds; the real-daemon tests stay as integration tests.

These are Protocols: they document the contracts and mypy checks them; implementations need not
inherit from them.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Tuple

Spec = Dict[str, Any]


class AttemptRef(NamedTuple):
    run: str
    stage: str
    attempt: int


class StageProcesses(Protocol):
    """The OS side of stage attempts: the shim that runs each one, its files and its processes."""

    def launch(self, ref: AttemptRef, launch: Dict[str, Any], now: float) -> None:
        """Start the attempt (command, workdir, env in `launch`). A failure to start is recorded as
        the attempt's exit (exit_info), never raised."""
        ...

    def exit_info(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        """{exit_code, signal, ended_at[, error]} once the command ended, else None."""
        ...

    def claimed_for(self, ref: AttemptRef, now: float) -> Optional[float]:
        """Seconds since a shim claimed the attempt (it runs or ran), None if none ever did."""
        ...

    def shim_state(self, ref: AttemptRef) -> str:
        """'alive', 'gone', 'refused' (a second shim found the attempt claimed) or 'unknown'."""
        ...

    def command_alive(self, ref: AttemptRef) -> bool:
        """A process of the attempt's command still lives (the shim itself may be gone)."""
        ...

    def signal(self, ref: AttemptRef, sig: int) -> None:
        """Signal every process of the attempt's command (its group, and what left the group)."""
        ...

    def cpu_seconds(self, ref: AttemptRef) -> Optional[float]:
        """CPU seconds the attempt's live processes have used (None: unknown)."""
        ...

    def leftovers(self, ref: AttemptRef) -> List[str]:
        """'pid (command)' of processes the ended attempt left running."""
        ...

    def release(self, ref: AttemptRef) -> None:
        """The attempt has ended: forget it (reaping what we started)."""
        ...

    def identity(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        """What proves a process on this box is one of the attempt's: {token, cgroup, shim_pid,
        shim_start_ticks}; None when its processes run elsewhere (Slurm) or are not recorded yet."""
        ...

    def reap(self) -> None:
        """Collect exited shims this process started (no zombies)."""
        ...

    def pid_alive(self, pid: int, start_ticks: Optional[int]) -> bool:
        """A process we did not start (a wait stage's pid), identified by pid + start time."""
        ...

    def start_ticks(self, pid: int) -> Optional[int]:
        ...

    # -- backends that queue stages elsewhere (Slurm); the shim backend answers with nothing
    def refresh(self, now: float) -> bool:
        """Bring what the backend knows up to date, once a tick before any attempt is checked
        (Slurm: one squeue call for every job followed, when one is due). True when it learned
        something (then queue_view may say more)."""
        ...

    def wake_in(self, now: float) -> Optional[float]:
        """Seconds until the backend needs the loop without any wakeup (a poll is due), or None."""
        ...

    def queue_view(self, run: str) -> Dict[str, Dict[str, Any]]:
        """stage -> what the backend's queue says of the run's newest job for it: {job_id,
        attempt, submitted_at, state, reason, start_at, node[, error]}; {} for a box."""
        ...

    def run_ended(self, run: str) -> None:
        """The run failed or was cancelled: nothing of it may run on (a backend that queued its
        later stages cancels them)."""
        ...


class BoxReader(Protocol):
    """The health part, as the engine sees it: the box read NOW, at a stage's start and end."""

    def anchor(self, now: float) -> Dict[str, Any]:
        """A reading to compare against when the stage ends (stored with the stage)."""
        ...

    def since(self, anchor: Optional[Dict[str, Any]], now: float, paths: List[str],
              run: Optional[str] = None, stage: Optional[str] = None,
              gpus: Optional[List[int]] = None) -> Dict[str, Any]:
        """What happened between the anchor and now, read from the box now: oom_kill_delta (None =
        unknown), disks (statvfs of `paths` and the watched dirs), gpu_faults (on `gpus` only,
        when the run holds its own), cgroup_version. OOM kills in the window are attributed to
        run/stage (no second alert for them)."""
        ...

    def gpus(self) -> Optional[List[Tuple[Any, ...]]]:
        """The box's usable GPUs, (NVML index, UUID[, bytes other tenants hold, total bytes, who
        they are]): what runs can be given (slots.Gpu's fields, in order; None: unknown)."""
        ...

    def cpu_quota_cores(self) -> Optional[float]:
        ...

    def preflight(self, preflight: Dict[str, Any], now: float, workdir: str) -> List[Dict[str, Any]]:
        ...


class Journal(Protocol):
    """Where transitions become durable. commit() writes the run's state together with the events
    of its transition as one unit (state first, carrying the events; then the event log), so a
    crash between the two is repaired on the next start (the events are appended then)."""

    def commit(self, run: Any, specs: List[Spec], now: float) -> List[Dict[str, Any]]:
        ...

    def emit(self, spec: Spec, now: float) -> Dict[str, Any]:
        """An event not tied to a state change (a log stall, a suspiciously fast stage)."""
        ...

    def repair(self, run: Any) -> None:
        """At start-up: append the events a crash kept out of the log (run.pending_events)."""
        ...


class Traits(NamedTuple):
    """What a backend is, as facts the scheduler reads (never its name)."""
    queues_elsewhere: bool   # a queue not this host's (a cluster's) holds its attempts: the run starts at
                             # once, takes none of this host's GPU slots, and waiting there is no stall
    runs_elsewhere: bool     # its stages run on other machines: this host's reboot does not end them, a
                             # SIGTERM to the daemon is no preemption of them, this host's cgroup and GPU
                             # readings are not theirs (only the shared disks are)
    own_timeout: bool        # it enforces a stage's time limit itself, daemon or not
    shim_marks: bool         # the stage's own shim writes its marker (the chain goes on without the
                             # daemon): a marker of the attempt after the stage's last is that attempt's


class RunHost(Protocol):
    """What a backend may read of the scheduler: its tables and the stores they live in. The one
    write it may make is an active attempt's `running_since` (when its queued job began)."""
    runs: Dict[str, Any]
    specs: Dict[str, Dict[str, Any]]
    active: Dict[str, Any]
    store: Any
    journal: Journal
    box: BoxReader
    env_hints: Dict[str, str]

    def marked(self, run: Any, st: Any) -> bool:
        """The stage is skipped for its marker."""
        ...

    def sspec(self, run: str, stage: str) -> Dict[str, Any]:
        """The stage's table in the run's job."""
        ...


class Backend(Protocol):
    """Where a run's stage attempts run: one object per kind (engine/backends.py has the table, one
    row per backend), chosen per run by its job's `backend`. `procs` starts an attempt, polls it
    (exit_info, shim_state, claimed_for, command_alive), cancels it (signal) and reads its exit;
    the three methods are the rest of what truly differs."""
    name: str
    traits: Traits
    procs: StageProcesses

    def launch_record(self, host: RunHost, att: Any, run: Any) -> Dict[str, Any]:
        """What procs.launch gets for this attempt: command, workdir, env, log (and whatever else
        the backend needs: Slurm's sbatch options and the rest of the chain)."""
        ...

    def sync(self, host: RunHost, now: float) -> None:
        """procs.refresh() learned something: bring the records of this backend's runs up to date
        (a queue's job states and waits into the stages, for status)."""
        ...

    def left_behind(self, host: RunHost, run: Any, now: float) -> List[Dict[str, Any]]:
        """The run failed or was cancelled: the transitions of the stages it will not run (those
        a queue still held), each with why; [] where nothing waits elsewhere."""
        ...
