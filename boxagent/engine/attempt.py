"""One running attempt, as the scheduler holds it between ticks: launched by this daemon or
re-adopted after a restart (the shim's files say which process is ours).

An attempt only reports facts: still running, never launched, or ended with {exit_code, signal,
ended_at, ...}. The scheduler decides what that means (diagnose, marker, retry, advance).
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, Optional

from boxagent.engine.ports import AttemptRef, StageProcesses
from boxagent.triage import StageWatch

RELAUNCH = {"relaunch": True}     # the daemon died between saving `running` and the shim's claim


class Attempt:
    def __init__(self, ref: AttemptRef, kind: str, sspec: Dict[str, Any], workdir: str,
                 procs: StageProcesses, watch: Any, started_at: float, launched_at: Optional[float],
                 wait_pid_ticks: Optional[int] = None):
        self.ref, self.kind, self.sspec, self.workdir = ref, kind, sspec, workdir
        self.procs, self.watch = procs, watch
        self.started_at = started_at
        self.launched_at = launched_at if launched_at is not None else started_at
        self.wait_pid_ticks = wait_pid_ticks     # wait.pid: the waited process's start ticks
        self.stop_reason: Optional[str] = None   # cancel | timeout | preempt
        self.kill_at: Optional[float] = None     # monotonic deadline to escalate TERM -> KILL
        self.killed = False
        self.cpu_mark: Optional[tuple] = None     # (wall time, CPU seconds) when the log fell silent
        self.timeout: Optional[float] = sspec.get("timeout")   # None: enforced elsewhere (Slurm)
        self.running_since: Optional[float] = None   # a queued job (Slurm): when it began to run

    @property
    def run(self) -> str:
        return self.ref.run

    @property
    def stage(self) -> str:
        return self.ref.stage

    # -- what the scheduler asks every tick
    def poll_log(self, now: float, until: float) -> list:
        """Read the log's new bytes in bounded slices until it is caught up or the monotonic
        clock passes `until`; the rest waits for the next pass."""
        specs: list = []
        while self.watch is not None:
            specs += self.watch.poll(now)
            if not self.watch.behind() or time.monotonic() >= until:
                break
        return specs

    def behind(self) -> bool:
        return self.watch is not None and self.watch.behind()

    def overdue(self, now: float) -> bool:
        timeout = self.timeout
        return timeout is not None and timeout > 0 and self.stop_reason is None and now - self.started_at > timeout

    def check(self, now: float, launch_grace: float) -> Optional[Dict[str, Any]]:
        """None while it runs; RELAUNCH; or how it ended."""
        if self.kind == "wait":
            return self._check_wait(now)
        info = self.procs.exit_info(self.ref)     # the shim writes it (then wakes us) just before exiting
        if info is not None:
            return info
        shim_state = self.procs.shim_state(self.ref)
        if shim_state in ("alive", "refused"):
            return None                           # refused: an earlier shim owns it; follow that one
        info = self.procs.exit_info(self.ref)     # it may have written it since the first look
        if info is not None:
            return info
        claimed = self.procs.claimed_for(self.ref, now)
        if claimed is None:
            if shim_state == "unknown":           # no shim of ours, none ever claimed it
                return RELAUNCH if now - self.launched_at > launch_grace else None
        elif shim_state == "unknown" and claimed < launch_grace:
            return None                           # claimed; its pid file is on its way
        if self.procs.command_alive(self.ref):
            return None                           # the shim was killed but the command runs on
        if self.stop_reason:
            return {"exit_code": None, "signal": 9 if self.killed else 15, "ended_at": now}
        return {"exit_code": None, "signal": None, "ended_at": now, "vanished": True}

    def _check_wait(self, now: float) -> Optional[Dict[str, Any]]:
        wait = self.sspec["wait"]
        done = self.stop_reason is not None
        if not done and "log" in wait:
            done = bool(self.watch is not None and (self.watch.success_seen or self.watch.fail_line))
        elif not done and "file" in wait:
            path = wait["file"]
            done = os.path.exists(path if os.path.isabs(path) else os.path.join(self.workdir, path))
        elif not done and "pid" in wait:
            done = not self.procs.pid_alive(wait["pid"], self.wait_pid_ticks)
        return {"exit_code": None, "signal": None, "ended_at": now} if done else None

    # -- stopping
    def stop(self, reason: str, grace: float, mono: float) -> None:
        """TERM the command now (a wait stage has nothing of ours to signal); KILL after `grace`."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.kind == "run":
            self.kill_at = mono + grace
            self.procs.signal(self.ref, signal.SIGTERM)

    def escalate(self, mono: float) -> None:
        if self.kill_at is not None and mono >= self.kill_at and not self.killed:
            self.killed = True
            self.procs.signal(self.ref, signal.SIGKILL)

    def cpu_while_silent(self, now: float, window: float) -> Optional[float]:
        """CPU seconds used while the log has been silent, scaled to `window` seconds (None until
        there is a mark to measure from). A mark is taken once the log is silent half a window."""
        last = (self.watch.last_output_at if self.watch is not None else None) or self.started_at
        silent = now - last
        if silent < window / 2:
            self.cpu_mark = None
            return None
        cpu = self.procs.cpu_seconds(self.ref)
        if cpu is None:
            return None
        if self.cpu_mark is None:
            self.cpu_mark = (now, cpu)
            return None
        at, before = self.cpu_mark
        return (cpu - before) * window / (now - at) if now > at else None

    def deadline(self, now: float, mono: float) -> Optional[float]:
        """Seconds until this attempt needs the loop without any wakeup (timeout, KILL)."""
        due = []
        if self.kill_at is not None and not self.killed:
            due.append(self.kill_at - mono)
        timeout = self.timeout
        if timeout and self.stop_reason is None:
            due.append(self.started_at + timeout - now + 0.01)
        return min(due) if due else None


def stage_log(store: Any, run: str, spec: Dict[str, Any], sspec: Dict[str, Any], attempt: int) -> Optional[str]:
    """The log an attempt is watched through: its own (a run stage), the file a wait stage names
    (relative to the workdir), or none."""
    if "wait" not in sspec:
        return store.log_path(run, sspec["name"], attempt)
    log = sspec["wait"].get("log")
    if not log:
        return None
    return log if log.startswith("/") else spec["workdir"].rstrip("/") + "/" + log


def stage_watch(rules: Any, sspec: Dict[str, Any], log: Optional[str], started_at: float) -> Optional[StageWatch]:
    if not log:
        return None
    wait = sspec.get("wait") or {}
    success = wait.get("pattern") if wait else sspec.get("success_pattern")
    fail = wait.get("fail_pattern") if wait else sspec.get("fail_pattern")
    return StageWatch(log, rules, success, fail, sspec.get("progress_pattern"), started_at,
                      metrics_pattern=sspec.get("metrics_pattern"))
