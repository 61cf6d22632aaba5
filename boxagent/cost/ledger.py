"""cost.json: what the cost part remembers across daemon restarts (tmp -> fsync -> rename).

  since        the agent's FIRST start on this box (epoch seconds); never moves
  up_s         seconds the box was up (billed) since then, measured with a monotonic clock
  last_at      the wall clock when it was last counted (to count a daemon's downtime at start)
  meter_at     the meter's own clock: seconds that only ever move forward (the idle clock and
               its reminders run on it), so a wall clock stepped back (an NTP step, a box restored
               from a snapshot) or forward neither freezes nor jumps them
  idle         {since, sent, next_at} on the meter's clock: the idle clock and its reminders
  idle_box_s   box-seconds no run held (share.py): the box's idle cost
  budget_sent  thresholds already told ("80", "100"); eta_sent: "run/stage/attempt" keys told
  deadline     {at, sent}: the declared stop deadline and which warnings ("24h", "2h") went out
  runs         {name: {start, end, want, run_s, box_s, cluster, gpu_s}}: each run's wall time
               (run_s) and its share of the box's time (box_s; share.py) over all its attempts;
               a run on a cluster's nodes (`cluster`: Ray places it, maybe on another box) holds
               no share of this box: its GPU-seconds (gpu_s: `gpus` x its wall time) are priced
               per GPU instead
  folded       {runs, run_s, box_s}: the ended runs folded out of `runs` past MAX_RUNS, so the
               file stays bounded and the sum of all runs' costs is still kept

Paid time is the time the box was up, not the time since `since`: a box powered off for three
days (AutoDL's power-off, RunPod's stop) did not bill compute meanwhile. The daemon may be down
while the box is up (a crash, an upgrade), and that time is billed: on start, the gap since
`last_at` counts unless the box itself came up after it (box_up_since); it is charged to the
runs that were running when the daemon last looked.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from boxagent.base import numbers
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.cost import share

SCHEMA = "rgt.cost/2"
OLD_SCHEMAS = ("rgt.cost/1",)
MAX_RUNS = 200           # runs kept by name; older ended runs are folded into `folded`
MAX_ETA_KEYS = 64


def _num(value: Any, kind: str = "duration_s") -> Optional[float]:
    return numbers.number(kind, value)


class Ledger:
    def __init__(self, since: float):
        self.since = since
        self.up_s = 0.0
        self.last_at = since
        self.meter_at = since
        self.wall_offset = 0.0               # wall - meter, at the last advance (for display)
        self.idle: Dict[str, Any] = {}
        self.idle_box_s = 0.0
        self.budget_sent: List[str] = []
        self.eta_sent: List[str] = []
        self.deadline: Dict[str, Any] = {}
        self.runs: Dict[str, Dict[str, Any]] = {}
        self.folded: Dict[str, float] = {"runs": 0, "run_s": 0.0, "box_s": 0.0, "gpu_s": 0.0}
        self.box_gpus: Optional[int] = None  # the box's usable GPUs (from the health sample)
        self._mono: Optional[float] = None   # the monotonic clock at the last advance (memory only)

    # -- the file
    @classmethod
    def load(cls, path: str, now: float) -> "Ledger":
        """The ledger on disk, or a new one starting now (first start, or an unreadable file)."""
        raw = read_json(path)
        if not isinstance(raw, dict) or raw.get("schema") not in (SCHEMA,) + OLD_SCHEMAS \
                or _num(raw.get("since"), "epoch_s") is None:
            return cls(now)
        led = cls(float(raw["since"]))
        led.up_s = _num(raw.get("up_s")) or 0.0
        led.last_at = _num(raw.get("last_at"), "epoch_s") or led.since
        led.budget_sent = [str(x) for x in _list(raw.get("budget_sent")) if isinstance(x, str)]
        led.eta_sent = [str(x) for x in _list(raw.get("eta_sent")) if isinstance(x, str)][-MAX_ETA_KEYS:]
        led.deadline = raw["deadline"] if isinstance(raw.get("deadline"), dict) else {}
        if raw.get("schema") in OLD_SCHEMAS:
            led.meter_at = led.last_at           # the idle clock of rgt.cost/1 was on the wall clock
            led._load_old_runs(raw.get("runs"))
            return led
        led.meter_at = _num(raw.get("meter_at"), "epoch_s") or led.last_at
        led.idle = _idle(raw.get("idle"))
        led.idle_box_s = _num(raw.get("idle_box_s")) or 0.0
        folded = got if isinstance(got := raw.get("folded"), dict) else {}
        led.folded = {"runs": int(_num(folded.get("runs"), "count") or 0),
                      "run_s": _num(folded.get("run_s")) or 0.0, "box_s": _num(folded.get("box_s")) or 0.0,
                      "gpu_s": _num(folded.get("gpu_s")) or 0.0}
        runs = got if isinstance(got := raw.get("runs"), dict) else {}
        for name, ent in runs.items():
            if isinstance(ent, dict) and _num(ent.get("start"), "epoch_s") is not None:
                want = ent.get("want")
                led.runs[str(name)] = {"start": float(ent["start"]), "end": _num(ent.get("end"), "epoch_s"),
                                       "want": want if want == share.ALL or isinstance(want, int) else share.ALL,
                                       "run_s": _num(ent.get("run_s")) or 0.0, "box_s": _num(ent.get("box_s")) or 0.0,
                                       "cluster": ent.get("cluster") is True, "gpu_s": _num(ent.get("gpu_s")) or 0.0}
        return led

    def _load_old_runs(self, runs: Any) -> None:
        """rgt.cost/1 charged each run the whole box for its wall time: kept as it was."""
        for name, ent in (runs if isinstance(runs, dict) else {}).items():
            if isinstance(ent, dict) and _num(ent.get("start"), "epoch_s") is not None:
                start, end = float(ent["start"]), _num(ent.get("end"), "epoch_s")
                run_s = (_num(ent.get("prior_s")) or 0.0) + (max(0.0, end - start) if end is not None else 0.0)
                self.runs[str(name)] = {"start": start, "end": end, "want": share.ALL, "run_s": run_s, "box_s": run_s,
                                        "cluster": False, "gpu_s": 0.0}

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": SCHEMA, "since": self.since, "up_s": self.up_s, "last_at": self.last_at,
                "meter_at": self.meter_at, "idle": self.idle, "idle_box_s": self.idle_box_s,
                "budget_sent": self.budget_sent, "eta_sent": self.eta_sent[-MAX_ETA_KEYS:],
                "deadline": self.deadline, "runs": self.runs, "folded": self.folded}

    def save(self, path: str) -> None:
        atomic_write_json(path, self.to_dict(), mode=0o600)

    # -- paid time
    def advance(self, now: float, mono: float) -> None:
        """Count the time since the last advance as up, on the monotonic clock: a wall clock
        that steps either way changes nothing here. The wall clock is only remembered (last_at)."""
        dt = 0.0 if self._mono is None else max(0.0, mono - self._mono)
        self._mono = mono
        self._meter(dt)
        self.last_at = now
        self.wall_offset = now - self.meter_at

    def reopen(self, now: float, mono: float, up_since: Optional[float]) -> bool:
        """The daemon starts again. Count the gap since last_at if the box stayed up meanwhile;
        if it came up after last_at (powered off, stopped, restarted), only the time since. A
        last_at ahead of now (the clock stepped back while the daemon was down) counts nothing
        and is not waited for. True when the box itself restarted (the idle clock starts over)."""
        restarted = up_since is not None and up_since > self.last_at
        gap = now - (up_since if restarted and up_since is not None else self.last_at)
        self._meter(min(max(0.0, gap), numbers.DURATION_MAX_S))
        self._mono = mono
        self.last_at = now
        self.wall_offset = now - self.meter_at
        return restarted

    def _meter(self, dt: float) -> None:
        """dt seconds of box time: to the running runs by their shares, the rest to idle."""
        if dt <= 0.0:
            return
        self.up_s += dt
        self.meter_at += dt
        live = {name: ent["want"] for name, ent in self.runs.items() if ent["end"] is None and not ent["cluster"]}
        shares = share.of(live, self.box_gpus)
        for name, part in shares.items():
            self.runs[name]["run_s"] += dt
            self.runs[name]["box_s"] += dt * part
        for ent in self.runs.values():
            if ent["end"] is None and ent["cluster"]:
                ent["run_s"] += dt
                ent["gpu_s"] += dt * share.gpus_held(ent["want"])
        self.idle_box_s += dt * max(0.0, 1.0 - sum(shares.values()))

    def hours(self) -> float:
        return self.up_s / 3600.0

    def wall(self, meter_t: float) -> float:
        """A time on the meter's clock, said on the wall clock (for a person)."""
        return meter_t + self.wall_offset

    # -- runs
    def run_started(self, name: str, at: float, want: Any = share.ALL, cluster: bool = False) -> None:
        """A run starts (again: a resumed run keeps the time of its earlier attempts). `cluster`:
        its stages run on a cluster's nodes (Ray), not as a share of this box."""
        ent = self.runs.pop(name, None)
        self.runs[name] = {"start": at, "end": None, "want": want,
                           "run_s": ent["run_s"] if ent else 0.0, "box_s": ent["box_s"] if ent else 0.0,
                           "cluster": cluster, "gpu_s": ent["gpu_s"] if ent else 0.0}
        self._fold()

    def run_ended(self, name: str, at: float) -> None:
        ent = self.runs.get(name)
        if ent is not None and ent["end"] is None:
            ent["end"] = max(at, ent["start"])

    def forget(self, name: str) -> None:
        """A new run under this name (submit --replace): the old one's cost goes to the total."""
        ent = self.runs.pop(name, None)
        if ent is not None:
            self._fold_one(ent)

    def _fold(self) -> None:
        ended = [n for n, e in self.runs.items() if e["end"] is not None]
        while len(self.runs) > MAX_RUNS and ended:
            self._fold_one(self.runs.pop(ended.pop(0)))

    def _fold_one(self, ent: Dict[str, Any]) -> None:
        self.folded["runs"] += 1
        self.folded["run_s"] += ent["run_s"]
        self.folded["box_s"] += ent["box_s"]
        self.folded["gpu_s"] += ent["gpu_s"]

    def runs_box_s(self) -> float:
        """Box-seconds charged to runs, all of them (folded ones too)."""
        return self.folded["box_s"] + sum(e["box_s"] for e in self.runs.values())


def _list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def _idle(raw: Any) -> Dict[str, Any]:
    if not isinstance(raw, dict) or _num(raw.get("since"), "epoch_s") is None:
        return {}
    out: Dict[str, Any] = {"since": float(raw["since"]), "sent": int(_num(raw.get("sent"), "count") or 0)}
    if _num(raw.get("next_at"), "epoch_s") is not None:
        out["next_at"] = float(raw["next_at"])
    return out


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
