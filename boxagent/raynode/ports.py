"""The pinned ports of one Ray node, from one base port: every node must reach every other on
them, so a firewall (and rgt's probe) can name each one."""
from __future__ import annotations

from typing import Dict, List

WORKER_SPAN = 40


def layout(base: int, head: bool) -> Dict[str, int]:
    """name -> port. The head adds the GCS (`--port`) and the dashboard (the Jobs API)."""
    ports = {"node_manager": base + 10, "object_manager": base + 11, "dashboard_agent": base + 2,
             "metrics_export": base + 3, "runtime_env_agent": base + 4,
             "min_worker": base + 20, "max_worker": base + 20 + WORKER_SPAN}
    if head:
        ports.update(gcs=base, dashboard=base + 1, client_server=base + 5)
    return ports


def must_reach(base: int, head: bool) -> List[int]:
    """The ports other nodes connect to (the worker range by its two ends)."""
    p = layout(base, head)
    names = ["node_manager", "object_manager", "min_worker", "max_worker"] + (["gcs", "dashboard"] if head else [])
    return sorted(p[n] for n in names)
