"""The scheduler: the one place that decides. Runs queue in submission order; a stage starts only
when every earlier stage succeeded; an ended attempt is read (its facts, the box as it is now),
judged (verdict.py) and applied through the records' transitions, whose events are committed with
the state (journal). Attempts only report; nothing below calls back up.

Every decision is a function of the state on disk plus what the box says now, so a daemon that
died anywhere resumes correctly: `advance()` finishes half-done transitions (a failed stage in a
running run fails the run), running stages are re-adopted at load, markers are skipped.
"""
from __future__ import annotations

import signal
import time
from typing import Any, Callable, Dict, List, Optional

from boxagent.engine import retire
from boxagent.engine import states as S
from boxagent.engine.attempt import RELAUNCH, Attempt, stage_log, stage_watch
from boxagent.engine.facts import build_facts, elsewhere
from boxagent.base.fsutil import read_json
from boxagent.engine.backends import BackendTable
from boxagent.engine.ports import AttemptRef, Backend, BoxReader, Journal
from boxagent.engine.records import Run, Stage
from boxagent.engine.requests import Requests, group_end
from boxagent.engine.slots import Gpu, Start, plan
from boxagent.engine.store import RunStore
from boxagent.engine.views import Views
from boxagent.engine.verdict import decide, preflight_cause
from boxagent.base.units import iso_utc
from boxagent.triage import build_rules, diagnose

LAST_LINES = 20
# Log scanning per loop pass, all stages together: a 1 GB log is read in slices between which the
# loop writes status and handles requests, so the heartbeat keeps its pace.
SCAN_BUDGET_S = 0.1


class Scheduler:
    """The decisions. Where a run's stages run is its backend's (self.backends, by the job's
    `backend`): the scheduler reads the backend's traits and calls its ports, and names none.
    What the inbox asks is `requests` (submit, cancel, resume); what the daemon reads between
    decisions is `views` (deadlines, stalls, GPU holders, live blocks)."""

    def __init__(self, store: RunStore, journal: Journal, backends: BackendTable, box: BoxReader,
                 finisher: Any, settings: Dict[str, Any], config: Dict[str, Any],
                 profile_rules: List[Dict[str, Any]], env_hints: Dict[str, str], boot_id: Optional[str],
                 log: Callable[[str], None], hold: Callable[[], bool] = lambda: False):
        self.store, self.journal, self.backends, self.box, self.finisher = store, journal, backends, box, finisher
        self.settings, self.config, self.log = settings, config, log
        self.profile_rules, self.env_hints, self.boot_id = profile_rules, env_hints, boot_id
        self.runs: Dict[str, Run] = {}
        self.specs: Dict[str, Dict[str, Any]] = {}
        self.active: Dict[str, Attempt] = {}
        self.artifacts: Dict[str, Dict[str, Any]] = {}
        self.finalizing: Dict[str, Any] = {}        # run -> ManifestJob (a worker thread hashes)
        self.frozen = False                         # preemption: finish what runs, start nothing new
        self.hold = hold                            # e.g. the state dir is full: start nothing for now
        self._rules: Dict[str, Any] = {}
        self.retired = retire.Retired()             # ended runs let go of memory (retire.py)
        self.requests = Requests(self)
        self.views = Views(self.runs, self.specs, self.active, self.finalizing, backends, self.backend, self.emit_for)

    def grace(self, name: str) -> float:
        return float(self.settings[name])

    def forget(self, name: str) -> None:
        """A run replaced by a new job under its name (archived first)."""
        for table in (self.runs, self.specs, self.artifacts, self._rules):
            table.pop(name, None)

    def backend(self, run: str) -> Backend:
        return self.backends.of(self.specs.get(run) or {})

    def marked(self, run: Run, st: Stage) -> bool:
        """The stage is skipped for its marker. Where the stage's shim writes its own (a Slurm chain
        runs on while the daemon is away), a marker of the attempt the chain ran (the next one) is
        that attempt's success, to bind to, judge and report, not a skip."""
        if not self.store.has_marker(run.name, st.name):
            return False
        if not self.backend(run.name).traits.shim_marks:
            return True
        mark = read_json(self.store.marker_path(run.name, st.name))
        return not (isinstance(mark, dict) and mark.get("attempt") == st.attempt + 1)

    # -- start-up: what the files say, repaired
    def load(self, now: float) -> None:
        names = retire.split_on_disk(self.store.home, self.store.names(), self.retired)
        for run, spec in self.store.load_all(names):
            self.runs[run.name], self.specs[run.name] = run, spec
            self.artifacts[run.name] = self.finisher.summary(run.name)
            self.store.ensure_handbook(spec, self.config)
            if run.pending_events:
                self.journal.repair(run)
        self.retire_old()

    def retire_old(self) -> None:
        """Let go of the ended runs past the recent tail (they stay on disk): the idle daemon's
        CPU and memory must not grow with its history."""
        for name in retire.to_retire(self.runs, set(self.active) | set(self.finalizing)):
            self.retired.add(self.runs[name])
            for table in (self.runs, self.specs, self.artifacts, self._rules):
                table.pop(name, None)

    def adopt_running(self, now: float) -> None:
        """Called right after load(), before any request is handled."""
        for run in self.runs.values():
            # Re-adopt before any request is handled: a cancel that waited in the inbox while the
            # daemon was down must find the attempt it is about (and kill it), not an idle run.
            st = next((s for s in run.stages if s.state == S.RUNNING), None)
            if run.state == S.RUNNING and st is not None:
                self._adopt(run, self.sspec(run.name, st.name), st, now)

    # -- every fast tick
    def tick(self, now: float, mono: float) -> None:
        self.refresh(now)
        if self.finalizing:
            self.collect_manifests(now)
        self.check_running(now, mono)
        if not (self.frozen or self.hold()):
            self._schedule(now)
        self.retire_old()

    def refresh(self, now: float) -> None:
        """What each backend in use knows, brought up to date (one queue poll where one is due),
        and into the records where it learned something."""
        for backend in self.backends.made():
            backend.procs.reap()
            if backend.procs.refresh(now):
                backend.sync(self, now)

    def check_running(self, now: float, mono: float) -> None:
        until = time.monotonic() + SCAN_BUDGET_S
        for att in list(self.active.values()):
            self._check(att, now, mono, until)

    def _check(self, att: Attempt, now: float, mono: float, until: float) -> None:
        for spec in att.poll_log(now, until):
            self.emit_for(att, spec, now)
        att.escalate(mono)
        if att.overdue(now):
            self.log("run %s: stage %s ran past its timeout (%ss); stopping it"
                     % (att.run, att.stage, att.sspec.get("timeout")))
            att.stop("timeout", self.grace("stop_grace"), mono)
        outcome = att.check(now, self.grace("launch_grace"))
        if outcome is RELAUNCH:
            if self.hold():
                return                  # nothing ran (a full disk): launch it when there is room
            # The daemon died between saving `running` and the shim claiming the attempt (or the
            # shim found no room to start): nothing ran, so launching it now runs it exactly once.
            self.log("run %s: stage %s attempt %d never started; launching it" % att.ref)
            att.launched_at = now
            self._launch(att, self.runs[att.run])
        elif outcome is not None:
            self._ended(att, outcome, now)

    def _schedule(self, now: float) -> None:
        running = [r for r in self.runs.values() if r.state == S.RUNNING]
        for run in running:
            if run.name not in self.active and run.name not in self.finalizing:
                self.advance(run, now)
        queued = sorted((r for r in self.runs.values() if r.state == S.QUEUED), key=lambda r: r.seq)
        for run in [r for r in queued if self._queues_elsewhere(r.name)]:
            self.start_run(Start(run, None), now)      # its backend's queue holds it, not this host
        queued = [r for r in queued if not self._queues_elsewhere(r.name)]
        if not queued:
            return
        running = [r for r in self.runs.values() if r.state == S.RUNNING and not self._queues_elsewhere(r.name)]
        cap = self.config.get("max_parallel")
        inventory = self.box.gpus()
        box = None if inventory is None else [Gpu(*g) for g in inventory]
        for start in plan(queued, running, self.specs, box, cap if isinstance(cap, int) else None):
            self.start_run(start, now)

    def _queues_elsewhere(self, run: str) -> bool:
        return self.backend(run).traits.queues_elsewhere

    def start_run(self, start: Start, now: float) -> None:
        run, spec, gpus = start.run, self.specs[start.run.name], start.gpus
        specs = [run.start(now, [g.index for g in gpus] if gpus is not None else None,
                           [g.uuid for g in gpus] if gpus is not None else None)]
        if start.shared:     # another tenant fills some of its GPUs: the run's status says so
            specs[0].update(severity="warning", gpu_shared=start.shared,
                            evidence=list(specs[0].get("evidence") or []) + [start.shared])
        failures = [{"summary": start.refused, "evidence": [start.refused],
                     "remediation": "lower the job's `gpus`, or run it on a box with more GPUs"}] if start.refused else []
        if not failures and spec.get("preflight"):
            failures = self.box.preflight(spec["preflight"], now, spec["workdir"])
        if failures:
            cause = preflight_cause(failures)
            specs.append(run.end_badly(S.FAILED, now, cause, None, failed_stage=None, evidence=cause["evidence"],
                                       summary="run %s failed its preflight: %s" % (run.name, cause["summary"])))
        self.commit(run, specs, now)
        if not failures:
            self.advance(run, now)

    def commit(self, run: Run, specs: List[Dict[str, Any]], now: float) -> None:
        """Commit a run's transition (its own event last in `specs`); a bad end of a run whose
        backend queued its later stages cancels the stages left behind (one unit with it), its
        end may end its sweep too."""
        backend = self.backend(run.name)
        behind = backend.left_behind(self, run, now)
        specs = specs[:-1] + behind + specs[-1:] if behind else specs
        if run.group and run.state not in S.LIVE:
            specs = specs + group_end(self.runs, self.retired, run)
        self.journal.commit(run, specs, now)
        if run.state in S.RESUMABLE:
            backend.procs.run_ended(run.name)

    def advance(self, run: Run, now: float) -> None:
        """Start the next stage, skip marked ones, finish a half-done end, or finish the run."""
        if self.frozen or self.hold():
            return
        skipped: List[Dict[str, Any]] = []
        for st in run.stages:
            if st.state in S.DONE:
                continue
            if st.state == S.PENDING:
                if st.retry_at and now < st.retry_at:
                    break
                if self.marked(run, st):
                    skipped.append(st.skip(self.store.marker_path(run.name, st.name)))
                    continue
                self._start_attempt(run, st, now, skipped)
                return
            if st.state == S.RUNNING:
                if skipped:
                    self.journal.commit(run, skipped, now)
                if run.name not in self.active:
                    self._adopt(run, self.sspec(run.name, st.name), st, now)
                return
            # failed / cancelled / interrupted in a running run: the daemon died between the
            # stage's transition and the run's. Finish it now.
            cause = st.cause or {"class": "nonzero_exit", "summary": "the stage %s" % st.state, "evidence": []}
            self.commit(run, skipped + [run.end_badly(st.state, now, cause, st.name)], now)
            return
        else:
            if skipped:
                self.journal.commit(run, skipped, now)
            self._finish_run(run, now)
            return
        if skipped:
            self.journal.commit(run, skipped, now)

    # -- one attempt
    def sspec(self, run: str, stage: str) -> Dict[str, Any]:
        return next(s for s in self.specs[run]["stage"] if s["name"] == stage)

    def _start_attempt(self, run: Run, st: Stage, now: float, prior: List[Dict[str, Any]]) -> None:
        spec, sspec = self.specs[run.name], self.sspec(run.name, st.name)
        attempt = st.attempt + 1
        log = stage_log(self.store, run.name, spec, sspec, attempt)
        wait_pid = (sspec.get("wait") or {}).get("pid")
        proc = {"wait_pid_ticks": self.backend(run.name).procs.start_ticks(wait_pid)} if wait_pid else None
        begun = run.begin_stage(st, now, log, self.boot_id, self.box.anchor(now), proc)
        # Persisted BEFORE the launch: a daemon killed right after finds the attempt and re-adopts
        # it (the shim's O_EXCL claim keeps it from ever running twice).
        self.journal.commit(run, prior + [begun], now)
        att = self._attempt(run, sspec, st, now)
        self.active[run.name] = att
        if st.kind == "run":
            self._launch(att, run)

    def _attempt(self, run: Run, sspec: Dict[str, Any], st: Stage, now: float) -> Attempt:
        if st.log and run.name not in self._rules:
            self._rules[run.name] = build_rules(self.profile_rules, self.specs[run.name].get("rule") or [])
        watch = stage_watch(self._rules.get(run.name), sspec, st.log, st.started_at or now)
        ticks = (st.proc or {}).get("wait_pid_ticks")
        backend = self.backend(run.name)
        att = Attempt(AttemptRef(run.name, st.name, st.attempt), st.kind, sspec, self.specs[run.name]["workdir"],
                      backend.procs, watch, st.started_at or now, st.launched_at, ticks)
        if st.kind == "run" and backend.traits.own_timeout:
            att.timeout = None      # the backend enforces it (slurm.time), daemon or not
        return att

    def _launch(self, att: Attempt, run: Run) -> None:
        backend = self.backend(run.name)
        backend.procs.launch(att.ref, backend.launch_record(self, att, run), att.launched_at)

    def _adopt(self, run: Run, sspec: Dict[str, Any], st: Stage, now: float) -> None:
        att = self._attempt(run, sspec, st, now)
        self.active[run.name] = att
        if st.boot_id and self.boot_id and st.boot_id != self.boot_id and not self.backend(run.name).traits.runs_elsewhere:
            self._ended(att, {}, now, boot_changed=True)
            return
        self.log("run %s: re-adopted stage %s attempt %d" % (run.name, st.name, st.attempt))

    # -- the end of an attempt: read, judge, apply
    def _ended(self, att: Attempt, info: Dict[str, Any], now: float, boot_changed: bool = False) -> None:
        self.active.pop(att.run, None)
        left: List[str] = []
        if att.stop_reason and att.kind == "run":
            att.procs.signal(att.ref, signal.SIGKILL)   # nothing of a stopped stage may survive it
        elif att.kind == "run" and not boot_changed:
            left = att.procs.leftovers(att.ref)       # children it started and left behind
        att.procs.release(att.ref)
        run = self.runs[att.run]
        st = run.stage(att.stage)
        assert st is not None, att.ref         # an attempt is always of one of its run's stages
        if att.watch is not None:
            att.watch.finish(now)
            att.watch.close()
        workdir = self.specs[att.run]["workdir"]
        if att.kind == "run" and self.backend(att.run).traits.runs_elsewhere:
            reading = elsewhere(self.box.since(st.anchor, now, [workdir]))
        else:
            reading = self.box.since(st.anchor, now, [workdir], att.run, att.stage, run.gpus)
        facts = build_facts(att.sspec, st.to_dict(), workdir, info, att.watch, now, att.stop_reason,
                            bool(info.get("vanished")), boot_changed, reading)
        verdict = decide(facts, int(att.sspec.get("retries") or 0), st.tries, self.grace("retry_backoff"),
                         att.stop_reason, self.log)
        live = att.watch.status_block() if att.watch is not None else {}
        exit_code, sig = facts["exit_code"], facts["signal"]
        if left:
            note = "left %d process(es) running after it ended: %s" % (len(left), ", ".join(left))
            verdict = verdict._replace(warnings=verdict.warnings + [note]) if verdict.cause is None else \
                verdict._replace(cause=dict(verdict.cause, evidence=list(verdict.cause.get("evidence") or []) + [note]))
        if verdict.state == S.SUCCEEDED:
            self._succeeded(run, st, facts, verdict, live, now)
            return
        assert verdict.cause is not None, verdict       # every end but success has its cause
        detail = {"duration_s": facts["duration_s"], "last_lines": facts["last_lines"][-LAST_LINES:], "log": st.log}
        if verdict.state == S.PENDING:
            self.journal.commit(run, [st.retry_later(now, verdict.backoff, verdict.cause, exit_code, sig, detail)], now)
            return
        specs = [st.end_badly(verdict.state, now, verdict.cause, exit_code, sig, live.get("progress"), detail,
                              live.get("metrics")),
                 run.end_badly(verdict.state, now, verdict.cause, st.name)]
        self.commit(run, specs, now)

    def _succeeded(self, run: Run, st: Stage, facts: Dict[str, Any], verdict: Any, live: Dict[str, Any],
                   now: float) -> None:
        marker = self.store.write_marker(run.name, st.name, {
            "run": run.name, "stage": st.name, "attempt": st.attempt, "succeeded_at": iso_utc(now),
            "duration_s": facts["duration_s"], "exit_code": facts["exit_code"], "spec_sha256": run.spec_sha256})
        specs = [st.succeed(now, facts["exit_code"], marker, verdict.warnings, live.get("progress"), live.get("metrics"))]
        if verdict.fast is not None:
            specs.append(dict(verdict.fast, run=run.name, stage=st.name))
        self.journal.commit(run, specs, now)
        self.advance(run, now)      # the next stage starts in this same tick

    def emit_for(self, att: Attempt, spec: Dict[str, Any], now: float) -> None:
        spec = dict(spec)
        spec.setdefault("run", att.run)
        spec.setdefault("stage", att.stage)
        self.journal.emit(spec, now)

    # -- the end of a run
    def _finish_run(self, run: Run, now: float) -> None:
        """Every stage is done: build the manifest on a worker thread, one at a time (hundreds of
        GB take minutes and the loop must keep ticking); collect_manifests() then commits
        run_succeeded, which carries the manifest's totals and sha256. Meanwhile the run stays
        `running` with no current stage; a daemon that stops first leaves it so, and the next one
        gets here again (the manifest is incremental)."""
        if self.finalizing:
            return
        if run.current_stage is not None:
            run.stages_done()
            self.store.save(run)
        self.log("run %s: every stage is done; building its manifest" % run.name)
        self.finalizing[run.name] = self.finisher.start(run.name, self.specs[run.name])

    def collect_manifests(self, now: float) -> None:
        for name, job in list(self.finalizing.items()):
            if not job.done():
                continue
            del self.finalizing[name]
            run = self.runs.get(name)
            if run is not None and run.state == S.RUNNING:
                self._run_succeeded(run, job, now)

    def _run_succeeded(self, run: Run, job: Any, now: float) -> None:
        # A failed manifest costs the manifest, never the run's success: the event says what is known.
        manifest = job.manifest or {}
        totals = manifest.get("totals") or {}
        self.artifacts[run.name] = self.finisher.summary(run.name)
        sha = self.artifacts[run.name].get("sha256") or manifest.get("sha256")
        extra: Dict[str, Any] = {"manifest_s": job.elapsed_s}
        if job.error:
            extra.update(manifest_error=job.error, evidence=["the manifest could not be built: %s" % job.error])
        elif manifest.get("on_node"):       # 0 files here says nothing of the node's disk: say so
            extra.update(evidence=list(manifest.get("warnings") or []))
        duration = round(now - run.started_at, 3) if run.started_at else None
        self.commit(run, [run.succeed(now, stages=len(run.stages), duration_s=duration, artifacts={
            "files": totals.get("files", 0), "bytes": totals.get("bytes", 0), "sha256": sha}, **extra)], now)

    # -- preemption
    def stop_all(self, reason: str, mono: float) -> None:
        if reason == "preempt":
            self.detach()           # SIGTERM on a login node: the cluster's jobs are not ours to stop
        for att in list(self.active.values()):
            att.stop(reason, self.grace("stop_grace"), mono)

    def end_all(self, now: float, reason: str) -> None:
        """The end of a preemption ("preempt": runs interrupted, resumable on restart) or of
        `stop --kill` ("cancel"): what still runs was KILLed; every running run ends."""
        for att in list(self.active.values()):
            att.stop_reason = att.stop_reason or reason
            self._ended(att, {"exit_code": None, "signal": 9, "ended_at": now}, now)
        self.collect_manifests(now)
        new = S.CANCELLED if reason == "cancel" else S.INTERRUPTED
        for run in self.runs.values():
            if run.state == S.RUNNING and not run.all_done() and not (reason == "preempt" and self.outlives_term(run.name)):
                # (a run whose stages are all done stays running: the next daemon builds its manifest)
                cause = diagnose({"cancelled": True} if reason == "cancel" else {"preempted": True})
                self.commit(run, [run.end_badly(new, now, cause, None)], now)

    def outlives_term(self, run: str) -> bool:
        """A SIGTERM to the daemon is no preemption of this run's stages (they run elsewhere)."""
        return self.backend(run).traits.runs_elsewhere

    def detach(self) -> List[str]:
        """SIGTERM to the daemon: forget the attempts that run elsewhere without stopping them
        (the next daemon re-adopts them). The names of the runs left running."""
        left = [name for name in self.active if self.outlives_term(name)]
        for name in left:
            att = self.active.pop(name)
            if att.watch is not None:
                att.watch.close()
        return left

