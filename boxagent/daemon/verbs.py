"""What the daemon does with each kind of inbox request, one handler per kind. A request travels
as a file (wire/inbox.py); the command that posts it is in runverbs.py (submit, cancel, resume)
or control.py (stop, reload). Every handler is idempotent: a request handled twice (the daemon
died in between) changes nothing more.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from boxagent.base.units import iso_utc


def _submit(daemon: Any, req: Dict[str, Any], now: float, mono: float) -> None:
    daemon.scheduler.requests.submit(req, now)


def _cancel(daemon: Any, req: Dict[str, Any], now: float, mono: float) -> None:
    # a sweep's cancel names its group, a run's its run: never one taken for the other
    daemon.scheduler.requests.cancel(str(req.get("group") or req.get("run")), now, mono, group="group" in req)


def _resume(daemon: Any, req: Dict[str, Any], now: float, mono: float) -> None:
    daemon.scheduler.requests.resume(str(req.get("run")), now)


def _stop(daemon: Any, req: Dict[str, Any], now: float, mono: float) -> None:
    posted = req.get("posted_at")
    if isinstance(posted, (int, float)) and posted < daemon.started_at:
        # A `stop` that timed out waiting for an older daemon must not stop this one.
        daemon.log("dropped a stop request older than this daemon (posted %s)" % iso_utc(posted))
        return
    daemon.waker.flags["kill" if req.get("kill") else "stop"] = True


def _reload(daemon: Any, req: Dict[str, Any], now: float, mono: float) -> None:
    daemon.reload()


HANDLERS: Dict[str, Callable[[Any, Dict[str, Any], float, float], None]] = {
    "submit": _submit, "cancel": _cancel, "resume": _resume, "stop": _stop,
    "reload": _reload, "notify-set": _reload,
}


def handle(daemon: Any, req: Dict[str, Any], now: float, mono: float) -> None:
    handler = HANDLERS.get(str(req.get("kind")))
    if handler is None:
        daemon.log("ignored a request of unknown kind %r" % (req.get("kind"),))
        return
    handler(daemon, req, now, mono)
