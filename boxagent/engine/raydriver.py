"""rgt's long-lived Ray driver: one per cluster and daemon home, run ONLY by the cluster's own
Python as a Ray Job (`python -m boxagent.engine.raydriver DIR`, where `ray` is installed). The
agent never imports this module: `ray` is imported inside main(), and nothing of boxagent
imports it (tests/ray/test_ray_tasks.py checks both).

Why it exists: a Ray Job per attempt costs Ray a JobSupervisor actor in a fresh worker process
that imports ray, 1 s alone and 8 s a wave of 8 on a loaded box (bench/ray_start_cost.py); a task
from a driver that stays up starts in a fraction of that.

It talks with the daemon through files under DIR (on the filesystem the nodes share):
  requests/<sid>.json    written by the daemon before anything starts: the shim's argv, env, gpus
  state/<sid>.start.json written by the task on its node: node id and address, host, GPU ids
  state/<sid>.json       written by the driver when the task ended, in the shape of a Jobs API
                         record (status, start/end time, node, error type and message)
  cancel/<sid>           written by the daemon: the task TERMs the shim's process group and
                         KILLs it after GRACE_S (the shim forwards TERM to its command)
A request with a state record is done. After a restart the driver skips requests whose shim
already claimed the attempt (`claim` in the request): the shim runs on, or its end is the
daemon's to judge from the exit file, never a second start.
"""
import json
import os
import sys
import time

GRACE_S = 3.0       # the TERM -> KILL wait, as Ray's own job stop
POLL_S = 0.05


def _write(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def _cell(argv, env, cancel, start_path, grace):
    """The task: start the shim in its own session, wait for it; a cancel file stops it."""
    import ray
    import signal
    import socket
    import subprocess
    ctx = ray.get_runtime_context()
    _write(start_path, {"start_time": int(time.time() * 1000), "driver_node_id": ctx.get_node_id(),
                        "node_ip": ray.util.get_node_ip_address(), "host": socket.gethostname(),
                        "gpu_ids": [str(g) for g in ray.get_gpu_ids()]})
    child = subprocess.Popen(argv, env=dict(os.environ, **env), start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stopped_at = None
    while True:
        code = child.poll()
        if code is not None:
            return {"exit_code": code, "stopped": stopped_at is not None}
        if stopped_at is None and os.path.exists(cancel):
            stopped_at = time.time()
            _kill(child.pid, signal.SIGTERM)
        elif stopped_at is not None and time.time() - stopped_at > grace:
            _kill(child.pid, signal.SIGKILL)
        time.sleep(POLL_S)


def _kill(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def main(argv):
    base = argv[1]
    import ray
    from ray import exceptions as rex
    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level=40, log_to_driver=False)
    cell = ray.remote(num_cpus=0, max_retries=0)(_cell)
    reqs, states = os.path.join(base, "requests"), os.path.join(base, "state")
    for d in (reqs, states, os.path.join(base, "cancel")):
        os.makedirs(d, exist_ok=True)
    running = {}            # object ref -> (sid, submitted at)
    sids = set()
    while True:
        for name in sorted(os.listdir(reqs)):
            sid = name[:-5]
            if not name.endswith(".json") or sid in sids or os.path.exists(os.path.join(states, sid + ".json")):
                continue
            sids.add(sid)
            try:
                with open(os.path.join(reqs, name)) as fh:
                    req = json.load(fh)
            except (OSError, ValueError):
                sids.discard(sid)       # half-written: the daemon writes it atomically, so a retry sees it whole
                continue
            if os.path.exists(req.get("claim") or ""):
                continue                # a shim already claimed it (an earlier driver started it): never twice
            ref = cell.options(num_gpus=req.get("gpus") or 0).remote(
                req["argv"], req["env"], os.path.join(base, "cancel", sid),
                os.path.join(states, sid + ".start.json"), GRACE_S)
            running[ref] = (sid, time.time())
        if not running:
            time.sleep(0.2)
            continue
        done, _ = ray.wait(list(running), num_returns=len(running), timeout=0.2)
        for ref in done:
            sid, _sent = running.pop(ref)
            start = _read(os.path.join(states, sid + ".start.json"))
            rec = {"status": "SUCCEEDED", "start_time": start.get("start_time"), "end_time": int(time.time() * 1000),
                   "driver_node_id": start.get("driver_node_id"),
                   "driver_agent_http_address": "http://%s:0" % start["node_ip"] if start.get("node_ip") else None,
                   "message": None, "error_type": None, "driver_exit_code": None}
            try:
                out = ray.get(ref)
                rec["driver_exit_code"] = out["exit_code"]
                if out["stopped"]:
                    rec["status"] = "STOPPED"
                elif out["exit_code"] != 0:
                    rec["status"] = "FAILED"
            except (rex.NodeDiedError, rex.WorkerCrashedError, rex.OwnerDiedError, rex.RayTaskError,
                    rex.RayError) as exc:
                rec.update(status="FAILED", error_type=type(exc).__name__,
                           message="%s (node id: %s)" % (str(exc)[:2000], start.get("driver_node_id")))
            _write(os.path.join(states, sid + ".json"), rec)


def _read(path):
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
