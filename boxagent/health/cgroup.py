"""The job's cgroup (v1 or v2) and the host totals, read cheaply every tick.

Why the cgroup and not `free`: on a rented box the container's memory.max is what kills the
job (the host may show 400 GB free while the container dies at 64 GB). Host totals are
reported apart and never used to blame the job.

Discovery follows <proc>/self/cgroup and <proc>/self/mountinfo (v1, v2, hybrid, nested paths).
When the path named in /proc/self/cgroup is not visible under the mount (containers without a
cgroup namespace show the host's path, e.g. /docker/<id>, while the mount root IS that cgroup),
we fall back to the mount root.

Files are kept open and re-read with pread(fd, n, 0): one syscall per file per tick, no
subprocess, no re-open (cgroupfs and procfs regenerate the content at offset 0).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

# A v1 memory.limit_in_bytes of PAGE_COUNTER_MAX (0x7FFFFFFFFFFFF000 on 4K pages) means no limit.
_V1_UNLIMITED = 1 << 60
_SYS_CGROUP = "/sys/fs/cgroup"


class CgroupPaths:
    """Where the memory and cpu controllers of this process live (or version "none")."""

    def __init__(self, version: str, memory_dir: Optional[str], cpu_dir: Optional[str],
                 path: str = "/"):
        self.version = version
        self.memory_dir = memory_dir
        self.cpu_dir = cpu_dir
        self.path = path

    def as_dict(self) -> Dict[str, Any]:
        return {"version": self.version, "path": self.path,
                "memory_dir": self.memory_dir, "cpu_dir": self.cpu_dir}


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


def parse_proc_cgroup(text: str) -> Tuple[Dict[str, str], Optional[str]]:
    """{controller: path} for v1 lines and the v2 path ("0::/x") from /proc/self/cgroup."""
    v1, v2 = {}, None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, ctrls, path = parts
        if hid == "0" and ctrls == "":
            v2 = path
            continue
        for c in ctrls.split(","):
            if c:
                v1[c] = path
    return v1, v2


def parse_mountinfo(text: str) -> List[Dict[str, Any]]:
    """cgroup/cgroup2 mounts: [{root, mountpoint, fstype, controllers}] (kernel field order)."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3 or rf[0] not in ("cgroup", "cgroup2"):
            continue
        opts = set(rf[2].split(",")) | set(lf[5].split(",") if len(lf) > 5 else [])
        out.append({"root": _unescape(lf[3]), "mountpoint": _unescape(lf[4]), "fstype": rf[0],
                    "controllers": opts})
    return out


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \040 \011 \012 \134
    return (field.replace("\\040", " ").replace("\\011", "\t")
            .replace("\\012", "\n").replace("\\134", "\\"))


def _rebase(mountpoint: str, cgroup_root: str) -> str:
    """Map a real /sys/fs/cgroup/... mountpoint onto the (overridable) cgroup root."""
    if cgroup_root != _SYS_CGROUP and (mountpoint == _SYS_CGROUP or mountpoint.startswith(_SYS_CGROUP + "/")):
        return cgroup_root + mountpoint[len(_SYS_CGROUP):]
    return mountpoint


def _resolve(mount: Dict[str, Any], path: str, cgroup_root: str) -> str:
    """The directory of cgroup `path` under `mount`; the mount root when it is not visible."""
    base = _rebase(mount["mountpoint"], cgroup_root)
    root = mount["root"].rstrip("/")
    rel = path
    if root and (path == root or path.startswith(root + "/")):
        rel = path[len(root):]
    candidate = os.path.join(base, rel.lstrip("/")) if rel.strip("/") else base
    return candidate if os.path.isdir(candidate) else base


def _v1_mount(mounts: List[Dict[str, Any]], controller: str) -> Optional[Dict[str, Any]]:
    for m in mounts:
        if m["fstype"] == "cgroup" and controller in m["controllers"]:
            return m
    return None


def find_cgroup(proc_root: str, cgroup_root: str) -> CgroupPaths:
    """Locate this process's memory and cpu cgroup directories (v1 preferred for memory in
    hybrid mode, because there the v2 hierarchy carries no controllers)."""
    text = _read_text(os.path.join(proc_root, "self", "cgroup")) or ""
    v1, v2 = parse_proc_cgroup(text)
    mounts = parse_mountinfo(_read_text(os.path.join(proc_root, "self", "mountinfo")) or "")
    mem = _v1_mount(mounts, "memory")
    if mem is not None and "memory" in v1:
        cpu = _v1_mount(mounts, "cpu")
        cpu_dir = _resolve(cpu, v1.get("cpu", "/"), cgroup_root) if cpu else None
        return CgroupPaths("v1", _resolve(mem, v1["memory"], cgroup_root), cpu_dir, v1["memory"])
    unified = [m for m in mounts if m["fstype"] == "cgroup2"]
    if v2 is not None and unified:
        d = _resolve(unified[0], v2, cgroup_root)
        return CgroupPaths("v2", d, d, v2)
    return _guess_without_mountinfo(cgroup_root, v1, v2)


def _guess_without_mountinfo(cgroup_root: str, v1: Dict[str, str], v2: Optional[str]) -> CgroupPaths:
    """No usable mountinfo (odd sandboxes): try the conventional layout under cgroup_root."""
    if "memory" in v1 and os.path.isdir(os.path.join(cgroup_root, "memory")):
        base = os.path.join(cgroup_root, "memory")
        d = os.path.join(base, v1["memory"].lstrip("/"))
        cpu_base = os.path.join(cgroup_root, "cpu")
        cd = os.path.join(cpu_base, v1.get("cpu", "/").lstrip("/"))
        return CgroupPaths("v1", d if os.path.isdir(d) else base,
                           cd if os.path.isdir(cd) else (cpu_base if os.path.isdir(cpu_base) else None),
                           v1["memory"])
    if v2 is not None and os.path.exists(os.path.join(cgroup_root, "cgroup.controllers")):
        d = os.path.join(cgroup_root, v2.lstrip("/"))
        d = d if os.path.isdir(d) else cgroup_root
        return CgroupPaths("v2", d, d, v2)
    return CgroupPaths("none", None, None)


class FileReader:
    """Keeps small kernel files open and re-reads them with one pread each."""

    def __init__(self) -> None:
        self._fds: Dict[str, int] = {}

    def read(self, path: Optional[str]) -> Optional[str]:
        if not path:
            return None
        fd = self._fds.get(path)
        try:
            if fd is None:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                self._fds[path] = fd
            return os.pread(fd, 65536, 0).decode("utf-8", "replace")
        except OSError:
            # Missing file (old kernel, no memory.peak) or a removed cgroup (ENODEV): drop the
            # fd so a recreated file is picked up next time.
            self._drop(path)
            return None

    def _drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        for path in list(self._fds):
            self._drop(path)


def _int(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _keyed(text: Optional[str], key: str) -> Optional[int]:
    """`key N` from flat-keyed files (memory.events, memory.oom_control, meminfo)."""
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def parse_psi_some_avg10(text: Optional[str]) -> Optional[float]:
    """`some avg10=1.23 avg60=... total=...` -> 1.23."""
    for line in (text or "").splitlines():
        if line.startswith("some "):
            for field in line.split()[1:]:
                if field.startswith("avg10="):
                    try:
                        return float(field[6:])
                    except ValueError:
                        return None
    return None


def parse_cpu_max(text: Optional[str]) -> Optional[float]:
    """v2 cpu.max `max 100000` -> None; `200000 100000` -> 2.0 cores."""
    parts = (text or "").split()
    if len(parts) < 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return round(quota / period, 3) if quota > 0 and period > 0 else None


class CgroupReader:
    """Reads memory/cpu numbers of one cgroup, v1 or v2, with the kernel's file names."""

    def __init__(self, paths: CgroupPaths, proc_root: str):
        self.paths = paths
        self.proc_root = proc_root
        self.files = FileReader()

    def _f(self, directory: Optional[str], name: str) -> Optional[str]:
        return self.files.read(os.path.join(directory, name)) if directory else None

    def memory(self) -> Dict[str, Any]:
        p, mem = self.paths, self.paths.memory_dir
        if p.version == "v1":
            cur = _int(self._f(mem, "memory.usage_in_bytes"))
            limit = _int(self._f(mem, "memory.limit_in_bytes"))
            limit = None if limit is None or limit >= _V1_UNLIMITED else limit
            peak = _int(self._f(mem, "memory.max_usage_in_bytes"))
            oom = _keyed(self._f(mem, "memory.oom_control"), "oom_kill")
            psi = None
        elif p.version == "v2":
            cur = _int(self._f(mem, "memory.current"))
            raw = self._f(mem, "memory.max")
            limit = None if raw is None or raw.strip() == "max" else _int(raw)
            peak = _int(self._f(mem, "memory.peak"))
            oom = _keyed(self._f(mem, "memory.events"), "oom_kill")
            psi = parse_psi_some_avg10(self._f(mem, "memory.pressure"))
        else:
            cur = limit = peak = oom = psi = None
        pct = round(100.0 * cur / limit, 1) if cur is not None and limit else None
        out = {"cgroup": p.version, "current_bytes": cur, "max_bytes": limit, "used_pct": pct,
               "peak_bytes": peak, "oom_kill": oom, "pressure_some_avg10": psi}
        out.update(self.host_memory())
        return out

    def host_memory(self) -> Dict[str, Any]:
        text = self.files.read(os.path.join(self.proc_root, "meminfo"))
        total, avail = _keyed(text, "MemTotal"), _keyed(text, "MemAvailable")
        return {"host_total_bytes": total * 1024 if total is not None else None,
                "host_available_bytes": avail * 1024 if avail is not None else None}

    def oom_kill(self) -> Optional[int]:
        """Only the oom_kill counter (stage start/end deltas), without a full memory read."""
        name = {"v1": "memory.oom_control", "v2": "memory.events"}.get(self.paths.version)
        return _keyed(self._f(self.paths.memory_dir, name), "oom_kill") if name else None

    def quota_cores(self) -> Optional[float]:
        p, cpu = self.paths, self.paths.cpu_dir
        if p.version == "v1":
            quota = _int(self._f(cpu, "cpu.cfs_quota_us"))
            period = _int(self._f(cpu, "cpu.cfs_period_us"))
            if quota is None or period is None or quota <= 0 or period <= 0:
                return None
            return round(quota / period, 3)
        if p.version == "v2":
            return parse_cpu_max(self._f(cpu, "cpu.max"))
        return None

    def cpu(self) -> Dict[str, Any]:
        psi = None
        if self.paths.version == "v2":
            psi = parse_psi_some_avg10(self._f(self.paths.cpu_dir, "cpu.pressure"))
        load = self.files.read(os.path.join(self.proc_root, "loadavg"))
        try:
            load1 = float(load.split()[0]) if load else None
        except (ValueError, IndexError):
            load1 = None
        return {"quota_cores": self.quota_cores(), "pressure_some_avg10": psi,
                "affinity_cores": affinity_cores(), "host_cores": os.cpu_count(),
                "host_load1": load1}

    def uptime_s(self) -> Optional[float]:
        text = self.files.read(os.path.join(self.proc_root, "uptime"))
        try:
            return float(text.split()[0]) if text else None
        except (ValueError, IndexError):
            return None

    def close(self) -> None:
        self.files.close()


def affinity_cores() -> Optional[int]:
    """CPUs this process may run on (cpuset / taskset); None where the OS cannot say."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def tracking_dir(proc_root: str, cgroup_root: str) -> Optional[str]:
    """This process's cgroup in a hierarchy where a child cgroup can hold a stage's processes:
    cgroup v2 first, then v1's pids, freezer or name=systemd hierarchy (any hierarchy tracks
    membership; none of these carries the memory limit, so moving a stage changes no limit)."""
    v1, v2 = parse_proc_cgroup(_read_text(os.path.join(proc_root, "self", "cgroup")) or "")
    mounts = parse_mountinfo(_read_text(os.path.join(proc_root, "self", "mountinfo")) or "")
    unified = [m for m in mounts if m["fstype"] == "cgroup2"]
    if v2 is not None and unified:
        return _resolve(unified[0], v2, cgroup_root)
    for controller in ("pids", "freezer", "name=systemd"):
        m = _v1_mount(mounts, controller)
        if m is not None and controller in v1:
            return _resolve(m, v1[controller], cgroup_root)
    return None
