"""The HTTP seam: one request, through urllib (or requests when RGT_NOTIFY_HTTP=requests).

Proxies come from the environment (both paths honour http_proxy/https_proxy/no_proxy) and from
the profile's `[proxy]` table (url, http, https, no_proxy, env, and a `hook` such as AutoDL's
/etc/network_turbo, see docs/profile-schema.md), which wins when it names any.
Redirects are not followed: a webhook that redirects is misconfigured, and following it would
send the body (and the token) to another host. `RGT_NOTIFY_HTTP=requests` picks requests.
Errors are returned as text, never raised: the caller scrubs secrets from them.

Endpoints may be hostile or broken, and the daemon must outlive them: at most MAX_BODY bytes
of any answer are read, streaming (a webhook answering with 1 GB took the daemon to 2.1 GB when
requests read the whole body), nothing is decompressed (a small gzip bomb is a big body), and
each request has a total deadline (deadline.py), not only a timeout per read.
"""
from __future__ import annotations

import email.utils
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Optional

from boxagent.notify import deadline
from boxagent.notify.types import Req, Result

MAX_RETRY_AFTER_S = 3600.0
MAX_BODY = 64 * 1024
READ_CHUNK = 16 * 1024


def profile_proxies(profile: Optional[Dict[str, Any]]) -> Dict[str, str]:
    """{"http": ..., "https": ..., "no": ...} from the profile's [proxy] (or a plain `proxy = URL`);
    {} when it names none, so the environment's proxies apply. The hook (AutoDL's
    /etc/network_turbo) is run by boxagent.base.profile.proxy_env, bounded, once per hub."""
    p = (profile or {}).get("proxy")
    if isinstance(p, str) and p:
        return {"http": p, "https": p}
    if not isinstance(p, dict):
        return {}
    try:
        from boxagent.base.profile import proxy_env
        env = proxy_env(profile or {})
    except Exception:  # noqa: BLE001 - a broken hook means "go direct", never a dead notifier
        env = {}
    return proxies_from_env(env)


def proxies_from_env(env: Dict[str, str]) -> Dict[str, str]:
    low = {k.lower(): v for k, v in env.items() if v}
    out = {}
    for scheme in ("http", "https"):
        val = low.get(scheme + "_proxy") or low.get("all_proxy")
        if val:
            out[scheme] = val
    if low.get("no_proxy"):
        out["no"] = low["no_proxy"]
    return out


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds from `Retry-After: 120` or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value)))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(MAX_RETRY_AFTER_S, max(0.0, when - (now if now is not None else time.time())))


def _requests(backend: Optional[str]) -> Any:
    """requests only when asked for (backend or RGT_NOTIFY_HTTP=requests): importing it grows the
    daemon by ~16 MiB of RSS for one POST now and then (on an H100 box the daemon held 58.5 MiB
    against a 28.7 MiB floor); the stdlib path below does the same job."""
    if (backend or os.environ.get("RGT_NOTIFY_HTTP", "").lower() or "urllib") != "requests":
        return None
    try:
        import requests
    except Exception:  # noqa: BLE001 - a broken requests install means "use urllib"
        return None
    return requests


class HttpClient:
    """One per delivery thread (a requests Session is not shared across threads)."""

    def __init__(self, proxies: Optional[Dict[str, str]] = None, backend: Optional[str] = None):
        self.proxies = dict(proxies or {})
        mod = _requests(backend)
        self.backend = "requests" if mod is not None else "urllib"
        self._session: Any = None
        if mod is not None:
            # urllib3 warns (retries, broken connections) with the URL path in the text; with no
            # handler configured Python prints that to stderr, i.e. daemon.log. Keep it quiet.
            logging.getLogger("urllib3").addHandler(logging.NullHandler())
            self._session = mod.Session()
            adapter = deadline.requests_adapter(mod)
            self._session.mount("http://", adapter)
            self._session.mount("https://", adapter)
        else:
            self._opener = self._build_opener(self._proxy_map_urllib())
            self._direct = self._build_opener({}) if self.proxies else self._opener

    def _proxy_map_urllib(self) -> Optional[Dict[str, str]]:
        explicit = {k: v for k, v in self.proxies.items() if k in ("http", "https")}
        return explicit or None          # None: urllib reads the environment's proxies itself

    @staticmethod
    def _build_opener(proxies: Optional[Dict[str, str]]) -> Any:
        handlers: list = [_NoRedirect()] + deadline.urllib_handlers()
        if proxies is not None:
            handlers.append(urllib.request.ProxyHandler(proxies))
        return urllib.request.build_opener(*handlers)

    def _urllib_opener(self, url: str) -> Any:
        """The profile's no_proxy list applies to the profile's proxies (urllib ignores it there)."""
        if self.proxies.get("no"):
            host = urllib.parse.urlsplit(url).hostname or ""
            if urllib.request.proxy_bypass_environment(host, {"no": self.proxies["no"]}):  # type: ignore[attr-defined]
                return self._direct
        return self._opener

    def send(self, req: Req, timeout: float) -> Result:
        """One request, done (or abandoned) within `timeout` seconds in total."""
        with deadline.Deadline(timeout) as dl:
            if self._session is not None:
                res = self._send_requests(req, timeout, dl)
            else:
                res = self._send_urllib(req, timeout, dl)
        if dl.expired and res.status is None:
            res.error = "no complete answer within %gs%s" % (timeout, " (%s)" % res.error if res.error else "")
        return res

    def _proxy_map(self) -> Optional[Dict[str, str]]:
        out = {k: v for k, v in self.proxies.items() if k in ("http", "https")}
        if self.proxies.get("no"):
            out["no_proxy"] = self.proxies["no"]
        return out or None

    def _send_requests(self, req: Req, timeout: float, dl: deadline.Deadline) -> Result:
        # identity: requests asks for gzip by default, and a body is bounded before decoding.
        headers = dict(req.headers, **{"Accept-Encoding": "identity"})
        try:
            r = self._session.request(req.method, req.url, data=req.body or None, headers=headers,
                                      timeout=timeout, allow_redirects=False, proxies=self._proxy_map(),
                                      stream=True)
        except Exception as exc:  # noqa: BLE001 - any transport failure is one failed attempt
            return Result(False, error="%s: %s" % (type(exc).__name__, exc))
        if dl.expired:       # the shutdown ended the header block early: that 200 is not real
            r.close()
            return Result(False)
        try:
            body = read_bounded(lambda n: r.raw.read(n, decode_content=False))
        finally:
            r.close()          # unread bytes are never drained: the connection is dropped
        return _result(r.status_code, r.headers.get("Retry-After"), body)

    def _send_urllib(self, req: Req, timeout: float, dl: deadline.Deadline) -> Result:
        r = urllib.request.Request(req.url, data=req.body if req.method != "DELETE" or req.body else None,
                                   headers=req.headers, method=req.method)
        try:
            with self._urllib_opener(req.url).open(r, timeout=timeout) as resp:
                if dl.expired:   # the shutdown ended the header block early: that 200 is not real
                    return Result(False)
                return _result(resp.status, resp.headers.get("Retry-After"), read_bounded(resp.read))
        except urllib.error.HTTPError as exc:
            if dl.expired:
                exc.close()
                return Result(False)
            body = read_bounded(exc.read)
            exc.close()
            return _result(exc.code, exc.headers.get("Retry-After") if exc.headers else None, body)
        except Exception as exc:  # noqa: BLE001 - URLError, timeouts, resets: one failed attempt
            reason = getattr(exc, "reason", exc)
            return Result(False, error="%s: %s" % (type(exc).__name__, reason))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()


def read_bounded(read: Any, limit: int = MAX_BODY) -> bytes:
    """At most `limit` bytes of an answer, in chunks; what arrived before an error is kept (a
    2xx whose body is cut off by the deadline still says the message was taken)."""
    chunks, got = [], 0
    while got < limit:
        try:
            chunk = read(min(READ_CHUNK, limit - got))
        except Exception:  # noqa: BLE001 - reset, deadline, IncompleteRead: keep what came
            break
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401 - urllib's hook
        return None


def _result(status: int, retry_after: Optional[str], body: bytes) -> Result:
    if 200 <= status < 300:
        return Result(True, status, body=body)
    permanent = 300 <= status < 500 and status not in (408, 425, 429)
    return Result(False, status, "HTTP %d%s" % (status, _snippet(body)), parse_retry_after(retry_after),
                  permanent, body)


def _snippet(body: bytes) -> str:
    text = body[:300].decode("utf-8", "replace").strip()
    text = " ".join(text.split())
    return (": " + text[:160]) if text else ""
