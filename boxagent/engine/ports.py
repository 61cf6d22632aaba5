"""The engine's ports: what the scheduler needs from the world, passed in (supervisor's `options`,
honcho's `_process_ctor`). The real implementations are engine/shimctl.py (stage processes on this box),
engine/slurmctl.py (stage attempts as Slurm jobs),
engine/journal.py (state + events on disk) and the health part (the box). Tests pass small fakes,
so retry, backoff, cancel-during-backoff, marker skip and re-adoption run in-process in
milliseconds; the real-daemon tests stay as integration tests.

These classes document the contracts; implementations need not inherit from them.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

Spec = Dict[str, Any]


class AttemptRef(NamedTuple):
    run: str
    stage: str
    attempt: int


class StageProcesses:
    """The OS side of stage attempts: the shim that runs each one, its files and its processes."""

    def launch(self, ref: AttemptRef, launch: Dict[str, Any], now: float) -> None:
        """Start the attempt (command, workdir, env in `launch`). A failure to start is recorded as
        the attempt's exit (exit_info), never raised."""
        raise NotImplementedError

    def exit_info(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        """{exit_code, signal, ended_at[, error]} once the command ended, else None."""
        raise NotImplementedError

    def claimed_for(self, ref: AttemptRef, now: float) -> Optional[float]:
        """Seconds since a shim claimed the attempt (it runs or ran), None if none ever did."""
        raise NotImplementedError

    def shim_state(self, ref: AttemptRef) -> str:
        """'alive', 'gone', 'refused' (a second shim found the attempt claimed) or 'unknown'."""
        raise NotImplementedError

    def command_alive(self, ref: AttemptRef) -> bool:
        """A process of the attempt's command still lives (the shim itself may be gone)."""
        raise NotImplementedError

    def signal(self, ref: AttemptRef, sig: int) -> None:
        """Signal every process of the attempt's command (its group, and what left the group)."""
        raise NotImplementedError

    def cpu_seconds(self, ref: AttemptRef) -> Optional[float]:
        """CPU seconds the attempt's live processes have used (None: unknown)."""
        raise NotImplementedError

    def leftovers(self, ref: AttemptRef) -> List[str]:
        """'pid (command)' of processes the ended attempt left running."""
        raise NotImplementedError

    def release(self, ref: AttemptRef) -> None:
        """The attempt has ended: forget it (reaping what we started)."""
        raise NotImplementedError

    def reap(self) -> None:
        """Collect exited shims this process started (no zombies)."""
        raise NotImplementedError

    def pid_alive(self, pid: int, start_ticks: Optional[int]) -> bool:
        """A process we did not start (a wait stage's pid), identified by pid + start time."""
        raise NotImplementedError

    def start_ticks(self, pid: int) -> Optional[int]:
        raise NotImplementedError

    # -- backends that queue stages elsewhere (Slurm); the shim backend answers with nothing
    def refresh(self, now: float) -> bool:
        """Bring what the backend knows up to date, once a tick before any attempt is checked
        (Slurm: one squeue call for every job followed, when one is due). True when it learned
        something (then queue_view may say more)."""
        raise NotImplementedError

    def wake_in(self, now: float) -> Optional[float]:
        """Seconds until the backend needs the loop without any wakeup (a poll is due), or None."""
        raise NotImplementedError

    def queue_view(self, run: str) -> Dict[str, Dict[str, Any]]:
        """stage -> what the backend's queue says of the run's newest job for it: {job_id,
        attempt, submitted_at, state, reason, start_at, node[, error]}; {} for a box."""
        raise NotImplementedError

    def run_ended(self, run: str) -> None:
        """The run failed or was cancelled: nothing of it may run on (a backend that queued its
        later stages cancels them)."""
        raise NotImplementedError


class BoxReader:
    """The health part, as the engine sees it: the box read NOW, at a stage's start and end."""

    def anchor(self, now: float) -> Dict[str, Any]:
        """A reading to compare against when the stage ends (stored with the stage)."""
        raise NotImplementedError

    def since(self, anchor: Optional[Dict[str, Any]], now: float, paths: List[str],
              run: Optional[str] = None, stage: Optional[str] = None,
              gpus: Optional[List[int]] = None) -> Dict[str, Any]:
        """What happened between the anchor and now, read from the box now: oom_kill_delta (None =
        unknown), disks (statvfs of `paths` and the watched dirs), gpu_faults (on `gpus` only,
        when the run holds its own), cgroup_version. OOM kills in the window are attributed to
        run/stage (no second alert for them)."""
        raise NotImplementedError

    def gpus(self) -> List[Tuple[Any, ...]]:
        """The box's usable GPUs, (NVML index, UUID[, bytes other tenants hold, total bytes, who
        they are]): what runs can be given (slots.Gpu's fields, in order)."""
        raise NotImplementedError

    def cpu_quota_cores(self) -> Optional[float]:
        raise NotImplementedError

    def preflight(self, preflight: Dict[str, Any], now: float, workdir: str) -> List[Dict[str, Any]]:
        raise NotImplementedError


class Journal:
    """Where transitions become durable. commit() writes the run's state together with the events
    of its transition as one unit (state first, carrying the events; then the event log), so a
    crash between the two is repaired on the next start (the events are appended then)."""

    def commit(self, run: Any, specs: List[Spec]) -> List[Dict[str, Any]]:
        raise NotImplementedError

    def emit(self, spec: Spec) -> Dict[str, Any]:
        """An event not tied to a state change (a log stall, a suspiciously fast stage)."""
        raise NotImplementedError

    def repair(self, run: Any) -> None:
        """At start-up: append the events a crash kept out of the log (run.pending_events)."""
        raise NotImplementedError
