"""Health fixtures: the fake libnvidia-ml.so.1 (built once with gcc), its JSON scenarios, and
cgroup/proc fixture trees written with the kernel's exact file formats."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
FAKE_SRC = HERE / "fakenvml" / "fakenvml.c"   # the fake libnvidia-ml.so.1's source


# -- the fake NVML library: built once per session by tests/conftest.py (fake_nvml_lib) ----------
GPU_TEMPLATE: Dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3", "util_gpu": 95, "util_memory": 40,
    "memory_total": 85899345920, "memory_used": 42949672960, "temperature": 62,
    "power_mw": 512000, "sm_clock": 1980, "sm_clock_max": 1980, "clocks_event_reasons": 0,
    "ecc_uncorrected": 0, "remapped": [0, 0, 0, 0], "processes": [],
}
# Real boxes put GPUs on buses with hex letters: the Xid regex trap.
BUS_IDS = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:3B:00.0",
           "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]


def healthy(n: int = 8) -> Dict[str, Any]:
    gpus = []
    for i in range(n):
        g = copy.deepcopy(GPU_TEMPLATE)
        g.update(uuid="GPU-%08d-fake" % i, pci_bus_id=BUS_IDS[i % len(BUS_IDS)])
        gpus.append(g)
    return {"driver_version": "550.54.15", "cuda_version": 12040, "gpus": gpus, "events": []}


def throttling() -> Dict[str, Any]:
    s = healthy(2)
    s["gpus"][1].update(temperature=88, sm_clock=1100, clocks_event_reasons=0x40 | 0x20)
    return s


def xid79() -> Dict[str, Any]:
    s = healthy(4)
    s["events"] = [{"gpu": 3, "xid": 79}]
    return s


def ecc_increase(before: int = 0, after: int = 2) -> List[Dict[str, Any]]:
    a, b = healthy(2), healthy(2)
    a["gpus"][0]["ecc_uncorrected"] = before
    b["gpus"][0]["ecc_uncorrected"] = after
    return [a, b]


def one_lost() -> Dict[str, Any]:
    s = healthy(8)
    s["gpus"][5]["errors"] = {"*": "GPU_IS_LOST"}
    return s


class FakeNvml:
    """Writes the JSON state the C library reads; replaces the file atomically (new inode)."""

    def __init__(self, lib: Path, state: Path):
        self.lib = lib
        self.state = state
        self.lib_dir = lib.parent

    def write(self, scenario: Dict[str, Any]) -> None:
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(scenario))
        os.replace(tmp, self.state)

    def subprocess_env(self, **extra: str) -> Dict[str, str]:
        """Env for a child that finds the fake through the real loader path (LD_LIBRARY_PATH)."""
        env = dict(os.environ)
        env.pop("RGT_NVML_LIB", None)
        env.update(LD_LIBRARY_PATH=str(self.lib_dir), FAKE_NVML_STATE=str(self.state))
        env.update(extra)
        return env

    def calls(self, name: str) -> int:
        import ctypes
        lib = ctypes.CDLL(str(self.lib))
        lib.fakeNvmlCallCount.restype = ctypes.c_ulong
        return int(lib.fakeNvmlCallCount(name.encode()))


@pytest.fixture
def fake_nvml(fake_nvml_lib, tmp_path, monkeypatch) -> FakeNvml:
    """In-process seam: RGT_NVML_LIB makes boxagent.health.nvml hand the fake to pynvml."""
    state = tmp_path / "nvml-state.json"
    fake = FakeNvml(fake_nvml_lib, state)
    fake.write(healthy(8))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("RGT_NVML_LIB", str(fake_nvml_lib))
    return fake


# -- cgroup / proc fixture trees -----------------------------------------------------------
MEMINFO = ("MemTotal:       263856712 kB\nMemFree:        200000000 kB\n"
           "MemAvailable:   250000000 kB\nBuffers:          123456 kB\n")

V1_MOUNTINFO = """\
22 27 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 22 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
33 31 0:30 {root} /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory
34 31 0:31 {root} /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
"""
V2_MOUNTINFO = """\
22 27 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:26 {root} /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:8 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class CgroupTree:
    def __init__(self, base: Path):
        self.proc = base / "proc"
        self.cgroup = base / "cgroup"
        self.dir: Optional[Path] = None

    def roots(self, kmsg: Optional[str] = None):
        from boxagent.base.roots import Roots
        return Roots(proc=str(self.proc), cgroup=str(self.cgroup),
                     kmsg=kmsg or str(self.proc.parent / "kmsg-none"))

    def proc_files(self, cgroup_text: str, mountinfo: str) -> None:
        _w(self.proc / "self" / "cgroup", cgroup_text)
        _w(self.proc / "self" / "mountinfo", mountinfo)
        _w(self.proc / "meminfo", MEMINFO)
        _w(self.proc / "uptime", "12345.67 24000.00\n")
        _w(self.proc / "loadavg", "3.50 2.00 1.00 2/345 6789\n")
        _w(self.proc / "sys" / "kernel" / "random" / "boot_id", "0d7f4a8e-1111-2222-3333-444455556666\n")

    def files(self, directory: Path, files: Dict[str, str]) -> None:
        for name, text in files.items():
            _w(directory / name, text)


def v1_memory_files(usage: int, limit: int, peak: int, oom_kill: Optional[int]) -> Dict[str, str]:
    oom = "oom_kill_disable 0\nunder_oom 0\n" + ("oom_kill %d\n" % oom_kill if oom_kill is not None else "")
    return {"memory.usage_in_bytes": "%d\n" % usage, "memory.limit_in_bytes": "%d\n" % limit,
            "memory.max_usage_in_bytes": "%d\n" % peak, "memory.oom_control": oom}


def v2_files(current: int, mx: str, peak: Optional[int], oom_kill: int, cpu_max: str) -> Dict[str, str]:
    files = {"memory.current": "%d\n" % current, "memory.max": mx + "\n",
             "memory.events": "low 0\nhigh 0\nmax 12\noom %d\noom_kill %d\noom_group_kill 0\n" % (oom_kill, oom_kill),
             "cpu.max": cpu_max + "\n",
             "cpu.pressure": "some avg10=1.25 avg60=0.50 avg300=0.10 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
             "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
             "cgroup.controllers": "cpuset cpu io memory pids\n"}
    if peak is not None:
        files["memory.peak"] = "%d\n" % peak
    return files


@pytest.fixture
def cgtree(tmp_path) -> CgroupTree:
    return CgroupTree(tmp_path / "tree")
