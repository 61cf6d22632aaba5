"""What the daemon asks of the engine between decisions: when it must wake next, which stages
look stalled, who holds which GPU, a running stage's live blocks for status.json. A part of the
Scheduler (it reads the scheduler's own tables and decides nothing), kept in its own module.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.engine import states as S
from boxagent.engine.facts import newest_mtime
from boxagent.engine.records import Run


class Views:
    # provided by the Scheduler
    runs: Dict[str, Run]
    specs: Dict[str, Dict[str, Any]]
    active: Dict[str, Any]
    finalizing: Dict[str, Any]
    procs: Any
    is_slurm: Any        # SlurmRules
    _emit_for: Any       # Scheduler

    def next_deadline(self, now: float, mono: float) -> float:
        """Seconds until something is due without any wakeup: a retry backoff ends, a stage times
        out, a TERM escalates to KILL. The loop sleeps no longer than this (the tick may be long)."""
        due = [3600.0]
        backend = self.procs.wake_in(now)
        if backend is not None:
            due.append(backend)
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
            if self.is_slurm(att.run) and att.kind == "run" and (att.running_since is None or now - att.running_since < after):
                continue            # waiting in the queue (or just started) is no stall
            mtime = newest_mtime(spec["workdir"], att.sspec.get("expect") or [])
            cpu_s = att.cpu_while_silent(now, after)
            for ev in att.watch.stall_check(now, after, mtime, gpu_busy, cpu_s=cpu_s):
                self._emit_for(att, ev, now)

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

    def live(self, run: str) -> Optional[Dict[str, Any]]:
        """The running stage's live blocks (progress, metrics) for status.json."""
        att = self.active.get(run)
        return att.watch.status_block() if att is not None and att.watch is not None else None
