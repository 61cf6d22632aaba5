"""Where a run's stages run, one row per backend: the name a job gives as `backend = "..."` and how
that backend is made. The scheduler asks `BackendTable.of(run)` and never names a backend; each
backend is made when a run first needs it (a box daemon never looks for sbatch).

A new backend (a Kubernetes Job, a cloud's batch API) is one module beside localrun.py and
slurmrun.py (an object with the ports.Backend face: name, traits, procs and three calls) plus one
row below; the job file accepts its name where slurm/spec.py lists BACKENDS.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, NamedTuple

from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.engine.ports import Backend


class Makings(NamedTuple):
    """What a backend may be made from (the daemon's composition root passes it)."""
    home: Home
    roots: Roots
    config: Dict[str, Any]
    settings: Dict[str, Any]
    log: Callable[[str], None]


def _local(m: Makings) -> Backend:
    from boxagent.engine.localrun import LocalBackend
    from boxagent.engine.shimctl import ShimProcesses
    return LocalBackend(ShimProcesses(m.home, m.roots))


def _slurm(m: Makings) -> Backend:
    from boxagent.engine.slurmrun import SlurmBackend
    return SlurmBackend.assemble(m.home, m.config, m.settings, m.log)


def _ray(m: Makings) -> Backend:
    from boxagent.engine.rayrun import RayBackend
    return RayBackend.assemble(m.home, m.config, m.settings, m.log)


REGISTRY: Dict[str, Callable[[Makings], Backend]] = {
    "local": _local,
    "slurm": _slurm,
    "ray": _ray,
}


def backend_name(spec: Dict[str, Any]) -> str:
    """The backend a validated job names ("local" when it names none)."""
    return str(spec.get("backend") or "local")


class BackendTable:
    """Each run's backend, by the name its job gives; each made once, on first need."""

    def __init__(self, makers: Dict[str, Callable[[], Backend]]):
        self._makers = makers
        self._made: Dict[str, Backend] = {}

    @classmethod
    def from_registry(cls, makings: Makings) -> "BackendTable":
        return cls({name: functools.partial(make, makings) for name, make in REGISTRY.items()})

    def named(self, name: str) -> Backend:
        if name not in self._made:
            self._made[name] = self._makers[name]()
        return self._made[name]

    def of(self, spec: Dict[str, Any]) -> Backend:
        return self.named(backend_name(spec))

    def made(self) -> List[Backend]:
        """The backends made so far (those some run has used): what a tick refreshes and reaps."""
        return list(self._made.values())
