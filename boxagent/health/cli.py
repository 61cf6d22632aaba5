"""Subcommands of the health concern: `probe [--json] [--path DIR ...]`."""
from __future__ import annotations

import json
import sys
from typing import Any

from boxagent.base.errors import EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("probe", help="audit this box once: Python, deps, cgroup limits, CPU quota, "
                                     "GPUs/driver/CUDA, disks with inodes, kernel log")
    p.add_argument("--json", action="store_true", help="print the rgt.probe/1 JSON object")
    p.add_argument("--path", action="append", default=[], metavar="DIR",
                   help="also report this directory's disk (repeatable)")
    p.set_defaults(func=cmd_probe)


def cmd_probe(args: Any) -> int:
    from boxagent.base import profile as profmod
    from boxagent.health.monitor import HealthMonitor
    from boxagent.health.probe import probe, render
    from boxagent.base.home import Home
    from boxagent.base.roots import Roots

    home = Home.from_env(getattr(args, "home", None))
    try:
        prof = profmod.load(home)
    except Exception:  # noqa: BLE001 - a broken config must not stop the audit that diagnoses it
        prof = {}
    monitor = HealthMonitor(Roots.from_env(), {}, prof)
    try:
        report = probe(monitor, home.root, list(args.path or []))
    finally:
        monitor.close()
    if args.json:
        sys.stdout.write(json.dumps(report, indent=1) + "\n")
    else:
        sys.stdout.write(render(report))
    return EXIT_OK
