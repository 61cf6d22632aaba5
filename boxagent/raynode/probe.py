"""The reachability probe `rgt-client ray up` runs before it starts Ray: a short listener on this
box's pinned ports that answers each connection with a nonce, and connections to the other boxes'
ports that must read their nonce back (a bare TCP connect is answered by proxies and NAT boxes
too: it proves nothing)."""
from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any, Dict, List

from boxagent.base.errors import UsageError
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home

CONNECT_TIMEOUT_S = 2.0
MAX_TARGETS = 512


def listen(home: Home, ports: List[int], for_s: float, token: str = "") -> Dict[str, Any]:
    """Bind every port now (a taken one is said, never waited for), then serve them from a child
    that lives `for_s` seconds at most: the other boxes connect while it does."""
    socks, taken = [], []
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("0.0.0.0", port))
            s.listen(16)
            socks.append(s)
        except OSError as exc:
            s.close()
            taken.append({"port": port, "why": exc.strerror or str(exc)})
    if taken or not socks:
        for s in socks:
            s.close()
        return {"listening": [], "taken": taken}
    pid = os.fork()
    if pid == 0:                                   # the child: accept and close until the deadline
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _serve(socks, time.monotonic() + max(1.0, min(for_s, 600.0)), (token + "\n").encode())
        os._exit(0)
    for s in socks:
        s.close()
    atomic_write_json(os.path.join(home.root, "ray-listen.json"), {"pid": pid, "ports": ports})
    return {"listening": ports, "taken": [], "pid": pid}


def _serve(socks: List[socket.socket], deadline: float, answer: bytes) -> None:
    import select
    while time.monotonic() < deadline:
        ready, _w, _x = select.select(socks, [], [], max(0.0, min(1.0, deadline - time.monotonic())))
        for s in ready:
            try:
                conn, _addr = s.accept()
                conn.settimeout(1.0)
                conn.sendall(answer)
                # The dialer closes first: TIME_WAIT then stays on its side, never on this port,
                # which Ray binds moments later (a port in TIME_WAIT made its GCS fail to start).
                while conn.recv(64):
                    pass
                conn.close()
            except OSError:
                pass


def stop_listener(home: Home) -> Dict[str, Any]:
    path = os.path.join(home.root, "ray-listen.json")
    data = read_json(path)
    stopped = False
    if isinstance(data, dict) and isinstance(data.get("pid"), int):
        try:
            os.kill(data["pid"], signal.SIGTERM)
            stopped = True
        except OSError:
            pass
        try:
            os.waitpid(data["pid"], os.WNOHANG)
        except OSError:
            pass
    try:
        os.unlink(path)
    except OSError:
        pass
    return {"stopped": stopped}


def reach(targets: List[str], expect: str = "") -> Dict[str, str]:
    """Each target dialled at once (threads): `ray up` without --ip sends every candidate address
    of every port, and one unreachable candidate must not cost 2 s per port in turn."""
    parsed = []
    for target in targets[:MAX_TARGETS]:
        addr, _, port = target.rpartition(":")
        if not addr or not port.isdigit():
            raise UsageError("--to: expected ADDR:PORT, got %r" % target, "e.g. --to 10.0.0.6:26389")
        parsed.append((target, addr.strip("[]"), int(port)))
    if len(targets) > MAX_TARGETS:
        raise UsageError("--to: at most %d targets, got %d" % (MAX_TARGETS, len(targets)), "name fewer addresses")
    out: Dict[str, str] = {}
    if not parsed:
        return out
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(32, len(parsed))) as pool:
        for target, why in zip([t[0] for t in parsed], pool.map(lambda t: _dial(t[1], t[2], expect), parsed)):
            out[target] = why
    return out


def _dial(addr: str, port: int, expect: str) -> str:
    try:
        conn = socket.create_connection((addr, port), timeout=CONNECT_TIMEOUT_S)
    except socket.timeout:
        return "timed out (nothing answered: a firewall, NAT, or no box at that address)"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    try:
        with conn:
            got = b""
            while len(got) < 256 and not got.endswith(b"\n"):
                chunk = conn.recv(256)
                if not chunk:
                    break
                got += chunk
        return "ok" if got.decode("utf-8", "replace").strip() == expect else \
            "connected, but not to that box's listener (a proxy, NAT or another process answered)"
    except socket.timeout:
        return "connected, but nothing answered (a proxy or NAT in between?)"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
