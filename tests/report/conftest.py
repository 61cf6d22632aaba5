"""Report fixtures: statuses shaped like the daemon's status.json, a RunLog driven directly
through its Part interface, and (for the end-to-end tests) a real box on this machine."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from boxagent.base.home import Home
from boxagent.base.part import PartContext
from boxagent.base.roots import Roots
from boxagent.base.units import iso_utc
from boxagent.runlog.part import RunLog

GIB = 1 << 30


def gpu(i: int, util: float = 95, mem_gib: float = 60, temp: int = 70, power: float = 550.0,
        sm: int = 1980, reasons: Optional[List[str]] = None) -> Dict[str, Any]:
    return {"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%d" % i, "util_pct": util,
            "memory_used_bytes": int(mem_gib * GIB), "memory_total_bytes": 80 * GIB, "temperature_c": temp,
            "power_w": power, "sm_clock_mhz": sm, "sm_clock_max_mhz": 1980, "throttle_reasons": reasons or [],
            "lost": False}


def status(runs: List[Dict[str, Any]], gpus: Optional[List[Dict[str, Any]]] = None, mem: int = 10 * GIB,
           limit: Optional[int] = 64 * GIB, disks: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    return {"schema": "rgt.status/1",
            "health": {"memory": {"cgroup": "v2", "current_bytes": mem, "max_bytes": limit},
                       "gpus": gpus if gpus is not None else [gpu(0), gpu(1)],
                       "disks": disks if disks is not None else [{"path": "/", "role": "state", "bytes_used_pct": 50.0,
                                                                  "inodes_used_pct": 5.0}]},
            "runs": runs}


def run_block(name: str, state: str = "running", stage: Optional[str] = "train", workdir: str = "/",
              metrics: Optional[Dict[str, float]] = None, progress: Optional[Dict[str, Any]] = None,
              gpus: Optional[List[int]] = None) -> Dict[str, Any]:
    st = {"name": stage, "state": "running" if state == "running" else state, "progress": progress}
    if metrics is not None:
        st["metrics"] = metrics
    out = {"name": name, "state": state, "workdir": workdir, "stages": [st] if stage else []}
    if gpus is not None:
        out["gpus"] = gpus
    return out


class Driver:
    """A RunLog and the statuses and events the daemon would hand it."""

    def __init__(self, home: Home, step_s: Optional[float] = None, config: Optional[Dict[str, Any]] = None):
        self.home = home
        self.current: Dict[str, Any] = {}
        self.part = RunLog(step_s)
        # these tests fold samples 10 s apart into points a minute long (history_every = 60 s;
        # a box's default step is its sampling interval)
        config = {"sample_every": 10, "history_every": 60} if config is None else config
        self.ctx = PartContext(home, Roots(), config, {}, "box", lambda: None, lambda: self.current)
        self.part.start(self.ctx)
        self.seq = 0

    def make_run(self, name: str) -> None:
        os.makedirs(self.home.run_dir(name), exist_ok=True)

    def event(self, t: float, etype: str, run: Optional[str], severity: str = "info", **extra: Any) -> Dict[str, Any]:
        self.seq += 1
        ev = {"id": "%013d-test-%d" % (int(t * 1000), self.seq), "at": iso_utc(t), "host": "box", "type": etype,
              "severity": severity, "run": run, "stage": extra.pop("stage", None), "summary": extra.pop("summary", etype),
              "evidence": extra.pop("evidence", [])}
        ev.update(extra)
        self.part.on_event(ev)
        return ev

    def sample(self, t: float, st: Dict[str, Any]) -> None:
        self.current = dict(st)       # a new dict per status write, as the daemon's
        self.part.sample(t)

    def history_path(self, run: str) -> Path:
        return Path(self.home.run_dir(run)) / "history.jsonl"


@pytest.fixture
def driver(tmp_path) -> Driver:
    return Driver(Home(str(tmp_path / "home")))

