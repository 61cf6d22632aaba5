"""HealthMonitor: the daemon's one entry point into health. CONTRACT (docs/ARCHITECTURE.md).

The daemon calls sample(now, watched) every `sample_every`, alert_events() after each sample,
and the small readers at stage start/end. Everything here is cheap per tick: cgroup and proc
files are kept open and pread, disks are one statvfs each, NVML handles are opened once, Xid
events arrive on a thread, and the kernel log is read incrementally without blocking.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.health import alerts as alertsmod
from boxagent.health.cgroup import CgroupReader, affinity_cores, find_cgroup
from boxagent.health.disks import DiskSampler
from boxagent.health.faults import FaultLog
from boxagent.health.history import History
from boxagent.health.nvml import Nvml
from boxagent.health.tenants import PidBook
from boxagent.health.xid import KmsgReader, XidEventThread
from boxagent.base import profile as profile_view
from boxagent.base.roots import Roots
from boxagent.base.units import iso_utc


class HealthMonitor:
    def __init__(self, roots: Roots, config: Dict[str, Any], profile: Dict[str, Any],
                 nvml: Optional[Nvml] = None):
        self.roots = roots
        self.config = config or {}
        self.profile = profile or {}
        self._last: Optional[Dict[str, Any]] = None
        self._last_ts: Optional[float] = None
        self.nvml = nvml if nvml is not None else Nvml()
        self.faults = FaultLog()
        self.history_ring = History(int(self.config.get("history_step_s", 60)), 60)
        self.alerts = alertsmod.AlertBook(alertsmod.merge_thresholds(profile_view.thresholds(self.profile),
                                                                     self.config.get("thresholds")))
        self.inode_caps: Dict[str, int] = profile_view.inode_caps(self.profile)
        self.disks = DiskSampler(roots.proc, float(self.config.get("disk_timeout_s", 2.0)))
        self.cg: Optional[CgroupReader] = None
        self.kmsg: Optional[KmsgReader] = None
        self.xid_thread: Optional[XidEventThread] = None
        self._pending: List[Dict[str, Any]] = []
        self._boot_wall: Optional[float] = None
        self.pids = PidBook(roots.proc)

    # -- lazy start ----------------------------------------------------------------------------
    def _cgroup(self) -> CgroupReader:
        if self.cg is None:
            self.cg = CgroupReader(find_cgroup(self.roots.proc, self.roots.cgroup), self.roots.proc)
        return self.cg

    def _start_gpu_sources(self, gpus: List[Dict[str, Any]], now: float) -> None:
        if self.kmsg is None:
            self.kmsg = KmsgReader(self.roots.kmsg)
            history = self.kmsg.open()
            self.faults.kernel_lines(history, gpus, self._accept_unmatched(), now, self._boot_wall, history=True)
        if self.xid_thread is None and self.nvml.available:
            self.xid_thread = XidEventThread(self.nvml, int(self.config.get("xid_wait_ms", 500)))
            self.xid_thread.start()

    def _accept_unmatched(self) -> bool:
        """Kernel Xids we cannot tie to one of our GPUs count only when NVML itself is broken
        (driver there, NVML failing: exactly when a GPU fell off the bus). With no NVIDIA
        library at all, kernel Xids belong to GPUs this container was never given."""
        return not self.nvml.available and not self.nvml.missing

    # -- the contract ----------------------------------------------------------------------------
    def sample(self, now: float, watched: List[Tuple[str, str]]) -> Dict[str, Any]:
        """Take one sample; return status.json's `health` block; keep it in the history ring.
        `watched` is [(path, role)] with role in state|workdir|data|durable|extra."""
        t_cpu = time.perf_counter()
        cg = self._cgroup()
        uptime = cg.uptime_s()
        if uptime is not None and self._boot_wall is None:
            self._boot_wall = now - uptime
        dirs = list(watched or []) + list(profile_view.watched_dirs(self.profile))
        gpus = self.nvml.sample(self.roots.proc)
        self._start_gpu_sources(gpus, now)
        self.pids.annotate(gpus, now)
        new = self._collect_faults(gpus, now)
        for g in gpus:
            g["xid_last"] = self.faults.last_xid(g["index"])
        block = {
            "sampled_at": iso_utc(now),
            "memory": cg.memory(),
            "cpu": cg.cpu(),
            "disks": self.disks.sample(dirs, self.inode_caps),
            "gpu_source": "nvml" if self.nvml.available else "none",
            "gpu_unavailable_reason": None if self.nvml.available else self.nvml.reason,
            "gpus": gpus,
            "driver_version": self.nvml.driver_version,
            "cuda_version": self.nvml.cuda_version,
            "xid_sources": self._xid_sources(),
            "cgroup_path": cg.paths.path,
            "boot_id": self.roots.boot_id(),
            "uptime_s": uptime,
        }
        block["sample_ms"] = round((time.perf_counter() - t_cpu) * 1000.0, 2)
        self.history_ring.add(now, block)
        self._pending.extend(new)
        self._last, self._last_ts = block, now
        return block

    def _collect_faults(self, gpus: List[Dict[str, Any]], now: float) -> List[Dict[str, Any]]:
        new: List[Dict[str, Any]] = []
        bus = {g["index"]: g.get("pci_bus_id") for g in gpus}
        if self.xid_thread is not None:
            for gpu, code, at in self.xid_thread.drain():
                f = self.faults.xid(code, gpu, bus.get(gpu), at, "nvml")
                if f is not None:
                    new.append(f)
        if self.kmsg is not None and self.kmsg.readable:
            lines = self.kmsg.read_new()
            new += self.faults.kernel_lines(lines, gpus, self._accept_unmatched(), now, self._boot_wall)
        new += self.faults.gpu_changes(gpus, now)
        for f in self.faults.unowned():
            o = self.pids.owner(f["pid"], now)
            f["owner"] = {k: o.get(k) for k in ("rgt", "run", "stage", "command", "visible", "ended", "by", "note") if k in o}
        return new

    def settle(self, gpus: Optional[List[int]], wait_s: float) -> List[Dict[str, Any]]:
        """At a stage's end: keep reading the Xid sources for up to `wait_s` while a fault on
        `gpus` (None: any) may still be in flight, and return early once one has arrived. On a
        real H100 the NVML event of a job's own Xid 31 came 0.2 s before its process exited,
        and the kernel line may trail the event; the stage's cause must carry both."""
        if not self.nvml.available or (self.xid_thread is None and not (self.kmsg and self.kmsg.readable)):
            return []
        deadline = time.monotonic() + max(0.0, wait_s)
        got: List[Dict[str, Any]] = []
        kernel = bool(self.kmsg and self.kmsg.readable)
        while True:
            new = self._collect_faults(list((self._last or {}).get("gpus") or []), time.time())
            self._pending.extend(new)
            got += [f for f in new if gpus is None or f.get("gpu") in gpus]
            if got and deadline > time.monotonic() + 0.1:
                deadline = time.monotonic() + 0.1   # NVML's event names no pid: the kernel line may
            if any(f.get("pid") is not None or not kernel for f in got) or time.monotonic() >= deadline:
                return got                          # follow it within a moment; wait that long
            time.sleep(0.05)

    def _xid_sources(self) -> Dict[str, Any]:
        t, k = self.xid_thread, self.kmsg
        return {"nvml_events": bool(t and t.registered), "nvml_events_gpus": list(t.registered) if t else [],
                "kernel_log": bool(k and k.readable), "kernel_log_error": k.error if k else None,
                "kernel_log_other_gpus": self.faults.other_gpus}

    def alert_events(self, sample: Dict[str, Any], running: List[Tuple[str, str]],
                     holders: Optional[Dict[int, Tuple[str, Optional[str]]]] = None) -> List[Dict[str, Any]]:
        """Event specs for alert transitions since the last call (hysteresis inside).
        `running` is [(run, stage)] to attribute e.g. an oom_kill to; `holders` maps a GPU to
        the run holding it, so a GPU's fault names that run and blames no other."""
        faults, self._pending = self._pending, []
        now = self._last_ts if self._last_ts is not None else time.time()
        return self.alerts.evaluate(sample or {}, faults, list(running or []), now, holders)

    def active_alerts(self) -> List[Dict[str, Any]]:
        """status.json `alerts`: [{key, type, severity, since, summary}]."""
        return self.alerts.alerts()

    def history(self) -> Dict[str, Any]:
        """Compact last-hour series for sparklines (status.json `history`)."""
        return self.history_ring.to_dict()

    def oom_kill_count(self) -> Optional[int]:
        """The cgroup oom_kill counter now (None when unknown): stages record deltas."""
        return self._cgroup().oom_kill()

    def cpu_quota_cores(self) -> Optional[float]:
        """The cgroup CPU quota in cores (None = unlimited/unknown): caps OMP_NUM_THREADS.
        A cpuset/affinity narrower than the host counts as a quota too (docker --cpuset-cpus)."""
        quota = self._cgroup().quota_cores()
        aff, host = affinity_cores(), os.cpu_count()
        limits = [q for q in (quota, float(aff) if aff and host and aff < host else None) if q]
        return min(limits) if limits else None

    def gpu_faults_since(self, t0: float) -> List[Dict[str, Any]]:
        """Xid / ECC / GPU-lost seen at or after t0 (wall clock), for a stage's diagnosis:
        [{type: gpu_xid|gpu_ecc|gpu_lost, code?, gpu?, at, source, hardware: bool, summary}]."""
        return self.faults.since(t0)

    def hard_faults_present(self) -> List[Dict[str, Any]]:
        """Hardware faults since boot (kernel log) or since start; the preflight refuses them."""
        return self.faults.hard_faults_present()

    def last_sample(self) -> Optional[Dict[str, Any]]:
        return self._last

    def close(self) -> None:
        if self.xid_thread is not None:
            self.xid_thread.stop()
            self.xid_thread = None
        self.nvml.shutdown()
        if self.kmsg is not None:
            self.kmsg.close()
            self.kmsg = None
        if self.cg is not None:
            self.cg.close()
            self.cg = None


def now() -> float:
    return time.time()
