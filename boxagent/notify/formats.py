"""The services, by format name: where a notifier points, which items it takes, what it sends.

Each service module offers `endpoint(n) -> dict` (raises ValueError with a message that holds
no secret), `takes(n, item) -> bool` and `request(n, ep, item) -> Req`; `file` and `apprise`
deliver themselves (`deliver(n, ep, item) -> Result`).
"""
from __future__ import annotations

from typing import Any, Dict, Optional
from urllib.parse import urlsplit, urlunsplit

from boxagent.notify.messages import Message


class BadURL(ValueError):
    """A notifier URL we cannot use; the message never quotes the URL."""


class Item:
    """One thing to send: an event (with its rendered message), a test, a heartbeat, a dead-man."""

    def __init__(self, kind: str, event: Dict[str, Any], message: Message, delay_s: Optional[float] = None):
        self.kind = kind            # event | test | heartbeat | deadman | ping
        self.event = event
        self.message = message
        self.delay_s = delay_s      # deadman: deliver after this many seconds unless replaced


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


def http_base(scheme: str, netloc: str, https_scheme: str) -> str:
    host = netloc.rsplit("@", 1)[-1]
    return "%s://%s" % ("https" if scheme == https_scheme else "http", host)


def _modules() -> Dict[str, Any]:
    from boxagent.notify import chat, hooks, ntfy, sinks
    return {"ntfy": ntfy, "slack": chat.SLACK, "discord": chat.DISCORD, "telegram": chat.TELEGRAM,
            "json": hooks.JSON, "healthchecks": hooks.HEALTHCHECKS, "file": sinks.FILE,
            "apprise": sinks.APPRISE}


def service(fmt: str) -> Any:
    return _modules()[fmt]


def endpoint(n: Any) -> Dict[str, Any]:
    """Resolve (and cache on the notifier) where it sends; ValueError when the URL is malformed."""
    ep = getattr(n, "_endpoint", None)
    if ep is None:
        try:
            ep = service(n.format).endpoint(n)
        except BadURL:
            raise
        except Exception as exc:  # noqa: BLE001 - urlsplit/port parsing errors may quote the URL
            raise BadURL("malformed %s URL (%s)" % (n.format, type(exc).__name__))
        n._endpoint = ep
    return ep


def takes(n: Any, item: Item) -> bool:
    return bool(service(n.format).takes(n, item))
