"""The shared vocabulary of the notifiers: what to send (Item), an HTTP request (Req), the
outcome of one attempt (Result), a URL we cannot use (BadURL), and URL helpers.

The service modules (chat, hooks, ntfy, sinks) import only this module (and messages); the
registry (registry.py) imports them. So no module imports a module that imports it back.
"""
from __future__ import annotations

from typing import Any, Dict, Optional
from urllib.parse import urlsplit, urlunsplit

from boxagent.notify.messages import Message


class BadURL(ValueError):
    """A notifier URL we cannot use; the message never quotes the URL."""


class Item:
    """One thing to send: an event (with its rendered message), a test, a heartbeat, a dead-man."""

    def __init__(self, kind: str, event: Dict[str, Any], message: Optional[Message],
                 delay_s: Optional[float] = None):
        self.kind = kind            # event | test | heartbeat | deadman | ping | cancel (the dead-man)
        self.event = event
        self.message = message
        self.delay_s = delay_s      # deadman: deliver after this many seconds unless replaced

    @property
    def rendered(self) -> Message:
        """The message a sink sends (every kind a sink renders has one; a ping has none)."""
        if self.message is None:
            raise ValueError("a %s item has no message to send" % self.kind)
        return self.message


class Req:
    def __init__(self, method: str, url: str, headers: Dict[str, str], body: bytes = b""):
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body


class Result:
    def __init__(self, ok: bool, status: Optional[int] = None, error: Optional[str] = None,
                 retry_after: Optional[float] = None, permanent: bool = False, body: bytes = b""):
        self.ok = ok
        self.status = status
        self.error = error
        self.retry_after = retry_after
        self.permanent = permanent
        self.body = body


def with_base(url: str, base: Optional[str]) -> str:
    """Swap scheme+host (+ path prefix) for `base_url` (tests, self-hosted, proxies): keep the path."""
    if not base:
        return url
    sp, bp = urlsplit(url), urlsplit(base)
    return urlunsplit((bp.scheme, bp.netloc, bp.path.rstrip("/") + sp.path, sp.query, ""))


def origin(url: Any) -> str:
    """Scheme and host[:port] only: all of a URL (or a `base_url`) that may ever be shown.
    A relay's path often is its access token, so the path never is."""
    try:
        sp = urlsplit(str(url))
        host = sp.hostname or ""
        if sp.port:
            host = "%s:%d" % (host, sp.port)
    except ValueError:
        return "***"
    scheme = sp.scheme.lower() or "?"
    return "%s://%s" % (scheme, host) if host else "%s://***" % scheme
