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
A request with a state record is done. A new driver (the next generation, after one ended)
skips requests an earlier one started (a start record, or the shim's claim): Ray ends a
driver's tasks with it (and the task worker's children), so the daemon judges those as ended
with their driver, never a second start of one attempt.
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


def _cell(argv, env, cancel, start_path, grace, driver, exit_path):
    """The task: start the shim detached from this worker (Ray kills a worker's children when
    the worker ends, and the worker ends with its driver: the shim must outlive both to write
    its exit file), then watch it until it ends; a cancel file stops it."""
    import ray
    import socket
    import subprocess
    ctx = ray.get_runtime_context()
    _write(start_path, {"start_time": int(time.time() * 1000), "driver_node_id": ctx.get_node_id(),
                        "node_ip": ray.util.get_node_ip_address(), "host": socket.gethostname(),
                        "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "driver": driver})
    # sh starts the shim in the background and exits: the shim's parent is init, not this worker.
    out = subprocess.run(["/bin/sh", "-c", '"$@" </dev/null >/dev/null 2>&1 & echo $!', "sh"] + list(argv),
                         env=dict(os.environ, **env), start_new_session=True, stdout=subprocess.PIPE, check=True)
    pid = int(out.stdout.split()[0])
    shim = {"pid": pid, "ticks": _ticks(pid)}
    _write(start_path[:-len(".start.json")] + ".shim.json", shim)
    return _watch(shim, exit_path, cancel, grace)


def _ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _watch(shim, exit_path, cancel, grace):
    """Until the shim ends (its exit file, or the process gone: then a moment for the exit file
    to come through the shared filesystem); a cancel file TERMs its process group, KILL after
    `grace`. Also run as its own task on the shim's node by a driver that took over."""
    import signal
    pid = shim.get("pid")
    stopped_at = None
    while True:
        done = _read(exit_path)
        if not done and (not pid or _ticks(pid) != shim.get("ticks")):
            time.sleep(1.0)
            done = _read(exit_path)
            if not done:
                return {"exit_code": None, "stopped": stopped_at is not None, "gone": True}
        if done:
            return {"exit_code": done.get("exit_code"), "stopped": stopped_at is not None}
        if stopped_at is None and os.path.exists(cancel):
            stopped_at = time.time()
            _kill(pid, signal.SIGTERM, group=False)     # the shim forwards TERM to its command's group
        elif stopped_at is not None and time.time() - stopped_at > grace:
            command = _read(exit_path[:-len(".exit")] + ".pid").get("pid") if exit_path.endswith(".exit") else None
            for target in (command, pid):
                _kill(target, signal.SIGKILL)
        time.sleep(POLL_S)


def _kill(pid, sig, group=True):
    """The process, or its whole process group."""
    if not isinstance(pid, int) or pid <= 1:
        return
    try:
        if group:
            os.killpg(os.getpgid(pid), sig)
        else:
            os.kill(pid, sig)
    except OSError:
        pass


def main(argv):
    base, me = argv[1], argv[2]
    import ray
    from ray import exceptions as rex
    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level=40, log_to_driver=False)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    cell = ray.remote(num_cpus=0, max_retries=0)(_cell)
    watch = ray.remote(num_cpus=0, max_retries=0)(_watch)
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
            start = _read(os.path.join(states, sid + ".start.json"))
            if start or os.path.exists(req.get("claim") or ""):
                # An earlier driver started it: watch its shim where it runs, never a second start.
                shim = _read(os.path.join(states, sid + ".shim.json"))
                where = NodeAffinitySchedulingStrategy(start.get("driver_node_id") or "", soft=False)
                ref = watch.options(scheduling_strategy=where).remote(
                    shim, req.get("exit") or "", os.path.join(base, "cancel", sid), GRACE_S)
                running[ref] = (sid, time.time())
                continue
            ref = cell.options(num_gpus=req.get("gpus") or 0).remote(
                req["argv"], req["env"], os.path.join(base, "cancel", sid),
                os.path.join(states, sid + ".start.json"), GRACE_S, me, req.get("exit") or "")
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
                if out.get("gone"):
                    rec.update(status="FAILED", error_type="ShimGone",
                               message="the shim ended without its exit file after rgt's driver %s ended"
                                       % start.get("driver"))
                elif out["stopped"]:
                    rec["status"] = "STOPPED"
                elif out["exit_code"] not in (0, None):
                    rec["status"] = "FAILED"
            except (rex.NodeDiedError, rex.WorkerCrashedError, rex.OwnerDiedError, rex.RayTaskError,
                    rex.RayError) as exc:
                node = start.get("driver_node_id")
                said = str(exc)[:2000]
                if isinstance(exc, rex.NodeDiedError) or _node_dead(ray, node):
                    # In the Jobs API's words for a job whose node died ("... its node has died.
                    # Node Id: <id>"), which the daemon reads as node_failure: a task on a killed
                    # node said only "the node it was running on is dead", and was judged an
                    # exit without its exit file, never retried.
                    said = "the task's node has died. Node Id: %s. Ray: %s" % (node, said)
                else:
                    said = "%s (node id: %s)" % (said, node)
                rec.update(status="FAILED", error_type=type(exc).__name__, message=said)
            _write(os.path.join(states, sid + ".json"), rec)


def _node_dead(ray, node_id):
    """The GCS's word that the node is no longer alive (a task on a node that died may end as
    WorkerCrashedError, or a takeover's watch as unschedulable, before any NodeDiedError)."""
    if not node_id:
        return False
    try:
        return any(n.get("NodeID") == node_id and not n.get("Alive") for n in ray.nodes())
    except Exception:       # noqa: BLE001 - asking is best effort; the record still says what Ray raised
        return False


def _read(path):
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
