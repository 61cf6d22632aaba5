"""A real two-node Ray cluster on loopback for the Ray backend's tests: two `ray start` processes
(a head and a worker, each declaring 4 GPUs), pinned ports, usage stats off, a small object store,
fast health checks (a killed node is DEAD within ~2 s instead of ~15 s). Every process it made is
found by its own temp dir and killed by pid at the end (never `ray stop`: that stops every Ray of
the machine's user).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

RAY = str(Path(sys.executable).with_name("ray"))
GPUS_PER_NODE = 4


class RayUnavailable(Exception):
    pass


def free_base(span: int = 200, start: int = 0) -> int:
    """A run of `span` free TCP ports (every one probed, on all addresses: other test sessions on
    this machine hold ports too), below the ephemeral range, for the pinned ports."""
    for base in range(start or 21000 + (os.getpid() % 20) * 400, 32000 - span, span):
        ok = True
        for port in range(base, base + span):
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    ok = False
            if ok:
                with socket.socket() as c:      # Ray's gRPC binds with SO_REUSEPORT: ask it too
                    c.settimeout(0.2)
                    ok = c.connect_ex(("127.0.0.1", port)) != 0
            if not ok:
                break
        if ok:
            return base
    raise RayUnavailable("no free port range for the Ray test cluster")


class RayCluster:
    def __init__(self, base_dir: Path, head_gpus: int = GPUS_PER_NODE, worker_wrap: List[str] | None = None,
                 head_wrap: List[str] | None = None):
        """`worker_wrap`, `head_wrap`: a command line that node's `ray start` runs under (e.g. a
        mount namespace of its own, so that node cannot see the daemon's files)."""
        self.dir = base_dir
        self.head_gpus, self.worker_wrap, self.head_wrap = head_gpus, list(worker_wrap or []), list(head_wrap or [])
        # Short, whatever pytest's own tmp path is (xdist adds popen-gwN): Ray's socket paths under
        # it must fit in 107 bytes.
        self.temp = Path(tempfile.mkdtemp(prefix="rgtray", dir="/tmp"))
        self.base = free_base(400)
        self.gcs = "127.0.0.1:%d" % self.base
        self.dashboard = "http://127.0.0.1:%d" % (self.base + 1)
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
                        RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="3",
                        RAY_health_check_initial_delay_ms="500", RAY_health_check_timeout_ms="500")
        self.env.pop("RAY_ADDRESS", None)
        # A token another Ray left in ~/.ray/auth_token made this cluster's GCS demand it while
        # its clients sent none: the nodes keep a home of their own.
        (self.temp / "home").mkdir()
        self.env.update(HOME=str(self.temp / "home"))
        for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            self.env.pop(var, None)
        self.worker_port = self.base + 100
        self.node_homes: Dict[str, Path] = {}

    def node_env(self, name: str) -> Dict[str, str]:
        """Each node keeps rgt's attempt files in a folder of its own, as on separate machines
        (nothing of an attempt reaches the daemon's RGT_HOME but through rgt's driver), laid out
        as `rgt-client ray up` lays it out: `<that box's RGT_HOME>/ray-node`."""
        self.node_homes[name] = self.temp / name / "ray-node"
        return dict(self.env, RGT_NODE_HOME=str(self.node_homes[name]))

    def _ray(self, *args: str, env: Dict[str, str] | None = None, wrap: List[str] | None = None) -> None:
        out = subprocess.run([*(wrap or []), RAY, *args], env=env or self.env, capture_output=True, text=True, timeout=120,
                             cwd=str(self.dir))
        if out.returncode != 0:
            raise RayUnavailable("`ray %s` failed: %s" % (args[0], (out.stderr or out.stdout)[-2000:]))

    def start(self) -> None:
        common = ["--num-gpus", str(self.head_gpus), "--num-cpus", "1", "--object-store-memory", "80000000",
                  "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
        self._ray("start", "--head", "--port", str(self.base), "--dashboard-port", str(self.base + 1),
                  "--dashboard-host", "127.0.0.1", "--include-dashboard=true", "--temp-dir", str(self.temp),
                  "--node-manager-port", str(self.base + 10), "--object-manager-port", str(self.base + 11),
                  "--min-worker-port", str(self.base + 20), "--max-worker-port", str(self.base + 60),
                  "--dashboard-agent-listen-port", str(self.base + 2), "--ray-client-server-port", str(self.base + 3),
                  *common, env=self.node_env("head"), wrap=self.head_wrap)
        self.add_worker()
        self.head_id = next(n["node_id"] for n in self.nodes() if n.get("is_head_node"))

    def add_worker(self) -> None:
        # A node killed a moment ago is still listed ALIVE until its health check gives up: the
        # worker is the node that was not there before this start.
        known = {n["node_id"] for n in self.nodes()} if hasattr(self, "head_id") else set()
        self.worker_port += 50
        p = self.worker_port
        self.worker_name = "worker%d" % p
        self._ray("start", "--address", self.gcs, "--node-manager-port", str(p), "--object-manager-port", str(p + 1),
                  "--min-worker-port", str(p + 5), "--max-worker-port", str(p + 45),
                  "--dashboard-agent-listen-port", str(p + 2), "--metrics-export-port", str(p + 3),
                  "--runtime-env-agent-port", str(p + 4),
                  "--num-gpus", str(GPUS_PER_NODE), "--num-cpus", "1", "--object-store-memory", "80000000",
                  "--node-ip-address", "127.0.0.1", "--disable-usage-stats", env=self.node_env(self.worker_name),
                  wrap=self.worker_wrap)
        deadline = time.time() + 60
        while time.time() < deadline:
            fresh = [n["node_id"] for n in self.nodes() if n["state"] == "ALIVE" and not n.get("is_head_node")
                     and n["node_id"] not in known]
            if fresh:
                self.worker_id = fresh[0]
                return
            time.sleep(0.3)
        raise RayUnavailable("the worker node never joined: %s" % self.nodes())

    # -- the cluster's own word
    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.dashboard + path, timeout=10) as resp:
            return json.loads(resp.read())

    def nodes(self) -> List[Dict[str, Any]]:
        return self.get("/api/v0/nodes?detail=1")["data"]["result"]["result"]

    def jobs(self) -> List[Dict[str, Any]]:
        return self.get("/api/jobs/")

    def stop_job(self, submission_id: str) -> None:
        req = urllib.request.Request(self.dashboard + "/api/jobs/%s/stop" % submission_id, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def gpus_in_use(self) -> float:
        usage = self.get("/api/cluster_status?format=0")["data"]["clusterStatus"]["loadMetricsReport"]["usage"]
        return float((usage.get("GPU") or [0.0])[0])

    # -- removing a node the way a machine dies: every process of it at once
    def kill_worker(self) -> str:
        import psutil
        raylet = [p for p in psutil.process_iter(["cmdline"])
                  if any("--node_manager_port=%d" % self.worker_port == a for a in (p.info["cmdline"] or []))]
        if not raylet:
            raise AssertionError("no raylet of the worker node")
        victims = set(raylet)
        for p in raylet:
            victims.update(p.children(recursive=True))
        # rgt's shims there are detached from Ray's worker (they outlive rgt's driver, by design)
        # but not from their machine: every process working in the node's own folder goes too.
        folder = str(self.node_homes[self.worker_name])
        for p in psutil.process_iter(["cmdline"]):
            try:
                if any(folder in a for a in (p.info["cmdline"] or [])):
                    victims.add(p)
                    victims.update(p.children(recursive=True))
            except psutil.Error:
                pass
        # All at once, as a machine dies: every process is stopped before any is killed. Killed one
        # by one, a stage's `sleep` could die first and its shell run on to `echo done`, exit 0 and
        # have the shim record a success before their own kills came.
        for sig in ("suspend", "kill"):
            for p in victims:
                try:
                    getattr(p, sig)()
                except psutil.Error:
                    pass
        return self.worker_id

    def stop(self) -> None:
        import psutil
        tag = str(self.temp)
        gcs = "--gcs-address=%s" % self.gcs
        mine = set()
        for p in psutil.process_iter(["cmdline"]):
            try:
                args = p.info["cmdline"] or []
                if p.pid != os.getpid() and any(tag in a or gcs in a or self.gcs in a for a in args):
                    mine.add(p)
                    mine.update(p.children(recursive=True))
            except psutil.Error:
                pass
        for p in mine:
            try:
                p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)
