"""Run and stage states (DESIGN.md "States"), the allowed transitions, and runs/<run>/state.json.

The daemon is the only writer of state.json (STYLE 4: every transition goes through the chain's
change_state(), which writes state.json and then the event). Times in state.json are epoch
seconds (status.json renders them as ISO 8601 UTC).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home

SCHEMA = "rgt.runstate/1"
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED = (
    "queued", "running", "succeeded", "failed", "cancelled", "interrupted")
PENDING, SKIPPED = "pending", "skipped"
RUN_STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
STAGE_STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED, SKIPPED)
LIVE = (QUEUED, RUNNING)
RESUMABLE = (FAILED, CANCELLED, INTERRUPTED)

RUN_TRANSITIONS = {
    QUEUED: (RUNNING, CANCELLED),
    RUNNING: (SUCCEEDED, FAILED, CANCELLED, INTERRUPTED),
    SUCCEEDED: (),
    FAILED: (QUEUED,),
    CANCELLED: (QUEUED,),
    INTERRUPTED: (QUEUED,),
}
STAGE_TRANSITIONS = {
    PENDING: (RUNNING, SKIPPED, CANCELLED, INTERRUPTED),
    # running -> pending is a retry waiting for its backoff
    RUNNING: (SUCCEEDED, FAILED, CANCELLED, INTERRUPTED, PENDING),
    SUCCEEDED: (PENDING,),   # resume: a succeeded stage whose marker was removed runs again
    FAILED: (PENDING,),
    CANCELLED: (PENDING,),
    INTERRUPTED: (PENDING,),
    SKIPPED: (PENDING,),
}

# The event each transition writes (None: the transition is part of another event, e.g. a
# resume resets stages to pending under one run_queued).
RUN_EVENTS = {QUEUED: "run_queued", RUNNING: "run_started", SUCCEEDED: "run_succeeded",
              FAILED: "run_failed", CANCELLED: "run_cancelled", INTERRUPTED: "run_interrupted"}
STAGE_EVENTS = {RUNNING: "stage_started", SUCCEEDED: "stage_succeeded", FAILED: "stage_failed",
                SKIPPED: "stage_skipped", CANCELLED: "stage_cancelled", INTERRUPTED: "stage_interrupted",
                PENDING: None}
RUN_SEVERITY = {QUEUED: "info", RUNNING: "info", SUCCEEDED: "info", FAILED: "critical",
                CANCELLED: "warning", INTERRUPTED: "critical"}
STAGE_SEVERITY = {RUNNING: "info", SUCCEEDED: "info", FAILED: "critical", SKIPPED: "info",
                  CANCELLED: "warning", INTERRUPTED: "warning", PENDING: "info"}


class TransitionError(RuntimeError):
    pass


def check_run_transition(old: str, new: str) -> None:
    if new not in RUN_TRANSITIONS.get(old, ()):
        raise TransitionError("run: %s -> %s is not allowed" % (old, new))


def check_stage_transition(old: str, new: str) -> None:
    if new not in STAGE_TRANSITIONS.get(old, ()):
        raise TransitionError("stage: %s -> %s is not allowed" % (old, new))


def new_stage(spec_stage: Dict[str, Any]) -> Dict[str, Any]:
    from boxagent.engine.jobspec import stage_kind   # here: `status` reads state.json and needs no jobspec
    return {"name": spec_stage["name"], "kind": stage_kind(spec_stage), "state": PENDING, "attempt": 0,
            "exit_code": None, "signal": None, "started_at": None, "ended_at": None, "duration_s": None,
            "marker": None, "log": None, "cause": None, "warnings": [], "retry_at": None,
            "proc": None, "oom_kill_at_start": None, "launched_at": None}


def new_run(spec: Dict[str, Any], sha: str, now: float, seq: int) -> Dict[str, Any]:
    return {"schema": SCHEMA, "name": spec["name"], "state": QUEUED, "spec_sha256": sha,
            "workdir": spec["workdir"], "created_at": now, "queued_at": now, "seq": seq,
            "started_at": None, "ended_at": None, "current_stage": None, "cause": None,
            "failed_stage": None, "resumes": 0,
            "stages": [new_stage(s) for s in spec["stage"]]}


def stage_of(run: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    for st in run["stages"]:
        if st["name"] == name:
            return st
    return None


def load(home: Home, name: str) -> Optional[Dict[str, Any]]:
    st = read_json(home.run_state(name))
    return st if isinstance(st, dict) and st.get("schema") == SCHEMA else None


def save(home: Home, run: Dict[str, Any]) -> None:
    atomic_write_json(home.run_state(run["name"]), run)


def list_runs(home: Home) -> List[str]:
    """Run names with a state.json, oldest queue position first."""
    try:
        names = [n for n in os.listdir(home.runs) if not n.startswith(".")]
    except OSError:
        return []
    return [n for n in names if os.path.exists(home.run_state(n))]


def load_all(home: Home) -> List[Dict[str, Any]]:
    runs = [r for r in (load(home, n) for n in list_runs(home)) if r is not None]
    runs.sort(key=lambda r: (r.get("seq", 0), r.get("created_at", 0)))
    return runs
