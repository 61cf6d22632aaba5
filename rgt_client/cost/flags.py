"""install's cost flags -> the `cost` block of the box's config.json (docs/cost.md).

Only the flags given travel, as a patch the box lays over what it has (boxagent.base.config
.merge_cost): `install HOST --price 3` changes the price and keeps the currency, the budget, the
idle delay and the deadline set last time; `0` (or `off`) removes a setting. Bad values stop the
install before the box is touched (Error + Hint, exit 2); the box validates the merged block again.
"""
from __future__ import annotations

import re
import time
from typing import Any

from boxagent.api import numbers
from rgt_client import exitcodes
from rgt_client.errors import ClientError

OFF = ("0", "off", "none")
HINT = "e.g. rgt-client install HOST --price 2.49 --currency USD --idle-alert-after 30m --budget 50"
_CURRENCY = re.compile(r"^[A-Za-z]{3}$")


def _money(flag: str, kind: str, text: str) -> float | None:
    """An amount within the bounds the box also checks (boxagent.base.numbers, shared so that a
    price one side accepts the other never calls malformed: `--price 1e300` once was); None for
    0/off (remove the setting)."""
    if text.strip().lower() in OFF:
        return None
    try:
        return numbers.parse_flag(kind, text)
    except ValueError as exc:
        raise ClientError("%s: %s" % (flag, exc), "%s 0 removes it; %s" % (flag, HINT), exitcodes.USAGE) from None


def _currency(text: str) -> str:
    if not _CURRENCY.match(text.strip()):
        raise ClientError("--currency: expected a 3-letter code, got %r" % text,
                          "an ISO 4217 code: USD, EUR, CNY (the currency the platform bills in)", exitcodes.USAGE)
    return text.strip().upper()


def _idle_after(text: str) -> float:
    from boxagent.api import parse_duration
    try:
        return parse_duration(text.strip())
    except ValueError as exc:
        raise ClientError("--idle-alert-after: %s" % exc, "e.g. 30m, 2h; 0 turns the idle warning off",
                          exitcodes.USAGE) from None


def _deadline(text: str, now: float) -> str | None:
    """A UTC time ("2026-12-01T08:00Z") or a duration from now ("12h"), as the box's ISO form."""
    from boxagent.api import parse_duration, parse_utc_time
    if text.strip().lower() in OFF:
        return None
    try:
        at = parse_utc_time(text)
    except ValueError:
        try:
            at = now + parse_duration(text.strip())
        except ValueError:
            raise ClientError("--stop-deadline: expected a UTC time like 2026-12-01T08:00Z or a duration "
                              "like 12h, got %r" % text,
                              "the time the platform stops or releases the box on its own (UTC); off removes it",
                              exitcodes.USAGE) from None
    if at <= now:
        raise ClientError("--stop-deadline: %s is in the past" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
                          "give a UTC time still to come (the box's clock is UTC too)", exitcodes.USAGE)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def cost_patch(price: str | None = None, currency: str | None = None, idle_alert_after: str | None = None,
               budget: str | None = None, stop_deadline: str | None = None, gpu_price: str | None = None,
               now: float | None = None) -> dict[str, Any] | None:
    """The `cost` patch for the flags given (None: no cost flag at all, the box keeps its own)."""
    now = time.time() if now is None else now
    patch: dict[str, Any] = {}
    if price is not None:
        patch["price_per_hour"] = _money("--price", "price_per_hour", price)
    if gpu_price is not None:
        patch["price_per_gpu_hour"] = _money("--gpu-price", "price_per_hour", gpu_price)
    if currency is not None:
        patch["currency"] = _currency(currency)
    if idle_alert_after is not None:
        patch["idle_alert_after_s"] = _idle_after(idle_alert_after)
    if budget is not None:
        patch["budget"] = _money("--budget", "budget", budget)
    if stop_deadline is not None:
        patch["stop_deadline_at"] = _deadline(stop_deadline, now)
    if patch.get("budget") is not None and "price_per_hour" in patch and patch["price_per_hour"] is None:
        raise ClientError("--budget needs a price: spend is hours x price",
                          "give both: --price 2.49 --budget 50", exitcodes.USAGE)
    return patch or None
