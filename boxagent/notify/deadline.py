"""A total deadline per HTTP request, for both HTTP paths (requests and urllib).

A socket timeout bounds each read, not the request: a server dripping one byte every 2 s held
a notifier (and `notify-test --timeout 5`) forever under a 10 s timeout. So each socket a
request opens or reuses is registered with the request's Deadline, and when the time is up a
timer shuts it down: shutdown(2) on a dup of its fd reaches the same kernel socket, so it also
ends a TLS handshake or a read of the TLS socket wrapped around it. The blocked read returns at
once, the request fails, and the caller reports "no complete answer within N s".

Registration happens in the connection classes below (urllib: http.client's
`_create_connection`; requests: urllib3's `_new_conn` for new connections and `request` for
reused ones), which only this module and http.py use.
"""
from __future__ import annotations

import http.client
import os
import socket
import threading
import urllib.request
from typing import Any, Callable, List, Optional

_current = threading.local()


class Deadline:
    def __init__(self, seconds: float):
        self.seconds = max(0.001, float(seconds))
        self.expired = False
        self._socks: List[socket.socket] = []
        self._lock = threading.Lock()
        self._timer: Optional[threading.Timer] = None

    def __enter__(self) -> "Deadline":
        _current.deadline = self
        self._timer = threading.Timer(self.seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        _current.deadline = None
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            s.close()

    def track(self, sock: Any) -> None:
        try:
            dup = socket.socket(fileno=os.dup(sock.fileno()))
        except (OSError, ValueError):
            return
        with self._lock:
            self._socks.append(dup)
            if self.expired:
                _shut(dup)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for s in self._socks:
                _shut(s)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def track(sock: Any) -> None:
    """Register a socket with the deadline of the request running on this thread, if any."""
    deadline = _current.__dict__.get("deadline")
    if deadline is not None and sock is not None:
        deadline.track(sock)


def _tracked(create: Callable[..., Any]) -> Callable[..., Any]:
    def create_connection(*args: Any, **kwargs: Any) -> Any:
        sock = create(*args, **kwargs)
        track(sock)
        return sock
    return create_connection


# -- urllib ----------------------------------------------------------------------------------------
class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._create_connection = _tracked(self._create_connection)  # type: ignore[has-type]  # http.client's hook, untyped


class HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_HTTPConnection, req)


def urllib_handlers() -> List[Any]:
    """Handlers whose connections register their sockets (they replace urllib's defaults)."""
    out: List[Any] = [HTTPHandler()]
    if hasattr(http.client, "HTTPSConnection"):      # Python built without ssl: http only
        class _HTTPSConnection(http.client.HTTPSConnection):
            def __init__(self, *args: Any, **kwargs: Any):
                super().__init__(*args, **kwargs)
                self._create_connection = _tracked(self._create_connection)  # type: ignore[has-type]  # http.client's hook, untyped

        class HTTPSHandler(urllib.request.HTTPSHandler):
            def https_open(self, req: Any) -> Any:
                return self.do_open(_HTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]
        out.append(HTTPSHandler())
    return out


# -- requests (urllib3) ----------------------------------------------------------------------------
class _Tracking:
    """Mixed into urllib3's connection classes: register each new socket, and the socket of a
    kept-alive connection when a request reuses it (no _new_conn then)."""

    def _new_conn(self) -> Any:
        sock = super()._new_conn()        # type: ignore[misc]
        track(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> Any:
        track(self.sock)                  # type: ignore[attr-defined]
        return super().request(*args, **kwargs)   # type: ignore[misc]


def requests_adapter(requests_mod: Any) -> Any:
    """An HTTPAdapter whose urllib3 connections register their sockets, direct and via proxy."""
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class TPool(HTTPConnectionPool):
        ConnectionCls = type("TConn", (_Tracking, HTTPConnection), {})

    class TSPool(HTTPSConnectionPool):
        ConnectionCls = type("TSConn", (_Tracking, HTTPSConnection), {})

    pools = {"http": TPool, "https": TSPool}

    class Adapter(requests_mod.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: Any, **kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **kwargs)
            manager.pool_classes_by_scheme = pools
            return manager

    return Adapter()
