"""The services, one row per format: which URLs it claims, where it sends, what it takes, how.

A new notifier is one service module (importing only notify.types and notify.messages) plus one
row below. Nothing imports this module back from a service module, so the import graph has no
circle: config, delivery, schedule and the hub ask the rows; the rows call the services.

A row names its functions explicitly: `request` (build one HTTP request; the delivery thread
sends it through the HTTP seam) or `deliver` (the service sends by itself: file, Apprise).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from boxagent.notify import chat, hooks, ntfy, sinks
from boxagent.notify.types import BadURL, Item, Req, Result

HostMatch = Callable[[str, str], bool]


class Service:
    def __init__(self, name: str, endpoint: Callable[[Any], Dict[str, Any]], takes: Callable[[Any, Item], bool],
                 request: Optional[Callable[[Any, Dict[str, Any], Item], Req]] = None,
                 deliver: Optional[Callable[[Any, Dict[str, Any], Item], Result]] = None,
                 schemes: Tuple[str, ...] = (), http_match: Optional[HostMatch] = None,
                 token_host: bool = False, deadman: Optional[str] = None,
                 retry_after: Optional[Callable[[bytes], Optional[float]]] = None):
        assert (request is None) != (deliver is None), name
        self.name = name
        self.endpoint = endpoint
        self.takes = takes
        self.request = request
        self.deliver = deliver
        self.schemes = schemes          # URL schemes that name this service by themselves
        self.http_match = http_match    # (host, path) -> True: an http(s) URL of this service
        self.token_host = token_host    # the URL's "host" is a token (slack://T/B/X): never shown
        self.deadman = deadman          # "message": a scheduled message; "ping": missed pings
        self.retry_after = retry_after  # a 429 body -> seconds, where the service says it there


def _hosts(*names: str, prefix: str = "", suffix: str = "") -> HostMatch:
    def match(host: str, path: str) -> bool:
        return (host in names or bool(suffix and host.endswith(suffix))) and path.startswith(prefix)
    return match


ROWS: List[Service] = [
    Service("ntfy", ntfy.endpoint, ntfy.takes, request=ntfy.request, schemes=("ntfy", "ntfys"),
            http_match=_hosts("ntfy.sh"), deadman="message"),
    Service("slack", chat.SLACK.endpoint, chat.SLACK.takes, request=chat.SLACK.request, schemes=("slack",),
            http_match=_hosts("hooks.slack.com"), token_host=True),
    Service("discord", chat.DISCORD.endpoint, chat.DISCORD.takes, request=chat.DISCORD.request,
            schemes=("discord",), token_host=True,
            http_match=_hosts("discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com",
                              prefix="/api/webhooks/")),
    Service("telegram", chat.TELEGRAM.endpoint, chat.TELEGRAM.takes, request=chat.TELEGRAM.request,
            schemes=("tgram", "telegram"), http_match=_hosts("api.telegram.org"), token_host=True,
            retry_after=chat.TELEGRAM.retry_after),
    Service("json", hooks.JSON.endpoint, hooks.JSON.takes, request=hooks.JSON.request, schemes=("json", "jsons")),
    Service("healthchecks", hooks.HEALTHCHECKS.endpoint, hooks.HEALTHCHECKS.takes,
            request=hooks.HEALTHCHECKS.request, http_match=_hosts("hc-ping.com", suffix=".hc-ping.com"),
            deadman="ping"),
    Service("file", sinks.FILE.endpoint, sinks.FILE.takes, deliver=sinks.FILE.deliver, schemes=("file",)),
    # Last: any scheme no row above claims goes to Apprise (when the box can import it).
    Service("apprise", sinks.APPRISE.endpoint, sinks.APPRISE.takes, deliver=sinks.APPRISE.deliver),
]
BY_NAME: Dict[str, Service] = {row.name: row for row in ROWS}
FORMATS = tuple(row.name for row in ROWS)
DEADMAN_FORMATS = tuple(row.name for row in ROWS if row.deadman)
TOKEN_HOST_SCHEMES = frozenset(s for row in ROWS if row.token_host for s in row.schemes)


def service(fmt: str) -> Service:
    return BY_NAME[fmt]


def infer_format(url: str) -> Optional[str]:
    """The format a URL names by itself (Apprise-style schemes and well-known webhook hosts)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        host = (parts.hostname or "").lower()
        for row in ROWS:
            if row.http_match is not None and row.http_match(host, parts.path):
                return row.name
        return None
    for row in ROWS:
        if scheme in row.schemes:
            return row.name
    return "apprise" if scheme else None


def endpoint(n: Any) -> Dict[str, Any]:
    """Resolve (and cache on the notifier) where it sends; BadURL when the URL is malformed."""
    if n.endpoint_cache is None:
        try:
            n.endpoint_cache = service(n.format).endpoint(n)
        except BadURL:
            raise
        except Exception as exc:  # noqa: BLE001 - urlsplit/port parsing errors may quote the URL
            raise BadURL("malformed %s URL (%s)" % (n.format, type(exc).__name__))
    return n.endpoint_cache


def takes(n: Any, item: Item) -> bool:
    return bool(service(n.format).takes(n, item))


def deliver(n: Any, item: Item, http: Any) -> Result:
    """Send one item through notifier `n`; errors come back scrubbed of the notifier's secrets."""
    row = service(n.format)
    try:
        ep = endpoint(n)
        if row.deliver is not None:
            res = row.deliver(n, ep, item)
        else:
            assert row.request is not None, n.format     # a row has deliver or request
            res = http.send(row.request(n, ep, item), n.timeout_s)
    except Exception as exc:  # noqa: BLE001 - a formatting bug must cost one message, not the thread
        res = Result(False, error="internal error: %s: %s" % (type(exc).__name__, exc))
    if not res.ok and res.status == 429 and res.retry_after is None and row.retry_after is not None:
        res.retry_after = row.retry_after(res.body)
    if res.error:
        res.error = n.scrub(res.error)
    return res
