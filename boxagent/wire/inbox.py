"""Requests to the daemon: one JSON file per request in $RGT_HOME/inbox/ (the daemon has no socket).

A command writes `<time_ns>-<kind>-<rand>.json` atomically; the daemon handles the files in name
order (FIFO) within a tick and removes each one after its effect is on disk. A request handled
twice (the daemon died in between) is harmless: every kind is idempotent.
Kinds: submit {spec, replace}, cancel {run}, resume {run}, stop {}, reload {} (notify-set).
"""
from __future__ import annotations

import fcntl
import os
import time

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from boxagent.base import boxjson, procs, safefile
from boxagent.base.fsutil import atomic_write_json
from boxagent.base.home import Home

KINDS = ("submit", "cancel", "resume", "stop", "reload", "notify-set")
# A job is at most 1 MiB of TOML; a sweep travels as its one unexpanded job (all or none).
MAX_REQUEST_BYTES = 8 << 20


def post(home: Home, kind: str, payload: Dict[str, Any]) -> str:
    import secrets   # here, not at the top: `status` reads the inbox and needs no hmac/hashlib
    home.ensure()
    body = dict(payload)
    body["kind"] = kind
    body["posted_at"] = time.time()
    path = os.path.join(home.inbox, "%019d-%s-%s.json" % (time.time_ns(), kind, secrets.token_hex(3)))
    atomic_write_json(path, body, mode=0o600)
    procs.poke_daemon(home.pidfile)   # handled now, not at the next tick
    return path


def pending(home: Home, aside: Optional[Callable[[str], None]] = None) -> List[Tuple[str, Dict[str, Any]]]:
    """[(path, request)] oldest first; unreadable files come back as {"kind": None}. What is not a
    regular file within the cap (a FIFO, a symlink, a device, a directory, a huge file) is never
    opened for reading: a reader skips it; the daemon passes `aside`, which moves it to
    inbox/.aside/ and says so in daemon.log (a stray mkfifo once wedged the daemon in open())."""
    try:
        names = sorted(n for n in os.listdir(home.inbox) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(home.inbox, name)
        try:
            req = boxjson.loads(safefile.read_bytes(path, MAX_REQUEST_BYTES))
        except safefile.Unsafe as exc:
            if aside is not None:
                what = safefile.describe(path)
                moved = safefile.set_aside(path)
                aside("inbox: set aside %s: %s (%s)%s" % (name, what, exc.strerror,
                                                        ", moved to %s" % moved if moved else ""))
            continue
        except (OSError, ValueError):       # boxjson.BadJSON: too deep, not JSON
            req = None
        out.append((path, req if isinstance(req, dict) else {"kind": None}))
    return out


def pending_submits(home: Home, expand: Optional[Callable[[Dict[str, Any]], List[Dict[str, Any]]]] = None
                    ) -> Dict[str, Dict[str, Any]]:
    """run name -> the newest not-yet-handled submit request for it. `expand` (engine.sweep.expand):
    a sweep travels as one request, and each of its runs is named here with its own spec."""
    out = {}
    for _path, req in pending(home):
        spec = req.get("spec")
        if req.get("kind") == "submit" and isinstance(spec, dict) and isinstance(spec.get("name"), str):
            for each in expand(spec) if expand is not None else [spec]:
                if isinstance(each.get("name"), str):
                    out[each["name"]] = dict(req, spec=each)
    return out


def done(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def submit_lock(home: Home) -> "_Locked":
    """Serialises submitters, so two different jobs under one name cannot both be accepted."""
    return _Locked(home)


class _Locked(object):
    """A class, not contextlib.contextmanager: contextlib (collections, functools) was a tenth
    of the imports of the box's one-round-trip `status`, which reads the inbox and locks nothing."""

    def __init__(self, home: Home) -> None:
        self.home, self.fd = home, -1

    def __enter__(self) -> None:
        self.home.ensure()
        self.fd = os.open(os.path.join(self.home.inbox, ".submit.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)
