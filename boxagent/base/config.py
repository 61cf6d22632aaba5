"""config.json (written by `configure`) and the daemon's intervals.

Every key is optional. Tests (and odd boxes) override the intervals through the environment
(RGT_TICK, RGT_SAMPLE_EVERY, RGT_STOP_GRACE, ...) so they run in seconds, not minutes.
"""
from __future__ import annotations

import math
import os
import re
import socket
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from boxagent.base import numbers
from boxagent.base.errors import UsageError
from boxagent.base.fsutil import read_json

if TYPE_CHECKING:
    from typing_extensions import TypeGuard     # typing.TypeGuard is 3.10+; only mypy reads it

# name -> (default, env override, minimum). Seconds throughout.
INTERVALS = {
    "tick": (None, "RGT_TICK", 0.01),                  # loop cadence; None = POLL_TICK / INOTIFY_TICK
    "sample_every": (10.0, "RGT_SAMPLE_EVERY", 0.05),  # health sample + status.json rewrite
    "stop_grace": (30.0, "RGT_STOP_GRACE", 0.0),       # TERM -> KILL on preemption/cancel/timeout
    "heartbeat_every": (300.0, "RGT_HEARTBEAT_EVERY", 0.1),  # heartbeat events (rate limit)
    "launch_grace": (5.0, "RGT_LAUNCH_GRACE", 0.1),    # a launched shim must claim its attempt by then
    "retry_backoff": (5.0, "RGT_RETRY_BACKOFF", 0.0),  # first retry delay; doubles per attempt
    "slurm_poll": (5.0, "RGT_SLURM_POLL", 0.5),        # one squeue call for every Slurm job followed
    "slurm_exit_grace": (15.0, "RGT_SLURM_EXIT_GRACE", 0.0),  # Slurm says ended: wait for the exit file
    "ray_poll": (1.0, "RGT_RAY_POLL", 0.1),            # one Jobs API list call for every Ray job followed
    "ray_exit_grace": (5.0, "RGT_RAY_EXIT_GRACE", 0.0),  # Ray says ended: wait for the exit file
    "ray_driver_wait": (60.0, "RGT_RAY_DRIVER_WAIT", 1.0),  # rgt's Ray driver runs: its first word by then
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
    if "max_parallel" in cfg and (isinstance(cfg["max_parallel"], bool) or not isinstance(cfg["max_parallel"], int)
                                  or cfg["max_parallel"] < 1):
        raise UsageError("config.max_parallel: expected a whole number >= 1 (runs with gpus = 0 at once), got %r"
                         % (cfg["max_parallel"],))
    for name in ("host",):
        if name in cfg and not isinstance(cfg[name], str):
            raise UsageError("config.%s: expected a string, got %r" % (name, cfg[name]))
    for name in ("profile", "thresholds"):
        if name in cfg and not isinstance(cfg[name], dict):
            raise UsageError("config.%s: expected an object, got %s" % (name, type(cfg[name]).__name__))
    if "cost" in cfg:
        validate_cost(cfg["cost"])
    return cfg


# -- cost: what the box costs (install --price --currency --idle-alert-after --budget --stop-deadline)
COST_KEYS = ("price_per_hour", "price_per_gpu_hour", "currency", "idle_alert_after_s", "budget", "stop_deadline_at")
DEFAULT_CURRENCY = "USD"
DEFAULT_IDLE_ALERT_S = 1800.0
# Platforms that bill a box by the hour whatever it does. On a laptop, a Slurm submit host or a
# pod, an idle agent costs nothing, and a warning every few hours would teach people to ignore it.
IDLE_ALERT_KINDS = ("ssh-rental", "cloud-api")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_COST_HINT = "rgt-client install HOST --price 2.49 --currency USD --idle-alert-after 30m --budget 50"


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_cost(block: Any) -> None:
    """config.cost, strictly (`configure` refuses what the cost part would have to ignore)."""
    if not isinstance(block, dict):
        raise UsageError("config.cost: expected an object, got %s" % type(block).__name__, _COST_HINT)
    for key in block:
        if key not in COST_KEYS:
            raise UsageError("config.cost.%s: unknown key" % key, "known: %s" % ", ".join(COST_KEYS))
    for key, kind in (("price_per_hour", "price_per_hour"), ("price_per_gpu_hour", "price_per_hour"),
                      ("budget", "budget")):
        if key in block and numbers.number(kind, block[key]) is None:
            # The bounds the client's flags use too: a price one accepts, the other never refuses.
            raise UsageError("config.cost.%s: expected %s, got %r" % (key, numbers.describe(kind), block[key]),
                             _COST_HINT)
    idle = block.get("idle_alert_after_s")
    if "idle_alert_after_s" in block and not (_number(idle) and idle >= 0):
        raise UsageError("config.cost.idle_alert_after_s: expected seconds >= 0 (0 = off), got %r" % (idle,),
                         _COST_HINT)
    if "currency" in block and not (isinstance(block["currency"], str) and _CURRENCY.match(block["currency"])):
        raise UsageError("config.cost.currency: expected a 3-letter code, got %r" % (block["currency"],),
                         "an ISO 4217 code: USD, EUR, CNY")
    if "stop_deadline_at" in block:
        from boxagent.base.units import parse_utc_time
        try:
            parse_utc_time(block["stop_deadline_at"])
        except ValueError as exc:
            raise UsageError("config.cost.stop_deadline_at: %s" % exc, 'e.g. "2026-12-01T08:00:00Z" (UTC)')
    if "budget" in block and "price_per_hour" not in block:
        raise UsageError("config.cost.budget needs a price: spend is hours x price",
                         "set both: rgt-client install HOST --price 2.49 --budget 50")


def merge_cost(old: Any, new: Any) -> Any:
    """The config `configure` writes: `new`, with its cost block laid over the box's current one
    (a key set to null is removed; no cost block keeps the old one whole). Re-running install to
    change one setting must not drop the price the user gave last week, and a budget alert
    computed without it would be silently off."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return new
    cost = old.get("cost")
    before: Dict[str, Any] = cost if isinstance(cost, dict) else {}
    if "cost" not in new:
        return dict(new, cost=dict(before)) if before else new
    patch = new["cost"]
    if not isinstance(patch, dict):
        return new if patch is not None else {k: v for k, v in new.items() if k != "cost"}
    merged = dict(before)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return dict(new, cost=merged)


def cost_settings(cfg: Mapping[str, Any], profile: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The cost part's view of config.cost; a bad field (a hand-edited config.json) is ignored.
    idle_alert_after_s None = idle alerts off (0 given, or a profile kind that is not billed)."""
    given = cfg.get("cost")
    block: Dict[str, Any] = given if isinstance(given, dict) else {}
    price = block.get("price_per_hour")
    price = numbers.number("price_per_hour", price)
    per_gpu = numbers.number("price_per_hour", block.get("price_per_gpu_hour"))
    budget = numbers.number("budget", block.get("budget")) if price is not None else None
    currency = block.get("currency")
    currency = currency if isinstance(currency, str) and _CURRENCY.match(currency) else DEFAULT_CURRENCY
    idle = block.get("idle_alert_after_s")
    if not (_number(idle) and idle >= 0):
        billed = (profile or {}).get("kind") in IDLE_ALERT_KINDS or not (profile or {}).get("kind")
        idle = DEFAULT_IDLE_ALERT_S if billed else 0
    deadline = None
    if isinstance(block.get("stop_deadline_at"), str):
        from boxagent.base.units import parse_utc_time
        try:
            deadline = parse_utc_time(block["stop_deadline_at"])
        except ValueError:
            deadline = None
    return {"price_per_hour": price, "price_per_gpu_hour": per_gpu, "currency": currency,
            "idle_alert_after_s": float(idle) or None,
            "budget": budget, "stop_deadline_at": deadline}
