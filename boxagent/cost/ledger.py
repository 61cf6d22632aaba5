"""cost.json: what the cost part remembers across daemon restarts (tmp -> fsync -> rename).

  since        the agent's FIRST start on this box (epoch seconds); never moves
  up_s         seconds the box was up (billed) since then; last_at: when it was last counted
  idle         {since, sent, next_at}: the idle clock and its reminders
  budget_sent  thresholds already told ("80", "100"); eta_sent: "run/stage/attempt" keys told
  deadline     {at, sent}: the declared stop deadline and which warnings ("24h", "2h") went out
  runs         {name: {start, end, prior_s}}: each run's paid wall time; a resumed run keeps the
               time of its earlier attempts in prior_s

Paid time is the time the box was up, not the time since `since`: a box powered off for three
days (AutoDL's power-off, RunPod's stop) did not bill compute meanwhile. The daemon may be down
while the box is up (a crash, an upgrade), and that time is billed: on start, the gap since
`last_at` counts unless the box itself came up after it (box_up_since).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from boxagent.base.fsutil import atomic_write_json, read_json

SCHEMA = "rgt.cost/1"
MAX_RUNS = 200           # runs remembered (status shows at most what the box keeps)
MAX_ETA_KEYS = 64


def _num(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Ledger:
    def __init__(self, since: float):
        self.since = since
        self.up_s = 0.0
        self.last_at = since
        self.idle: Dict[str, Any] = {}
        self.budget_sent: List[str] = []
        self.eta_sent: List[str] = []
        self.deadline: Dict[str, Any] = {}
        self.runs: Dict[str, Dict[str, Any]] = {}

    # -- the file
    @classmethod
    def load(cls, path: str, now: float) -> "Ledger":
        """The ledger on disk, or a new one starting now (first start, or an unreadable file)."""
        raw = read_json(path)
        if not isinstance(raw, dict) or raw.get("schema") != SCHEMA or _num(raw.get("since")) is None:
            return cls(now)
        led = cls(float(raw["since"]))
        led.up_s = max(0.0, _num(raw.get("up_s")) or 0.0)
        led.last_at = _num(raw.get("last_at")) or led.since
        led.idle = raw["idle"] if isinstance(raw.get("idle"), dict) else {}
        led.budget_sent = [str(x) for x in raw.get("budget_sent") or [] if isinstance(x, str)]
        led.eta_sent = [str(x) for x in raw.get("eta_sent") or [] if isinstance(x, str)][-MAX_ETA_KEYS:]
        led.deadline = raw["deadline"] if isinstance(raw.get("deadline"), dict) else {}
        runs = raw.get("runs") if isinstance(raw.get("runs"), dict) else {}
        for name, ent in runs.items():
            if isinstance(ent, dict) and _num(ent.get("start")) is not None:
                led.runs[str(name)] = {"start": float(ent["start"]), "end": _num(ent.get("end")),
                                       "prior_s": max(0.0, _num(ent.get("prior_s")) or 0.0)}
        return led

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": SCHEMA, "since": self.since, "up_s": round(self.up_s, 3), "last_at": self.last_at,
                "idle": self.idle, "budget_sent": self.budget_sent, "eta_sent": self.eta_sent[-MAX_ETA_KEYS:],
                "deadline": self.deadline, "runs": self.runs}

    def save(self, path: str) -> None:
        atomic_write_json(path, self.to_dict(), mode=0o600)

    # -- paid time
    def advance(self, now: float) -> None:
        """Count the time since last_at as up (the daemon was watching, or the box was up)."""
        self.up_s += max(0.0, now - self.last_at)     # a clock stepped back counts nothing
        self.last_at = max(self.last_at, now)

    def reopen(self, now: float, up_since: Optional[float]) -> bool:
        """The daemon starts again. Count the gap since last_at if the box stayed up meanwhile;
        if it came up after last_at (powered off, stopped, restarted), only the time since.
        True when the box itself restarted (the idle clock starts over)."""
        if up_since is not None and up_since > self.last_at:
            self.up_s += max(0.0, now - up_since)
            self.last_at = max(self.last_at, now)
            return True
        self.advance(now)
        return False

    def hours(self, now: float) -> float:
        return (self.up_s + max(0.0, now - self.last_at)) / 3600.0

    # -- runs
    def run_seconds(self, name: str, now: float) -> Optional[float]:
        ent = self.runs.get(name)
        if ent is None:
            return None
        end = ent["end"] if ent["end"] is not None else now
        return ent["prior_s"] + max(0.0, end - ent["start"])

    def run_started(self, name: str, at: float) -> None:
        ent = self.runs.get(name)
        prior = 0.0
        if ent is not None:
            prior = ent["prior_s"] + (max(0.0, ent["end"] - ent["start"]) if ent["end"] is not None else 0.0)
        self.runs.pop(name, None)
        self.runs[name] = {"start": at, "end": None, "prior_s": prior}
        while len(self.runs) > MAX_RUNS:
            self.runs.pop(next(iter(self.runs)))

    def run_ended(self, name: str, at: float) -> None:
        ent = self.runs.get(name)
        if ent is not None and ent["end"] is None:
            ent["end"] = max(at, ent["start"])


def box_up_since(proc_root: str) -> Optional[float]:
    """When this box (a VM, or a container in its own pid namespace) last came up: its pid 1
    started then (the kernel's btime + pid 1's start ticks). None where /proc does not say."""
    try:
        with open(os.path.join(proc_root, "stat"), "rb") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
        with open(os.path.join(proc_root, "1", "stat"), "rb") as fh:
            data = fh.read().decode("ascii", "replace")
        ticks = int(data[data.rfind(")") + 2:].split()[19])
        return btime + ticks / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
