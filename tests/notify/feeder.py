"""A stand-in for the daemon's event path, run as a real process by the durable-feed tests:
the real EventLog (wire/events.py) appends each event, then the real NotifyHub gets on_event(),
in the daemon's order. It can SIGKILL itself between the two, or be killed from outside.

python -m tests.notify.feeder HOME [--events N] [--kill-after-append K] [--no-publish]
                                   [--rotate-bytes B] [--pause S] [--until-drained] [--serve S]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from boxagent.base.home import Home
from boxagent.notify.hub import NotifyHub
from boxagent.wire.events import EventLog

CONFIG = {"host": "box1", "notify": {"retry_base_s": 0.05, "retry_cap_s": 0.2}}


def main(argv: list) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("home")
    ap.add_argument("--events", type=int, default=0)
    ap.add_argument("--kill-after-append", type=int, default=0, help="SIGKILL self after appending the Kth event")
    ap.add_argument("--rotate-bytes", type=int, default=10 * 1024 * 1024)
    ap.add_argument("--no-publish", action="store_true", help="append only; never call on_event")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between events")
    ap.add_argument("--until-drained", action="store_true")
    ap.add_argument("--serve", type=float, default=0.0, help="seconds to keep ticking after the events")
    args = ap.parse_args(argv)
    home = Home(args.home)
    home.ensure()
    log = EventLog(home.events, "box1", rotate_bytes=args.rotate_bytes)
    hub = NotifyHub(home, CONFIG, {})
    hub.start()
    print(json.dumps({"started": os.getpid()}), flush=True)
    for i in range(args.events):
        event = log.emit({"type": "stage_failed", "severity": "critical", "run": "r", "stage": "s%d" % i,
                          "summary": "step %d failed" % i, "pad": "x" * 200}, time.time())
        if args.kill_after_append and i + 1 == args.kill_after_append:
            os.kill(os.getpid(), signal.SIGKILL)
        if not args.no_publish:
            hub.on_event(event)
        hub.tick(time.time())
        if args.pause:
            time.sleep(args.pause)
    end = time.monotonic() + args.serve
    while time.monotonic() < end or (args.until_drained and hub.summary()["pending"]):
        hub.tick(time.time())
        time.sleep(0.02)
    hub.stop(2.0)
    print(json.dumps(hub.summary()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
