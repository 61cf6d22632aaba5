"""Agent subcommand of the run log.

    report-data RUN    (for `rgt-client report`) one JSON document: the run, its history, its events
"""
from __future__ import annotations

import json
import sys

from boxagent.base import names
from boxagent.base.home import Home
from boxagent.base.roots import Roots


def register(sub) -> None:
    p = sub.add_parser("report-data", help="(for rgt-client report) a run's state, history and events as JSON")
    p.add_argument("run", type=names.argtype("run"))
    p.set_defaults(func=cmd_report_data)


def cmd_report_data(args) -> int:
    from boxagent.runlog.report_data import build
    doc = build(Home.from_env(getattr(args, "home", None)), Roots.from_env(), args.run)
    out = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
    return 0
