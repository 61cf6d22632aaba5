"""`watch` (a bounded short-connection poll of one run) and `patrol` (a verdict per host from a
fixed decision table) — made for cron jobs and agent loops. Facts and decisions only: what a
user reads is render_poll.py's."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from rgt_client import exitcodes
from rgt_client.status import statusdata
from rgt_client.errors import BoxTooSlow, ClientError
from rgt_client.status.fetch import HostStatus, fetch_status
from rgt_client.box.transport import Target

TERMINAL_OK = ("succeeded",)
TERMINAL_BAD = ("failed", "cancelled", "interrupted")


@dataclass
class Clock:
    """The seam for time: tests pass tight intervals, never fake sleeps as the thing under test."""
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass
class WatchEvent:
    """What one watch tick saw. kind: `run` (the run as it is now), `no_answer` (ssh failed or the
    box was too slow: the run is not affected), `ended` (it ended badly), `agent_down` (down for
    `dead` ticks in a row: watch stops), `gave_up` (--max-wait passed)."""
    kind: str
    run: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)   # the answer it came in (agent block)
    error: ClientError | None = None
    dead: int = 0
    waited_s: float = 0.0
    # gave_up: what was last actually observed, never a guess: its age (None: the box never
    # answered during the wait), and since when (epoch seconds) the box has not answered
    seen_age_s: float | None = None
    unknown_since: float | None = None
    # streamed watch (watchstream.py): `event` (one event from the box's feed), `link_lost`
    # (waited_s: the backoff before the next try), `link_back`
    event: dict[str, Any] = field(default_factory=dict)


def watch(target: Target, run: str, every_s: float, max_wait_s: float, show: Callable[[WatchEvent], None],
          dead_ticks: int = 3, clock: Clock | None = None) -> int:
    """Poll until the run ends: 0 succeeded, 4 failed/cancelled/interrupted, 6 gave up,
    3 when the agent stayed down for `dead_ticks` ticks in a row (it would never finish)."""
    clock = clock or Clock()
    start = clock.monotonic()
    next_tick, dead = start, 0
    seen = _Seen()
    while True:
        code, dead = _watch_tick(target, run, show, dead, seen, clock)
        if code is not None:
            return code
        if dead >= dead_ticks:
            show(WatchEvent("agent_down", dead=dead))
            return exitcodes.AGENT_DOWN
        # the next tick on the schedule, but never a burst of catch-up ticks after a slow ssh
        next_tick = max(next_tick + every_s, clock.monotonic())
        if next_tick - start > max_wait_s:
            show(WatchEvent("gave_up", run=seen.run, waited_s=max_wait_s, unknown_since=seen.unknown_since, dead=dead,
                            seen_age_s=None if seen.at is None else clock.monotonic() - seen.at))
            return exitcodes.GAVE_UP
        clock.sleep(max(0.0, next_tick - clock.monotonic()))


class _Seen:
    """The run as last observed, when, and since when the box has not answered. A wait that
    never reached the box once ended with "still not finished" about a run that had succeeded."""

    def __init__(self) -> None:
        self.run: dict[str, Any] = {}
        self.at: float | None = None
        self.unknown_since: float | None = None


def _watch_tick(target: Target, run: str, show: Callable[[WatchEvent], None], dead: int, seen: _Seen,
                clock: Clock) -> tuple[int | None, int]:
    hs = fetch_status(target, events=0, run=run, timeout=60.0)
    if hs.error is not None:
        if hs.error.code == exitcodes.UNREACHABLE or isinstance(hs.error, BoxTooSlow):
            if seen.unknown_since is None:
                seen.unknown_since = time.time()
            show(WatchEvent("no_answer", error=hs.error))
            return None, dead
        raise hs.error
    status = hs.status or {}
    info = statusdata.find_run(status, run)
    if info is None:   # an agent that ignored --run: the same error as an unknown name
        raise statusdata.unknown_run(target.host, run, status)
    seen.run, seen.at, seen.unknown_since = info, clock.monotonic(), None
    show(WatchEvent("run", run=info, status=status))
    if info.get("state") in TERMINAL_OK:
        return exitcodes.OK, 0
    if info.get("state") in TERMINAL_BAD:
        show(WatchEvent("ended", run=info, status=status))
        return exitcodes.RUN_FAILED, 0
    return None, 0 if statusdata.alive(status) else dead + 1


# --- patrol ---------------------------------------------------------------------------------

# The fixed decision table, first match wins (also in the client docs):
PATROL_TABLE = (
    ("UNREACHABLE", exitcodes.UNREACHABLE, "ssh could not reach the host (no connection, or no such host)"),
    ("HOST-KEY", exitcodes.HOST_KEY, "the box's host key is unknown here (first contact) or has changed"),
    ("AUTH-FAILED", exitcodes.AUTH_FAILED, "the box refused the login (no ssh-agent under cron, wrong key)"),
    ("AGENT-DOWN", exitcodes.AGENT_DOWN, "agent not installed, not running, or heartbeat stale"),
    ("STATE-FULL", exitcodes.STATE_FULL, "the agent's state dir is full: runs go on, no new stage starts"),
    ("RUN-FAILED", exitcodes.RUN_FAILED, "a run failed or was interrupted within --since"),
    ("WARNED", exitcodes.OK, "a run has stage warnings and is active or ended within --since"),
    ("HEALTHY", exitcodes.OK, "a run is running or queued"),
    ("DONE", exitcodes.OK, "every run finished, the last one succeeded: pull next, or when and where its "
                           "verified pull went"),
    ("IDLE", exitcodes.OK, "no runs"),
    ("ERROR", exitcodes.ERROR, "anything else: no python, a malformed or too slow answer"),
)
_CODE = {word: code for word, code, _ in PATROL_TABLE}
# Several hosts: the exit code of the most urgent verdict, in this order.
PATROL_PRIORITY = (exitcodes.RUN_FAILED, exitcodes.STATE_FULL, exitcodes.AGENT_DOWN, exitcodes.HOST_KEY,
                   exitcodes.AUTH_FAILED, exitcodes.UNREACHABLE, exitcodes.ERROR)


@dataclass
class Verdict:
    word: str
    code: int
    runs: list[dict[str, Any]] = field(default_factory=list)   # the runs the verdict is about
    error: ClientError | None = None
    status: dict[str, Any] = field(default_factory=dict)


def patrol_verdict(hs: HostStatus, since_s: float) -> Verdict:
    """The first row of PATROL_TABLE that matches this host."""
    if hs.error is not None:
        word = {exitcodes.UNREACHABLE: "UNREACHABLE", exitcodes.AGENT_DOWN: "AGENT-DOWN", exitcodes.HOST_KEY: "HOST-KEY",
                exitcodes.AUTH_FAILED: "AUTH-FAILED"}.get(hs.error.code, "ERROR")
        return Verdict(word, _CODE[word], error=hs.error)
    status = hs.status or {}
    runs = status.get("runs") or []
    if not statusdata.alive(status):
        return _v("AGENT-DOWN", runs, status)
    recent = [r for r in runs if r.get("state") in statusdata.ACTIVE or _recent(r, status, since_s)]
    failed = [r for r in recent if r.get("state") in ("failed", "interrupted")]
    if statusdata.state_dir_full(status):
        # its own verdict: the agent is up (it serves status from memory), but nothing new starts
        return _v("STATE-FULL", failed + [r for r in runs if r.get("state") in statusdata.ACTIVE], status)
    if failed:
        return _v("RUN-FAILED", failed, status)
    warned = [r for r in recent if statusdata.warnings_of(r)]
    active = [r for r in runs if r.get("state") in statusdata.ACTIVE]
    if warned:
        return _v("WARNED", warned + [r for r in active if r not in warned], status)
    if active:
        return _v("HEALTHY", active, status)
    if runs:
        last = max(runs, key=lambda r: r.get("ended_at") or r.get("created_at") or "")
        if last.get("state") == "succeeded":
            return _v("DONE", [last], status)
    return _v("IDLE", [], status)


def _v(word: str, runs: list[dict[str, Any]], status: dict[str, Any]) -> Verdict:
    return Verdict(word, _CODE[word], runs, status=status)


def _parse_iso(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
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
