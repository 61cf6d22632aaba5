"""This box's candidate addresses for `rgt-client ray up` without `--ip`: the client proves which
of them every other box reaches (the probe's per-box nonce) and gives Ray that one.

Only candidates, never a verdict: a box often has several (a private network, a public one, a
container bridge that every box has under the same address), and only a connection that reads
this box's own nonce back says which one the others reach. IPv4 only: Ray's node addresses are.
"""
from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
from typing import Dict, List, Tuple

MAX_CANDIDATES = 16


def _route_source(host: str) -> List[str]:
    """The source address the kernel picks toward `host` (a UDP connect sends nothing)."""
    try:
        infos = socket.getaddrinfo(host, 9, socket.AF_INET, socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return []
    out = []
    for info in infos[:4]:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(info[4])
                out.append(s.getsockname()[0])
        except OSError:
            pass
    return out


def _hostname() -> List[str]:
    try:
        return [str(i[4][0]) for i in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except (OSError, UnicodeError):
        return []


def _ip_addr() -> List[str]:
    """`ip -o -4 addr show` where iproute2 is installed."""
    ip = shutil.which("ip")
    if not ip:
        return []
    try:
        out = subprocess.run([ip, "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=5,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        words = line.split()
        if "inet" in words and words.index("inet") + 1 < len(words):
            found.append(words[words.index("inet") + 1].partition("/")[0])
    return found


def _fib_trie(path: str = "/proc/net/fib_trie") -> List[str]:
    """The kernel's own local addresses (containers without iproute2 still have /proc)."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            lines = fh.read(1 << 20).splitlines()
    except OSError:
        return []
    found = []
    for prev, line in zip(lines, lines[1:]):
        if "/32 host LOCAL" in line:
            found.append(prev.strip().lstrip("|-+` ").strip())
    return found


def candidates(toward: List[str]) -> Dict[str, object]:
    """Ordered, most likely first: the source address toward each other box, the host name's,
    then every local one; loopback last (it reaches another "box" only on this same machine)."""
    seen: List[str] = []
    how: Dict[str, str] = {}
    found: List[Tuple[str, List[str]]] = [("route to %s" % h, _route_source(h)) for h in toward[:MAX_CANDIDATES]]
    found += [("host name", _hostname()), ("ip addr", _ip_addr()), ("fib_trie", _fib_trie())]
    for name, addrs in found:
        for addr in addrs:
            try:
                ip = ipaddress.IPv4Address(addr)
            except ValueError:
                continue
            if ip.is_unspecified or ip.is_multicast or str(ip) in seen:
                continue
            seen.append(str(ip))
            how[str(ip)] = name
    ordered = [a for a in seen if not ipaddress.IPv4Address(a).is_loopback] + \
        [a for a in seen if ipaddress.IPv4Address(a).is_loopback]
    ordered = ordered[:MAX_CANDIDATES]
    return {"addrs": ordered, "how": {a: how[a] for a in ordered}, "host": socket.gethostname()}
