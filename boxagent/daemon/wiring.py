"""How the daemon joins the engine to its parts: the health part, seen by the engine through the
bus's guard (a broken sampler costs the stage's evidence, never the stage's end); the stage
processes, on this host or as Slurm jobs, per run.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.daemon.bus import Bus
from boxagent.engine.ports import AttemptRef
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
