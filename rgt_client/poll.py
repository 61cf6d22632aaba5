"""`watch` (a bounded short-connection poll of one run) and `patrol` (one line per host, an
exit code from a fixed decision table) — made for cron jobs and agent loops."""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from rgt_client import exitcodes
from rgt_client.ops import HostStatus, fetch_status, find_run, unknown_run
from rgt_client.render import heartbeat_state, run_line
from rgt_client.transport import Target

TERMINAL_OK = ("succeeded",)
TERMINAL_BAD = ("failed", "cancelled", "interrupted")
ACTIVE = ("running", "queued")


@dataclass
class Clock:
    """The seam for time: tests pass tight intervals, never fake sleeps as the thing under test."""
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def watch(target: Target, run: str, every_s: float, max_wait_s: float, say: Callable[[str], None],
          dead_ticks: int = 3, clock: Clock | None = None) -> int:
    """Poll until the run ends: 0 succeeded, 4 failed/cancelled/interrupted, 6 gave up,
    3 when the agent stayed down for `dead_ticks` ticks in a row (it would never finish)."""
    clock = clock or Clock()
    start = clock.monotonic()
    next_tick, dead = start, 0
    while True:
        code, dead = _watch_tick(target, run, say, dead)
        if code is not None:
            return code
        if dead >= dead_ticks:
            say("%s the agent on %s stayed down for %d checks; restart it: rgt-client install %s"
                % (_ts(), target.host, dead, target.host))
            return exitcodes.AGENT_DOWN
        # the next tick on the schedule, but never a burst of catch-up ticks after a slow ssh
        next_tick = max(next_tick + every_s, clock.monotonic())
        if next_tick - start > max_wait_s:
            say("%s gave up after %s: run %s is still not finished (it keeps going on the box)"
                % (_ts(), _dur(max_wait_s), run))
            return exitcodes.GAVE_UP
        clock.sleep(max(0.0, next_tick - clock.monotonic()))


def _watch_tick(target: Target, run: str, say: Callable[[str], None], dead: int) -> tuple[int | None, int]:
    hs = fetch_status(target, events=0, timeout=60.0)
    if hs.error is not None:
        if hs.error.code == exitcodes.UNREACHABLE:
            say("%s ssh failed (the run is not affected): %s" % (_ts(), hs.error.message))
            return None, dead
        raise hs.error
    info = find_run(hs.status or {}, run)
    if info is None:
        raise unknown_run(target, run, hs.status)
    alive, words = heartbeat_state(hs.status or {})
    say("%s %s%s" % (_ts(), run_line(info), "" if alive else "; " + words))
    state = info.get("state")
    if state in TERMINAL_OK:
        return exitcodes.OK, 0
    if state in TERMINAL_BAD:
        say("%s run %s %s: rgt-client status %s --run %s" % (_ts(), run, state, target.host, run))
        return exitcodes.RUN_FAILED, 0
    return None, 0 if alive else dead + 1


def _ts() -> str:
    return time.strftime("%H:%M:%S")


def _dur(s: float) -> str:
    from boxagent.base.units import format_duration
    return format_duration(s)


# --- patrol ---------------------------------------------------------------------------------

# The fixed decision table, first match wins (also in docs/readme/client.md):
PATROL_TABLE = (
    ("UNREACHABLE", exitcodes.UNREACHABLE, "ssh could not reach the host"),
    ("AGENT-DOWN", exitcodes.AGENT_DOWN, "agent not installed, not running, or heartbeat stale"),
    ("RUN-FAILED", exitcodes.RUN_FAILED, "a run failed or was interrupted within --since"),
    ("HEALTHY", exitcodes.OK, "a run is running or queued"),
    ("DONE", exitcodes.OK, "every run finished, the last one succeeded: pull next"),
    ("IDLE", exitcodes.OK, "no runs"),
)
# Several hosts: the exit code of the most urgent verdict, in this order.
PATROL_PRIORITY = (exitcodes.RUN_FAILED, exitcodes.AGENT_DOWN, exitcodes.UNREACHABLE, exitcodes.ERROR)


def patrol_verdict(hs: HostStatus, since_s: float) -> tuple[str, int, str]:
    """(word, exit code, detail) for one host."""
    if hs.error is not None:
        if hs.error.code == exitcodes.UNREACHABLE:
            return "UNREACHABLE", exitcodes.UNREACHABLE, hs.error.message
        if hs.error.code == exitcodes.AGENT_DOWN:
            return "AGENT-DOWN", exitcodes.AGENT_DOWN, hs.error.message
        return "ERROR", exitcodes.ERROR, hs.error.message
    status = hs.status or {}
    alive, words = heartbeat_state(status)
    runs = status.get("runs") or []
    if not alive:
        return "AGENT-DOWN", exitcodes.AGENT_DOWN, "%s; %d run(s): %s" % (words, len(runs), _runs_brief(runs))
    failed = [r for r in runs if r.get("state") in ("failed", "interrupted") and _recent(r, status, since_s)]
    if failed:
        return "RUN-FAILED", exitcodes.RUN_FAILED, "; ".join(run_line(r) for r in failed)
    active = [r for r in runs if r.get("state") in ACTIVE]
    if active:
        return "HEALTHY", exitcodes.OK, "; ".join(run_line(r) for r in active) + _alerts(status)
    if runs:
        last = max(runs, key=lambda r: r.get("ended_at") or r.get("created_at") or "")
        if last.get("state") == "succeeded":
            return "DONE", exitcodes.OK, "run %s succeeded; pull next: rgt-client pull %s %s" % (
                last.get("name"), hs.target.host, last.get("name"))
    return "IDLE", exitcodes.OK, "no active runs" + _alerts(status)


def _runs_brief(runs: list[dict[str, Any]]) -> str:
    return ", ".join("%s %s" % (r.get("name"), r.get("state")) for r in runs) or "none"


def _alerts(status: dict[str, Any]) -> str:
    alerts = status.get("alerts") or []
    if not alerts:
        return ""
    return " · alerts: " + ", ".join("%s %s" % (a.get("severity"), a.get("type")) for a in alerts)


def _parse_iso(s: Any) -> datetime | None:
    if not isinstance(s, str) or not s:
        return None
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _recent(run: dict[str, Any], status: dict[str, Any], since_s: float) -> bool:
    """Ended within since_s of the box's own clock (no skew between laptop and box)."""
    ended = _parse_iso(run.get("ended_at"))
    now = _parse_iso(status.get("observed_at")) or datetime.now(timezone.utc)
    if ended is None:
        return True  # interrupted runs may have no end time: they still need the user
    return (now - ended).total_seconds() <= since_s


def patrol_exit(codes: list[int]) -> int:
    for code in PATROL_PRIORITY:
        if code in codes:
            return code
    return exitcodes.OK


