"""Run and stage states (DESIGN.md "States"), the transitions allowed between them, and the event
each transition writes. Data only: the records (records.py) apply them.
"""
from __future__ import annotations

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED = (
    "queued", "running", "succeeded", "failed", "cancelled", "interrupted")
PENDING, SKIPPED = "pending", "skipped"
RUN_STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
STAGE_STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED, SKIPPED)
LIVE = (QUEUED, RUNNING)
RESUMABLE = (FAILED, CANCELLED, INTERRUPTED)
DONE = (SUCCEEDED, SKIPPED)          # a stage in one of these never runs again in this run

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

RUN_EVENTS = {QUEUED: "run_queued", RUNNING: "run_started", SUCCEEDED: "run_succeeded",
              FAILED: "run_failed", CANCELLED: "run_cancelled", INTERRUPTED: "run_interrupted"}
STAGE_EVENTS = {RUNNING: "stage_started", SUCCEEDED: "stage_succeeded", FAILED: "stage_failed",
                SKIPPED: "stage_skipped", CANCELLED: "stage_cancelled", INTERRUPTED: "stage_interrupted",
                PENDING: "stage_retry"}
RUN_SEVERITY = {QUEUED: "info", RUNNING: "info", SUCCEEDED: "info", FAILED: "critical",
                CANCELLED: "warning", INTERRUPTED: "critical"}
STAGE_SEVERITY = {RUNNING: "info", SUCCEEDED: "info", FAILED: "critical", SKIPPED: "info",
                  CANCELLED: "warning", INTERRUPTED: "warning", PENDING: "warning"}
RUN_SUMMARY = {QUEUED: "run %s queued", RUNNING: "run %s started", SUCCEEDED: "run %s succeeded",
               FAILED: "run %s failed", CANCELLED: "run %s cancelled", INTERRUPTED: "run %s interrupted"}
STAGE_SUMMARY = {RUNNING: "stage %s started", SUCCEEDED: "stage %s succeeded", FAILED: "stage %s failed",
                 SKIPPED: "stage %s skipped (its marker exists)", CANCELLED: "stage %s cancelled",
                 INTERRUPTED: "stage %s interrupted", PENDING: "stage %s will be retried"}


class TransitionError(RuntimeError):
    """A transition the state machine does not allow: a bug in the caller, never user input."""


def check_run(old: str, new: str) -> None:
    if new not in RUN_TRANSITIONS.get(old, ()):
        raise TransitionError("run: %s -> %s is not allowed" % (old, new))


def check_stage(old: str, new: str) -> None:
    if new not in STAGE_TRANSITIONS.get(old, ()):
        raise TransitionError("stage: %s -> %s is not allowed" % (old, new))
