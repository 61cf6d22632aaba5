"""Generic JSON webhook (HMAC-signed) and healthchecks-style pings.

JSON: `json://host/path` (http), `jsons://host/path` (https), or any http(s) URL with
`format = "json"`. The body is the event itself; `X-Rgt-Event-Id` lets the receiver drop a
resend; `X-Rgt-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>` when `secret` is set.

Healthchecks (https://hc-ping.com/<uuid>, or any base with `format = "healthchecks"`):
`<base>/start` when a run starts, `<base>/fail` with the cause as body (<= 10 KB) when it fails,
`<base>` when it succeeds and on every heartbeat, so the service pages when the pings stop.
A test goes to `<base>/log`, which records without changing the check's state.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, Dict
from urllib.parse import unquote, urlsplit, urlunsplit

from boxagent import __version__
from boxagent.notify.types import BadURL, Item, Req, with_base

HC_LIMIT_BYTES = 10 * 1024
HC_EVENTS = ("run_started", "run_succeeded", "run_failed")
USER_AGENT = "rgt-agent/" + __version__


def _strip_userinfo(url: str) -> tuple:
    sp = urlsplit(url)
    auth = None
    if sp.username:
        raw = ("%s:%s" % (unquote(sp.username), unquote(sp.password or ""))).encode("utf-8")
        auth = "Basic " + base64.b64encode(raw).decode("ascii")
    return urlunsplit((sp.scheme, sp.netloc.rsplit("@", 1)[-1], sp.path, sp.query, "")), auth


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class JsonHook:
    def endpoint(self, n: Any) -> Dict[str, Any]:
        sp = urlsplit(n.url)
        scheme = sp.scheme.lower()
        if scheme in ("json", "jsons"):
            url = urlunsplit(("https" if scheme == "jsons" else "http", sp.netloc, sp.path or "/", sp.query, ""))
        elif scheme in ("http", "https"):
            url = n.url
        else:
            raise BadURL("JSON webhook URLs are json://host/path, jsons://host/path or http(s)://...")
        if not sp.netloc:
            raise BadURL("a JSON webhook URL needs a host")
        url, auth = _strip_userinfo(url)
        return {"url": with_base(url, n.base_url), "auth": auth}

    def takes(self, n: Any, item: Item) -> bool:
        return item.kind in ("event", "test", "heartbeat")

    def request(self, n: Any, ep: Dict[str, Any], item: Item) -> Req:
        event = item.event
        body = json.dumps(event, ensure_ascii=False, separators=(",", ":"), sort_keys=True,
                          default=str).encode("utf-8")
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT,
                   "X-Rgt-Event-Id": str(event.get("id") or ""), "X-Rgt-Event-Type": str(event.get("type") or "")}
        if n.secret:
            headers["X-Rgt-Signature"] = signature(n.secret, body)
        if ep.get("auth"):
            headers["Authorization"] = ep["auth"]
        return Req("POST", ep["url"], headers, body)


class Healthchecks:
    def endpoint(self, n: Any) -> Dict[str, Any]:
        sp = urlsplit(n.url)
        if sp.scheme not in ("http", "https") or not sp.netloc or sp.path.strip("/") == "":
            raise BadURL("a healthchecks URL is https://hc-ping.com/<uuid> (or <base>/ping/<key>/<slug>)")
        url, auth = _strip_userinfo(n.url)
        return {"url": with_base(url, n.base_url).rstrip("/"), "auth": auth}

    def takes(self, n: Any, item: Item) -> bool:
        if item.kind == "event":
            return item.event.get("type") in HC_EVENTS
        return item.kind in ("test", "ping")

    def request(self, n: Any, ep: Dict[str, Any], item: Item) -> Req:
        etype = item.event.get("type")
        suffix, body = "", b""
        if item.kind == "test":
            suffix, body = "/log", item.rendered.plain().encode("utf-8")
        elif etype == "run_started":
            suffix = "/start"
        elif etype == "run_failed":
            suffix = "/fail"
            body = item.rendered.fit(HC_LIMIT_BYTES, "bytes").plain().encode("utf-8")
        elif etype == "run_succeeded":
            body = item.rendered.first_line().encode("utf-8")
        headers = {"User-Agent": USER_AGENT, "Content-Type": "text/plain; charset=utf-8"}
        if ep.get("auth"):
            headers["Authorization"] = ep["auth"]
        return Req("POST", ep["url"] + suffix, headers, body)


JSON = JsonHook()
HEALTHCHECKS = Healthchecks()
