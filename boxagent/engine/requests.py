"""What the inbox asks of the scheduler: submit, cancel, resume. The scheduler makes one and
keeps it as `requests`; it works on the scheduler's tables and commits through it (Core: what it
needs of the scheduler).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Protocol

from boxagent.engine import retire, sweep
from boxagent.engine import states as S
from boxagent.engine.jobspec import JobError, spec_sha256, stage_kind, validate
from boxagent.engine.ports import AttemptRef
from boxagent.engine.records import Run, Stage


class Core(Protocol):
    runs: Dict[str, Run]
    specs: Dict[str, Dict[str, Any]]
    active: Dict[str, Any]
    artifacts: Dict[str, Dict[str, Any]]
    finalizing: Dict[str, Any]
    retired: retire.Retired
    store: Any
    journal: Any
    finisher: Any
    config: Dict[str, Any]
    log: Callable[[str], None]

    def grace(self, name: str) -> float: ...

    def backend(self, run: str) -> Any: ...

    def commit(self, run: Run, specs: List[Dict[str, Any]], now: float) -> None: ...

    def forget(self, name: str) -> None: ...


class Requests:
    def __init__(self, core: Core):
        self.core = core

    def submit(self, req: Dict[str, Any], now: float) -> None:
        """One run, or a whole sweep: a [matrix] job is expanded here, in this one request, so
        the sweep is queued whole or (one of its runs refused) not at all."""
        try:
            spec = validate(req.get("spec"), "submit")
        except JobError as exc:
            self.core.log("dropped an invalid submit request: %s" % exc.message)
            return
        specs = sweep.expand(spec)
        refused = [r for r in (self._refusal(s, bool(req.get("replace"))) for s in specs) if r]
        if refused:
            what = "sweep %s" % spec["name"] if len(specs) > 1 else "run %s" % spec["name"]
            self.core.journal.emit({"type": "submit_refused", "severity": "warning", "run": specs[0]["name"],
                                    "summary": "%s refused: %s" % (what, refused[0]) + (
                                        " (and %d more)" % (len(refused) - 1) if len(refused) > 1 else "")}, now)
            return
        for each in specs:
            self._submit_one(each, now)

    def known(self, name: str) -> Optional[Run]:
        """The run under this name: in memory, or a retired one brought back from its files."""
        run = self.core.runs.get(name)
        if run is not None:
            return run
        loaded = retire.load_one(self.core.store.home, name)     # a name never seen: one failed open
        if loaded is None:
            return None
        run, spec = loaded
        self.core.retired.back(run)
        self.core.runs[name], self.core.specs[name] = run, spec
        self.core.artifacts[name] = self.core.finisher.summary(name)
        return run

    def _refusal(self, spec: Dict[str, Any], replace: bool) -> Optional[str]:
        old = self.known(spec["name"])
        if old is None or old.spec_sha256 == spec_sha256(spec):
            return None
        if old.state in S.LIVE or not replace:
            return "a different job was submitted under the name of run %s (%s)" % (spec["name"], old.state)
        return None

    def _submit_one(self, spec: Dict[str, Any], now: float) -> None:
        name, sha = spec["name"], spec_sha256(spec)
        old = self.core.runs.get(name)
        if old is not None:
            if old.spec_sha256 == sha:
                return                                  # identical re-submit: nothing to do
            self.core.store.archive(name, now)
            self.core.forget(name)
        run = Run.new(spec, sha, now, self._next_seq(), [stage_kind(s) for s in spec["stage"]])
        self.core.store.create(run, spec, self.core.config)
        self.core.runs[name], self.core.specs[name] = run, spec
        self.core.artifacts[name] = {"files": 0, "bytes": 0, "manifest": None}
        self.core.journal.commit(run, [run.created(len(spec["stage"]))], now)

    def _next_seq(self) -> int:
        return 1 + max([r.seq for r in self.core.runs.values()] + [self.core.retired.max_seq])

    def cancel(self, name: str, now: float, mono: float, group: bool = False) -> None:
        """A run, or every run of a sweep by its group's name (`group`: the sweep, even where a
        run has the same name; a cancel of a sweep once went to a plain run of its name)."""
        if group or name not in self.core.runs:
            names = sorted(r.name for r in self.core.runs.values() if r.group == name)
        else:
            names = [name]
        for each in names:
            self._cancel_one(each, now, mono)

    def _cancel_one(self, name: str, now: float, mono: float) -> None:
        run = self.core.runs[name]
        if run.state not in S.LIVE:
            return
        att = self.core.active.get(name)
        if att is not None:
            att.stop("cancel", self.core.grace("stop_grace"), mono)   # it ends through the normal path
            return
        if run.state == S.RUNNING and (name in self.core.finalizing or run.all_done()):
            # Every stage succeeded: cancelling now would throw that away for a manifest.
            self.core.log("run %s: cancel ignored: every stage is done and its manifest is being built" % name)
            return
        specs = [st.cancel_waiting(now) for st in run.stages
                 if st.state == S.PENDING and run.state == S.RUNNING and st.retry_at][:1]
        self.core.commit(run, specs + [run.cancel_idle(now)], now)

    def resume(self, name: str, now: float) -> None:
        run = self.known(name)
        if run is None or run.state not in S.RESUMABLE:
            return
        alive = self.live_attempt_of(run)
        if alive is not None:
            # A stage never runs twice: not while the previous attempt's processes live on.
            self.core.log("run %s: resume refused: attempt %d of stage %s still has live processes"
                          % (name, alive.attempt, alive.name))
            self.core.journal.emit({"type": "resume_refused", "severity": "warning", "run": name, "stage": alive.name,
                                    "summary": "resume of run %s refused: attempt %d of stage %s still runs"
                                               % (name, alive.attempt, alive.name)}, now)
            return
        self.core.journal.commit(run, [run.requeue(now, self._next_seq())], now)

    def live_attempt_of(self, run: Run) -> Optional[Stage]:
        procs = self.core.backend(run.name).procs
        for st in run.stages:
            if st.attempt and st.kind == "run" and procs.command_alive(AttemptRef(run.name, st.name, st.attempt)):
                return st
        return None


def group_end(runs: Dict[str, Run], retired: retire.Retired, run: Run) -> List[Dict[str, Any]]:
    """`group_finished` when this run's end leaves no run of its sweep live. Its runs the daemon
    let go of (retire.py) count too: the message speaks for the whole sweep."""
    members = [r for r in runs.values() if r.group == run.group]
    if any(r.state in S.LIVE for r in members):
        return []
    gone = retired.groups.get(run.group or "") or {"ended": 0, "succeeded": 0, "failed": []}
    total = len(members) + gone["ended"]
    succeeded = len([r for r in members if r.state == S.SUCCEEDED]) + gone["succeeded"]
    failed = sorted([{"run": r.name, "state": r.state, "class": (r.cause or {}).get("class"), "seq": r.seq}
                     for r in members if r.state != S.SUCCEEDED] + list(gone["failed"]), key=lambda f: f["seq"] or 0)
    n_failed = total - succeeded
    named = ["%s (%s)" % (f["run"], f["class"] or f["state"]) for f in failed]
    summary = "sweep %s finished: %d of %d succeeded" % (run.group, succeeded, total)
    if n_failed:
        summary += "; not: %s" % ", ".join(named[:8]) + (" and %d more" % (n_failed - 8) if n_failed > 8 else "")
    return [{"type": "group_finished", "severity": "warning" if n_failed else "info", "run": None, "stage": None,
             "summary": summary, "group": run.group, "runs": total, "succeeded": succeeded,
             "failed": [{k: f[k] for k in ("run", "state", "class")} for f in failed]}]
