"""config.json (written by `configure`) and the daemon's intervals.

Every key is optional. Tests (and odd boxes) override the intervals through the environment
(RGT_TICK, RGT_SAMPLE_EVERY, RGT_STOP_GRACE, ...) so they run in seconds, not minutes.
"""
from __future__ import annotations

import os
import socket
from typing import Any, Dict, Mapping, Optional

from boxagent.base.errors import UsageError
from boxagent.base.fsutil import read_json

# name -> (default, env override, minimum). Seconds throughout.
INTERVALS = {
    "tick": (None, "RGT_TICK", 0.01),                  # loop cadence; None = POLL_TICK / INOTIFY_TICK
    "sample_every": (10.0, "RGT_SAMPLE_EVERY", 0.05),  # health sample + status.json rewrite
    "stop_grace": (30.0, "RGT_STOP_GRACE", 0.0),       # TERM -> KILL on preemption/cancel/timeout
    "heartbeat_every": (300.0, "RGT_HEARTBEAT_EVERY", 0.1),  # heartbeat events (rate limit)
    "launch_grace": (5.0, "RGT_LAUNCH_GRACE", 0.1),    # a launched shim must claim its attempt by then
    "retry_backoff": (5.0, "RGT_RETRY_BACKOFF", 0.0),  # first retry delay; doubles per attempt
}
# Stage exits and requests wake the loop at once (SIGCHLD, SIGUSR1 from the shim and the commands,
# inotify): the tick only paces log tailing and is a safety net. A wakeup costs ~0.1 ms of CPU on a
# small VM, so an idle daemon must sleep long to stay far below the shell loops it replaces.
POLL_TICK = 5.0
INOTIFY_TICK = 5.0


def load(path: str) -> Dict[str, Any]:
    cfg = read_json(path, {})
    return cfg if isinstance(cfg, dict) else {}


def interval(cfg: Mapping[str, Any], name: str, env: Optional[Mapping[str, str]] = None) -> Optional[float]:
    """The env override, else config.json, else the default; bad values fall back to the default."""
    default, env_name, minimum = INTERVALS[name]
    env = os.environ if env is None else env
    for raw in (env.get(env_name), cfg.get(name)):
        if raw is None or raw == "":
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        return max(minimum, value)
    return default


def host_name(cfg: Mapping[str, Any]) -> str:
    host = cfg.get("host")
    return host if isinstance(host, str) and host else socket.gethostname()


def validate(cfg: Any) -> Dict[str, Any]:
    """What `configure` accepts: an object; the keys the core reads must have the right type.
    Other keys (thresholds, notify settings...) belong to other parts and pass through."""
    if not isinstance(cfg, dict):
        raise UsageError("config must be a JSON object, got %s" % type(cfg).__name__,
                         'send e.g. {"host": "box1", "sample_every": 10} on stdin')
    for name in INTERVALS:
        if name in cfg and (isinstance(cfg[name], bool) or not isinstance(cfg[name], (int, float))
                            or cfg[name] < 0):
            raise UsageError("config.%s: expected a number of seconds >= 0, got %r" % (name, cfg[name]))
    for name in ("host",):
        if name in cfg and not isinstance(cfg[name], str):
            raise UsageError("config.%s: expected a string, got %r" % (name, cfg[name]))
    for name in ("profile", "thresholds"):
        if name in cfg and not isinstance(cfg[name], dict):
            raise UsageError("config.%s: expected an object, got %s" % (name, type(cfg[name]).__name__))
    return cfg
