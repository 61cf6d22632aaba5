"""The Ray backend (`backend = "ray"`): its processes and its rules. Each stage attempt runs the
agent's own stage shim on a node Ray picks, holding the job's `gpus` as Ray GPUs; Ray sets
CUDA_VISIBLE_DEVICES for the shim; rgt adds no placement. Two ways, by config.json
`ray_attempts`:
- "tasks" (the default, raytasks.py): a task of rgt's one long-lived driver on the cluster. The
  node keeps the attempt's files in rgt's folder on its own disk and the driver streams the pid
  record, the log and the exit record back into RGT_HOME here: no shared filesystem.
- "jobs" (rayctl.RayProcesses): one Ray Job per attempt through the Jobs REST API (raybook.py),
  `entrypoint_num_gpus` = gpus; the shim reads its launch file and writes its files under
  RGT_HOME, which must then be on a filesystem the nodes share at the same path (as with Slurm).
Either way the log is the run's log on the box the user talks to, so triage, progress, `logs
--follow` and the report read it unchanged; the pid record says where it ran (host,
CUDA_VISIBLE_DEVICES as Ray set them); the stage's `placement` in status says it with Ray's node
id and address. The agent never imports `ray`.

- a run starts at once (Ray's cluster, not this host's GPU slots, holds it), but rgt submits an
  attempt only while some live node has `gpus` free (cluster_status): nothing waits in Ray (a Job
  would fail past RAY_JOB_START_WAIT_TIME_S), the wait is in rgt's own queue, in submission order.
- exactly once: the attempt's id is written before the submission; Ray refuses a second job with
  that id, the driver marks a task sent before sending it and asks the nodes before a second
  start, and the shim's O_EXCL claim refuses a second start.
- an attempt ends when its exit file appears, or when Ray names its end and no exit file came
  within `ray_exit_grace`: then Ray's record is the evidence, and an attempt whose node is DEAD
  ends as `node_failure` with the node's id, address and state message, retried per the stage's
  `retries` (Ray places the retry on a live node).
- cancel and timeout stop the attempt (TERM to the shim and its command's group, KILL after a
  grace): its GPUs are Ray's again. A SIGTERM to the daemon leaves the attempts running: the next
  daemon re-adopts them from the attempt files.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

from boxagent.base.home import Home
from boxagent.engine import states as S
from boxagent.engine.launch import launch_record, stage_env
from boxagent.engine.ports import RunHost, StageProcesses, Traits
from boxagent.engine.raybook import DEFAULT_ADDRESS, FINAL
from boxagent.engine.records import Run


def address_of(spec: Dict[str, Any], config: Dict[str, Any]) -> str:
    """The cluster a run's stages go to: the job's `[ray] address`, else config.json's
    `ray_address`, else a dashboard on this host."""
    addr = (spec.get("ray") or {}).get("address") or config.get("ray_address")
    return str(addr) if isinstance(addr, str) and addr else DEFAULT_ADDRESS


class RayBackend:
    name = "ray"
    traits = Traits(queues_elsewhere=True, runs_elsewhere=True, own_timeout=False, shim_marks=False)

    def __init__(self, procs: StageProcesses, config: Dict[str, Any]):
        self.procs = procs
        self.config = config

    @classmethod
    def assemble(cls, home: Home, config: Dict[str, Any], settings: Dict[str, Any],
                 log: Callable[[str], None]) -> "RayBackend":
        from boxagent.engine.rayctl import RayProcesses
        python = config.get("ray_python")
        token = _token(config, home)
        mode = config.get("ray_attempts") or "tasks"
        if mode not in ("tasks", "jobs"):
            log("config.json ray_attempts %r is neither \"tasks\" nor \"jobs\": tasks" % (mode,))
        from boxagent.engine.raytasks import RayTaskProcesses
        kind = RayProcesses                             # one Ray Job per attempt (rayctl.py)
        if mode != "jobs":                              # tasks of one long-lived driver (raytasks.py)
            kind = RayTaskProcesses
        procs = kind(home, python if isinstance(python, str) and python else None, token,
                     settings["ray_poll"], settings["ray_exit_grace"], log)
        if isinstance(procs, RayTaskProcesses):
            procs.driver_wait = settings["ray_driver_wait"]
        return cls(procs, config)

    def launch_record(self, host: RunHost, att: Any, run: Run) -> Dict[str, Any]:
        spec = host.specs[run.name]
        env = stage_env(spec, att.sspec, run.name, att.ref.attempt, host.store.home.root, None, host.env_hints)
        log = host.store.log_path(run.name, att.stage, att.ref.attempt)
        gpus = spec.get("gpus", 0)
        return dict(launch_record(att.sspec, spec["workdir"], env, log),
                    ray={"address": address_of(spec, self.config), "gpus": gpus if isinstance(gpus, int) else 0})

    def sync(self, host: RunHost, now: float) -> None:
        """Where each running attempt's job is, and its state, into the stage (status shows it)."""
        for run in list(host.runs.values()):
            if (host.specs.get(run.name) or {}).get("backend") != self.name or not (
                    run.state == S.RUNNING or any(st.placement and st.placement.get("state") not in FINAL
                                                  for st in run.stages)):
                continue            # an ended run is followed until Ray names its job's end (status converges)
            view = self.procs.queue_view(run.name)
            changed = False
            for st in run.stages:
                seen = view.get(st.name)
                if seen is None or seen.get("attempt") != st.attempt:
                    continue
                changed = st.placed(seen) or changed
                att = host.active.get(run.name)
                if att is not None and att.stage == st.name and seen.get("state") == "RUNNING" and seen.get("start_at"):
                    att.running_since = seen["start_at"]
            if changed:
                host.store.save(run)

    def left_behind(self, host: RunHost, run: Any, now: float) -> List[Dict[str, Any]]:
        return []       # one stage's job at a time: nothing of a later stage waits in Ray


def _token(config: Dict[str, Any], home: Home) -> Optional[str]:
    """Ray's auth token (RAY_AUTH_MODE=token), read from a file: `ray_token_file` in config.json,
    else RAY_AUTH_TOKEN_PATH, else the one `rgt-client ray up` left in RGT_HOME, else Ray's own
    default path. Never from argv or config.json itself."""
    for path in (config.get("ray_token_file"), os.environ.get("RAY_AUTH_TOKEN_PATH"),
                 os.path.join(home.root, "ray-auth-token"), os.path.expanduser("~/.ray/auth_token")):
        if not path:
            continue
        try:
            with open(str(path)) as fh:
                return fh.read().strip() or None
        except OSError:
            continue
    return None
