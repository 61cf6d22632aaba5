"""Which Slurm job is which stage attempt, and what Slurm last said of each: the job files
(`runs/<run>/stages/<stage>.<attempt>.job`, written as soon as sbatch answered) and one batched
squeue call per interval for every job still followed.

A job is followed until Slurm names its end state (or no longer knows it): its last record is
kept, so status converges to COMPLETED, FAILED, ... and an ended attempt is judged with it.
A controller that does not answer keeps the last view: a missing job is "not known now",
never "gone" (follow.poll).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.engine.ports import AttemptRef
from boxagent.slurm import follow, states, submit
from boxagent.slurm.cmd import Result

FINAL = ("ended", "gone")
# Slurm keeps a job's submit time in whole seconds; our clock and the controller's may differ by
# a little: a job found by name counts as this attempt's when submitted at most this long before
# the attempt's batch script was written.
NAME_SLACK_S = 5.0


class JobBook:
    def __init__(self, home: Home, runner: Callable[..., Result], user: Optional[str] = "self",
                 sacct: Optional[str] = None, timeout: float = follow.FOLLOW_TIMEOUT_S):
        self.home, self.runner, self.user, self.sacct, self.timeout = home, runner, user, sacct, timeout
        self.jobs: Dict[AttemptRef, Dict[str, Any]] = {}    # ref -> job file {job_id, submitted_at, after}
        self.recs: Dict[str, Dict[str, Any]] = {}           # job id -> Slurm's last record
        self.gone: set = set()                              # ids Slurm no longer knows
        self.loaded: set = set()                            # runs whose job files were read
        self.error: Optional[str] = None                    # the last poll's, while it lasts
        self.calls = 0

    # -- the job files
    def load(self, run: str) -> None:
        """Read a run's job files once; attempts whose batch script has no job file (the daemon
        died between sbatch and the file) are looked for by name."""
        if run in self.loaded:
            return
        self.loaded.add(run)
        try:
            names = os.listdir(self.home.stage_dir(run))
        except OSError:
            return
        orphans = []
        for name in names:
            ref = _ref_of(run, name)
            if ref is None:
                continue
            if name.endswith(".job"):
                data = read_json(os.path.join(self.home.stage_dir(run), name))
                if isinstance(data, dict) and data.get("job_id"):
                    self.jobs[ref] = data
            elif name.endswith(".sbatch"):
                orphans.append(ref)
        lost = [r for r in orphans if r not in self.jobs and not os.path.exists(self.home.stage_exit(*r))]
        if lost:
            self.find_by_name(lost)

    def record(self, ref: AttemptRef, job_id: str, now: float, after: Optional[str]) -> None:
        data = {"job_id": job_id, "submitted_at": now, "after": after}
        atomic_write_json(self.home.stage_job(*ref), data)
        self.jobs[ref] = data
        self.recs.pop(job_id, None)
        self.gone.discard(job_id)

    def find_by_name(self, refs: List[AttemptRef]) -> Dict[AttemptRef, str]:
        """Jobs named `rgt:<run>:<stage>` submitted after each attempt's batch script was written."""
        names = sorted({submit.job_name(r.run, r.stage) for r in refs})
        uid = str(os.getuid()) if self.user == "self" else self.user
        res = self.runner(follow.squeue_by_name_argv(names, user=uid), self.timeout)
        self.calls += 1
        if res.rc != 0:
            return {}
        found: Dict[AttemptRef, str] = {}
        recs = follow.parse_squeue(res.out)
        for ref in refs:
            try:
                since = os.stat(self.home.stage_sbatch(*ref)).st_mtime - NAME_SLACK_S
            except OSError:
                continue
            mine = [r for r in recs.values() if r["name"] == submit.job_name(ref.run, ref.stage)
                    and (r["submit_at"] or 0) >= since and r["job_id"] not in self.ids()]
            if mine:
                rec = max(mine, key=lambda r: int(r["job_id"]) if r["job_id"].isdigit() else 0)
                self.record(ref, rec["job_id"], rec["submit_at"] or since, None)
                self.recs[rec["job_id"]] = rec
                found[ref] = rec["job_id"]
        return found

    def ids(self) -> List[str]:
        return [j["job_id"] for j in self.jobs.values()]

    def job_of(self, ref: AttemptRef) -> Optional[str]:
        self.load(ref.run)
        job = self.jobs.get(ref)
        return job["job_id"] if job else None

    def latest(self, run: str) -> Dict[str, Tuple[AttemptRef, Dict[str, Any]]]:
        """stage -> (ref, job file) of its newest submitted attempt."""
        self.load(run)
        out: Dict[str, Tuple[AttemptRef, Dict[str, Any]]] = {}
        for ref, job in self.jobs.items():
            if ref.run == run and (ref.stage not in out or ref.attempt > out[ref.stage][0].attempt):
                out[ref.stage] = (ref, job)
        return out

    # -- what Slurm says
    def phase(self, job_id: Optional[str]) -> str:
        """pending | running | ended | gone | unknown (not asked yet, or the controller is down)."""
        if job_id is None:
            return "unknown"
        if job_id in self.gone:
            return "gone"
        rec = self.recs.get(job_id)
        return states.phase(rec["state"]) if rec else "unknown"

    def rec(self, job_id: Optional[str]) -> Optional[Dict[str, Any]]:
        return self.recs.get(job_id) if job_id else None

    def followed(self) -> List[str]:
        return sorted({j for j in self.ids() if self.phase(j) not in FINAL}, key=_num)

    def unasked(self) -> bool:
        """A job followed that Slurm was never asked about (just loaded after a restart)."""
        return any(j not in self.recs for j in self.followed())

    def running(self) -> bool:
        return any(self.phase(j) == "running" for j in self.followed())

    def poll(self, ids: Optional[List[str]] = None) -> bool:
        """One squeue call (plus sacct for ids squeue forgot, where accounting exists). False
        when the controller did not answer (the last view stays)."""
        ids = self.followed() if ids is None else ids
        if not ids:
            return True
        out = follow.poll(ids, runner=self.runner, sacct=self.sacct, timeout=self.timeout, user=self.user)
        self.calls += out["calls"]
        self.error = out["error"]
        if out["error"]:
            return False
        for job_id, rec in out["records"].items():
            self.recs[job_id] = rec
        for job_id in out["gone"]:
            # Forgotten before we saw it end (purged while the daemon was away, no sacct): its
            # last state here (RUNNING, PENDING) is no longer true; "not known" is.
            if states.phase((self.recs.get(job_id) or {}).get("state")) != "ended":
                self.recs.pop(job_id, None)
        self.gone.update(out["gone"])
        return True


def _ref_of(run: str, name: str) -> Optional[AttemptRef]:
    """`<stage>.<attempt>.job` / `.sbatch` -> the attempt (stage names hold dots)."""
    base, _, ext = name.rpartition(".")
    if ext not in ("job", "sbatch"):
        return None
    stage, _, attempt = base.rpartition(".")
    return AttemptRef(run, stage, int(attempt)) if stage and attempt.isdigit() else None


def _num(job_id: str) -> int:
    return int(job_id) if job_id.isdigit() else 0
