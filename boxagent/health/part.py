"""Health as one part of the daemon (boxagent/base/part.py), and as the engine's BoxReader.

It owns the timelines of the box's facts (the oom_kill counter, Xid/ECC/GPU-lost, disk state):
the periodic sample raises alerts from them, and a stage that ends asks what happened between
its start and now. That answer is read from the box NOW (a fresh sample: the counter, statvfs,
the kernel log lines and NVML events still pending), never taken from the last periodic sample:
real faults are fast, and a stage that dies of an Xid dies within milliseconds of it. The fresh
sample is also what status.json shows next, so the screen and the cause agree.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base.part import Part
from boxagent.wire.status import RUN_FIELDS
from boxagent.health import attribution
from boxagent.health import preflight as preflight_mod
from boxagent.health import tenants
from boxagent.health.monitor import HealthMonitor

Watched = List[Tuple[str, str]]


class HealthPart(Part):
    name = "health"

    def __init__(self, monitor: HealthMonitor, watched: Callable[[], Watched],
                 running: Callable[[], List[Tuple[str, str]]],
                 holders: Callable[[], Dict[int, Tuple[str, Optional[str]]]] = lambda: {},
                 attempts: Optional[Callable[[], List[Dict[str, Any]]]] = None):
        self.monitor = monitor
        # the live attempts' unforgeable marks (token, cgroup, shim pid + start time): the
        # only way a GPU process is told to be one of rgt's stages (health/tenants.py)
        monitor.pids.attempts = attempts
        self.watched = watched          # [(path, role)]: the state dir and the live runs' workdirs
        self.running = running          # [(run, stage)]: who a box-wide alert belongs to
        self.holders = holders          # GPU index -> (run, stage): who a GPU's alert belongs to
        self.last: Optional[Dict[str, Any]] = None
        # how long a stage's end waits for an Xid still in flight (config xid_settle_s)
        self.settle_s = float((monitor.config or {}).get("xid_settle_s", 0.3))

    # -- the Part
    def sample(self, now: float) -> List[Dict[str, Any]]:
        self.last = self.monitor.sample(now, self.watched())
        return self.monitor.alert_events(self.last, self.running(), self.holders())

    def status_block(self) -> Dict[str, Any]:
        health = self.last
        run_fields: Dict[str, Dict[str, Any]] = {}
        if health is not None:
            holders = self.holders()
            health = dict(health, gpus=[dict(g, run=(holders.get(g.get("index")) or (None,))[0])
                                        for g in health.get("gpus") or []])
            for g in health["gpus"]:
                others = tenants.foreign(g)
                if g["run"] is not None and others:       # the run's status names who shares its GPU
                    run_fields.setdefault(g["run"], {"gpu_tenants": []})["gpu_tenants"] += [
                        {"gpu": g.get("index"), "pid": p.get("pid"), "command": p.get("command"),
                         "used_memory_bytes": p.get("used_memory_bytes"), "visible": p.get("visible")}
                        for p in others]
        return {"health": health, "alerts": self.monitor.active_alerts(), "history": self.monitor.history(),
                RUN_FIELDS: run_fields}

    def stop(self, timeout: float) -> None:
        self.monitor.close()

    # -- the BoxReader
    def anchor(self, now: float) -> Dict[str, Any]:
        return {"at": now, "oom_kill": self.monitor.oom_kill_count()}

    def since(self, anchor: Optional[Dict[str, Any]], now: float, paths: List[str],
              run: Optional[str] = None, stage: Optional[str] = None,
              gpus: Optional[List[int]] = None) -> Dict[str, Any]:
        """`gpus`: the run's own GPUs (None: the whole box); faults on others are not its story."""
        anchor = anchor or {}
        extra = [(p, "workdir") for p in paths if p]
        self.last = block = self.monitor.sample(now, self.watched() + extra)
        mem = block.get("memory") or {}
        oom, before = mem.get("oom_kill"), anchor.get("oom_kill")
        delta: Optional[int] = None
        if isinstance(oom, int) and isinstance(before, int):
            delta = oom - before
            if delta:
                self.monitor.alerts.claim_oom(oom)
        at = anchor.get("at")
        t0 = at if isinstance(at, (int, float)) else now
        faults = self._stage_faults(t0, run, stage, gpus)
        if run is not None and self._may_be_in_flight(faults, gpus):   # (a Slurm stage ran elsewhere)
            self.monitor.settle(gpus, self.settle_s)
            faults = self._stage_faults(t0, run, stage, gpus)
        if run is not None:
            self.monitor.faults.claim([f for f in faults if attribution.is_application(f)], run, stage)
        return {"oom_kill_delta": delta, "oom_kill": oom, "cgroup_version": mem.get("cgroup"),
                "disks": list(block.get("disks") or []), "gpu_faults": faults,
                "gpu_tenants": self._tenants(gpus)}

    def _stage_faults(self, t0: float, run: Optional[str], stage: Optional[str],
                      gpus: Optional[List[int]]) -> List[Dict[str, Any]]:
        """The GPU faults that are this stage's story: any fault on its GPUs, except an
        application's own Xid that the kernel log pins on a process of another stage or on a
        process rgt did not start (that one is its process's, not this stage's)."""
        faults = self.monitor.gpu_faults_since(t0)
        if gpus is not None:
            faults = [f for f in faults if f.get("gpu") in gpus]
        return [f for f in faults if run is None or attribution.belongs(f, run, stage)]

    def _tenants(self, gpus: Optional[List[int]]) -> List[Dict[str, Any]]:
        """The processes rgt did not start on the stage's GPUs, as the last sample saw them."""
        out = []
        for g in (self.last or {}).get("gpus") or []:
            if gpus is None or g.get("index") in gpus:
                out += [dict(p, gpu=g.get("index")) for p in tenants.foreign(g)]
        return out

    def _may_be_in_flight(self, faults: List[Dict[str, Any]], gpus: Optional[List[int]]) -> bool:
        """A stage on GPUs whose end shows no Xid with a pid yet: one may still be on its way."""
        if self.settle_s <= 0 or gpus == []:
            return False
        held = [g for g in (self.last or {}).get("gpus") or [] if gpus is None or g.get("index") in gpus]
        return bool(held) and not any(f.get("type") == "gpu_xid" and f.get("pid") is not None for f in faults)

    def gpus(self) -> Optional[List[Tuple[Any, ...]]]:
        """The usable GPUs of the last sample, (index, uuid, bytes other tenants hold, total
        bytes, who they are): what runs can be given (None before the first sample: not known
        yet, which is not "none")."""
        if self.last is None:
            return None
        out = []
        for g in (self.last or {}).get("gpus") or []:
            if isinstance(g, dict) and isinstance(g.get("index"), int) and not g.get("lost"):
                others = tenants.foreign(g)
                taken = sum(p.get("used_memory_bytes") or 0 for p in others)
                out.append((g["index"], g.get("uuid"), taken, g.get("memory_total_bytes"),
                            "; ".join(tenants.describe(p) for p in others[:3])))
        return out

    def cpu_quota_cores(self) -> Optional[float]:
        return self.monitor.cpu_quota_cores()

    def preflight(self, preflight: Dict[str, Any], now: float, workdir: str) -> List[Dict[str, Any]]:
        self.last = sample = self.monitor.sample(now, self.watched() + [(workdir, "workdir")])
        return preflight_mod.check(preflight, sample, self.monitor)

    def gpu_busy(self) -> Optional[bool]:
        gpus = (self.last or {}).get("gpus") or []
        utils = [u for u in (g.get("util_pct") for g in gpus if isinstance(g, dict)) if u is not None]
        return (max(utils) >= 10) if utils else None
