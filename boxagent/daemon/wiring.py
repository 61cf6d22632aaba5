"""How the daemon joins the engine to its parts: the health part seen by the engine through the
bus's guard (a broken sampler costs the stage's evidence, never the stage's end), and the notify
hub on the bus.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.base.part import Part, PartContext
from boxagent.daemon.bus import Bus
from boxagent.health.part import HealthPart

HUB_TICK_S = 1.0        # heartbeats, dead-man pings and retries need no finer cadence


class GuardedBox:
    """The engine's BoxReader: the health part, each call guarded. What cannot be read is unknown."""

    def __init__(self, health: HealthPart, bus: Bus):
        self.health, self.bus = health, bus

    def anchor(self, now: float) -> Dict[str, Any]:
        return self.bus.guard(self.health, "anchor", lambda: self.health.anchor(now), {"at": now})

    def since(self, anchor: Optional[Dict[str, Any]], now: float, paths: List[str],
              run: Optional[str] = None, stage: Optional[str] = None) -> Dict[str, Any]:
        return self.bus.guard(self.health, "since", lambda: self.health.since(anchor, now, paths, run, stage), {})

    def cpu_quota_cores(self) -> Optional[float]:
        return self.bus.guard(self.health, "cpu_quota_cores", self.health.cpu_quota_cores, None)

    def preflight(self, preflight: Dict[str, Any], now: float, workdir: str) -> List[Dict[str, Any]]:
        return self.bus.guard(self.health, "preflight", lambda: self.health.preflight(preflight, now, workdir), [])

    def gpu_busy(self) -> Optional[bool]:
        return self.bus.guard(self.health, "gpu_busy", self.health.gpu_busy, None)


class HubPart(Part):
    """The notify hub on the bus."""
    name = "notify"

    def __init__(self, hub: Any):
        self.hub = hub
        self.ctx: Optional[PartContext] = None
        self._last_tick: Optional[float] = None

    def start(self, ctx: PartContext) -> None:
        self.ctx = ctx
        self.hub.start()

    def on_event(self, event: Dict[str, Any]) -> None:
        self.hub.publish(event)

    def tick(self, now: float) -> List[Dict[str, Any]]:
        if self._last_tick is not None and now - self._last_tick < HUB_TICK_S:
            return []
        self._last_tick = now
        self.hub.tick(now, self.ctx.last_status() if self.ctx is not None else {})
        return self.hub.drain_events()          # e.g. notify_failed: a message given up on

    def status_block(self) -> Dict[str, Any]:
        return {"notifications": self.hub.summary()}

    def reload(self, config: Dict[str, Any], profile: Dict[str, Any]) -> None:
        self.hub.reload()

    def stop(self, timeout: float) -> None:
        self.hub.stop(timeout)
