"""Box health: cgroup memory/oom_kill/CPU quota, disks, NVML GPUs, Xid, alerts.

`HealthMonitor` is loaded on first use: the stage shim imports `health.cgroup` once per stage
start, and the monitor's NVML (ctypes) imports cost every stage tens of milliseconds."""
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "HealthMonitor":
        from boxagent.health.monitor import HealthMonitor
        return HealthMonitor
    raise AttributeError("module 'boxagent.health' has no attribute %r" % name)
