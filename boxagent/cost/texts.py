"""The words of the cost events, in the platform profile's terms (config.json `profile`).

What to do next on an idle box: first the results (a verified pull of the last run, or the
command that makes one), then the platform's verbs that stop the meter and what each destroys.
rgt never runs those verbs; the texts say so. Lines are short: they end up on a phone.
"""
from __future__ import annotations

import shlex
import time
from typing import Any, Dict, List, Optional

from boxagent.base.units import format_duration

MAX_VERBS = 4


def utc(t: float) -> str:
    """ "2026-12-01 08:00 UTC": a time a person reads on a phone in another zone."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def money(amount: Optional[float], currency: str) -> str:
    if amount is not None and 0 < amount < 0.005:
        return "<0.01 %s" % currency        # a short run cost something: never "0.00"
    return "-" if amount is None else "%.2f %s" % (amount, currency)


def rate(price: Optional[float], currency: str) -> str:
    return "no price set" if price is None else "%s %s/h" % (_num(price), currency)


def _num(x: float) -> str:
    """2.49, 0.035, 2.5e-05: never "0." for a price that is not zero."""
    return ("%.2f" % x) if x >= 0.1 else "%.3g" % x


def cost_of(seconds: float, price: Optional[float], currency: str) -> str:
    """ "45m00s (1.87 USD)" or, with no price, "45m00s (0.75 paid hours)"."""
    if price is None:
        return "%s (%.2f paid hours)" % (format_duration(seconds), seconds / 3600.0)
    return "%s (%s)" % (format_duration(seconds), money(seconds / 3600.0 * price, currency))


def platform(profile: Dict[str, Any]) -> str:
    return str(profile.get("platform") or profile.get("name") or "this platform")


def verb_text(verb: Dict[str, Any]) -> str:
    """ "terminate deletes / (container disk), /workspace (volume disk), IRREVERSIBLE (a Network
    Volume survives)" from one [[teardown]] entry."""
    destroys = [str(d) for d in verb.get("destroys") or [] if isinstance(d, str)]
    text = "%s deletes %s" % (verb.get("name") or "?", ", ".join(destroys) if destroys else "nothing")
    if verb.get("irreversible"):
        text += ", IRREVERSIBLE"
    still = [str(s) for s in verb.get("still_bills") or [] if isinstance(s, str)]
    if still:
        text += "; still bills: %s" % "; ".join(still)
    if isinstance(verb.get("note"), str) and verb["note"]:
        text += " (%s)" % verb["note"]
    return text


def meter_stop_lines(profile: Dict[str, Any]) -> List[str]:
    """The profile's verbs that stop billing, each with what it destroys."""
    verbs = [t for t in profile.get("teardown") or [] if isinstance(t, dict) and t.get("stops_billing")]
    if not verbs:
        return ["%s: no platform verb stops a meter here." % platform(profile)]
    lines = ["Stop the meter on %s (rgt never does it for you):" % platform(profile)]
    lines += ["\u2022 " + verb_text(t) for t in verbs[:MAX_VERBS]]
    return lines


def danger_lines(profile: Dict[str, Any]) -> List[str]:
    out = []
    for clock in profile.get("danger_clock") or []:
        if isinstance(clock, dict) and isinstance(clock.get("what"), str):
            out.append("DANGER after %s: %s" % (clock.get("after") or "?", clock["what"]))
    return out


def pull_line(host: str, last: Optional[Dict[str, Any]]) -> str:
    """Whether the last ended run's results are safely off the box (a verified pull)."""
    if last is None:
        return "No run has ended on this box: no results to pull."
    name = str(last.get("name"))
    if last.get("pull_verified_at"):
        return "Run %s: pulled and verified at %s: its results are safe off the box." % (name, last["pull_verified_at"])
    if not last.get("manifest"):
        return "Run %s declares no [artifacts]: copy what you need off the box first." % name
    return "Run %s: results NOT pulled and verified yet. First: rgt-client pull %s %s" % (
        name, shlex.quote(host), shlex.quote(name))


def idle_summary(idle_s: float, price: Optional[float], currency: str) -> str:
    if price is None:
        return "idle for %s: nothing running or queued, GPUs idle (%.2f paid hours; no price set)" % (
            format_duration(idle_s), idle_s / 3600.0)
    return "idle for %s: %s burned at %s, nothing running or queued" % (
        format_duration(idle_s), money(idle_s / 3600.0 * price, currency), rate(price, currency))
