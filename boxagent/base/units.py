"""Durations ("90", "90s", "20m", "12h", "2d") and sizes ("50G"), parsed and formatted."""
from __future__ import annotations

import time

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Optional, Union

# The patterns are compiled when first used: `re` (and the enum, functools and collections it
# imports) was the largest import of the box's one-round-trip `status`, which parses none of these.
_PATTERNS = {
    "duration": (r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", False),
    "size": (r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", True),
    "utc_time": (r"^\s*(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?\s*(?:Z|[+-]00:?00|UTC)\s*$", True),
}
_DUR_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
# A measured value that is not a finite number travels in JSON as one of these strings (JSON has
# no literal for NaN or infinity): a metric's last value in status.json.
NON_FINITE = ("nan", "inf", "-inf")


def parse_duration(value: Union[int, float, str]) -> float:
    """Seconds from 90 / "90" / "90s" / "20m" / "12h" / "2d". ValueError says what was expected."""
    if isinstance(value, bool):
        raise ValueError('expected a duration like "90m", got %r' % (value,))
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("expected a non-negative duration, got %r" % (value,))
        return float(value)
    if isinstance(value, str):
        m = _match("duration", value)
        if m:
            return float(m.group(1)) * _DUR_UNITS[m.group(2)]
    raise ValueError('expected a duration like "90m", got %s' % (_short_repr(value),))


def parse_size(value: Union[int, str]) -> int:
    """Bytes from 1024 / "50G" / "512M" / "1.5TiB" (binary multiples)."""
    if isinstance(value, bool):
        raise ValueError('expected a size like "50G", got %r' % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("expected a non-negative size, got %r" % (value,))
        return value
    if isinstance(value, str):
        m = _match("size", value)
        if m:
            return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])
    raise ValueError('expected a size like "50G", got %s' % (_short_repr(value),))


def format_duration(seconds: Union[int, float, None]) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm%02ds" % (s // 60, s % 60)
    if s < 86400:
        return "%dh%02dm" % (s // 3600, (s % 3600) // 60)
    return "%dd%02dh" % (s // 86400, (s % 86400) // 3600)


def format_bytes(n: Union[int, float, None]) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1000.0
    return "%.1f PB" % value


def _short_repr(value: object) -> str:
    # strings in double quotes, as the user typed them in TOML/JSON: got "abc", not 'abc'
    text = '"%s"' % value.replace('"', '\\"') if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def iso_utc(ts: Optional[float]) -> Optional[str]:
    """Epoch seconds -> ISO 8601 UTC with milliseconds ("2024-05-01T12:00:00.123Z"); None stays None."""
    if ts is None:
        return None
    ms = int(round((ts - int(ts)) * 1000))
    secs = int(ts)
    if ms >= 1000:
        secs, ms = secs + 1, ms - 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + ".%03dZ" % ms


def _match(name: str, text: str) -> Any:
    import re       # re caches what it compiled
    pattern, ignore_case = _PATTERNS[name]
    return re.match(pattern, text, re.I if ignore_case else 0)


def parse_utc_time(text: str) -> float:
    """Epoch seconds from a UTC time a person types: "2026-12-01T08:00Z", "2026-12-01 08:00:30Z",
    "2026-12-01T08:00:00.5+00:00". Only UTC: a deadline typed in local time on a laptop in one
    zone and read on a box in another is hours off, and an hour decides whether data survives."""
    import calendar
    m = _match("utc_time", text) if isinstance(text, str) else None
    if not m:
        raise ValueError('expected a UTC time like "2026-12-01T08:00Z", got %s' % _short_repr(text))
    day, hh, mm, ss, frac = m.groups()
    try:
        base = time.strptime("%s %s:%s:%s" % (day, hh, mm, ss or "00"), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise ValueError('no such time: %s' % _short_repr(text))
    return calendar.timegm(base) + (float(frac) if frac else 0.0)


def parse_iso_utc(text: str) -> float:
    """iso_utc()'s output (or any "YYYY-MM-DDTHH:MM:SS[.fff]Z") back to epoch seconds."""
    import calendar
    base, _, frac = text.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)
