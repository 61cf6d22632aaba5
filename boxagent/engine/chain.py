"""The L1 self-completion chain: runs queue FIFO, one at a time; a stage starts only when every
earlier stage succeeded; every state change goes through change_run()/change_stage(), which write
state.json and then the event (STYLE 4).

Requests (submit/cancel/resume) arrive from the inbox; the per-attempt work (launch, watch,
re-adopt, finish) lives in stagectl.py.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

from boxagent.engine import handbook, state
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.engine.jobspec import JobError, spec_sha256, validate
from boxagent.base.roots import Roots
from boxagent.engine.runner import Active
from boxagent.daemon.services import Services, log_line
from boxagent.engine.state import (CANCELLED, FAILED, INTERRUPTED, LIVE, PENDING, QUEUED, RESUMABLE, RUNNING,
                            SKIPPED, SUCCEEDED)

RUN_SUMMARY = {QUEUED: "run %s queued", RUNNING: "run %s started", SUCCEEDED: "run %s succeeded",
               FAILED: "run %s failed", CANCELLED: "run %s cancelled", INTERRUPTED: "run %s interrupted"}
STAGE_SUMMARY = {RUNNING: "stage %s started", SUCCEEDED: "stage %s succeeded", FAILED: "stage %s failed",
                 SKIPPED: "stage %s skipped (its marker exists)", CANCELLED: "stage %s cancelled",
                 INTERRUPTED: "stage %s interrupted", PENDING: "stage %s pending"}


class Chain:
    def __init__(self, home: Home, roots: Roots, svc: Services):
        self.home, self.roots, self.svc = home, roots, svc
        self.runs: Dict[str, Dict[str, Any]] = {}
        self.specs: Dict[str, Dict[str, Any]] = {}
        self.active: Dict[str, Active] = {}
        self.artifacts: Dict[str, Dict[str, Any]] = {}
        self.boot_id = roots.boot_id()
        self.frozen = False     # preemption: finish what runs, start nothing new
        self.reap: List[Any] = []   # shims we started whose attempt ended: waited for, no zombies
        # run -> ManifestJob: every stage is done and the manifest builds on a worker thread
        # (minutes for hundreds of GB); the run stays `running` until collect_manifests().
        self.finalizing: Dict[str, Any] = {}
        from boxagent.engine.stagectl import StageControl
        self.stages = StageControl(self)

    def load(self) -> None:
        for run in state.load_all(self.home):
            spec = read_json(self.home.run_spec(run["name"]))
            if not isinstance(spec, dict):
                log_line("run %s: spec.json missing or unreadable; ignoring the run" % run["name"])
                continue
            self.runs[run["name"]] = run
            self.specs[run["name"]] = spec
            self.artifacts[run["name"]] = self.svc.artifacts_summary(run["name"])

    # -- transitions (STYLE 4: the only places that change a state)
    def change_run(self, run: Dict[str, Any], new: str, now: float, summary: Optional[str] = None,
                   severity: Optional[str] = None, **extra: Any) -> None:
        state.check_run_transition(run["state"], new)
        run["state"] = new
        if new == RUNNING:
            run["started_at"], run["ended_at"] = now, None
        elif new == QUEUED:
            run["queued_at"], run["ended_at"] = now, None
        else:
            run["ended_at"] = now
            run["current_stage"] = None if new == SUCCEEDED else run.get("current_stage")
        state.save(self.home, run)
        self._emit(state.RUN_EVENTS[new], severity or state.RUN_SEVERITY[new], run["name"], extra.pop("stage", None),
                   summary or RUN_SUMMARY[new] % run["name"], extra)

    def change_stage(self, run: Dict[str, Any], st: Dict[str, Any], new: str, now: float,
                     event: Optional[str] = None, summary: Optional[str] = None,
                     severity: Optional[str] = None, **extra: Any) -> None:
        state.check_stage_transition(st["state"], new)
        st["state"] = new
        if new == RUNNING:
            run["current_stage"] = st["name"]
        elif new not in (PENDING, SKIPPED):
            st["ended_at"] = now
            if st.get("started_at"):
                st["duration_s"] = round(now - st["started_at"], 3)
        state.save(self.home, run)
        etype = event or state.STAGE_EVENTS[new]
        if etype:
            self._emit(etype, severity or state.STAGE_SEVERITY[new], run["name"], st["name"],
                       summary or STAGE_SUMMARY[new] % st["name"], extra)

    def _emit(self, etype: str, severity: str, run: Optional[str], stage: Optional[str], summary: str,
              extra: Dict[str, Any]) -> None:
        spec = {"type": etype, "severity": severity, "run": run, "stage": stage, "summary": summary,
                "evidence": extra.pop("evidence", [])}
        spec.update(extra)
        self.svc.emit(spec)

    # -- requests from the inbox
    def submit(self, req: Dict[str, Any], now: float) -> None:
        try:
            spec = validate(req.get("spec"), "submit")
        except JobError as exc:
            log_line("dropped an invalid submit request: %s" % exc.message)
            return
        name, sha = spec["name"], spec_sha256(spec)
        old = self.runs.get(name)
        if old is not None:
            if old.get("spec_sha256") == sha:
                return                                  # identical re-submit: nothing to do
            if old["state"] in LIVE or not req.get("replace"):
                self._emit("submit_refused", "warning", name, None,
                           "a different job was submitted under the name of run %s (%s); refused"
                           % (name, old["state"]), {})
                return
            self._archive(name, now)
        self._create(spec, sha, now)

    def _archive(self, name: str, now: float) -> None:
        os.makedirs(self.home.archive, exist_ok=True)
        dest = os.path.join(self.home.archive, "%s.%s" % (name, time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))))
        os.replace(self.home.run_dir(name), dest)
        for table in (self.runs, self.specs, self.artifacts):
            table.pop(name, None)
        log_line("run %s: replaced; the old run is kept in %s" % (name, dest))

    def _create(self, spec: Dict[str, Any], sha: str, now: float) -> None:
        name = spec["name"]
        self.home.ensure_run(name)
        atomic_write_json(self.home.run_spec(name), spec, mode=0o600)   # job env may hold tokens
        run = state.new_run(spec, sha, now, self._next_seq())
        state.save(self.home, run)
        self.runs[name], self.specs[name] = run, spec
        self.artifacts[name] = {"files": 0, "bytes": 0, "manifest": None}
        handbook.write(self.home, spec, self.svc.config)
        self._emit("run_queued", "info", name, None, RUN_SUMMARY[QUEUED] % name,
                   {"stages": len(spec["stage"]), "workdir": spec["workdir"]})

    def _next_seq(self) -> int:
        return 1 + max([r.get("seq", 0) for r in self.runs.values()] or [0])

    def cancel(self, name: str, now: float, mono: float) -> None:
        run = self.runs.get(name)
        if run is None or run["state"] not in LIVE:
            return
        act = self.active.get(name)
        if act is not None:
            self.stages.stop(act, "cancel", mono)        # ends through the normal finish path
            return
        if run["state"] == RUNNING and (name in self.finalizing or self.all_done(run)):
            # Every stage succeeded: cancelling now would throw that away for a manifest.
            log_line("run %s: cancel ignored: every stage is done and its manifest is being built" % name)
            return
        for st in run["stages"]:
            if st["state"] == PENDING and run["state"] == RUNNING and st.get("retry_at"):
                st["retry_at"] = None
                self.change_stage(run, st, CANCELLED, now)
                break
        self.change_run(run, CANCELLED, now, evidence=["cancelled by request"])

    def resume(self, name: str, now: float) -> None:
        run = self.runs.get(name)
        if run is None or run["state"] not in RESUMABLE:
            return
        for st in run["stages"]:
            if st["state"] != PENDING:
                self.change_stage(run, st, PENDING, now)
            st.update(retry_at=None, cause=None, tries=0)
        run.update(cause=None, failed_stage=None, current_stage=None, seq=self._next_seq(),
                   resumes=run.get("resumes", 0) + 1)
        self.change_run(run, QUEUED, now, summary="run %s queued again (resume from its last marker)" % name,
                        resumed=True)

    # -- the scheduler, every fast tick
    def tick(self, now: float, mono: float) -> None:
        if self.reap:
            self.reap = [p for p in self.reap if p.poll() is None]
        if self.finalizing:
            self.collect_manifests(now)
        for act in list(self.active.values()):
            self.stages.check(act, now, mono)
        if self.frozen:
            return
        running = [r for r in self.runs.values() if r["state"] == RUNNING]
        if not running:
            queued = sorted((r for r in self.runs.values() if r["state"] == QUEUED), key=lambda r: r.get("seq", 0))
            if queued:
                self.start_run(queued[0], now)
            return
        for run in running:
            if run["name"] not in self.active:
                self.advance(run, now)

    def start_run(self, run: Dict[str, Any], now: float) -> None:
        self.change_run(run, RUNNING, now)
        spec = self.specs[run["name"]]
        if spec.get("preflight"):
            failures = self.svc.preflight(spec["preflight"], now, [(spec["workdir"], "workdir")])
            if failures:
                cause = preflight_cause(failures)
                run.update(cause=cause, failed_stage=None)
                self.change_run(run, FAILED, now, cause=cause, failed_stage=None,
                                evidence=cause["evidence"], summary="run %s failed its preflight: %s"
                                % (run["name"], cause["summary"]))
                return
        self.advance(run, now)

    def advance(self, run: Dict[str, Any], now: float) -> None:
        """Start the next stage, skip marked ones, or finish the run when every stage is done."""
        if self.frozen:
            return
        spec = self.specs[run["name"]]
        for sspec, st in zip(spec["stage"], run["stages"]):
            if st["state"] in (SUCCEEDED, SKIPPED):
                continue
            if st["state"] == PENDING:
                if st.get("retry_at") and now < st["retry_at"]:
                    return
                marker = self.home.marker(run["name"], st["name"])
                if os.path.exists(marker):
                    st["marker"] = marker
                    self.change_stage(run, st, SKIPPED, now, marker=marker)
                    continue
                self.stages.start(run, sspec, st, now)
            elif st["state"] == RUNNING:
                self.stages.adopt(run, sspec, st, now)
            return
        self.finish_run(run, now)

    def finish_run(self, run: Dict[str, Any], now: float) -> None:
        """Every stage is done: build the manifest on a worker thread, one at a time (hundreds of
        GB take minutes and the loop must keep ticking); collect_manifests() then emits
        run_succeeded, which carries the manifest's totals and sha256. Meanwhile the run stays
        `running` with no current stage (status.json: `finalizing`). A daemon that stops first
        leaves it so in state.json, and the next one gets here again: the manifest is incremental."""
        name = run["name"]
        if self.finalizing:       # this run's build, or another's: one at a time
            return
        if run.get("current_stage") is not None:
            run["current_stage"] = None
            state.save(self.home, run)
        log_line("run %s: every stage is done; building its manifest" % name)
        self.finalizing[name] = self.svc.start_manifest(name, self.specs[name])

    def collect_manifests(self, now: float) -> None:
        for name, job in list(self.finalizing.items()):
            if not job.done():
                continue
            del self.finalizing[name]
            run = self.runs.get(name)
            if run is not None and run["state"] == RUNNING:
                self._succeed(run, job, now)

    def _succeed(self, run: Dict[str, Any], job: Any, now: float) -> None:
        # A failed manifest costs the manifest, never the run's success: the event says what is known.
        manifest = job.manifest or {}
        totals = manifest.get("totals") or {}
        self.artifacts[run["name"]] = self.svc.artifacts_summary(run["name"])
        sha = self.artifacts[run["name"]].get("sha256") or manifest.get("sha256")
        duration = round(now - run["started_at"], 3) if run.get("started_at") else None
        extra: Dict[str, Any] = {"manifest_s": job.elapsed_s}
        if job.error:
            extra.update(manifest_error=job.error, evidence=["the manifest could not be built: %s" % job.error])
        self.change_run(run, SUCCEEDED, now, stages=len(run["stages"]), duration_s=duration,
                        artifacts={"files": totals.get("files", 0), "bytes": totals.get("bytes", 0),
                                   "sha256": sha}, **extra)

    @staticmethod
    def all_done(run: Dict[str, Any]) -> bool:
        return all(st["state"] in (SUCCEEDED, SKIPPED) for st in run["stages"])

    def fail_run(self, run: Dict[str, Any], st: Dict[str, Any], cause: Dict[str, Any], now: float,
                 new: str = FAILED) -> None:
        run.update(cause=cause, failed_stage=st["name"] if new == FAILED else None)
        extra = {"cause": cause, "stage": st["name"]}
        if new == FAILED:
            extra["failed_stage"] = st["name"]
        self.change_run(run, new, now, summary="run %s %s at stage %s: %s"
                        % (run["name"], new, st["name"], cause.get("summary", "")), **extra)

    def interrupt_all(self, now: float) -> None:
        """The end of a preemption: what still runs was KILLed; every running run is interrupted."""
        for act in list(self.active.values()):
            act.stop_reason = act.stop_reason or "preempt"
            self.stages.finish(act, {"exit_code": None, "signal": 9, "ended_at": now}, now)
        self.collect_manifests(now)
        for run in self.runs.values():
            if run["state"] == RUNNING and not self.all_done(run):
                # (a run whose stages are all done stays running: the next daemon builds its manifest)
                cause = self.svc.diagnose({"preempted": True}) or {
                    "class": "preempted", "summary": "stopped by SIGTERM to the agent",
                    "remediation": "resume from the last marker", "retryable": True, "evidence": []}
                run["cause"] = cause
                self.change_run(run, INTERRUPTED, now, cause=cause)

    def next_deadline(self, now: float, mono: float) -> float:
        """Seconds until something is due without any wakeup: a retry backoff ends, a stage times
        out, a TERM escalates to KILL. The loop sleeps no longer than this (the tick may be long)."""
        due = [3600.0]
        if self.finalizing:
            due.append(1.0)    # the worker wakes us when it ends; this is only a backstop
        for run in self.runs.values():
            if run["state"] != RUNNING:
                continue
            for st in run["stages"]:
                if st["state"] == PENDING and st.get("retry_at"):
                    due.append(st["retry_at"] - now)
        for act in self.active.values():
            if act.kill_at is not None and not act.killed:
                due.append(act.kill_at - mono)
            st = state.stage_of(self.runs[act.run], act.stage)
            timeout = self.stages.spec_stage(act).get("timeout")
            if timeout and st and st.get("started_at") and act.stop_reason is None:
                due.append(st["started_at"] + timeout - now + 0.01)
        return max(0.0, min(due))

    def running_pairs(self) -> List[tuple]:
        return [(a.run, a.stage) for a in self.active.values()]


def preflight_cause(failures: List[Dict[str, Any]]) -> Dict[str, Any]:
    evidence: List[str] = []
    for f in failures:
        evidence.extend(str(e) for e in (f.get("evidence") or [f.get("summary", "")]))
    return {"class": "preflight_failed",
            "summary": "; ".join(str(f.get("summary", "preflight check failed")) for f in failures),
            "remediation": "; ".join(str(f["remediation"]) for f in failures if f.get("remediation"))
            or "fix the box (or relax `preflight`) and resume the run",
            "retryable": False, "evidence": evidence}
