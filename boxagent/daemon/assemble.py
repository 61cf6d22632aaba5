"""The daemon's composition root: every object the loop drives is made and joined here, once, at
start-up (loop.py only runs them). The health part is seen by the engine through the bus's guard
(a broken sampler costs the stage's evidence, never the stage's end); the stage processes run on
this host or as Slurm jobs, per run (engine/backends.py: one row per backend).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from boxagent.base import config as config_mod
from boxagent.base import profile as profile_view
from boxagent.base.home import Home
from boxagent.base.part import PartContext
from boxagent.base.roots import Roots
from boxagent.base.storage import Storage
from boxagent.cost.part import CostPart
from boxagent.daemon.bus import Bus
from boxagent.engine.backends import BackendTable, Makings
from boxagent.engine.finalize import Finisher
from boxagent.engine.journal import FileJournal
from boxagent.engine.scheduler import Scheduler
from boxagent.engine.store import RunStore
from boxagent.health.monitor import HealthMonitor
from boxagent.health.part import HealthPart
from boxagent.notify.hub import NotifyHub
from boxagent.runlog.part import RunLog
from boxagent.wire.events import EventLog


class Hooks(NamedTuple):
    """What the made objects call back into the daemon for (its loop owns these facts)."""
    watched: Callable[[], List[tuple]]             # (path, role) of the dirs whose disks matter
    running: Callable[[], List[tuple]]             # (run, stage) of every running attempt
    published: Callable[[Dict[str, Any]], None]    # an event was written: to the parts, status dirty
    last_status: Callable[[], Dict[str, Any]]      # the status.json last written


class Assembly(NamedTuple):
    profile: Dict[str, Any]
    host: Optional[str]
    storage: Storage
    events: EventLog
    health: HealthPart
    bus: Bus
    journal: Any
    box: "GuardedBox"
    scheduler: Scheduler


def assemble(home: Home, roots: Roots, config: Dict[str, Any], settings: Dict[str, Any],
             boot_id: Optional[str], wake: Callable[[], None], hooks: Hooks,
             log: Callable[[str], None]) -> Assembly:
    """The parts, the engine and its ports, joined. The bus is started (the parts may read the
    box from here on); the scheduler has not loaded the runs yet."""
    profile = profile_view.load(home)
    host = config_mod.host_name(config)
    storage = Storage(home.root)
    events = EventLog(home.events, host, write=storage.append)
    sched: List[Scheduler] = []           # the health part asks who holds a GPU; made just below
    health = HealthPart(HealthMonitor(roots, config, profile), hooks.watched, hooks.running,
                        lambda: sched[0].views.gpu_holders(), lambda: sched[0].views.identities())
    bus = Bus([health, NotifyHub(home, config, profile), RunLog(), CostPart()], log)
    events.annotate = bus.annotate      # parts add facts to events (a run's cost)
    store = RunStore(home, log, storage)
    journal = FileJournal(store, events, hooks.published, log)
    box = GuardedBox(health, bus)
    backends = BackendTable.from_registry(Makings(home, roots, config, settings, log))
    sched.append(Scheduler(store, journal, backends, box, Finisher(home, wake, log), settings, config,
                           profile_view.rules(profile), profile_view.stage_env_hints(profile),
                           boot_id, log, hold=lambda: storage.full))
    bus.start(PartContext(home, roots, config, profile, host, wake, hooks.last_status))
    return Assembly(profile, host, storage, events, health, bus, journal, box, sched[0])


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
