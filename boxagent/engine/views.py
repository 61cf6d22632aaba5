"""What the daemon asks of the engine between decisions: when it must wake next, which stages
look stalled, who holds which GPU, a running stage's live blocks for status.json. It reads the
scheduler's tables (the same dicts, shared) and decides nothing; the scheduler makes one.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from boxagent.engine import states as S
from boxagent.engine.facts import newest_mtime
from boxagent.engine.backends import BackendTable
from boxagent.engine.ports import Backend
from boxagent.engine.records import Run


class Views:
    def __init__(self, runs: Dict[str, Run], specs: Dict[str, Dict[str, Any]], active: Dict[str, Any],
                 finalizing: Dict[str, Any], backends: BackendTable, backend: Callable[[str], Backend],
                 emit_for: Callable[[Any, Dict[str, Any], float], None]):
        self.runs, self.specs, self.active, self.finalizing = runs, specs, active, finalizing
        self.backends, self.backend, self.emit_for = backends, backend, emit_for

    def next_deadline(self, now: float, mono: float) -> float:
        """Seconds until something is due without any wakeup: a retry backoff ends, a stage times
        out, a TERM escalates to KILL. The loop sleeps no longer than this (the tick may be long)."""
        due = [3600.0]
        for backend in self.backends.made():
            wake = backend.procs.wake_in(now)
            if wake is not None:
                due.append(wake)
        if self.finalizing:
            due.append(1.0)    # the worker wakes us when it ends; this is only a backstop
        for run in self.runs.values():
            if run.state == S.RUNNING:
                due += [st.retry_at - now for st in run.stages if st.state == S.PENDING and st.retry_at]
        for att in self.active.values():
            d = att.deadline(now, mono)
            if d is not None:
                due.append(d)
        return max(0.0, min(due))

    def stall_checks(self, now: float, default_stall: Optional[float], gpu_busy: Optional[bool]) -> None:
        for att in list(self.active.values()):
            spec = self.specs[att.run]
            after = att.sspec.get("stall_after") or spec.get("stall_after") or default_stall
            if not after or att.watch is None:
                continue
            if att.kind == "run" and self.backend(att.run).traits.queues_elsewhere \
                    and (att.running_since is None or now - att.running_since < after):
                continue            # waiting in the queue (or just started) is no stall
            mtime = newest_mtime(spec["workdir"], att.sspec.get("expect") or [])
            cpu_s = att.cpu_while_silent(now, after)
            for ev in att.watch.stall_check(now, after, mtime, gpu_busy, cpu_s=cpu_s):
                self.emit_for(att, ev, now)

    def behind(self) -> bool:
        """A stage log still holds unread bytes: the loop should come back at once, not after
        its idle tick (it keeps its heartbeat between slices)."""
        return any(att.behind() for att in self.active.values())

    def running_pairs(self) -> List[tuple]:
        return [(a.run, a.stage) for a in self.active.values()]

    def gpu_holders(self) -> Dict[int, tuple]:
        """GPU index -> (run, running stage or None) for every running run on its own GPUs."""
        out: Dict[int, tuple] = {}
        for run in self.runs.values():
            if run.state == S.RUNNING and run.gpus:
                att = self.active.get(run.name)
                for i in run.gpus:
                    out[i] = (run.name, att.stage if att is not None else None)
        return out

    def identities(self) -> List[Dict[str, Any]]:
        """{run, stage, token, cgroup, shim_pid, shim_start_ticks} of every running attempt whose
        processes live on this box: what tells its GPU processes from another tenant's."""
        out: List[Dict[str, Any]] = []
        for att in list(self.active.values()):
            ident = self.backend(att.run).procs.identity(att.ref)
            if ident:
                out.append(dict(ident, run=att.run, stage=att.stage))
        return out

    def live(self, run: str) -> Optional[Dict[str, Any]]:
        """The running stage's live blocks (progress, metrics) for status.json."""
        att = self.active.get(run)
        return att.watch.status_block() if att is not None and att.watch is not None else None
