"""Fixtures for the cost tests: the real CostPart on a temp RGT_HOME with an injected clock (the
one seam), and the status dicts the daemon would have written (runs[], health.gpus)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from boxagent.base.home import Home
from boxagent.base.part import PartContext
from boxagent.base.roots import Roots
from boxagent.base.units import iso_utc

T0 = 1_900_000_000.0     # a fixed wall clock: 2030-03-17
RUNPOD = {"name": "runpod", "platform": "RunPod", "kind": "cloud-api",
          "teardown": [{"name": "stop", "stops_billing": True, "irreversible": False,
                        "destroys": ["/ (container disk)"],
                        "still_bills": ["the /workspace volume, at 2x while stopped"]},
                       {"name": "terminate", "stops_billing": True, "irreversible": True,
                        "destroys": ["/ (container disk)", "/workspace (volume disk)"],
                        "note": "a Network Volume survives"}]}


class Clock:
    """The wall clock (called) and a monotonic one (`mono`): time passing moves both; an NTP step
    or a restored snapshot (`step`) moves only the wall clock."""

    def __init__(self, now: float = T0):
        self.now = now
        self.mono_now = 1000.0

    def __call__(self) -> float:
        return self.now

    def mono(self) -> float:
        return self.mono_now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        self.mono_now += seconds
        return self.now

    def step(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def gpus(*utils: Optional[float]) -> Dict[str, Any]:
    """A status with only the health block: GPUs at these utilisations (none: no GPU)."""
    return {"health": {"gpu_source": "nvml" if utils else "none",
                       "gpu_unavailable_reason": None if utils else "no NVML",
                       "gpus": [{"index": i, "util_pct": u} for i, u in enumerate(utils)]}}


IDLE_STATUS = dict(gpus(0, 1), runs=[])


def run(name: str, state: str, started: Optional[float] = None, ended: Optional[float] = None,
        **extra: Any) -> Dict[str, Any]:
    out = {"name": name, "state": state, "started_at": iso_utc(started), "ended_at": iso_utc(ended),
           "stages": [], "artifacts": {"files": 0, "bytes": 0, "manifest": None}}
    out.update(extra)
    return out


def event(etype: str, run_name: str, at: float, **extra: Any) -> Dict[str, Any]:
    return dict({"type": etype, "run": run_name, "at": iso_utc(at), "severity": "info"}, **extra)


class Harness:
    """A CostPart as the daemon runs it: start(ctx), on_event, tick, sample, status_block."""

    def __init__(self, home: Path, clock: Clock, config: Dict[str, Any], profile: Dict[str, Any],
                 up_since: Callable[[], Optional[float]]):
        from boxagent.cost.part import CostPart
        self.home, self.clock, self.config, self.profile = Home(str(home)), clock, config, profile
        self.status: Dict[str, Any] = {}
        self.part = CostPart(clock=clock, up_since=up_since, mono=clock.mono)
        self.part.start(PartContext(self.home, Roots(), config, profile, config.get("host", "box1"),
                                    lambda: None, lambda: self.status))

    def sample(self, seconds: float = 0.0, status: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
        self.clock.advance(seconds)
        if status is not None:
            self.status = status
        return self.part.tick(self.clock.now) + self.part.sample(self.clock.now)

    def block(self) -> Dict[str, Any]:
        return self.part.status_block()


@pytest.fixture
def receiver():
    from tests.notify.receiver import Receiver
    r = Receiver()
    yield r
    r.down()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def harness(rgt_home, clock):
    """harness(cost={...}, profile=RUNPOD, up_since=None) -> a started Harness on rgt_home."""
    def make(cost: Optional[Dict[str, Any]] = None, profile: Optional[Dict[str, Any]] = None,
             up_since: Optional[float] = None, host: str = "box1") -> Harness:
        config = {"host": host, "profile": profile or RUNPOD, "cost": cost or {}}
        return Harness(rgt_home, clock, config, config["profile"], lambda: up_since)
    return make
