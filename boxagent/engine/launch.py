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


def slurm_options(spec: Dict[str, Any], stage: Dict[str, Any]) -> Dict[str, Any]:
    """The sbatch options of one stage: the job's [slurm] table under the stage's. A stage
    `timeout` without a `slurm.time` becomes the job's time limit (whole minutes, rounded up:
    Slurm's unit); Slurm then enforces it, with or without the daemon."""
    from boxagent.slurm.spec import format_slurm_time, merge
    options = merge(spec.get("slurm"), stage.get("slurm"))
    if "time" not in options and stage.get("timeout"):
        options["time"] = format_slurm_time(60 * int(math.ceil(float(stage["timeout"]) / 60.0)))
    return options


def slurm_record(record: Dict[str, Any], stage: Dict[str, Any], marker: str,
                 marker_record: Dict[str, Any]) -> Dict[str, Any]:
    """The launch record of an attempt that runs as a Slurm job: the shim on the node judges the
    stage itself (Slurm's afterok follows the batch job's exit status) and writes its marker."""
    return dict(record, slurm=True, expect=list(stage.get("expect") or []),
                success_pattern=stage.get("success_pattern"), fail_pattern=stage.get("fail_pattern"),
                marker={"path": marker, "record": marker_record})
