"""How the daemon joins the engine to its parts: the health part, seen by the engine through the
bus's guard (a broken sampler costs the stage's evidence, never the stage's end).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from boxagent.daemon.bus import Bus
from boxagent.health.part import HealthPart


class GuardedBox:
    """The engine's BoxReader: the health part, each call guarded. What cannot be read is unknown."""

    def __init__(self, health: HealthPart, bus: Bus):
        self.health, self.bus = health, bus

    def anchor(self, now: float) -> Dict[str, Any]:
        return self.bus.guard(self.health, "anchor", lambda: self.health.anchor(now), {"at": now})

    def since(self, anchor: Optional[Dict[str, Any]], now: float, paths: List[str],
              run: Optional[str] = None, stage: Optional[str] = None,
              gpus: Optional[List[int]] = None) -> Dict[str, Any]:
        return self.bus.guard(self.health, "since", lambda: self.health.since(anchor, now, paths, run, stage, gpus), {})

    def gpus(self) -> Optional[List[Tuple[int, Optional[str]]]]:
        return self.bus.guard(self.health, "gpus", self.health.gpus, None)

    def cpu_quota_cores(self) -> Optional[float]:
        return self.bus.guard(self.health, "cpu_quota_cores", self.health.cpu_quota_cores, None)

    def preflight(self, preflight: Dict[str, Any], now: float, workdir: str) -> List[Dict[str, Any]]:
        return self.bus.guard(self.health, "preflight", lambda: self.health.preflight(preflight, now, workdir), [])

    def gpu_busy(self) -> Optional[bool]:
        return self.bus.guard(self.health, "gpu_busy", self.health.gpu_busy, None)
