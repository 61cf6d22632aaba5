"""Which address of each box `ray up` gives Ray: `--ip HOST=ADDR` where the user named one, else
the first of the box's own candidates (`rgt-agent ray-node addrs`) that every other box reached
on every pinned port, reading back THAT box's nonce (a container bridge address every box has,
or loopback on another machine, reaches the dialler's own listener: its nonce differs).

The box is untrusted: its candidates are kept only as IPv4 literals, at most MAX_CANDIDATES."""
from __future__ import annotations

import ipaddress
from typing import Any

from rgt_client import exitcodes
from rgt_client.errors import ClientError

MAX_CANDIDATES = 16
# (dialler, box) -> candidate address -> the ports it failed on, "PORT (why)"
Reached = dict[tuple[str, str], dict[str, list[str]]]


def given(ips: tuple[str, ...], hosts: list[str]) -> dict[str, str]:
    """--ip overrides, checked: a box of this cluster, an IPv4 or IPv6 literal or a name."""
    out: dict[str, str] = {}
    for item in ips:
        name, eq, addr = item.partition("=")
        if not eq or not name or not addr or any(c.isspace() for c in addr):
            raise ClientError("--ip %r: expected HOST=ADDR" % item, "e.g. --ip worker1=10.0.0.6", exitcodes.USAGE)
        if name not in hosts:
            raise ClientError("--ip %s: %s is not one of the boxes named (%s)" % (item, name, " ".join(hosts)),
                              "name it as the box is named on the command line", exitcodes.USAGE)
        out[name] = addr
    return out


def from_box(said: dict[str, Any]) -> list[str]:
    """The candidates a box's agent offered, as IPv4 literals only, in its order, deduplicated."""
    out: list[str] = []
    offered = said.get("addrs")
    for a in (offered if isinstance(offered, list) else [])[:MAX_CANDIDATES]:
        try:
            ip = str(ipaddress.IPv4Address(a)) if isinstance(a, str) else None
        except ValueError:
            ip = None
        if ip and ip not in out:
            out.append(ip)
    return out


def pick(hosts: list[str], cands: dict[str, list[str]], reached: Reached,
         named: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Each box's address every other box reached, and the problems when a box has none."""
    addr: dict[str, str] = {}
    problems: list[str] = []
    for b in hosts:
        others = [a for a in hosts if a != b]
        ok = [c for c in cands[b] if all(not reached[(a, b)].get(c, ["?"]) for a in others)]
        if ok:
            addr[b] = ok[0]
        elif b in named:
            for a in others:
                bad = reached[(a, b)].get(named[b]) or []
                if bad:
                    problems.append("%s cannot reach %s (%s) on port %s" % (a, b, named[b], ", ".join(bad)))
        elif not cands[b]:
            problems.append("%s's agent offered no IPv4 address" % b)
        else:
            tried = []
            for c in cands[b][:4]:
                fails = ["%s: port %s" % (a, reached[(a, b)][c][0]) for a in others if reached[(a, b)].get(c)]
                tried.append("%s (%s)" % (c, "; ".join(fails)))
            more = " and %d more" % (len(cands[b]) - 4) if len(cands[b]) > 4 else ""
            problems.append("no address of %s is reached by every other box: tried %s%s"
                            % (b, ", ".join(tried), more))
    return addr, problems
