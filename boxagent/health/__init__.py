"""Box health: cgroup memory/oom_kill/CPU quota, disks, NVML GPUs, Xid, alerts."""
from boxagent.health.monitor import HealthMonitor  # noqa: F401
