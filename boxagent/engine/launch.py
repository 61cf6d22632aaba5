"""What a stage attempt is started with: its environment and the launch record the shim reads
(a file, so env values never reach argv, where `ps` on the box would show them).
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def stage_env(spec: Dict[str, Any], stage: Dict[str, Any], run: str, attempt: int, home_root: str,
              quota_cores: Optional[float], hints: Dict[str, str],
              extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The env overlay: profile hints < job env < stage env; then what rgt always sets. `extra`
    (the run's GPU slot and sweep variables) wins over the job's own."""
    env: Dict[str, str] = {}
    env.update({k: str(v) for k, v in (hints or {}).items() if k not in os.environ})
    env.update(spec.get("env") or {})
    env.update(stage.get("env") or {})
    env.update(extra or {})
    # Buffered stdout makes a live job look silent (and stalled) for minutes: on unless the job
    # says otherwise (`PYTHONUNBUFFERED = ""` in its env is honoured, never silently undone).
    env.setdefault("PYTHONUNBUFFERED", "1")
    if quota_cores:
        # Thread pools sized to the host's cores under a small cgroup quota thrash (GPU idles).
        cap = str(max(1, int(math.floor(quota_cores))))
        for var in THREAD_VARS:
            if var not in env:
                env[var] = cap
    env.update({"RGT_HOME": home_root, "RGT_RUN": run, "RGT_STAGE": stage["name"], "RGT_ATTEMPT": str(attempt)})
    return env


def launch_record(stage: Dict[str, Any], workdir: str, env: Dict[str, str], log: str) -> Dict[str, Any]:
    return {"command": stage["run"], "workdir": workdir, "env": env, "log": log}
