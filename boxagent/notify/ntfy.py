"""ntfy (https://docs.ntfy.sh/publish/): `ntfy://` (http) / `ntfys://` (https) `[token@]host/topic`.

Body = the message (<= 4096 bytes, or ntfy turns it into an attachment); Title, Priority
(critical 5, warning 4, info 3), Tags (emoji shortcodes), Authorization when a token is given.
Every message carries `X-Sequence-ID` (the event id): since ntfy 2.16 a second publish with the
same sequence id replaces the first on the phone, so a resend after a crash mid-send shows once.

The dead-man is ONE scheduled message (`In: <deadman>`) under a fixed sequence id. Per ntfy's
docs ("Updating scheduled messages"; sequence ids arrived in 2.16) publishing again with the same sequence id
deletes the pending scheduled message and schedules the new one; `DELETE /<topic>/<sequence_id>`
cancels it. So re-arming on every heartbeat keeps exactly one pending, and when the agent stops
re-arming, ntfy itself delivers "box silent". Older servers ignore the sequence id (each re-arm
would add a scheduled message); the publish response then lacks `sequence_id` and the status
says so (`deadman.confirmed: false`).
"""
from __future__ import annotations

import base64
import json
import re
from typing import Any, Dict, Optional
from urllib.parse import unquote, urlsplit

from boxagent.notify.types import BadURL, Item, Req

LIMIT_BYTES = 4096
MAX_DELAY_S = 3 * 86400     # ntfy keeps scheduled messages at most 3 days
PRIORITY = {"critical": "5", "warning": "4", "info": "3"}
_TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
_SEQ_BAD = re.compile(r"[^-_A-Za-z0-9]")


def endpoint(n: Any) -> Dict[str, Any]:
    sp = urlsplit(n.url)
    scheme = sp.scheme.lower()
    segs = [unquote(s) for s in sp.path.split("/") if s]
    hostport = sp.netloc.rsplit("@", 1)[-1]
    if scheme in ("ntfy", "ntfys"):
        web = "https" if scheme == "ntfys" else "http"
        if segs:
            base, topic = "%s://%s" % (web, "/".join([hostport] + segs[:-1])), segs[-1]
        else:               # ntfy://topic means the public server, as in Apprise
            base, topic = "https://ntfy.sh", hostport
    elif scheme in ("http", "https"):
        if not segs:
            raise BadURL("an ntfy URL needs a topic: https://ntfy.sh/<topic>")
        base, topic = "%s://%s" % (scheme, "/".join([hostport] + segs[:-1])), segs[-1]
    else:
        raise BadURL("ntfy URLs start with ntfy://, ntfys:// or https://")
    if not _TOPIC.match(topic):
        raise BadURL("an ntfy topic is 1-64 letters, digits, - or _")
    if n.deadman_s and n.deadman_s > MAX_DELAY_S:
        raise BadURL("ntfy holds a scheduled message at most 3 days: deadman must be <= 3d")
    if n.base_url:
        base = n.base_url.rstrip("/")
    return {"base": base, "topic": topic, "auth": _auth(sp.username, sp.password)}


def _auth(user: Optional[str], password: Optional[str]) -> Optional[str]:
    if user and password:
        raw = ("%s:%s" % (unquote(user), unquote(password))).encode("utf-8")
        return "Basic " + base64.b64encode(raw).decode("ascii")
    if user:
        return "Bearer " + unquote(user)
    return None


def takes(n: Any, item: Item) -> bool:
    return item.kind != "ping"


def sequence_id(text: str) -> str:
    return _SEQ_BAD.sub("_", text)[:64] or "rgt"


def header_text(text: str, limit: int = 250) -> str:
    """Headers travel as latin-1 in http.client: non-ASCII goes RFC 2047 encoded (ntfy decodes it)."""
    text = " ".join(text.split())[:limit]
    try:
        text.encode("ascii")
        return text
    except UnicodeEncodeError:
        return "=?UTF-8?B?%s?=" % base64.b64encode(text.encode("utf-8")).decode("ascii")


def _body(msg: Any) -> str:
    return msg.body() or msg.first_line()


def request(n: Any, ep: Dict[str, Any], item: Item) -> Req:
    if item.kind == "cancel":
        return cancel_request(n, ep)
    msg = item.rendered.fit(LIMIT_BYTES, "bytes", text=_body)
    headers = {"Title": header_text(msg.headline), "Priority": PRIORITY.get(msg.severity, "3"),
               "Content-Type": "text/plain; charset=utf-8"}
    if msg.tags:
        headers["Tags"] = ",".join(msg.tags)
    if item.kind == "deadman":
        headers["In"] = "%ds" % max(1, int(round(item.delay_s or 0)))
        headers["X-Sequence-ID"] = deadman_sequence(n)
    else:
        headers["X-Sequence-ID"] = sequence_id(str(item.event.get("id") or ""))
    if ep.get("auth"):
        headers["Authorization"] = ep["auth"]
    return Req("POST", "%s/%s" % (ep["base"], ep["topic"]), headers, _body(msg).encode("utf-8"))


def deadman_sequence(n: Any) -> str:
    return sequence_id("rgt-deadman-%s" % n.id)


def cancel_request(n: Any, ep: Dict[str, Any]) -> Req:
    """Cancel the pending dead-man (notifier removed): DELETE /<topic>/<sequence_id>."""
    headers = {"Authorization": ep["auth"]} if ep.get("auth") else {}
    return Req("DELETE", "%s/%s/%s" % (ep["base"], ep["topic"], deadman_sequence(n)), headers)


def confirms_sequence(body: bytes) -> bool:
    """True when the server echoed the sequence id (ntfy >= 2.16 replaces scheduled messages)."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and bool(data.get("sequence_id"))
