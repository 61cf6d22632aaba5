"""The StageProcesses port for runs with `backend = "ray"` (engine/rayrun.py has the backend's
rules): each stage attempt one Ray Job through the Jobs REST API (raybook.py), its entrypoint the
agent's own shim, held in rgt's own queue until a live node can place it; its end read from the
shim's exit file on the shared filesystem, else from Ray's record (and the State API's word on
the node it ran on).
"""
from __future__ import annotations

import os
import re
import shlex
import sys
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base import procs
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.engine import shim
from boxagent.engine.ports import AttemptRef
from boxagent.engine.raybook import DEFAULT_ADDRESS, FINAL, JobBook, RayApi, RayError

EXIT_CHECK_S = 0.25     # while a job is followed: look for exit files (a stat) this often
REPORT_LAG_S = 10.0     # Ray's cluster_status may still count a released GPU this long
GONE_AFTER_S = 10.0     # a submitted job the list no longer has, this long after its submission: gone
# No node declares the GPUs an attempt asks for, this long in a row: refused. A cluster just
# formed reports its nodes one by one (its head first), and a job of 1 GPU on a head that
# declares none was refused before the worker's first report.
INFEASIBLE_S = 30.0
# An attempt that failed without its exit file, on a node the State API does not yet list DEAD:
# this long for the node's word. Ray's health check gives up on a node 15 s after it stops
# answering with its defaults, and up to a minute when the machine vanished from the network
# (each check then waits out its timeout); judged sooner, a lost node was taken for a command
# that died, and never retried. Nothing but a kill ends a shim without its exit file.
NODE_VERDICT_S = 90.0
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class RayProcesses:
    """StageProcesses for Ray Jobs."""

    def __init__(self, home: Home, python: Optional[str], token: Optional[str], poll_s: float,
                 exit_grace_s: float, log: Callable[[str], None], clock: Callable[[], float] = time.time):
        self.home, self.token, self.log, self.clock = home, token, log, clock
        self.python = python or sys.executable
        pyz = procs.running_pyz()
        self.agent = ["-S", pyz] if pyz else ["-S", "-m", "boxagent"]
        self.prefix = "" if pyz else "PYTHONPATH=%s " % shlex.quote(procs.source_root())
        self.poll_s, self.exit_grace_s = poll_s, exit_grace_s
        self.book = JobBook(home)
        self.apis: Dict[str, RayApi] = {}
        self.waiting: List[AttemptRef] = []            # rgt's own queue: not submitted yet
        self.end_seen: Dict[AttemptRef, float] = {}    # Ray says ended, no exit file yet
        self.stopped: set = set()
        self.nodes: Dict[str, Dict[str, Any]] = {}     # node id -> Ray's record (asked on a job's failure)
        self.nodes_at: Dict[str, float] = {}           # address -> when its nodes were last asked
        self.next_poll, self.urgent = 0.0, False
        self.said: set = set()
        self._restored: set = set()                    # runs whose attempt files were read back
        # address -> (when, GPUs, node id) rgt's attempts let go of
        self.released: Dict[str, List[Tuple[float, float, Optional[str]]]] = {}
        self.freed: set = set()                        # attempts whose release is counted
        self.infeasible: Dict[AttemptRef, float] = {}  # when no node was first seen to have its GPUs

    def api(self, address: str) -> RayApi:
        if address not in self.apis:
            self.apis[address] = RayApi(address, self.token)
        return self.apis[address]

    def _job(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        job = self.book.get(ref)
        if ref.run not in self._restored:
            self._restored.add(ref.run)
            self._restore(ref.run)
        return job

    def _restore(self, run: str) -> None:
        """After a restart: attempts written but never submitted wait again; submitted ones are
        asked about at once."""
        for ref_t, job in list(self.book.jobs.items()):
            ref = AttemptRef(*ref_t)
            if ref.run != run or os.path.exists(self.home.stage_exit(*ref)):
                continue
            if job.get("submitted_at") is None and ref not in self.waiting:
                self.waiting.append(ref)
            self.urgent = True

    # -- submitting
    def launch(self, ref: AttemptRef, launch: Dict[str, Any], now: float) -> None:
        if self._job(ref) is not None:
            if ref not in self.waiting and (self.book.get(ref) or {}).get("submitted_at") is None:
                self.waiting.append(ref)
            return
        ray = launch.get("ray") or {}
        record = {k: v for k, v in launch.items() if k != "ray"}
        record["ray"] = True
        self.home.ensure_run(ref.run)
        atomic_write_json(self.home.stage_launch(*ref), record, mode=0o600)   # the env may hold tokens
        sid = "rgt-%s-%s-%s-%d" % (uuid.uuid4().hex[:12], _SAFE.sub("_", ref.run)[:60],
                                   _SAFE.sub("_", ref.stage)[:40], ref.attempt)
        self.book.put(ref, {"submission_id": sid, "address": ray.get("address") or DEFAULT_ADDRESS,
                                   "gpus": ray.get("gpus") or 0, "submitted_at": None, "written_at": now})
        self.waiting.append(ref)
        self._submit_waiting(now)

    def _entrypoint(self, ref: AttemptRef) -> str:
        argv = [self.python] + self.agent + ["exec-stage", "--home", self.home.root, "--run", ref.run,
                                             "--stage", ref.stage, "--attempt", str(ref.attempt)]
        return self.prefix + " ".join(shlex.quote(a) for a in argv)

    def _submit_waiting(self, now: float) -> bool:
        """Submit, in order, what some live node can place now. True when one was submitted."""
        free: Dict[str, Optional[Dict[str, Tuple[float, float]]]] = {}
        per_node: Dict[str, Dict[str, float]] = {}  # what each node can place now, as rgt counts it
        spent: Dict[str, float] = {}                # GPUs submitted in this pass, per cluster
        done = False
        for ref in list(self.waiting):
            job = self.book.get(ref)
            if job is None:
                self.waiting.remove(ref)
                continue
            api, gpus = self.api(job["address"]), float(job.get("gpus") or 0)
            if job["address"] not in free:
                try:
                    free[job["address"]] = _free(api)
                except RayError as exc:
                    free[job["address"]] = None
                    self._say(("down", job["address"]), "run %s: %s; stage %s waits" % (ref.run, exc, ref.stage))
            nodes = free[job["address"]]
            if nodes is None:
                continue
            if job["address"] not in per_node:
                per_node[job["address"]] = self._node_free(job["address"], nodes, now)
            if not nodes:
                # Ray's load report names no node at all for its first seconds (a cluster just
                # started, a head just restarted): that is "not known yet", never "no GPUs".
                self._say(("unreported", job["address"]), "Ray at %s has not reported its nodes yet; "
                          "runs wait" % job["address"])
                continue
            self.said.discard(("unreported", job["address"]))
            if gpus and not any(total >= gpus for _f, total in nodes.values()):
                why = "no node of the Ray cluster at %s has %g GPUs (the nodes declare %s)" % (
                    job["address"], gpus, ", ".join("%g" % t for _f, t in nodes.values()) or "none")
                since = self.infeasible.setdefault(ref, now)
                if now - since < INFEASIBLE_S:
                    self._say(("infeasible", ref), "run %s: stage %s waits: %s yet" % (ref.run, ref.stage, why))
                    continue
                self.infeasible.pop(ref, None)
                self._refuse(ref, now, "%s for %gs" % (why, INFEASIBLE_S),
                             "lower the job's `gpus` to what one node has, or add a node with more GPUs")
                continue
            self.infeasible.pop(ref, None)
            fit = [n for n, f in per_node[job["address"]].items() if f >= gpus]
            # Ray's report of GPUs in use lags seconds behind both ways: rgt's own running jobs
            # count against the cluster's total whether it shows them yet or not, and the GPUs
            # rgt's jobs just let go of are free although it still counts them. What it counts
            # beyond both is other users'.
            total = sum(t for _f, t in nodes.values())
            held, recent = self._held(job["address"]), self._recent(job["address"], now)
            others = max(0.0, sum(t - f for f, t in nodes.values()) - held - recent)
            budget = total - held - others - spent.get(job["address"], 0.0)
            # One GPU fits wherever one is free; more must fit on one node (Ray's per-node view).
            if gpus and (budget < gpus or (gpus > 1 and not fit)):
                continue                            # the GPUs are busy: it waits here, not in Ray
            try:
                said = self._send(api, ref, job, gpus)
            except RayError as exc:
                self._say(("down", job["address"]), "run %s: %s; stage %s waits" % (ref.run, exc, ref.stage))
                continue
            if said and "already exists" not in said:
                self._refuse(ref, now, *self._refusal(job["address"], said))
                continue
            if gpus and fit:
                room = per_node[job["address"]]
                best = max(fit, key=lambda n: room[n])
                room[best] -= gpus
            if gpus:
                spent[job["address"]] = spent.get(job["address"], 0.0) + gpus
            self.waiting.remove(ref)
            self.book.put(ref, dict(job, submitted_at=now))
            self.log("run %s: stage %s attempt %d is Ray job %s" % (ref.run, ref.stage, ref.attempt,
                                                                     job["submission_id"]))
            self.urgent = done = True
        return done

    def _send(self, api: RayApi, ref: AttemptRef, job: Dict[str, Any], gpus: float) -> str:
        """Start the attempt on the cluster: here one Ray Job. '' or Ray's refusal."""
        return api.submit(job["submission_id"], self._entrypoint(ref), gpus,
                          {"rgt_run": ref.run, "rgt_stage": ref.stage, "rgt_attempt": str(ref.attempt)})

    def _refusal(self, address: str, said: str) -> Tuple[str, str]:
        """Why an attempt was not sent, and the hint."""
        return "Ray refused the job: %s" % said, "check the cluster's dashboard log (ray logs dashboard.log)"

    def _records(self, address: str, followed: List[Tuple[Any, Dict[str, Any]]], now: float) -> Dict[str, Any]:
        """submission id -> Ray's record of it (the Jobs API's shape)."""
        return self.api(address).jobs()

    def _stop(self, job: Dict[str, Any]) -> None:
        self.api(job["address"]).stop(job["submission_id"])

    def _recent(self, address: str, now: float, node: Any = False) -> float:
        """GPUs rgt's jobs on that cluster (on that node) let go of within the last REPORT_LAG_S."""
        keep = [r for r in self.released.get(address, []) if now - r[0] < REPORT_LAG_S]
        self.released[address] = keep
        return sum(g for _t, g, n in keep if node is False or n == node)

    def _node_free(self, address: str, nodes: Dict[str, Tuple[float, float]], now: float) -> Dict[str, float]:
        """node id -> GPUs it can place now. Ray's per-node report lags seconds both ways, as the
        cluster's does: on each node, what rgt's own attempts there hold counts whether the report
        shows it yet or not, and what they just let go of is free although it still counts it; a
        retry of 2 GPUs waited seconds for the report after a cell on that node ended."""
        held: Dict[str, float] = {}
        for node, gpus in self._holding(address):
            if node in nodes:
                held[node] = held.get(node, 0.0) + gpus
        out = {}
        for node, (free, total) in nodes.items():
            mine = held.get(node, 0.0)
            others = max(0.0, total - free - mine - self._recent(address, now, node))
            out[node] = total - mine - others
        return out

    def _held(self, address: str) -> float:
        """GPUs rgt's own submitted jobs on that cluster hold (or are about to)."""
        return sum(gpus for _node, gpus in self._holding(address))

    def _holding(self, address: str) -> List[Tuple[Optional[str], float]]:
        """(node id or None before Ray placed it, GPUs) of each attempt of rgt's on that cluster
        that holds GPUs: submitted, until the shim's exit file is there or Ray names its end."""
        out = []
        for ref_t, job in self.book.jobs.items():
            if job["address"] == address and job.get("submitted_at") is not None \
                    and self.book.status(job["submission_id"]) not in FINAL \
                    and not os.path.exists(self.home.stage_exit(*ref_t)):
                out.append(((self.book.recs.get(job["submission_id"]) or {}).get("driver_node_id"),
                            float(job.get("gpus") or 0)))
        return out

    def _refuse(self, ref: AttemptRef, now: float, why: str, hint: str) -> None:
        self.waiting.remove(ref)
        self.log("run %s: stage %s attempt %d: %s" % (ref.run, ref.stage, ref.attempt, why))
        atomic_write_json(self.home.stage_exit(*ref), {"exit_code": shim.SPAWN_FAILED, "signal": None,
                                                       "ended_at": now, "error": why, "hint": hint})

    def _say(self, key: tuple, text: str) -> None:
        if key not in self.said:
            self.said.add(key)
            self.log(text)

    # -- what the scheduler asks every tick
    def refresh(self, now: float) -> bool:
        followed = [(r, j) for r, j in self.book.followed() if j.get("submitted_at") is not None]
        if not (followed or self.waiting) or not (self.urgent or now >= self.next_poll):
            return False
        self.urgent = False
        self.next_poll = now + self.poll_s
        learned = False
        for address in sorted({j["address"] for _r, j in followed}):
            try:
                jobs = self._records(address, followed, now)
            except RayError as exc:
                self._say(("down", address), "Ray at %s: %s (the jobs' last known states stay)" % (address, exc))
                continue
            self.said.discard(("down", address))
            for ref, job in followed:
                if job["address"] != address:
                    continue
                rec = jobs.get(job["submission_id"])
                if rec is None and now - (job.get("submitted_at") or now) > GONE_AFTER_S:
                    rec = {"status": "FAILED", "gone": True, "message": "Ray no longer knows job %s (the head "
                           "restarted, or it was deleted)" % job["submission_id"]}
                if rec is not None and rec != self.book.recs.get(job["submission_id"]):
                    self.book.recs[job["submission_id"]] = rec
                    learned = True
        if self.waiting:
            learned = self._submit_waiting(now) or learned
        return learned

    def wake_in(self, now: float) -> Optional[float]:
        if not (self.waiting or self.book.followed()):
            return None
        due = [max(0.0, self.next_poll - now), EXIT_CHECK_S]
        # Past the exit grace an ended attempt waits for the node's word: at the poll, not at once.
        due += [d if d > 0 else self.poll_s for d in (t + self.exit_grace_s - now for t in self.end_seen.values())]
        return max(0.0, min(due))

    def exit_info(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        path = self.home.stage_exit(*ref)
        info = read_json(path) if os.path.exists(path) else None
        info = info if isinstance(info, dict) else None
        job = self._job(ref)
        if job is None:
            return info
        rec = self.book.recs.get(job["submission_id"])
        if info is not None:
            self._release(ref, job)
            return dict(info, ray=self._details(job, rec, self._pid_record(ref)))
        if (rec or {}).get("status") not in FINAL:
            return None
        now = self.clock()
        since = self.end_seen.setdefault(ref, now)
        if now - since < self.exit_grace_s:
            return None                 # the shim's exit file may still be on its way
        info = self._from_ray(job, rec or {}, now, self._pid_record(ref))
        node = info["ray"].get("node") or {}
        said_died = "node has died" in str((rec or {}).get("message") or "")
        if (said_died or node.get("node_id")) and node.get("state") != "DEAD" \
                and now - since < max(3 * self.exit_grace_s, NODE_VERDICT_S):
            # The State API lists a node DEAD only once its health check gives up, a moment after
            # the job (or the driver's task) failed with it; a job that failed without its exit
            # file on a node still listed ALIVE was judged an exit without its exit file before
            # the node's death was known, and never retried. The node's word decides, within
            # a bounded wait.
            return None
        return info

    def _release(self, ref: AttemptRef, job: Dict[str, Any]) -> None:
        """The attempt's command ended: its GPUs are free, whatever Ray's report still says."""
        if job.get("submitted_at") is not None and ref not in self.freed and job.get("gpus"):
            node = (self.book.recs.get(job["submission_id"]) or {}).get("driver_node_id")
            self.released.setdefault(job["address"], []).append((self.clock(), float(job["gpus"]), node))
        self.freed.add(ref)

    def _pid_record(self, ref: AttemptRef) -> Dict[str, Any]:
        data = read_json(self.home.stage_pid(*ref))
        return data if isinstance(data, dict) else {}

    def _details(self, job: Dict[str, Any], rec: Optional[Dict[str, Any]], pid: Dict[str, Any]) -> Dict[str, Any]:
        rec = rec or {}
        node = rec.get("driver_node_id")
        out = {"submission_id": job["submission_id"], "address": job["address"], "status": rec.get("status"),
               "message": rec.get("message"), "error_type": rec.get("error_type"), "node_id": node,
               "node_ip": _ip(rec.get("driver_agent_http_address")),
               "start_at": _sec(rec.get("start_time")), "end_at": _sec(rec.get("end_time"))}
        where: Dict[str, Any] = pid["ray"] if isinstance(pid.get("ray"), dict) else {}
        out.update(host=where.get("host"), cuda_visible_devices=where.get("cuda_visible_devices"))
        return out

    def _from_ray(self, job: Dict[str, Any], rec: Dict[str, Any], now: float, pid: Dict[str, Any]) -> Dict[str, Any]:
        """How the attempt ended when its shim wrote nothing: what Ray says, and for a job that
        failed, the state of the node it ran on."""
        details = self._details(job, rec, pid)
        info: Dict[str, Any] = {"exit_code": rec.get("driver_exit_code"), "signal": None, "no_exit_file": True,
                                "ended_at": details["end_at"] or now, "ray": details}
        if rec.get("status") == "STOPPED":
            info.update(exit_code=None, signal=15)
        elif rec.get("status") == "FAILED":
            node = self._node(job["address"], details.get("node_id"), rec)
            if node is not None:
                details["node"] = {"node_id": node.get("node_id"), "node_ip": node.get("node_ip"),
                                   "state": node.get("state"), "state_message": node.get("state_message")}
        return info

    def _node(self, address: str, node_id: Optional[str], rec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The node a failed job ran on, as the State API says now (the node id from the job, or
        from Ray's message: "... its node has died. Node Id: <id>")."""
        if not node_id:
            m = re.search(r"[Nn]ode [Ii][Dd]:? ?([0-9a-f]{20,})", str(rec.get("message") or ""))
            node_id = m.group(1) if m else None
        if not node_id:
            return None
        if self.clock() - self.nodes_at.get(address, float("-inf")) >= self.poll_s or node_id not in self.nodes:
            try:
                self.nodes.update(self.api(address).nodes())
            except RayError as exc:
                return {"node_id": node_id, "state": None, "state_message": "not asked: %s" % exc}
            self.nodes_at[address] = self.clock()       # asked at most once a poll while a verdict waits
        return self.nodes.get(node_id) or {"node_id": node_id, "state": None,
                                           "state_message": "the State API does not know this node"}

    def shim_state(self, ref: AttemptRef) -> str:
        if self._job(ref) is not None:
            return "alive"              # a job of ours: its end comes through exit_info
        return "gone" if os.path.exists(self.home.stage_exit(*ref)) else "unknown"

    def claimed_for(self, ref: AttemptRef, now: float) -> Optional[float]:
        try:
            return max(0.0, now - os.stat(self.home.stage_claim(*ref)).st_mtime)
        except OSError:
            return None

    def command_alive(self, ref: AttemptRef) -> bool:
        job = self._job(ref)
        return job is not None and self.book.status(job["submission_id"]) not in FINAL

    def signal(self, ref: AttemptRef, sig: int) -> None:
        """Stop the job: Ray TERMs the shim and every child, KILLs them after its stop wait."""
        job = self._job(ref)
        if job is None:
            return
        if ref in self.waiting:
            self.waiting.remove(ref)    # never submitted: nothing ran
            self.infeasible.pop(ref, None)
            atomic_write_json(self.home.stage_exit(*ref), {"exit_code": None, "signal": sig,
                                                           "ended_at": self.clock(), "never_started": True})
            return
        if job.get("submitted_at") is None:
            return                      # refused before it was sent: nothing runs
        if job["submission_id"] in self.stopped or self.book.status(job["submission_id"]) in FINAL:
            return
        self.stopped.add(job["submission_id"])
        try:
            self._stop(job)
        except RayError as exc:
            self.stopped.discard(job["submission_id"])
            self.log("run %s: could not stop Ray job %s: %s" % (ref.run, job["submission_id"], exc))
        self.urgent = True

    def run_ended(self, run: str) -> None:
        for ref_t, job in list(self.book.jobs.items()):
            if ref_t[0] == run and self.book.status(job["submission_id"]) not in FINAL:
                self.signal(AttemptRef(*ref_t), 15)

    def queue_view(self, run: str) -> Dict[str, Dict[str, Any]]:
        """stage -> its newest attempt's job: {job_id, attempt, submitted_at, state, reason,
        start_at, node, node_id, host, gpus, ssh_host}."""
        self.book.load(run)
        # Which box each node is, where `rgt-client ray up` formed the cluster (ray-node hosts).
        boxes = read_json(os.path.join(self.home.root, "ray-hosts.json"))
        boxes = boxes if isinstance(boxes, dict) else {}
        out: Dict[str, Dict[str, Any]] = {}
        for (name, stage, attempt), job in self.book.jobs.items():
            if name != run or (stage in out and out[stage]["attempt"] > attempt):
                continue
            rec = self.book.recs.get(job["submission_id"]) or {}
            pid = self._pid_record(AttemptRef(name, stage, attempt))
            where: Dict[str, Any] = pid["ray"] if isinstance(pid.get("ray"), dict) else {}
            state = rec.get("status") or ("WAITING_FOR_GPUS" if job.get("submitted_at") is None else "SUBMITTED")
            out[stage] = {"job_id": job["submission_id"], "attempt": attempt, "submitted_at": job.get("submitted_at"),
                          "state": state, "reason": rec.get("message"), "start_at": _sec(rec.get("start_time")),
                          "node": _ip(rec.get("driver_agent_http_address")), "node_id": rec.get("driver_node_id"),
                          "host": where.get("host"), "gpus": where.get("cuda_visible_devices"),
                          "ssh_host": boxes.get(rec.get("driver_node_id") or "")}
        return out

    # -- nothing of these on a cluster
    def cpu_seconds(self, ref: AttemptRef) -> Optional[float]:
        return None

    def leftovers(self, ref: AttemptRef) -> List[str]:
        return []       # Ray kills the entrypoint's children when the job ends

    def identity(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        """Only the token: Ray may place the attempt on this box or another, and a shim's pid
        read from a node's record means nothing in this box's process table."""
        token = (self._pid_record(ref).get("contain") or {}).get("token")
        return {"token": token, "cgroup": None, "shim_pid": None, "shim_start_ticks": None} if token else None

    def release(self, ref: AttemptRef) -> None:
        self.end_seen.pop(ref, None)
        self.freed.discard(ref)

    def reap(self) -> None:
        pass

    def pid_alive(self, pid: int, start_ticks: Optional[int]) -> bool:
        return procs.alive(Roots.from_env(), pid, start_ticks)

    def start_ticks(self, pid: int) -> Optional[int]:
        return Roots.from_env().process_start_ticks(pid)


def _free(api: RayApi) -> Dict[str, Tuple[float, float]]:
    return api.free_gpus()


def _sec(ms: Any) -> Optional[float]:
    return ms / 1000.0 if isinstance(ms, (int, float)) and ms > 0 else None


def _ip(url: Any) -> Optional[str]:
    m = re.match(r"^https?://([^:/]+)", str(url or ""))
    return m.group(1) if m else None
