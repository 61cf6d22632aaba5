"""Every number the box or a user hands rgt, checked in one place: finite, within stated bounds.

A number that is not finite or is absurdly large passes `isinstance(x, float)` and then breaks
arithmetic far away: `--price 1e300` made every later spend infinite and status "malformed";
`1e999` or `"t": 1e308` in a run's history.jsonl stopped the report with an OverflowError (gmtime,
int()). `2.49e-320` (a denormal) was shown as "0. USD/h". The agent and the client share this
module (the client imports it), so a value one side accepts the other never refuses.

Each kind has a stated range (BOUNDS). `number(kind, value)` is the reader's check (None for
anything outside: the caller skips the value); `parse_flag(kind, text)` is the flag's (ValueError
with a message that names the range).
"""
from __future__ import annotations

import math

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

EPOCH_MAX_S = 32503680000.0          # 3000-01-01 UTC: far past any real clock, inside gmtime's range
DURATION_MAX_S = 100 * 365 * 86400.0

# kind -> (lowest, highest, what a person reads in the error)
BOUNDS: Dict[str, Tuple[float, float, str]] = {
    # No rented GPU box bills a million an hour, and below a millionth it is not a price: a tiny
    # denormal (2.49e-320) printed as "0." and every spend was 0.
    "price_per_hour": (1e-6, 1e6, "an amount per hour between 0.000001 and 1000000"),
    "budget": (1e-6, 1e12, "an amount between 0.000001 and 1000000000000"),
    "money": (0.0, 1e15, "an amount of money"),
    "epoch_s": (0.0, EPOCH_MAX_S, "a time between 1970 and 3000 (epoch seconds)"),
    "duration_s": (0.0, DURATION_MAX_S, "a duration of at most 100 years"),
    "count": (0.0, 1e15, "a count"),
    # Metrics are the user's own numbers (a loss, a step): any finite value, but not so close to
    # the float's limit that a chart's arithmetic (max - min, scaling) overflows to infinity.
    "metric": (-1e300, 1e300, "a finite number"),
    "pct": (0.0, 100.0, "a percentage between 0 and 100"),
}


def finite(value: Any) -> Optional[float]:
    """The value as a finite float; None for anything else (bool, text, NaN, infinities)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:          # an int too large for a float (JSON allows 1 followed by 400 zeros)
        return None
    return out if math.isfinite(out) else None


def number(kind: str, value: Any) -> Optional[float]:
    """The value when it is a finite number within the kind's bounds, else None."""
    low, high, _what = BOUNDS[kind]
    out = finite(value)
    return out if out is not None and low <= out <= high else None


def clamp(kind: str, value: Any) -> Optional[float]:
    """A finite value pulled into the kind's bounds (a display of a sum); None if not finite."""
    low, high, _what = BOUNDS[kind]
    out = finite(value)
    return None if out is None else min(max(out, low), high)


def parse_flag(kind: str, text: Any) -> float:
    """A flag's text (or a config's number) as a float within bounds; ValueError says the range."""
    low, high, what = BOUNDS[kind]
    if isinstance(text, str):
        try:
            value: Any = float(text.strip().lstrip("$"))
        except ValueError:
            value = None
    else:
        value = text
    out = number(kind, value)
    if out is None:
        raise ValueError("expected %s, got %s" % (what, _short(text)))
    return out


def describe(kind: str) -> str:
    return BOUNDS[kind][2]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
