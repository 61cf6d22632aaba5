"""The daemon's composition root: every object the loop drives is made and joined here, once, at
start-up (loop.py only runs them). The health part is seen by the engine through the bus's guard
(a broken sampler costs the stage's evidence, never the stage's end); the stage processes run on
this host or as Slurm jobs, per run.
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
from boxagent.engine.finalize import Finisher
from boxagent.engine.journal import FileJournal
from boxagent.engine.ports import AttemptRef
from boxagent.engine.scheduler import Scheduler
from boxagent.engine.shimctl import ShimProcesses
from boxagent.engine.store import RunStore
from boxagent.health.monitor import HealthMonitor
from boxagent.health.part import HealthPart
from boxagent.notify.hub import NotifyHub
from boxagent.runlog.part import RunLog
from boxagent.slurm import spec as slurm_spec
from boxagent.wire.events import EventLog


class Hooks:
    """What the made objects call back into the daemon for (its loop owns these facts)."""

    def watched(self) -> List[tuple]:
        raise NotImplementedError

    def running(self) -> List[tuple]:
        raise NotImplementedError

    def published(self, event: Dict[str, Any]) -> None:
        raise NotImplementedError

    def last_status(self) -> Dict[str, Any]:
        raise NotImplementedError


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
                        lambda: sched[0].gpu_holders())
    bus = Bus([health, NotifyHub(home, config, profile), RunLog(), CostPart()], log)
    events.annotate = bus.annotate      # parts add facts to events (a run's cost)
    store = RunStore(home, log, storage)
    journal = FileJournal(store, events, hooks.published, log)
    box = GuardedBox(health, bus)
    procs = Backends(ShimProcesses(home, roots), lambda: slurm_processes(home, config, settings, log),
                     lambda run: slurm_spec.backend(sched[0].specs.get(run) or {}))
    sched.append(Scheduler(store, journal, procs, box, Finisher(home, wake, log), settings, config,
                           profile_view.rules(profile), profile_view.stage_env_hints(profile),
                           boot_id, log, hold=lambda: storage.full))
    bus.start(PartContext(home, roots, config, profile, host, wake, hooks.last_status))
    return Assembly(profile, host, storage, events, health, bus, journal, box, sched[0])


def slurm_processes(home: Home, config: Dict[str, Any], settings: Dict[str, Any],
                    log: Callable[[str], None]) -> Any:
    """Stage attempts as Slurm jobs (made when the first run with backend = "slurm" needs it).
    The node runs the shim with `slurm_python` (config.json) or this daemon's own Python."""
    from boxagent.engine.slurmctl import SlurmProcesses
    python = config.get("slurm_python")
    return SlurmProcesses(home, python=python if isinstance(python, str) and python else None,
                          poll_s=settings["slurm_poll"], exit_grace_s=settings["slurm_exit_grace"], log=log)


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


class Backends:
    """The engine's StageProcesses: the shim on this host, or Slurm, per run (the job's
    `backend`). The Slurm side is made when a Slurm run first needs it: a box daemon never
    looks for sbatch."""

    def __init__(self, local: Any, make_slurm: Callable[[], Any], backend_of: Callable[[str], str]):
        self.local, self._make_slurm, self.backend_of = local, make_slurm, backend_of
        self._slurm: Optional[Any] = None

    @property
    def slurm(self) -> Any:
        if self._slurm is None:
            self._slurm = self._make_slurm()
        return self._slurm

    def _for(self, run: str) -> Any:
        return self.slurm if self.backend_of(run) == "slurm" else self.local

    def launch(self, ref: AttemptRef, launch: Dict[str, Any], now: float) -> None:
        self._for(ref.run).launch(ref, launch, now)

    def exit_info(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        return self._for(ref.run).exit_info(ref)

    def claimed_for(self, ref: AttemptRef, now: float) -> Optional[float]:
        return self._for(ref.run).claimed_for(ref, now)

    def shim_state(self, ref: AttemptRef) -> str:
        return self._for(ref.run).shim_state(ref)

    def command_alive(self, ref: AttemptRef) -> bool:
        return self._for(ref.run).command_alive(ref)

    def signal(self, ref: AttemptRef, sig: int) -> None:
        self._for(ref.run).signal(ref, sig)

    def cpu_seconds(self, ref: AttemptRef) -> Optional[float]:
        return self._for(ref.run).cpu_seconds(ref)

    def leftovers(self, ref: AttemptRef) -> List[str]:
        return self._for(ref.run).leftovers(ref)

    def release(self, ref: AttemptRef) -> None:
        self._for(ref.run).release(ref)

    def reap(self) -> None:
        self.local.reap()

    def pid_alive(self, pid: int, start_ticks: Optional[int]) -> bool:
        return self.local.pid_alive(pid, start_ticks)     # a wait stage's process is on this host

    def start_ticks(self, pid: int) -> Optional[int]:
        return self.local.start_ticks(pid)

    def refresh(self, now: float) -> bool:
        return self._slurm.refresh(now) if self._slurm is not None else False

    def wake_in(self, now: float) -> Optional[float]:
        return self._slurm.wake_in(now) if self._slurm is not None else None

    def queue_view(self, run: str) -> Dict[str, Dict[str, Any]]:
        return self._for(run).queue_view(run)

    def run_ended(self, run: str) -> None:
        self._for(run).run_ended(run)
