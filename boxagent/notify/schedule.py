"""What tick() schedules per notifier: the ntfy dead-man re-arm, healthchecks pings, heartbeats.

Each goes to the notifier's thread as a latest-wins slot (see delivery.py): a newer re-arm
replaces one not yet sent, so a slow server never piles them up. `now` is the daemon's tick
time (only differences are used); slot times use the hub's clock. The texts say what the box
was doing, from the status the daemon last wrote.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from boxagent.notify import messages
from boxagent.notify.books import Books
from boxagent.notify.registry import service, takes
from boxagent.notify.types import Item


def rearm_every(deadman_s: float) -> float:
    """Re-arm 4 times per dead-man window (at most every 5 min): one late tick never fires it."""
    return max(0.1, min(300.0, deadman_s / 4.0))


class Schedule:
    def __init__(self, books: Books, clock: Callable[[], float]):
        self.books = books
        self.clock = clock
        self._next: Dict[str, Dict[str, float]] = {}     # notifier id -> {what: next tick time}

    def forget(self, nid: str) -> None:
        self._next.pop(nid, None)

    def due(self, n: Any, w: Any, now: float, host: str, status: Dict[str, Any]) -> None:
        """Hand the notifier's thread `w` whatever is due at `now`."""
        nxt = self._next.setdefault(n.id, {})
        wall = self.clock()
        deadman = service(n.format).deadman
        if deadman == "message" and n.deadman_s and now >= nxt.get("deadman", now):
            nxt["deadman"] = now + rearm_every(n.deadman_s)
            msg = messages.render_deadman(host, n.deadman_s, status, messages.iso(wall))
            ev = {"id": "deadman-%s" % n.id, "type": "deadman", "severity": "critical", "host": host}
            w.set_slot("deadman", Item("deadman", ev, msg, n.deadman_s), wall)
        ping_every = n.heartbeat_s or (n.deadman_s / 4.0 if n.deadman_s else None)
        if deadman == "ping" and ping_every:
            if now >= nxt.get("ping", now):
                nxt["ping"] = now + ping_every
                ev = {"id": "ping-%s-%d" % (n.id, int(wall)), "type": "ping", "host": host}
                w.set_slot("ping", Item("ping", ev, messages.render_heartbeat(host, status)), wall)
        elif n.heartbeat_s:
            first = nxt.setdefault("heartbeat", now + n.heartbeat_s)   # the first one after a full period
            if now >= first:
                nxt["heartbeat"] = now + n.heartbeat_s
                ev = {"id": "heartbeat-%s-%d" % (n.id, int(wall)), "type": "heartbeat", "severity": "info",
                      "host": host, "summary": messages.status_line(status)}
                item = Item("heartbeat", ev, messages.render_heartbeat(host, status))
                if takes(n, item):
                    w.set_slot("heartbeat", item, wall)

    def forget_deadman(self, nid: str) -> None:
        """The dead-man was taken away: stop re-arming it (the thread cancels it, see delivery.py)."""
        self._next.get(nid, {}).pop("deadman", None)
