"""Which events a notifier takes: its `events` list, or its min_severity minus the quiet ones,
and never a run_failed (run_cancelled) that only repeats the stage_failed (stage_cancelled) it just
got (one buzz, not two)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from boxagent.notify.config import SEVERITY_RANK

# Not worth a phone buzz unless a notifier lists them in `events`: never, or only at severity info
# (a stage_succeeded with warnings, or a daemon_stopped by preemption, is a warning and goes out).
QUIET_EVENTS = frozenset(("heartbeat", "progress", "status", "notify_failed"))
QUIET_INFO_EVENTS = frozenset(("daemon_started", "daemon_stopped", "run_queued", "stage_started",
                               "stage_succeeded", "stage_skipped", "box_busy"))
CauseKey = Tuple[Any, Any]
CANCELLED_KEY: CauseKey = ("cancelled", None)   # what a sent stage_cancelled leaves for its run


def rank(event: Dict[str, Any]) -> int:
    return SEVERITY_RANK.get(str(event.get("severity") or "info"), 0)


def cause_key(event: Dict[str, Any]) -> CauseKey:
    cause = got if isinstance(got := event.get("cause"), dict) else {}
    return (cause.get("class"), cause.get("summary"))


def routes(n: Any, event: Dict[str, Any], last_stage_cause: Optional[CauseKey]) -> bool:
    """`events` listed: exactly those types. Otherwise severity >= min_severity, minus the quiet.
    `last_stage_cause`: the cause of the stage_failed this notifier last got for the event's run."""
    etype = event.get("type")
    if n.events is not None:
        return etype in n.events
    sev = rank(event)
    if etype in QUIET_EVENTS or (etype in QUIET_INFO_EVENTS and sev == 0):
        return False
    if etype == "run_failed" and last_stage_cause is not None and last_stage_cause == cause_key(event):
        return False
    if etype == "run_cancelled" and last_stage_cause == CANCELLED_KEY:
        return False            # the stage_cancelled just sent said it: one push per cancel
    return sev >= SEVERITY_RANK.get(n.min_severity, 0)
