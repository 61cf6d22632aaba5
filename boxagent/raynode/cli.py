"""`rgt-agent ray-node ...`: this box as a node of the Ray cluster `rgt-client ray up` forms.

    ray-node listen --ports P,Q,.. --token T [--for S]
                                             a short listener on each port (a child that exits
                                             after S seconds or `listen --stop`) that answers each
                                             connection with T; JSON {listening, taken}: a port
                                             another process holds is `taken`
    ray-node listen --stop                   end that listener now
    ray-node reach --expect T --to ADDR:PORT ...
                                             connect to each (2 s) and read T back: JSON {target:
                                             "ok" | why}. A connection that does not answer T
                                             reached something else (a proxy, a NAT box, another
                                             process), never the other box
    ray-node addrs [--toward HOST ...]      this box's candidate IPv4 addresses, most likely
                                             first (the source address toward each HOST, the
                                             host name's, every local one, loopback last):
                                             JSON {addrs, how, host}; `ray up` without --ip
                                             proves which one every other box reaches
    ray-node start --role head|worker --base B --ip ADDR [--head ADDR]
                                             `ray start` with every port pinned from B, usage
                                             stats off, --num-gpus from NVML; the processes it
                                             made are recorded (ray-node.json) for `stop`
    ray-node hosts  (stdin: {node id: ssh host})
                                             which box each Ray node is (ray-hosts.json): status
                                             names a Ray stage's box as the user called it
    ray-node stop                            kill what `start` recorded (pid + start time), and
                                             their children; nothing else
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, List

from boxagent.base.errors import UsageError
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.raynode.addrs import candidates
from boxagent.raynode.node import hosts, start, stop
from boxagent.raynode.probe import listen, reach, stop_listener

LISTEN_FOR_S = 60.0


def register(sub: Any) -> None:
    p = sub.add_parser("ray-node", help="(for rgt-client ray up/down) this box as a Ray node")
    p.add_argument("action", choices=("listen", "reach", "addrs", "start", "stop", "hosts"))
    p.add_argument("--ports", default="", help="listen: comma-separated ports")
    p.add_argument("--for", dest="for_s", type=float, default=LISTEN_FOR_S)
    p.add_argument("--stop", action="store_true", help="listen: end the listener now")
    p.add_argument("--to", nargs="*", default=[], help="reach: ADDR:PORT targets")
    p.add_argument("--token", default="", help="listen: what each connection is answered with")
    p.add_argument("--expect", default="", help="reach: what the other box's listener answers")
    p.add_argument("--toward", nargs="*", default=[], help="addrs: the other boxes' host names")
    p.add_argument("--role", choices=("head", "worker"))
    p.add_argument("--base", type=int)
    p.add_argument("--ip", help="this node's address as the others reach it")
    p.add_argument("--head", help="worker: the head's GCS, ADDR:PORT")
    p.add_argument("--token-stdin", action="store_true",
                   help="start: Ray's auth token on stdin (RAY_AUTH_MODE=token); never in argv")
    p.set_defaults(func=cmd_ray_node)


def cmd_ray_node(args: Any) -> int:
    home = Home.from_env(getattr(args, "home", None))
    os.makedirs(home.root, exist_ok=True)
    if args.action == "listen":
        out = stop_listener(home) if args.stop else listen(home, _ports(args.ports), args.for_s, args.token)
    elif args.action == "reach":
        out = reach(args.to, args.expect)
    elif args.action == "addrs":
        out = candidates(args.toward)
    elif args.action == "start":
        token = sys.stdin.read().strip() if args.token_stdin else None
        out = start(home, args.role, args.base, args.ip, args.head, token)
    elif args.action == "hosts":
        out = hosts(home, sys.stdin.read())
    else:
        out = stop(home, Roots.from_env())
    print(json.dumps(out, sort_keys=True))
    return 0


def _ports(text: str) -> List[int]:
    try:
        ports = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise UsageError("--ports: expected comma-separated port numbers, got %r" % text, "e.g. --ports 26379,26380")
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise UsageError("--ports: expected ports between 1 and 65535", "e.g. --ports 26379,26380")
    return ports
