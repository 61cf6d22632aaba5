"""What the box costs, in words: the `cost` line of install, status and patrol, and a run's cost
(status.json `cost` and `runs[].cost`, written by the agent's cost part; docs/cost.md).

The box may be compromised: every number is checked (finite, sane) before it is formatted and
every word goes through textsafe (its s()); anything else shows as absent.
"""
from __future__ import annotations

import math
import time
from typing import Any

from boxagent.api import format_duration, parse_iso_utc
from rgt_client.textsafe import s

_BIG = 1e15


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if abs(v) < _BIG and math.isfinite(v) else None


def _cur(cost: dict[str, Any]) -> str:
    return s(cost.get("currency") or "USD")


def money(amount: Any, cost: dict[str, Any]) -> str:
    v = _num(amount)
    if v is not None and 0 < v < 0.005:
        return "<0.01 %s" % _cur(cost)      # a short run's cost is not zero: the data keeps it whole
    return "-" if v is None else "%.2f %s" % (v, _cur(cost))


def _when(text: Any) -> str:
    """ "2026-11-20 14:02 UTC" from the box's ISO time (box text otherwise, sanitised)."""
    if not isinstance(text, str):       # a box's null or number here once raised AttributeError
        return s(text)
    try:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(parse_iso_utc(text)))
    except (TypeError, ValueError, OverflowError, AttributeError):     # `"since": null` from the box
        return s(text)


def settings_line(cost: Any) -> str:
    """install: what the box now has (`  cost     2.49 USD/h; idle warning after 30m; ...`)."""
    cost = cost if isinstance(cost, dict) else {}
    price = _num(cost.get("price_per_hour"))
    bits = ["%s %s/h" % (_price(price), _cur(cost)) if price is not None else "no price set (hours only: --price P)"]
    per_gpu = _num(cost.get("price_per_gpu_hour"))
    if per_gpu is not None:
        bits.append("a Ray cluster's GPU %s %s/h" % (_price(per_gpu), _cur(cost)))
    idle = _num(cost.get("idle_alert_after_s"))
    bits.append("idle warning after %s" % _setting(idle) if idle else "idle warning off")
    if _num(cost.get("budget")) is not None:
        bits.append("budget %s" % money(cost["budget"], cost))
    if cost.get("stop_deadline_at"):
        bits.append("stop deadline %s" % _when(cost["stop_deadline_at"]))
    return "  cost     " + "; ".join(bits)


def _setting(seconds: float) -> str:
    """A duration as it was typed (30m, 2h), where it is a whole number of them."""
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return "%d%s" % (seconds // n, unit)
    return format_duration(seconds)


def _price(p: float) -> str:
    """2.49, 0.035, 2.5e-05: a price that is not zero never shows as "0." (2.49e-320 once did)."""
    return "%.2f" % p if p >= 0.1 else "%.3g" % p


def status_lines(cost: Any) -> list[str]:
    """status: paid hours and spend, and the idle spell or the deadline when there is one."""
    if not isinstance(cost, dict) or _num(cost.get("hours")) is None:
        return []
    line = "  cost    %s paid since %s" % (format_duration(cost["hours"] * 3600.0), _when(cost.get("since")))
    price = _num(cost.get("price_per_hour"))
    if price is not None and _num(cost.get("spent")) is not None:
        line += " · %s at %s %s/h" % (money(cost["spent"], cost), _price(price), _cur(cost))
    else:
        line += " (no price set)"
    if _num(cost.get("budget")) is not None:
        used = _num(cost.get("budget_used_pct"))
        line += " · budget %s%s" % (money(cost["budget"], cost), " (%.0f %%)" % used if used is not None else "")
    lines = [line]
    idle = block if isinstance(block := cost.get("idle"), dict) else {}
    idle_s = _num(idle.get("idle_s"))
    if idle_s is not None:
        text = "  idle    %s" % format_duration(idle_s)
        if _num(idle.get("spent")) is not None:
            text += " · %s burned" % money(idle["spent"], cost)
        text += " · nothing running or queued, GPUs idle"
        lines.append(text)
    left = _num(cost.get("stop_deadline_in_s"))
    if left is not None:
        lines.append("  deadline %s (%s): the platform stops the box then" % (
            _when(cost.get("stop_deadline_at")), "in %s" % format_duration(left) if left > 0 else "passed"))
    return lines


def run_cost(run: dict[str, Any], box: Any) -> str:
    """ "3h12m paid, 7.97 USD" for a run (its cost block; the currency is the box's), or ""."""
    cost = block if isinstance(block := run.get("cost"), dict) else {}
    hours = _num(cost.get("hours"))
    if hours is None:
        return ""
    spent = _num(cost.get("spent"))
    box = box if isinstance(box, dict) else {}
    return "%s paid%s" % (format_duration(hours * 3600.0), ", " + money(spent, box) if spent is not None else "")


def patrol_brief(status: dict[str, Any]) -> str:
    """ " · 30.88 USD spent" (or " · 12.4 h paid"), and " · idle 45m00s" once the box has been idle a
    minute: patrol's tail (the box's spend, whatever its verdict)."""
    cost = block if isinstance(block := status.get("cost"), dict) else {}
    hours, spent = _num(cost.get("hours")), _num(cost.get("spent"))
    if hours is None:
        return ""
    out = " · %s" % ("%s spent" % money(spent, cost) if spent is not None else "%.1f h paid" % hours)
    idle = block if isinstance(block := cost.get("idle"), dict) else {}
    idle_s = _num(idle.get("idle_s"))
    if idle_s is not None and idle_s >= 60:
        out += " · idle %s" % format_duration(idle_s)
    return out
