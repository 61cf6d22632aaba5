"""Ray on this box, started and stopped for `rgt-client ray up/down`: `ray start` with every port
pinned, usage stats off, --num-gpus from NVML, token auth; the processes it made are recorded
(ray-node.json: pid + start time) so `stop` kills those and their children, nothing else."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional, Set

from boxagent.base.errors import AgentError, UsageError
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.raynode.ports import layout

START_TIMEOUT_S = 180.0


def _ray_bin() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "ray")
    if os.access(here, os.X_OK):
        return here
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, "ray")
        if os.access(path, os.X_OK):
            return path
    raise AgentError("Ray is not installed on this box (no `ray` next to %s or on PATH)" % sys.executable,
                     "install it where the agent's Python is: %s -m pip install 'ray[default]'" % sys.executable)


def gpu_count() -> int:
    """The GPUs NVML sees here (0 without NVML): what the node declares to Ray."""
    from boxagent.health.nvml import Nvml
    nvml = Nvml()
    return len(nvml.gpus) if nvml.start() else 0


def hosts_path(home: Home) -> str:
    return os.path.join(home.root, "ray-hosts.json")


def hosts(home: Home, text: str) -> Dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise UsageError("ray-node hosts: expected {node id: ssh host} on stdin", "rgt-client ray up sends it")
    atomic_write_json(hosts_path(home), data)
    return {"hosts": len(data)}


def token_path(home: Home) -> str:
    """Ray's auth token of the cluster `ray up` formed (0600): the nodes and this box's daemon read it."""
    return os.path.join(home.root, "ray-auth-token")


def start(home: Home, role: Optional[str], base: Optional[int], ip: Optional[str], head: Optional[str],
          token: Optional[str] = None) -> Dict[str, Any]:
    if role is None or base is None or not ip or (role == "worker" and not head):
        raise UsageError("ray-node start needs --role, --base, --ip (and --head for a worker)",
                         "rgt-client ray up runs it for you")
    record_path = os.path.join(home.root, "ray-node.json")
    if isinstance(read_json(record_path), dict):
        raise UsageError("Ray started by rgt already runs on this box (%s)" % record_path,
                         "stop it first: rgt-client ray down")
    p = layout(base, role == "head")
    gpus = gpu_count()
    argv = [_ray_bin(), "start", "--node-ip-address", ip, "--num-gpus", str(gpus), "--disable-usage-stats",
            "--node-manager-port", str(p["node_manager"]), "--object-manager-port", str(p["object_manager"]),
            "--min-worker-port", str(p["min_worker"]), "--max-worker-port", str(p["max_worker"]),
            "--dashboard-agent-listen-port", str(p["dashboard_agent"]), "--metrics-export-port", str(p["metrics_export"]),
            "--runtime-env-agent-port", str(p["runtime_env_agent"])]
    if role == "head":
        argv += ["--head", "--port", str(p["gcs"]), "--dashboard-port", str(p["dashboard"]), "--dashboard-host", ip,
                 "--include-dashboard=true", "--ray-client-server-port", str(p["client_server"])]
    else:
        argv += ["--address", str(head)]          # the head's GCS, ADDR:PORT
    # rgt's attempt files on this node (engine/raycell.py) live in this box's own RGT_HOME: the
    # box's agent is the one that serves a run's files pulled from this node.
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RGT_NODE_HOME=os.path.join(home.root, "ray-node"))
    if token:
        # Anyone who reaches Ray's ports can run code: with a token, only who holds it.
        fd = os.open(token_path(home), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token_path(home))
        env.pop("RAY_AUTH_TOKEN", None)
    roots = Roots.from_env()
    before = set(_pids(roots))
    said = ""
    try:
        res: Optional[subprocess.CompletedProcess] = subprocess.run(argv, env=env, capture_output=True, text=True,
                                                                   timeout=START_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        res, said = None, str(exc)
    made = _made_since(roots, before, str(head) if role == "worker" else "%s:%d" % (ip, base), p)
    atomic_write_json(record_path, {"role": role, "base": base, "ip": ip, "gpus": gpus,
                                    "procs": [{"pid": pid, "ticks": roots.process_start_ticks(pid)} for pid in made]})
    if res is None or res.returncode != 0:
        stop(home, roots)
        if res is not None:
            lines = [ln.strip() for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
            errs = [ln for ln in lines if "Error" in ln or "failed" in ln]
            said = (errs or lines or ["exit %d" % res.returncode])[-1]
        raise AgentError("`ray start` failed on this box: %s" % said[:400],
                         "see the box's /tmp/ray/session_latest/logs; nothing of it was left running")
    node_id = next((w.split("=", 1)[1] for pid in made for w in _cmdline(roots, pid).split()
                    if w.startswith("--node_id=") and "--node_manager_port=%d" % p["node_manager"] in _cmdline(roots, pid)), None)
    out = {"role": role, "ip": ip, "gpus": gpus, "procs": len(made), "token_auth": bool(token), "node_id": node_id}
    if role == "head":
        out["dashboard"] = "http://%s:%d" % (ip, p["dashboard"])
    return out


def _pids(roots: Roots) -> List[int]:
    return [int(n) for n in os.listdir(roots.proc) if n.isdigit()]


def _cmdline(roots: Roots, pid: int) -> str:
    try:
        with open(os.path.join(roots.proc, str(pid), "cmdline"), "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _made_since(roots: Roots, before: Set[int], gcs: str, p: Dict[str, int]) -> List[int]:
    """The processes `ray start` left running: new since it began, and naming this node's GCS
    port (Ray rewrites 127.0.0.1 to the node's own address in `--gcs-address`, so the port is
    what is matched) or its own node-manager port; their children die with them at `stop`."""
    port = gcs.rpartition(":")[2]
    marks = ("--node_manager_port=%d" % p["node_manager"], "--gcs_server_port=%s" % port)
    made = []
    for pid in _pids(roots):
        if pid in before or pid == os.getpid():
            continue
        words = _cmdline(roots, pid).split()
        mine = "%d" % p["node_manager"]
        # (a raylet's own worker command line names RAY_NODE_MANAGER_PORT_PLACEHOLDER: not a port)
        if any(w.split("=", 1)[0] in ("--node-manager-port", "--node_manager_port")
               and w.split("=", 1)[1].isdigit() and w.split("=", 1)[1] != mine for w in words if "=" in w):
            continue            # a worker process of another node (the head, on the same machine)
        if any(m in words for m in marks) or any(w.startswith("--gcs-address=") and w.endswith(":" + port)
                                                 for w in words):
            made.append(pid)
    return made


def _children(roots: Roots) -> Dict[int, List[int]]:
    kids: Dict[int, List[int]] = {}
    for pid in _pids(roots):
        try:
            with open(os.path.join(roots.proc, str(pid), "stat")) as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(pid)
    return kids


def stop(home: Home, roots: Roots) -> Dict[str, Any]:
    """Kill the processes `start` recorded (still the same processes: pid + start ticks) and
    every process under them. Nothing else: another Ray on this box is not ours."""
    path = os.path.join(home.root, "ray-node.json")
    data = read_json(path)
    if not isinstance(data, dict):
        return {"stopped": 0, "note": "no Ray started by rgt on this box"}
    ours = [int(p["pid"]) for p in data.get("procs") or []
            if isinstance(p, dict) and isinstance(p.get("pid"), int) and roots.process_start_ticks(p["pid"]) == p.get("ticks")]
    kids, victims, todo = _children(roots), set(), list(ours)
    while todo:
        pid = todo.pop()
        if pid not in victims:
            victims.add(pid)
            todo += kids.get(pid, [])
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for done in (path, token_path(home), hosts_path(home)):
        try:
            os.unlink(done)
        except OSError:
            pass
    return {"stopped": len(victims)}
