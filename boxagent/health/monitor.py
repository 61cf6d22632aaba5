"""HealthMonitor: the daemon's one entry point into health. CONTRACT (docs/ARCHITECTURE.md).

This is the interface stub the daemon is written against; issue 4 replaces the bodies.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.roots import Roots


class HealthMonitor:
    def __init__(self, roots: Roots, config: Dict[str, Any], profile: Dict[str, Any]):
        self.roots = roots
        self.config = config
        self.profile = profile
        self._last: Optional[Dict[str, Any]] = None

    def sample(self, now: float, watched: List[Tuple[str, str]]) -> Dict[str, Any]:
        """Take one sample; return status.json's `health` block; keep it in the history ring.
        `watched` is [(path, role)] with role in state|workdir|data|durable|extra."""
        self._last = {
            "sampled_at": now,
            "memory": {"cgroup": "none", "current_bytes": None, "max_bytes": None, "used_pct": None,
                       "peak_bytes": None, "oom_kill": None, "host_total_bytes": None,
                       "host_available_bytes": None},
            "cpu": {"quota_cores": None, "pressure_some_avg10": None},
            "disks": [],
            "gpu_source": "none",
            "gpu_unavailable_reason": "not sampled yet",
            "gpus": [],
        }
        return self._last

    def alert_events(self, sample: Dict[str, Any], running: List[Tuple[str, str]]) -> List[Dict[str, Any]]:
        """Event specs for alert transitions since the last call (hysteresis inside).
        `running` is [(run, stage)] to attribute e.g. an oom_kill to."""
        return []

    def active_alerts(self) -> List[Dict[str, Any]]:
        """status.json `alerts`: [{key, type, severity, since, summary}]."""
        return []

    def history(self) -> Dict[str, Any]:
        """Compact last-hour series for sparklines (status.json `history`)."""
        return {}

    def oom_kill_count(self) -> Optional[int]:
        """The cgroup oom_kill counter now (None when unknown): stages record deltas."""
        return None

    def cpu_quota_cores(self) -> Optional[float]:
        """The cgroup CPU quota in cores (None = unlimited/unknown): caps OMP_NUM_THREADS."""
        return None

    def gpu_faults_since(self, t0: float) -> List[Dict[str, Any]]:
        """Xid / ECC / GPU-lost seen at or after t0 (wall clock), for a stage's diagnosis:
        [{type: gpu_xid|gpu_ecc|gpu_lost, code?, gpu?, at, source, hardware: bool, summary}]."""
        return []

    def close(self) -> None:
        pass


def now() -> float:
    return time.time()
