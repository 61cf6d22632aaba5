"""Sinks that deliver themselves: `file://PATH` (JSON lines) and Apprise (any other scheme).

The file sink is for demos, tests and local logs: one JSON object per line, appended with one
write so concurrent readers never see half a line. Apprise is optional: it is used only when
the box can import it, and its own logger is silenced because it may print the URL it was given.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import time
from typing import Any, Dict
from urllib.parse import unquote, urlsplit

from boxagent.base import safefile
from boxagent.notify.types import BadURL, Item, Result

_PERMANENT_ERRNO = (errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EROFS)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class FileSink:
    def endpoint(self, n: Any) -> Dict[str, Any]:
        sp = urlsplit(n.url)
        path = unquote((sp.netloc or "") + sp.path)
        if not path:
            raise BadURL("a file URL is file:///absolute/path.jsonl")
        return {"path": os.path.abspath(os.path.expanduser(path))}

    def takes(self, n: Any, item: Item) -> bool:
        return item.kind in ("event", "test", "heartbeat")

    def line(self, item: Item) -> bytes:
        msg = item.rendered
        rec = {"at": _iso(time.time()), "kind": item.kind, "id": item.event.get("id"),
               "type": item.event.get("type"), "severity": msg.severity, "title": msg.headline,
               "text": msg.plain(), "event": item.event}
        return (json.dumps(rec, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")

    def deliver(self, n: Any, ep: Dict[str, Any], item: Item) -> Result:
        data = self.line(item)
        try:
            os.makedirs(os.path.dirname(ep["path"]) or ".", exist_ok=True)
            fd = safefile.open_for_write(ep["path"], os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            return Result(False, error="cannot append to %s: %s" % (ep["path"], exc.strerror),
                          permanent=exc.errno in _PERMANENT_ERRNO)
        return Result(True)


class AppriseSink:
    def _apprise(self) -> Any:
        import apprise  # optional; config validation refused this format when it is missing
        logging.getLogger("apprise").addHandler(logging.NullHandler())
        logging.getLogger("apprise").propagate = False
        return apprise

    def endpoint(self, n: Any) -> Dict[str, Any]:
        try:
            apprise = self._apprise()
        except ImportError:
            raise BadURL("this scheme needs Apprise on the box (pip install apprise)")
        obj = apprise.Apprise()
        if not obj.add(n.url):
            raise BadURL("Apprise does not accept this URL (check it with `apprise -vv -b test URL`)")
        return {"apprise": obj}

    def takes(self, n: Any, item: Item) -> bool:
        return item.kind in ("event", "test", "heartbeat")

    def deliver(self, n: Any, ep: Dict[str, Any], item: Item) -> Result:
        msg = item.rendered
        try:
            ok = ep["apprise"].notify(title=msg.headline, body=msg.body() or msg.first_line())
        except Exception as exc:  # noqa: BLE001 - a plugin's bug is one failed send, not a dead thread
            return Result(False, error="apprise: %s" % type(exc).__name__)
        return Result(bool(ok), error=None if ok else "apprise reported a failed send")


FILE = FileSink()
APPRISE = AppriseSink()
