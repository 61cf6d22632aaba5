"""What tick() schedules per notifier: the ntfy dead-man re-arm, healthchecks pings, heartbeats.

Each goes to the notifier's thread as a latest-wins slot (see delivery.py): a newer re-arm
replaces one not yet sent, so a slow server never piles them up. `now` is the daemon's tick
time (only differences are used); slot times use the hub's clock.
"""
from __future__ import annotations

import threading
from typing import Any

from boxagent.notify import messages, ntfy
from boxagent.notify.formats import Item, endpoint, takes


def rearm_every(deadman_s: float) -> float:
    """Re-arm 4 times per dead-man window (at most every 5 min): one late tick never fires it."""
    return max(0.1, min(300.0, deadman_s / 4.0))


def due(hub: Any, n: Any, w: Any, now: float) -> None:
    """Hand the notifier's thread whatever is due at `now`."""
    sched = hub._sched.setdefault(n.id, {})
    wall = hub.clock()
    if n.format == "ntfy" and n.deadman_s and now >= sched.get("deadman", now):
        sched["deadman"] = now + rearm_every(n.deadman_s)
        msg = messages.render_deadman(hub.host, n.deadman_s, hub._status, messages.iso(wall))
        ev = {"id": "deadman-%s" % n.id, "type": "deadman", "severity": "critical", "host": hub.host}
        w.set_slot("deadman", Item("deadman", ev, msg, n.deadman_s), wall)
    ping_every = n.heartbeat_s or (n.deadman_s / 4.0 if n.deadman_s else None)
    if n.format == "healthchecks" and ping_every:
        if now >= sched.get("ping", now):
            sched["ping"] = now + ping_every
            ev = {"id": "ping-%s-%d" % (n.id, int(wall)), "type": "ping", "host": hub.host}
            w.set_slot("ping", Item("ping", ev, messages.render_heartbeat(hub.host, hub._status)), wall)
    elif n.heartbeat_s:
        first = sched.setdefault("heartbeat", now + n.heartbeat_s)   # the first one after a full period
        if now >= first:
            sched["heartbeat"] = now + n.heartbeat_s
            ev = {"id": "heartbeat-%s-%d" % (n.id, int(wall)), "type": "heartbeat", "severity": "info",
                  "host": hub.host, "summary": messages.status_line(hub._status)}
            item = Item("heartbeat", ev, messages.render_heartbeat(hub.host, hub._status))
            if takes(n, item):
                w.set_slot("heartbeat", item, wall)


def cancel_deadman(hub: Any, n: Any) -> None:
    """A dead-man the user took away must not fire later: DELETE it (best effort, off-thread)."""
    hub._per(n).pop("deadman", None)
    hub._sched.get(n.id, {}).pop("deadman", None)

    def cancel() -> None:
        try:
            res = hub._new_http().send(ntfy.cancel_request(n, endpoint(n)), n.timeout_s)
            if not res.ok:
                hub.record_error(n, "cancelling the dead-man: %s" % n.scrub(res.error or "failed"))
        except Exception as exc:  # noqa: BLE001 - best effort; the status says what happened
            hub.record_error(n, "cancelling the dead-man: %s" % n.scrub(str(exc)))
    threading.Thread(target=cancel, name="rgt-notify-cancel", daemon=True).start()
