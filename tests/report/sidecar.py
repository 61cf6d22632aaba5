"""The daemon's side of the run log, at its seam, for end-to-end tests of real runs.

RunLog is a Part: the daemon hands it every event and, every sample, the status it wrote; the
engine hands each stage's metrics_pattern to the StageWatch that tails its log. Until the
daemon does that itself, this thread does exactly that from the files the real daemon writes
(events.jsonl, status.json, the stage logs). A daemon that runs the part itself says so in its
status (`metrics_history`, RunLog's status block): then this thread stays out of the way, so the
history file never has two writers.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional

from boxagent.base.home import Home
from boxagent.base.part import PartContext
from boxagent.base.roots import Roots
from boxagent.runlog.part import RunLog
from boxagent.triage import StageWatch


class Sidecar(threading.Thread):
    def __init__(self, home: Path, step_s: float, metrics: Optional[Dict[str, str]] = None, every: float = 0.2):
        super().__init__(daemon=True)
        self.home, self.every = Path(home), every
        self.metrics = metrics or {}                   # stage name -> metrics_pattern
        self.current: Dict[str, Any] = {}
        self.part = RunLog(step_s)
        self.part.start(PartContext(Home(str(home)), Roots(), {}, {}, "box", lambda: None, lambda: self.current))
        self.offset = 0
        self.watches: Dict[str, StageWatch] = {}
        self.ended: Dict[str, Dict[str, Any]] = {}     # log -> the metrics it ended with
        self._halt = threading.Event()
        self._status_mtime: Optional[int] = None
        self.errors: list = []
        self.passive: Optional[bool] = None           # decided by the first status.json read

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - reported by stop(), never lost in a thread
                self.errors.append(exc)
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
        self.step()
        if not self.passive:
            self.part.stop(1.0)
        assert not self.errors, self.errors

    def step(self) -> None:
        now = time.time()
        status = self._new_status()
        if self.passive is None:
            if status is None:
                return                   # no status yet: the events wait in the file
            self.passive = "metrics_history" in status
        if self.passive:
            return
        for ev in self._new_events():
            self.part.on_event(ev)
        if status is not None:
            self._add_metrics(status, now)
            self.current = status
            self.part.sample(now)

    def _new_events(self) -> list:
        try:
            with open(self.home / "events.jsonl", "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        complete = data[:data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def _new_status(self) -> Optional[Dict[str, Any]]:
        path = self.home / "status.json"
        try:
            mtime = path.stat().st_mtime_ns
            if mtime == self._status_mtime:
                return None
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        self._status_mtime = mtime
        return status

    def _add_metrics(self, status: Dict[str, Any], now: float) -> None:
        """What the engine's hook does: each stage's StageWatch with its metrics_pattern."""
        for run in status.get("runs") or []:
            for st in run.get("stages") or []:
                pattern, log = self.metrics.get(st.get("name")), st.get("log")
                if not pattern or not log:
                    continue
                if log in self.ended:
                    st["metrics"] = self.ended[log]
                    continue
                watch = self.watches.get(log)
                if watch is None:
                    watch = self.watches[log] = StageWatch(log, None, None, None, None, now, metrics_pattern=pattern)
                watch.poll(now)
                if st.get("state") != "running":
                    watch.finish(now)
                    watch.close()
                    self.ended[log] = watch.status_block().get("metrics")
                st["metrics"] = watch.status_block().get("metrics")
