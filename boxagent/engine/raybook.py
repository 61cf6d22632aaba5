"""A Ray cluster as rgt sees it: its Jobs REST API on the dashboard port (urllib only: the agent
never imports `ray`), and which Ray Job is which stage attempt (`runs/<run>/stages/<stage>.<attempt>.ray`).

The attempt file is written BEFORE the submission, with the submission id the job will carry:
Ray refuses a second job with the same submission id, so a daemon killed between the file and
Ray's answer looks the job up on restart (GET /api/jobs/<id>) and submits only when Ray has
never heard of it. An attempt is never submitted twice.

Calls used (Ray 2.x): POST /api/jobs/ (submit), GET /api/jobs/ (every job, one call a poll),
GET /api/jobs/<id>, POST /api/jobs/<id>/stop, GET /api/v0/nodes?detail=1 (node state and its
state message, for a node that died), GET /api/cluster_status?format=0 (GPUs in use per node: rgt
submits only what the cluster can place now, so no job waits past RAY_JOB_START_WAIT_TIME_S).
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
HTTP_TIMEOUT_S = 10.0
FINAL = ("SUCCEEDED", "FAILED", "STOPPED")
MAX_BODY = 64 << 20


class RayError(Exception):
    """The cluster did not answer, or answered with an error (the text says which)."""


class RayApi:
    """One cluster's Jobs and State REST API."""

    def __init__(self, address: str, token: Optional[str] = None, timeout: float = HTTP_TIMEOUT_S):
        self.address = address.rstrip("/")
        self.token, self.timeout = token, timeout

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Tuple[int, bytes]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(self.address + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            # Ray's token auth (RAY_AUTH_MODE=token): the token travels in a header, never a URL.
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, resp.read(MAX_BODY)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(4096)
        except (OSError, ValueError) as exc:
            raise RayError("the Ray dashboard at %s did not answer: %s" % (self.address, exc))

    def _json(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        code, raw = self._call(method, path, body)
        if code >= 400:
            raise RayError("Ray answered %s %s with HTTP %d: %s" % (method, path, code, _first_line(raw)))
        try:
            return json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            raise RayError("Ray answered %s %s with something not JSON" % (method, path))

    def submit(self, submission_id: str, entrypoint: str, gpus: float, metadata: Dict[str, str]) -> str:
        """'' when submitted; the reason when Ray refused it (a refusal because the id exists
        means an earlier call of ours submitted it: the caller looks it up)."""
        code, raw = self._call("POST", "/api/jobs/", {
            "entrypoint": entrypoint, "submission_id": submission_id, "entrypoint_num_gpus": gpus,
            "entrypoint_num_cpus": 0, "metadata": metadata})
        return "" if code < 400 else _first_line(raw, "already exists") or "HTTP %d" % code

    def job(self, submission_id: str) -> Optional[Dict[str, Any]]:
        """The job's record, or None when Ray has never heard of it."""
        code, raw = self._call("GET", "/api/jobs/" + submission_id)
        if code == 404:
            return None
        if code >= 400:
            raise RayError("Ray answered GET job %s with HTTP %d" % (submission_id, code))
        data = json.loads(raw.decode("utf-8", "replace"))
        return data if isinstance(data, dict) else None

    def jobs(self) -> Dict[str, Dict[str, Any]]:
        data = self._json("GET", "/api/jobs/")
        return {j["submission_id"]: j for j in data or [] if isinstance(j, dict) and j.get("submission_id")}

    def stop(self, submission_id: str) -> None:
        self._call("POST", "/api/jobs/%s/stop" % submission_id)

    def nodes(self) -> Dict[str, Dict[str, Any]]:
        """node id -> {node_id, node_ip, state (ALIVE | DEAD), state_message, resources_total}."""
        data = self._json("GET", "/api/v0/nodes?detail=1&limit=10000")
        rows = (((data or {}).get("data") or {}).get("result") or {}).get("result") or []
        return {n["node_id"]: n for n in rows if isinstance(n, dict) and n.get("node_id")}

    def free_gpus(self) -> Dict[str, Tuple[float, float]]:
        """node id -> (GPUs not in use now, GPUs declared), for the live nodes."""
        data = self._json("GET", "/api/cluster_status?format=0")
        report = ((((data or {}).get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {})
        out: Dict[str, Tuple[float, float]] = {}
        for node, usage in (report.get("usageByNode") or {}).items():
            used, total = (usage or {}).get("GPU") or (0.0, 0.0)
            out[node] = (float(total) - float(used), float(total))
        return out


def _first_line(raw: bytes, prefer: str = "") -> str:
    text = raw.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if prefer:
        for ln in lines:
            if prefer in ln:
                return ln[:300]
        return ""
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return ln[:300]
    return (lines[-1] if lines else "")[:300]


def attempt_file(home: Home, run: str, stage: str, attempt: int) -> str:
    return os.path.join(home.stage_dir(run), "%s.%d.ray" % (stage, attempt))


class JobBook:
    """attempt -> {submission_id, address, gpus, submitted_at (None: not yet)}; Ray's last record
    of each job."""

    def __init__(self, home: Home):
        self.home = home
        self.jobs: Dict[Tuple[str, str, int], Dict[str, Any]] = {}
        self.recs: Dict[str, Dict[str, Any]] = {}
        self.loaded: set = set()

    def load(self, run: str) -> None:
        if run in self.loaded:
            return
        self.loaded.add(run)
        try:
            names = os.listdir(self.home.stage_dir(run))
        except OSError:
            return
        for name in names:
            base, _, ext = name.rpartition(".")
            stage, _, attempt = base.rpartition(".")
            if ext == "ray" and stage and attempt.isdigit():
                data = read_json(os.path.join(self.home.stage_dir(run), name))
                if isinstance(data, dict) and isinstance(data.get("submission_id"), str):
                    self.jobs[(run, stage, int(attempt))] = data

    def get(self, ref: Tuple[str, str, int]) -> Optional[Dict[str, Any]]:
        self.load(ref[0])
        return self.jobs.get(ref)

    def put(self, ref: Tuple[str, str, int], data: Dict[str, Any]) -> None:
        atomic_write_json(attempt_file(self.home, *ref), data)
        self.jobs[ref] = data

    def followed(self) -> List[Tuple[Tuple[str, str, int], Dict[str, Any]]]:
        """Attempts whose job Ray has not yet named an end state of."""
        return [(ref, j) for ref, j in self.jobs.items()
                if (self.recs.get(j["submission_id"]) or {}).get("status") not in FINAL]

    def status(self, sid: str) -> Optional[str]:
        return (self.recs.get(sid) or {}).get("status")
