"""The Ray backend's attempts as tasks of one long-lived rgt driver per cluster and daemon home
(the default; `ray_attempts: "jobs"` in config.json makes each one a Ray Job instead,
rayctl.RayProcesses). The driver (raydriver.py) is itself one Ray Job on the head, submitted
through the same Jobs REST client with a fixed submission id per home and generation, so a
restarted daemon finds it (Ray refuses a second job with that id). Everything else is
RayProcesses: rgt's queue hold, the exit file as the end, the node's state on a failure, status
placement.

Daemon <-> driver through files under RGT_HOME/ray-driver/<cluster>/ (raydriver.py names them):
a request per attempt written before anything starts (the launch record and the run's spec go
to the node with it: raycell.py keeps the attempt's files there), the driver's Jobs-API-shaped
record back, a cancel file to stop one. The driver writes the node's pid record, log and exit
record into this RGT_HOME as the node streams them.

The driver ending (stopped, crashed, the head restarted): the daemon sees it in the Jobs list,
writes the next generation and submits a new driver, which takes up every request not yet done;
one an earlier driver sent is followed where a node has it, never started twice.
"""
from __future__ import annotations

import hashlib
import os
import shlex
from typing import Any, Dict, List, Tuple

from boxagent.base import procs
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.engine import shim
from boxagent.engine.ports import AttemptRef
from boxagent.engine.raybook import FINAL, RayApi, RayError
from boxagent.engine.rayctl import _SAFE, RayProcesses

DRIVER_START_S = 60.0   # a driver the Jobs list has not named since its submission this long: gone
BLIND_HINT = ("run rgt's agent on the Ray cluster's head (as `rgt-client ray up` does), or put RGT_HOME on a "
              "filesystem the head shares at the same path, or set \"ray_attempts\": \"jobs\" in config.json "
              "with RGT_HOME shared by every node")


class RayTaskProcesses(RayProcesses):
    """StageProcesses: each attempt one task of rgt's driver on the cluster."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.drivers: Dict[str, float] = {}     # address -> when this daemon submitted (or found) its driver
        self.driver_wait = DRIVER_START_S       # its first word (driver-<id>.json) by then, once Ray runs it
        self.blind: Dict[str, str] = {}         # address -> why its driver cannot serve this RGT_HOME

    def _dir(self, address: str) -> str:
        return os.path.join(self.home.root, "ray-driver", _SAFE.sub("_", address)[:80])

    def _generation(self, address: str) -> int:
        gen = read_json(os.path.join(self._dir(address), "generation.json"))
        return gen.get("generation", 1) if isinstance(gen, dict) and isinstance(gen.get("generation"), int) else 1

    def driver_id(self, address: str) -> str:
        tag = hashlib.sha256(("%s\0%s" % (self.home.root, address)).encode()).hexdigest()[:12]
        return "rgt-driver-%s-%d" % (tag, self._generation(address))

    def _driver_entrypoint(self, address: str) -> str:
        root = procs.running_pyz() or procs.source_root()
        argv = [self.python, "-m", "boxagent.engine.raydriver", self._dir(address), self.driver_id(address)]
        return "PYTHONPATH=%s %s" % (shlex.quote(root), " ".join(shlex.quote(a) for a in argv))

    def _ensure_driver(self, api: RayApi, address: str, now: float) -> None:
        if address in self.drivers:
            return
        for sub in ("requests", "state", "cancel"):
            os.makedirs(os.path.join(self._dir(address), sub), mode=0o700, exist_ok=True)
        said = api.submit(self.driver_id(address), self._driver_entrypoint(address), 0,
                          {"rgt_driver": "1"})
        if said and "already exists" not in said:
            raise RayError("Ray refused rgt's driver: %s" % said)
        self.drivers[address] = now
        self.log("Ray at %s: rgt's driver is job %s" % (address, self.driver_id(address)))

    def _send(self, api: RayApi, ref: AttemptRef, job: Dict[str, Any], gpus: float) -> str:
        if job["address"] in self.blind:
            return self.blind[job["address"]]
        self._ensure_driver(api, job["address"], self.clock())
        root = self.home.root
        paths = {"launch": self.home.stage_launch(*ref), "claim": self.home.stage_claim(*ref),
                 "pid": self.home.stage_pid(*ref), "exit": self.home.stage_exit(*ref),
                 "log": self.home.stage_log(*ref)}
        launch = read_json(paths["launch"])
        spec = read_json(self.home.run_spec(ref.run))
        pyz = procs.running_pyz()
        atomic_write_json(os.path.join(self._dir(job["address"]), "requests", job["submission_id"] + ".json"),
                          dict(paths, sid=job["submission_id"], run=ref.run, stage=ref.stage, attempt=ref.attempt,
                               gpus=gpus, launch=launch if isinstance(launch, dict) else {},
                               spec=spec if isinstance(spec, dict) else {}, spec_rel=os.path.relpath(
                                   self.home.run_spec(ref.run), root),
                               rel={k: os.path.relpath(v, root) for k, v in paths.items()},
                               tag=self.driver_id(job["address"]).rsplit("-", 1)[0][len("rgt-driver-"):],
                               python=self.python, pyz=pyz, source=None if pyz else procs.source_root()),
                          mode=0o600)
        return ""

    def _records(self, address: str, followed: List[Tuple[Any, Dict[str, Any]]], now: float) -> Dict[str, Any]:
        jobs = self.api(address).jobs()
        self._watch_driver(address, jobs, now)
        out: Dict[str, Any] = {}
        state = os.path.join(self._dir(address), "state")
        for _ref, job in followed:
            if job["address"] != address:
                continue
            sid = job["submission_id"]
            rec = read_json(os.path.join(state, sid + ".json"))
            if isinstance(rec, dict):
                out[sid] = rec
                continue
            start = read_json(os.path.join(state, sid + ".start.json"))
            if isinstance(start, dict):
                ip = start.get("node_ip")
                out[sid] = {"status": "RUNNING", "start_time": start.get("start_time"),
                            "driver_node_id": start.get("driver_node_id"),
                            "driver_agent_http_address": "http://%s:0" % ip if ip else None}
            else:
                out[sid] = {"status": "PENDING"}
        return out

    def _watch_driver(self, address: str, jobs: Dict[str, Any], now: float) -> None:
        """A driver that ended (or that Ray no longer knows): the next generation takes over."""
        since = self.drivers.get(address)
        if since is None:
            return
        rec = jobs.get(self.driver_id(address))
        if rec is None and now - since < DRIVER_START_S:
            return
        if rec is not None and rec.get("status") not in FINAL:
            self._check_seen(address, rec, now, since)
            return
        why = "Ray no longer knows it" if rec is None else "%s: %s" % (rec.get("status"), rec.get("message"))
        self.log("Ray at %s: rgt's driver %s ended (%s); starting the next one"
                 % (address, self.driver_id(address), why))
        atomic_write_json(os.path.join(self._dir(address), "generation.json"),
                          {"generation": self._generation(address) + 1})
        del self.drivers[address]
        self._ensure_driver(self.api(address), address, now)

    def _refusal(self, address: str, said: str) -> Tuple[str, str]:
        if said == self.blind.get(address):
            return said, BLIND_HINT
        return super()._refusal(address, said)

    def _check_seen(self, address: str, rec: Dict[str, Any], now: float, since: float) -> None:
        """The driver runs on the cluster's head and works in this RGT_HOME: one that Ray runs but
        that never wrote its first word here sees another disk at that path (the agent is not on
        the head, and nothing is shared), and would leave every attempt waiting without a word."""
        if address in self.blind or rec.get("status") != "RUNNING" or now - since < self.driver_wait \
                or os.path.exists(os.path.join(self._dir(address), "driver-%s.json" % self.driver_id(address))):
            return
        self.blind[address] = ("rgt's driver runs on the Ray cluster's head (job %s) but has not written in "
                               "this RGT_HOME (%s) within %gs: the head does not see it"
                               % (self.driver_id(address), self.home.root, self.driver_wait))
        self.log("Ray at %s: %s" % (address, self.blind[address]))
        for ref_t, job in self.book.followed():
            if job["address"] == address and job.get("submitted_at") is not None \
                    and not os.path.exists(os.path.join(self._dir(address), "state", job["submission_id"] + ".start.json")):
                atomic_write_json(self.home.stage_exit(*ref_t), {
                    "exit_code": shim.SPAWN_FAILED, "signal": None, "ended_at": now,
                    "error": self.blind[address], "hint": BLIND_HINT})

    def _stop(self, job: Dict[str, Any]) -> None:
        folder = os.path.join(self._dir(job["address"]), "cancel")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        atomic_write_json(os.path.join(folder, job["submission_id"]), {"at": self.clock()})

    def leftovers(self, ref: AttemptRef) -> List[str]:
        return []       # the task KILLs the shim's process group after the grace

