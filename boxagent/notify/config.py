"""Notifier configs: parse and validate the `notify` entries of secrets.json, and redact them.

An entry is what the user wrote in `[[notify]]` (client TOML) after it crossed ssh stdin as JSON:
`{"url", "format"?, "min_severity"?, "events"?, "heartbeat"?, "deadman"?, "secret"?,
"repeat_after"?, "base_url"?, "timeout"?, "id"?}`. The URL (and `secret`) are the secrets: they
stay in memory and secrets.json; everything written elsewhere names a notifier by its `id` and
shows its target through `redact()` only.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional
from urllib.parse import unquote, urlsplit

from boxagent.base import redact as redact_mod
from boxagent.base.units import parse_duration
from boxagent.notify.registry import DEADMAN_FORMATS, FORMATS, TOKEN_HOST_SCHEMES, endpoint, infer_format
from boxagent.notify.types import origin

SEVERITIES = ("info", "warning", "critical")
SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
KEYS = ("url", "format", "min_severity", "events", "heartbeat", "deadman", "secret", "repeat_after",
        "base_url", "timeout", "id", "name")
DEFAULT_REPEAT_AFTER_S = 3600.0
DEFAULT_TIMEOUT_S = 10.0
SUPPORTED_HINT = ("supported: ntfy://[token@]host/topic, ntfys://..., slack://T/B/X or "
                  "https://hooks.slack.com/services/..., discord://ID/TOKEN or "
                  "https://discord.com/api/webhooks/ID/TOKEN, tgram://BOTTOKEN/CHATID, json:// or "
                  "jsons://host/path, https://hc-ping.com/UUID, file:///path.jsonl; any http(s) URL with "
                  "format = \"ntfy\" | \"json\" | \"healthchecks\" | \"slack\" | \"discord\"; other schemes "
                  "need Apprise installed on the box")
_PUBLIC_PIECES = frozenset(("services", "api", "webhooks", "sendMessage", "token", "ping"))
_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class NotifyConfigError(ValueError):
    """A notifier entry that cannot be used; `hint` says how to fix it."""

    def __init__(self, message: str, hint: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.hint = hint or SUPPORTED_HINT


class Notifier:
    """One validated notifier. `url` and `secret` are secret; `target` is the redacted form."""

    def __init__(self, index: int, entry: Dict[str, Any], fmt: str):
        self.index = index
        self.entry = entry
        self.url = str(entry["url"])
        self.format = fmt
        self.id = str(entry.get("id") or "%s%d" % (fmt, index))
        self.name = str(entry.get("name") or "")
        self.min_severity = str(entry.get("min_severity") or "info")
        self.events = list(entry["events"]) if entry.get("events") is not None else None
        self.heartbeat_s = _dur(entry, "heartbeat")
        self.deadman_s = _dur(entry, "deadman")
        repeat = _dur(entry, "repeat_after")
        self.repeat_after_s: float = DEFAULT_REPEAT_AFTER_S if repeat is None else repeat
        self.timeout_s = _dur(entry, "timeout") or DEFAULT_TIMEOUT_S
        self.secret = entry.get("secret")
        # base_url is often a relay whose path is its access token: as secret as the URL.
        self.base_url = entry.get("base_url")
        self.target = redact(self.url, fmt)
        self._redactor = redact_mod.Redactor(self.secret_strings())
        redact_mod.KNOWN.add(self.secret_strings())     # every error bound for status or a terminal
        self.endpoint_cache: Optional[Dict[str, Any]] = None    # registry.endpoint() fills it

    def secret_strings(self) -> List[str]:
        """Every string whose appearance in a log/error/status would leak this notifier."""
        out = secret_parts(self.url, self.secret)
        if self.base_url:
            out = sorted(set(out) | set(secret_parts(self.base_url, keep_host=True)), key=len, reverse=True)
        return out

    def scrub(self, text: str) -> str:
        """`text` (an exception message, a response body) with this notifier's secrets masked, in
        every form an error quotes them (escaped CR/LF, %-quoted, line by line: base/redact.py)."""
        return self._redactor.scrub(text)

    def public(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"id": self.id, "format": self.format, "target": self.target,
               "min_severity": self.min_severity}
        if self.events is not None:
            out["events"] = self.events
        if self.base_url:
            out["base"] = origin(self.base_url)       # where it really goes; never the path
        if self.heartbeat_s:
            out["heartbeat_s"] = self.heartbeat_s
        if self.deadman_s:
            out["deadman_s"] = self.deadman_s
        return out


def _dur(entry: Dict[str, Any], key: str) -> Optional[float]:
    value = entry.get(key)
    if value is None or value == "" or value is False:
        return None
    return parse_duration(value)


def apprise_importable() -> bool:
    try:
        import apprise  # noqa: F401  (optional: only for schemes we do not speak ourselves)
    except Exception:  # noqa: BLE001 - a broken apprise install is "not available", not a crash
        return False
    return True


def parse_entry(index: int, entry: Any, apprise_ok: Optional[bool] = None) -> Notifier:
    """Validate one entry; NotifyConfigError names the entry and what to change."""
    where = "notify entry %d" % (index + 1)
    if not isinstance(entry, dict):
        raise NotifyConfigError("%s is not a table" % where, "write each notifier as a [[notify]] table")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise NotifyConfigError("%s: unknown key %s" % (where, ", ".join(unknown)),
                                "known keys: " + ", ".join(KEYS))
    url = entry.get("url")
    if not isinstance(url, str) or not url.strip():
        raise NotifyConfigError("%s has no url" % where, 'add url = "ntfys://ntfy.sh/your-topic"')
    _check_url_form(where, url.strip())
    fmt = _entry_format(where, url, entry, apprise_ok)
    _check_fields(where, entry, fmt)
    clean = dict(entry, url=url.strip())
    notifier = Notifier(index, clean, fmt)
    if fmt != "apprise" or apprise_importable():   # the client may validate for a box that has it
        _check_url_shape(where, notifier)
    return notifier


def _check_url_form(where: str, url: str) -> None:
    """scheme://... and, but for file://, something after the slashes. `ntfy:/mytopic` (one
    slash, a typo) was taken for the public server with an empty topic and never delivered.
    The message names the scheme only: the rest of a URL is often its token."""
    try:
        sp = urlsplit(url)
    except ValueError:
        raise NotifyConfigError("%s: the url is not a URL" % where, 'e.g. url = "ntfys://ntfy.sh/your-topic"')
    if not sp.scheme or not url[len(sp.scheme) + 1:].startswith("//"):
        scheme = sp.scheme or "ntfys"
        raise NotifyConfigError("%s: the url needs two slashes after %s:" % (where, scheme),
                                'write it as %s://... (e.g. url = "ntfys://ntfy.sh/your-topic")' % scheme)
    if sp.scheme != "file" and not sp.netloc:
        raise NotifyConfigError("%s: the url has nothing after %s://" % (where, sp.scheme),
                                'e.g. url = "%s://ntfy.sh/your-topic"' % sp.scheme)


def _entry_format(where: str, url: str, entry: Dict[str, Any], apprise_ok: Optional[bool]) -> str:
    fmt = entry.get("format")
    if fmt is not None:
        if fmt not in FORMATS:
            raise NotifyConfigError("%s: unknown format %r" % (where, fmt), "formats: " + ", ".join(FORMATS))
    else:
        fmt = infer_format(url)
        if fmt is None:
            raise NotifyConfigError("%s: cannot tell the service from the URL %s" % (where, redact(url)),
                                    'set format = "json" (or ntfy, healthchecks, slack, discord); '
                                    + SUPPORTED_HINT)
    if fmt == "apprise":
        available = apprise_importable() if apprise_ok is None else apprise_ok
        if not available:
            raise NotifyConfigError("%s: %s is not a scheme rgt speaks, and Apprise is not installed here"
                                    % (where, redact(url)),
                                    "pip install apprise on the box, or use one of the built-in formats; "
                                    + SUPPORTED_HINT)
    return fmt


def _check_fields(where: str, entry: Dict[str, Any], fmt: str) -> None:
    sev = entry.get("min_severity")
    if sev is not None and sev not in SEVERITIES:
        raise NotifyConfigError("%s: min_severity %r" % (where, sev), "use one of: info, warning, critical")
    events = entry.get("events")
    if events is not None and (not isinstance(events, list) or not all(isinstance(e, str) for e in events)):
        raise NotifyConfigError("%s: events must be a list of event types" % where,
                                'e.g. events = ["run_succeeded", "stage_failed", "oom_kill"]')
    for key in ("heartbeat", "deadman", "repeat_after", "timeout"):
        try:
            _dur(entry, key)
        except ValueError as exc:
            raise NotifyConfigError("%s: %s: %s" % (where, key, exc), '%s = "20m" (s, m, h, d)' % key)
    if entry.get("deadman") and fmt not in DEADMAN_FORMATS:
        raise NotifyConfigError("%s: deadman needs a service that speaks when the box cannot" % where,
                                "use deadman with ntfy (a scheduled message) or healthchecks (missed pings)")
    for key in ("secret", "base_url", "name"):
        if entry.get(key) is not None and not isinstance(entry.get(key), str):
            raise NotifyConfigError("%s: %s must be a string" % (where, key))
    nid = entry.get("id")
    if nid is not None and not (isinstance(nid, str) and _ID_OK.match(nid)):
        raise NotifyConfigError("%s: id must be 1-40 letters, digits, - or _" % where)


def _check_url_shape(where: str, n: Notifier) -> None:
    try:
        endpoint(n)
    except ValueError as exc:
        raise NotifyConfigError("%s: %s" % (where, exc))


def parse_notifiers(entries: Any, apprise_ok: Optional[bool] = None) -> List[Notifier]:
    """Validate a whole `notify` list (or {"notify": [...]}); ids must be unique."""
    if isinstance(entries, dict):
        entries = entries.get("notify", [])
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise NotifyConfigError("notify must be a list of notifier tables", "write [[notify]] tables")
    out = [parse_entry(i, e, apprise_ok) for i, e in enumerate(entries)]
    seen = set()
    for n in out:
        if n.id in seen:
            raise NotifyConfigError("two notifiers share the id %r" % n.id, "give each a distinct id, or none")
        seen.add(n.id)
    return out


def secret_parts(url: str, secret: Any = None, keep_host: bool = False) -> List[str]:
    """The URL, its userinfo, and every path/query piece long enough to matter (topics, tokens).
    keep_host: a `base_url`, whose scheme and host are shown (they say where it goes)."""
    parts = [secret] if isinstance(secret, str) and secret else []
    try:
        sp = urlsplit(url)
    except ValueError:
        return parts + [url]
    if sp.scheme == "file":  # a local path is not a secret; the status shows it
        return parts
    if not keep_host:
        parts.append(url)
    elif sp.path.strip("/") or sp.query or sp.username:
        parts.append(url.rstrip("/"))
    pieces = [sp.username, sp.password]
    if sp.scheme in TOKEN_HOST_SCHEMES:  # there the "host" is a token
        pieces.append(sp.netloc)
    pieces += re.split(r"[/?&=#]", sp.path + "?" + sp.query)
    pieces += _raw_pieces(url, sp.scheme in TOKEN_HOST_SCHEMES)
    # A receiver echoing the request's Authorization header into its error body (and so into
    # last_error and the outbox), or an HTTP library's debug log, shows user:pass as Basic auth's
    # base64: learned as the URL, `user` and `pass` only, that line passed every redaction.
    pieces += _wire_forms(sp.username, sp.password)
    for p in pieces:
        if p and len(p) >= 4 and p not in _PUBLIC_PIECES:
            parts.append(p)
            if unquote(p) != p:
                parts.append(unquote(p))
    return sorted(set(parts), key=len, reverse=True)


def _wire_forms(user: Optional[str], password: Optional[str]) -> List[str]:
    """How a URL's userinfo travels to its receiver: `user:pass` as written and decoded, and the
    HTTP Basic header's base64 of it (standard and URL-safe, unpadded: the padded spelling holds
    the unpadded one)."""
    if not user and not password:
        return []
    import base64
    out = []
    for pair in {"%s:%s" % (user or "", password or ""), "%s:%s" % (unquote(user or ""), unquote(password or ""))}:
        raw = pair.encode("utf-8")
        out += [pair, base64.b64encode(raw).decode("ascii").rstrip("="),
                base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")]
    return out


def _raw_pieces(url: str, host_is_token: bool) -> List[str]:
    """The pieces of the URL as written. urlsplit drops CR, LF and tab, but an HTTP library
    quotes the URL it was given: a base_url with CR/LF inside its path leaked the part before
    them into last_error, notify-test and the outbox. So the raw text is split at the URL's
    delimiters, control characters kept: each piece is a secret, and the redaction masks its
    escaped spelling ('re\\r\\nlay...') as well as each run between its control characters."""
    rest = url.split("://", 1)[-1]
    host, _, path = rest.partition("/")
    if "@" in host:
        userinfo, _, host = host.rpartition("@")
        path = userinfo + "/" + path
    return re.split(r"[/?&=#@]+", (host + "/" if host_is_token else "") + path)


def redact(url: str, fmt: Optional[str] = None) -> str:
    """`ntfys://ntfy.sh/***`: scheme and host stay (they say where), the rest never leaves."""
    try:
        sp = urlsplit(url)
    except ValueError:
        return "***"
    scheme = sp.scheme.lower() or "?"
    if scheme == "file":
        return "file://" + sp.path
    if scheme in TOKEN_HOST_SCHEMES:
        return "%s://***" % scheme
    shown = origin(url)
    return shown if shown.endswith("***") else shown + "/***"
