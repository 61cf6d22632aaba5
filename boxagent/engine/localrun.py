"""The local backend (`backend = "local"`, the default): each stage attempt runs on this host under
the agent's shim (shimctl.ShimProcesses), on the run's GPUs, within this host's CPU quota; the
daemon enforces the stage's timeout and reads this host's cgroup and GPUs when it ends.
"""
from __future__ import annotations

from typing import Any, Dict, List

from boxagent.engine.launch import launch_record, stage_env
from boxagent.engine.ports import RunHost, StageProcesses, Traits
from boxagent.engine.slots import Gpu, stage_env as gpu_env


class LocalBackend:
    name = "local"
    traits = Traits(queues_elsewhere=False, runs_elsewhere=False, own_timeout=False, shim_marks=False)

    def __init__(self, procs: StageProcesses):
        self.procs = procs

    def launch_record(self, host: RunHost, att: Any, run: Any) -> Dict[str, Any]:
        spec = host.specs[run.name]
        gpus = None if run.gpus is None else [Gpu(i, u) for i, u in zip(run.gpus, run.gpu_uuids or [None] * len(run.gpus))]
        env = stage_env(spec, att.sspec, run.name, att.ref.attempt, host.store.home.root,
                        host.box.cpu_quota_cores(), host.env_hints, gpu_env(gpus))
        log = host.store.log_path(run.name, att.stage, att.ref.attempt)
        return launch_record(att.sspec, spec["workdir"], env, log)

    def sync(self, host: RunHost, now: float) -> None:
        pass            # nothing queues elsewhere: the records are the daemon's own

    def left_behind(self, host: RunHost, run: Any, now: float) -> List[Dict[str, Any]]:
        return []       # a later stage here starts only when the one before succeeded
