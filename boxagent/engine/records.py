"""Runs and stages as typed records. Their transition methods are the only writers of their
fields: each one checks the state machine (states.py), writes what the new state means, and
returns the event spec of the transition for the scheduler to commit together with the state.

state.json (`rgt.runstate/1`) is Run.to_dict(); times in it are epoch seconds.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.engine import states as S

SCHEMA = "rgt.runstate/1"
Spec = Dict[str, Any]

STAGE_FIELDS = ("name", "kind", "state", "attempt", "tries", "exit_code", "signal", "started_at", "ended_at",
                "duration_s", "marker", "log", "cause", "warnings", "retry_at", "proc", "launched_at",
                "boot_id", "progress", "metrics", "last_success_s", "anchor",
                "slurm_job_id", "slurm_state", "slurm_reason", "slurm_waiting", "placement")
RUN_FIELDS = ("name", "state", "spec_sha256", "workdir", "created_at", "queued_at", "seq", "started_at",
              "ended_at", "current_stage", "cause", "failed_stage", "resumes", "gpus", "gpu_uuids", "group",
              "matrix", "pending_events")
_LISTS = ("warnings", "pending_events")


def _event(etype: str, severity: str, run: str, stage: Optional[str], summary: str, **extra: Any) -> Spec:
    spec = {"type": etype, "severity": severity, "run": run, "stage": stage, "summary": summary,
            "evidence": list(extra.pop("evidence", None) or [])}
    spec.update(extra)
    return spec


class Stage:
    __slots__ = STAGE_FIELDS + ("run_name",)
    # The fields' types (declared, not assigned: __slots__ holds them). state.json's `stages[]`.
    name: str
    kind: str
    state: str
    attempt: int
    tries: int
    exit_code: Optional[int]
    signal: Optional[int]
    started_at: Optional[float]
    ended_at: Optional[float]
    duration_s: Optional[float]
    marker: Optional[str]
    log: Optional[str]
    cause: Optional[Dict[str, Any]]
    warnings: List[str]
    retry_at: Optional[float]
    proc: Optional[Dict[str, Any]]
    launched_at: Optional[float]
    boot_id: Optional[str]
    progress: Optional[Dict[str, Any]]
    metrics: Optional[Dict[str, Any]]
    last_success_s: Optional[float]
    anchor: Optional[Dict[str, Any]]
    slurm_job_id: Optional[str]
    slurm_state: Optional[str]
    slurm_reason: Optional[str]
    slurm_waiting: Optional[Dict[str, Any]]
    placement: Optional[Dict[str, Any]]
    run_name: str

    def __init__(self, name: str, kind: str, run_name: str = "") -> None:
        for f in STAGE_FIELDS:
            setattr(self, f, [] if f in _LISTS else None)
        self.name, self.kind, self.state = name, kind, S.PENDING
        self.attempt, self.tries, self.run_name = 0, 0, run_name

    @classmethod
    def from_dict(cls, d: Dict[str, Any], run_name: str) -> "Stage":
        st = cls(str(d.get("name")), d.get("kind") or "run", run_name)
        for f in STAGE_FIELDS:
            if f in d and d[f] is not None:
                setattr(st, f, d[f])
        st.attempt, st.tries = int(st.attempt or 0), int(st.tries or 0)
        if st.anchor is None and d.get("oom_kill_at_start") is not None:
            st.anchor = {"oom_kill": d["oom_kill_at_start"], "at": d.get("started_at")}   # an older agent's state
        return st

    def to_dict(self) -> Dict[str, Any]:
        return {f: getattr(self, f) for f in STAGE_FIELDS}

    def _to(self, new: str) -> None:
        S.check_stage(self.state, new)
        self.state = new

    def _ended(self, new: str, now: float) -> None:
        self._to(new)
        self.ended_at = now
        if self.started_at:
            self.duration_s = round(now - self.started_at, 3)

    # -- transitions
    def begin(self, now: float, log: Optional[str], boot_id: Optional[str], anchor: Optional[Dict[str, Any]],
              proc: Optional[Dict[str, Any]] = None) -> Spec:
        """pending -> running: a new attempt."""
        self._to(S.RUNNING)
        self.attempt += 1
        self.tries += 1
        self.exit_code = self.signal = self.ended_at = self.duration_s = self.cause = None
        self.retry_at = self.marker = self.progress = self.metrics = None
        self.warnings = []
        self.started_at = self.launched_at = now
        self.log, self.boot_id, self.anchor, self.proc = log, boot_id, anchor, proc
        return _event("stage_started", "info", self.run_name, self.name, S.STAGE_SUMMARY[S.RUNNING] % self.name,
                      attempt=self.attempt, log=log)

    def succeed(self, now: float, exit_code: Optional[int], marker: str, warnings: List[str],
                progress: Optional[Dict[str, Any]], metrics: Optional[Dict[str, Any]] = None) -> Spec:
        self._ended(S.SUCCEEDED, now)
        self.exit_code, self.signal, self.marker, self.warnings = exit_code, None, marker, list(warnings)
        self.progress, self.metrics, self.last_success_s = progress, metrics, self.duration_s
        return _event("stage_succeeded", "warning" if warnings else "info", self.run_name, self.name,
                      S.STAGE_SUMMARY[S.SUCCEEDED] % self.name, attempt=self.attempt,
                      duration_s=self.duration_s, warnings=list(warnings))

    def end_badly(self, new: str, now: float, cause: Dict[str, Any], exit_code: Optional[int],
                  signal: Optional[int], progress: Optional[Dict[str, Any]], detail: Dict[str, Any],
                  metrics: Optional[Dict[str, Any]] = None) -> Spec:
        """running -> failed | cancelled | interrupted, with the cause the scheduler diagnosed."""
        self._ended(new, now)
        self.cause, self.exit_code, self.signal, self.progress = cause, exit_code, signal, progress
        self.metrics = metrics
        summary = S.STAGE_SUMMARY[new] % self.name
        if new == S.FAILED:
            summary = "stage %s failed: %s" % (self.name, cause.get("summary", ""))
        extra = dict(detail, cause=cause, attempt=self.attempt, evidence=cause.get("evidence") or [])
        return _event(S.STAGE_EVENTS[new], S.STAGE_SEVERITY[new], self.run_name, self.name, summary, **extra)

    def retry_later(self, now: float, backoff: float, cause: Dict[str, Any], exit_code: Optional[int],
                    signal: Optional[int], detail: Dict[str, Any]) -> Spec:
        """running -> pending: the cause is transient and retries are left; the next attempt waits."""
        self._ended(S.PENDING, now)
        self.cause, self.exit_code, self.signal = cause, exit_code, signal
        self.retry_at = now + backoff
        summary = "stage %s failed (%s); retrying in %ds as attempt %d" % (
            self.name, cause.get("class"), backoff, self.attempt + 1)
        extra = dict(detail, cause=cause, attempt=self.attempt, next_attempt=self.attempt + 1,
                     retry_in_s=backoff, evidence=cause.get("evidence") or [])
        return _event("stage_retry", "warning", self.run_name, self.name, summary, **extra)

    def skip(self, marker: str) -> Spec:
        self._to(S.SKIPPED)
        self.marker = marker
        return _event("stage_skipped", "info", self.run_name, self.name, S.STAGE_SUMMARY[S.SKIPPED] % self.name,
                      marker=marker)

    def cancel_waiting(self, now: float) -> Spec:
        """A stage waiting for its retry backoff is cancelled with its run."""
        self._to(S.CANCELLED)
        self.ended_at, self.retry_at = now, None
        return _event("stage_cancelled", "warning", self.run_name, self.name,
                      S.STAGE_SUMMARY[S.CANCELLED] % self.name)

    def left_behind(self, now: float, cause: Dict[str, Any]) -> Spec:
        """pending -> cancelled: a stage of a Slurm chain behind one that did not succeed (Slurm
        cancelled its job, or rgt did, or it was never submitted)."""
        self._to(S.CANCELLED)
        self.ended_at, self.retry_at, self.cause = now, None, cause
        return _event("stage_cancelled", "warning", self.run_name, self.name,
                      "stage %s not run: %s" % (self.name, cause.get("summary", "")), cause=cause,
                      attempt=self.attempt, evidence=cause.get("evidence") or [])

    def queue_seen(self, job_id: Optional[str], state: Optional[str], reason: Optional[str],
                   waiting: Optional[Dict[str, Any]] = None) -> bool:
        """What the cluster's queue says of the stage's job (Slurm): its id, its state, why it
        waits ({text, blocked} in words while it does). True when that changed (the state file
        is then saved; no event of its own)."""
        seen = (job_id, state, reason, waiting)
        if (self.slurm_job_id, self.slurm_state, self.slurm_reason, self.slurm_waiting) == seen:
            return False
        self.slurm_job_id, self.slurm_state, self.slurm_reason, self.slurm_waiting = seen
        return True

    def placed(self, seen: Dict[str, Any]) -> bool:
        """Where a cluster (Ray) placed the stage's newest attempt and what it says of it: {job_id,
        attempt, state, reason, node, node_id, host, gpus, ssh_host}. True when that changed (saved, no event)."""
        keep = ("job_id", "attempt", "state", "reason", "node", "node_id", "host", "gpus", "ssh_host")
        where = {k: seen.get(k) for k in keep}
        if self.placement == where:
            return False
        self.placement = where
        return True

    def reset(self) -> None:
        """resume: back to pending, silently (the run's run_queued says it)."""
        if self.state != S.PENDING:
            self._to(S.PENDING)
        self.retry_at, self.cause, self.tries = None, None, 0
        self.slurm_job_id = self.slurm_state = self.slurm_reason = self.slurm_waiting = None   # the old jobs are over


class Run:
    __slots__ = RUN_FIELDS + ("stages", "schema")
    # The fields' types (declared, not assigned: __slots__ holds them). state.json's top level.
    name: str
    state: str
    spec_sha256: str
    workdir: str
    created_at: float
    queued_at: Optional[float]
    seq: int
    started_at: Optional[float]
    ended_at: Optional[float]
    current_stage: Optional[str]
    cause: Optional[Dict[str, Any]]
    failed_stage: Optional[str]
    resumes: int
    gpus: Optional[List[int]]
    gpu_uuids: Optional[List[Optional[str]]]
    group: Optional[str]
    matrix: Optional[Dict[str, Any]]
    pending_events: List[Dict[str, Any]]
    stages: List[Stage]
    schema: str

    def __init__(self, name: str, stages: List[Stage]) -> None:
        for f in RUN_FIELDS:
            setattr(self, f, [] if f in _LISTS else None)
        self.schema, self.name, self.state, self.stages = SCHEMA, name, S.QUEUED, stages
        self.resumes, self.seq = 0, 0

    @classmethod
    def new(cls, spec: Dict[str, Any], sha: str, now: float, seq: int, kinds: List[str]) -> "Run":
        run = cls(spec["name"], [Stage(s["name"], k, spec["name"]) for s, k in zip(spec["stage"], kinds)])
        run.spec_sha256, run.workdir, run.created_at, run.queued_at, run.seq = sha, spec["workdir"], now, now, seq
        run.group, run.matrix = spec.get("group"), spec.get("matrix")
        return run

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Run":
        name = str(d.get("name"))
        run = cls(name, [Stage.from_dict(s, name) for s in d.get("stages") or [] if isinstance(s, dict)])
        for f in RUN_FIELDS:
            if f in d and d[f] is not None:
                setattr(run, f, d[f])
        run.seq, run.resumes = int(run.seq or 0), int(run.resumes or 0)
        return run

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"schema": SCHEMA}
        out.update((f, getattr(self, f)) for f in RUN_FIELDS)
        out["stages"] = [st.to_dict() for st in self.stages]
        return out

    def stage(self, name: str) -> Optional[Stage]:
        return next((st for st in self.stages if st.name == name), None)

    def all_done(self) -> bool:
        return all(st.state in S.DONE for st in self.stages)

    def _to(self, new: str, summary: Optional[str], severity: Optional[str], **extra: Any) -> Spec:
        S.check_run(self.state, new)
        self.state = new
        return _event(S.RUN_EVENTS[new], severity or S.RUN_SEVERITY[new], self.name, extra.pop("stage", None),
                      summary or S.RUN_SUMMARY[new] % self.name, **extra)

    # -- transitions
    def created(self, n_stages: int) -> Spec:
        """The event of a new run (it is born queued)."""
        return _event("run_queued", "info", self.name, None, S.RUN_SUMMARY[S.QUEUED] % self.name,
                      stages=n_stages, workdir=self.workdir)

    def start(self, now: float, gpus: Optional[List[int]] = None, uuids: Optional[List[Optional[str]]] = None) -> Spec:
        """queued -> running, on these GPUs (NVML indices; None: the whole box)."""
        self.gpus, self.gpu_uuids = gpus, uuids
        extra = {"gpus": gpus} if gpus is not None else {}
        spec = self._to(S.RUNNING, None, None, **extra)
        self.started_at, self.ended_at = now, None
        return spec

    def requeue(self, now: float, seq: int) -> Spec:
        """resume: failed/cancelled/interrupted -> queued, every stage back to pending."""
        for st in self.stages:
            st.reset()
        spec = self._to(S.QUEUED, "run %s queued again (resume from its last marker)" % self.name, None,
                        resumed=True)
        self.gpus = self.gpu_uuids = None          # it gets GPUs again when it starts
        self.queued_at, self.ended_at, self.seq = now, None, seq
        self.cause = self.failed_stage = self.current_stage = None
        self.resumes += 1
        return spec

    def succeed(self, now: float, **extra: Any) -> Spec:
        spec = self._to(S.SUCCEEDED, None, None, **extra)
        self.ended_at, self.current_stage = now, None
        return spec

    def end_badly(self, new: str, now: float, cause: Dict[str, Any], stage: Optional[str],
                  summary: Optional[str] = None, **extra: Any) -> Spec:
        """running|queued -> failed | cancelled | interrupted."""
        self.cause = cause
        self.failed_stage = stage if new == S.FAILED else None
        if stage is not None:
            extra["stage"] = stage
            if new == S.FAILED:
                extra["failed_stage"] = stage
            summary = summary or "run %s %s at stage %s: %s" % (self.name, new, stage, cause.get("summary", ""))
        spec = self._to(new, summary, None, cause=cause, **extra)
        self.ended_at = now
        return spec

    def cancel_idle(self, now: float) -> Spec:
        """Cancel a run with no attempt running: queued, or waiting for a retry's backoff."""
        spec = self._to(S.CANCELLED, None, None, evidence=["cancelled by request"])
        self.ended_at = now
        return spec

    def begin_stage(self, st: Stage, now: float, log: Optional[str], boot_id: Optional[str],
                    anchor: Optional[Dict[str, Any]], proc: Optional[Dict[str, Any]] = None) -> Spec:
        self.current_stage = st.name
        return st.begin(now, log, boot_id, anchor, proc)

    def stages_done(self) -> bool:
        """Every stage succeeded or was skipped; the run now waits for its manifest."""
        self.current_stage = None
        return self.all_done()
