"""The last hour of health in fixed time buckets, for the sparklines in `status`.

Samples (every `sample_every`, 10 s by default) fold into `step_s` buckets (60 s): at most
`points` (60) values per series whatever the sampling rate, so status.json stays small (8 GPUs
and an hour of history fit well under 64 KB). Utilisation is averaged over a bucket; levels
that can kill a job (memory, disk, temperature) keep the bucket's maximum, so a one-sample
spike is not averaged away. Buckets with no sample (daemon down) are null.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

_MEAN, _MAX = "mean", "max"


class _Series:
    __slots__ = ("mode", "vals")

    def __init__(self, mode: str):
        self.mode = mode
        self.vals: Dict[int, List[float]] = {}  # bucket -> [sum, count, max]

    def add(self, bucket: int, value: Optional[float]) -> None:
        if value is None:
            return
        agg = self.vals.get(bucket)
        if agg is None:
            self.vals[bucket] = [value, 1, value]
        else:
            agg[0] += value
            agg[1] += 1
            agg[2] = max(agg[2], value)

    def value(self, bucket: int) -> Optional[int]:
        agg = self.vals.get(bucket)
        if agg is None:
            return None
        return int(round(agg[0] / agg[1] if self.mode == _MEAN else agg[2]))

    def prune(self, oldest: int) -> None:
        for b in [b for b in self.vals if b < oldest]:
            del self.vals[b]


class History:
    """Ring of `points` buckets of `step_s` seconds (wall clock)."""

    def __init__(self, step_s: int = 60, points: int = 60):
        self.step_s = step_s
        self.points = points
        self.current: Optional[int] = None
        self.groups: Dict[str, Dict[str, _Series]] = {}

    def _series(self, group: str, key: str, mode: str) -> _Series:
        g = self.groups.setdefault(group, {})
        s = g.get(key)
        if s is None:
            s = g[key] = _Series(mode)
        return s

    def add(self, now: float, health: Dict[str, Any]) -> None:
        bucket = int(now // self.step_s)
        if self.current is None or bucket > self.current:
            self.current = bucket
            oldest = bucket - self.points + 1
            for g in self.groups.values():
                for s in g.values():
                    s.prune(oldest)
        mem = health.get("memory") or {}
        self._series("mem_used_pct", "", _MAX).add(bucket, mem.get("used_pct"))
        for gpu in health.get("gpus") or []:
            key = str(gpu.get("index"))
            self._series("gpu_util_pct", key, _MEAN).add(bucket, gpu.get("util_pct"))
            self._series("gpu_temp_c", key, _MAX).add(bucket, gpu.get("temperature_c"))
        for disk in health.get("disks") or []:
            key = str(disk.get("path"))
            self._series("disk_used_pct", key, _MAX).add(bucket, disk.get("bytes_used_pct"))
            self._series("disk_inodes_used_pct", key, _MAX).add(bucket, disk.get("inodes_used_pct"))

    def to_dict(self) -> Dict[str, Any]:
        """ARCHITECTURE's `history`: {"step_s", "t0", <series>: [...] or {key: [...]}}."""
        if self.current is None:
            return {"step_s": self.step_s, "t0": None}
        first = self._first_bucket(self.current)
        buckets = range(first, self.current + 1)
        out: Dict[str, Any] = {"step_s": self.step_s, "t0": first * self.step_s}
        for name, group in sorted(self.groups.items()):
            rendered = {}
            for key, s in sorted(group.items()):
                vals = [s.value(b) for b in buckets]
                if any(v is not None for v in vals):
                    rendered[key] = vals
            out[name] = rendered.get("", []) if name == "mem_used_pct" else rendered
        return out

    def _first_bucket(self, current: int) -> int:
        oldest = current - self.points + 1
        have = [b for g in self.groups.values() for s in g.values() for b in s.vals]
        return max(oldest, min(have)) if have else current
