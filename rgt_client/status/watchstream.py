"""`watch` streamed: one bounded wait on the box's event feed after another (eventwait.py), on the
shared connection, so a stage's end is shown within a second and a round trip, not at the next
poll. A poll each minute never showed a 15 s stage and saw a run end 27 s late.

Each wait starts from the last event id shown, so a broken link loses and repeats nothing: the
next wait returns what landed meanwhile. A broken link is said and retried with backoff (1, 2, 4
... 15 s) while --max-wait allows; what was last observed, and since when the box has not
answered, is kept as in the poll (poll._Seen), so a final message never claims a state it did not
see. An agent with no events file is polled (poll.watch) with --every.
During a stage the box may write no event for hours: a `progress` line (the stage's progress,
ETA and its age) comes at most every --every, so a long stage shows life (it printed nothing
for the whole stage).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from rgt_client import exitcodes
from rgt_client.status import statusdata
from rgt_client.errors import BoxTooSlow, ClientError
from rgt_client.status.eventwait import box_wait
from rgt_client.status.poll import TERMINAL_BAD, TERMINAL_OK, Clock, WatchEvent, _Seen, watch as poll_watch
from rgt_client.box.transport import Target

WAIT_S = 40.0          # one wait on the box; a longer one only delays finding a dead link
SLACK_S = 20.0         # past its bound a wait is a stalled link (ssh's keepalive ends it near 30 s too)
BACKOFF_MAX_S = 15.0
PROGRESS_MIN_S = 0.5   # --every 0 would be a busy loop of round trips


def watch(target: Target, run: str, every_s: float, max_wait_s: float, show: Callable[[WatchEvent], None],
          dead_ticks: int = 3, clock: Clock | None = None, wait_s: float = WAIT_S) -> int:
    """Stream until the run ends: 0 succeeded, 4 failed/cancelled/interrupted, 6 gave up, 3 when
    the agent stayed down for `dead_ticks` answers in a row."""
    clock = clock or Clock()
    deadline = clock.monotonic() + max_wait_s
    state = _Stream(show, clock, every_s)
    while True:
        left = deadline - clock.monotonic()
        if left <= 0:
            seen = state.seen
            show(WatchEvent("gave_up", run=seen.run, waited_s=max_wait_s, unknown_since=seen.unknown_since,
                            dead=state.dead,
                            seen_age_s=None if seen.at is None else clock.monotonic() - seen.at))
            return exitcodes.GAVE_UP
        first = state.cursor is None     # the first answer: where the feed is now, and the run's state
        # an agent that is not running writes no events: checked every --every, as the poll does
        bound = 0.0 if first else min(wait_s, left, every_s if state.dead else wait_s, state.progress_due())
        try:
            head = box_wait(target, run, state.cursor, bound, slack_s=SLACK_S)
        except ClientError as e:
            if not _link_broke(e):
                raise
            state.lost(e, deadline)
            continue
        if first and not _has_feed(head):   # an older agent: the poll, with --every
            return poll_watch(target, run, every_s, max(0.0, deadline - clock.monotonic()), show, dead_ticks, clock)
        code = state.take(head, run, target.host, first)
        if code is not None:
            return code
        if state.dead >= dead_ticks:
            show(WatchEvent("agent_down", dead=state.dead))
            return exitcodes.AGENT_DOWN


def _has_feed(head: dict[str, Any]) -> bool:
    """An events file with event ids and a status beside it; else the poll, which also says in its
    own words why a status failed (an unknown run, an agent that is down)."""
    return bool(head.get("feed") and head.get("cursor") and head.get("status_doc") is not None)


def _link_broke(e: ClientError) -> bool:
    """A blip: ssh lost the box, or the box stopped answering on an open link. A refused key or
    login is no blip: waiting will not fix it."""
    return isinstance(e, BoxTooSlow) or e.code == exitcodes.UNREACHABLE


class _Stream:
    def __init__(self, show: Callable[[WatchEvent], None], clock: Clock, every_s: float = 60.0) -> None:
        self.show, self.clock, self.every_s = show, clock, max(every_s, PROGRESS_MIN_S)
        self.shown_at: float | None = None       # when the run's last line (or progress line) was shown
        self.running = False
        self.seen = _Seen()
        self.cursor: str | None = None
        self.dead = 0
        self.backoff = 0.0

    def progress_due(self) -> float:
        """Seconds until the next progress line is due (a wait returns then with the status)."""
        if not self.running or self.shown_at is None:
            return WAIT_S
        return max(PROGRESS_MIN_S, self.shown_at + self.every_s - self.clock.monotonic())

    def lost(self, e: ClientError, deadline: float) -> None:
        self.backoff = min(BACKOFF_MAX_S, self.backoff * 2 or 1.0)
        if self.seen.unknown_since is None:
            self.seen.unknown_since = time.time()
        self.show(WatchEvent("link_lost", run=self.seen.run, error=e, waited_s=self.backoff,
                             unknown_since=self.seen.unknown_since))
        self.clock.sleep(max(0.0, min(self.backoff, deadline - self.clock.monotonic())))

    def take(self, head: dict[str, Any], run: str, host: str, first: bool) -> int | None:
        """Show what one wait brought: its events, then the run as the status beside them says."""
        self.cursor = head.get("cursor") or self.cursor
        if self.backoff:
            self.show(WatchEvent("link_back", unknown_since=self.seen.unknown_since))
        for e in head.get("events") or []:
            self.show(WatchEvent("event", event=e))
        status = head.get("status_doc")
        if status is None:
            self.show(WatchEvent("no_answer", error=BoxTooSlow("the agent's status did not answer beside the events",
                                                               "")))
            return None
        info = statusdata.find_run(status, run)
        if info is None:
            raise statusdata.unknown_run(host, run, status)
        again = self.backoff > 0
        self.seen.run, self.seen.at, self.seen.unknown_since, self.backoff = info, self.clock.monotonic(), None, 0.0
        self.dead = 0 if statusdata.alive(status) else self.dead + 1
        now = self.clock.monotonic()
        self.running = info.get("state") == "running"
        if first or again or head.get("events") or info.get("state") in TERMINAL_OK + TERMINAL_BAD:
            self.show(WatchEvent("run", run=info, status=status))
            self.shown_at = now
        elif self.running and (self.shown_at is None or now - self.shown_at >= self.every_s - 0.05):
            self.show(WatchEvent("progress", run=info, status=status))
            self.shown_at = now
        if info.get("state") in TERMINAL_OK:
            return exitcodes.OK
        if info.get("state") in TERMINAL_BAD:
            self.show(WatchEvent("ended", run=info, status=status))
            return exitcodes.RUN_FAILED
        return None
