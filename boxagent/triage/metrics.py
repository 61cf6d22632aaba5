"""Metrics from a stage's log: the stage key `metrics_pattern`, a regex whose named groups are
numbers (`loss=(?P<loss>[0-9.eE+-]+)`, `acc (?P<acc>[0-9.]+)`); a value the log prints as nan or
inf is kept as the text "nan"/"inf"/"-inf" (the history, which charts numbers, skips it).

The StageWatch feeds every block its tailer reads (and the redrawn tqdm line not yet ended by a
newline, where `set_postfix(loss=...)` lands) to a MetricsTracker: no second pass over the log.
Only the last value of each name is kept, so memory is bounded by the pattern's group count
(at most MAX_METRICS). status.json shows them as runs[].stages[].metrics {name: last value};
the run log samples them into the run's history.
"""
from __future__ import annotations

import math
import re
from typing import Dict, Optional, Tuple, Union

from boxagent.base.units import NON_FINITE
from boxagent.triage.anchors import Finder, candidate_lines
from boxagent.triage.regexsafe import unsafe_reason
from boxagent.triage.rules import derive_keywords
from boxagent.triage.text import decode, last_segment, match_text, user_text

MAX_METRICS = 8
EXAMPLE = "'loss=(?P<loss>[0-9.eE+-]+)'"


def pattern_problem(pattern: object) -> Optional[str]:
    """Why `pattern` cannot be a metrics_pattern (a sentence for the job file's author), or None."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "expected a regular expression with named groups, e.g. %s" % EXAMPLE
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        return "not a valid regular expression (%s)" % exc
    if not rx.groupindex:
        return ("needs a named group per value, e.g. %s (a plain group `(...)` has no name to "
                "show the value under)" % EXAMPLE)
    if len(rx.groupindex) > MAX_METRICS:
        return "at most %d named groups (one chart each), got %d" % (MAX_METRICS, len(rx.groupindex))
    return unsafe_reason(pattern)


def compile_metrics_pattern(pattern: Optional[str]) -> "Optional[re.Pattern[str]]":
    """The compiled pattern, None for none; ValueError with pattern_problem()'s sentence."""
    if not pattern:
        return None
    problem = pattern_problem(pattern)
    if problem:
        raise ValueError("metrics_pattern: %s" % problem)
    return re.compile(pattern)


def number(text: Optional[str]) -> Optional[float]:
    """A finite number from a group's text; None for text that is not one (or nan/inf, which
    JSON cannot carry; a loss gone to nan is the divergence rule's business)."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if math.isnan(value) or math.isinf(value):
        return None
    return int(value) if value.is_integer() and abs(value) < 1e15 and "." not in text else value


def reading(text: Optional[str]) -> Optional[Union[float, str]]:
    """What a group says the value is now: a finite number, or "nan"/"inf"/"-inf" as text (a
    loss gone to nan IS its last value: showing the last finite one would say the run is fine;
    JSON has no literal for it, so it travels as a string)."""
    value = number(text)
    if value is not None or text is None:
        return value
    try:
        raw = float(text.strip())
    except ValueError:
        return None
    return NON_FINITE[0] if math.isnan(raw) else NON_FINITE[1 if raw > 0 else 2]


class MetricsTracker:
    """The last value of each named group of one stage's metrics_pattern."""

    def __init__(self, rx: "re.Pattern[str]"):
        self.rx = rx
        self.names: Tuple[str, ...] = tuple(sorted(rx.groupindex, key=rx.groupindex.__getitem__))
        kws = derive_keywords(rx.pattern)
        self.finder = Finder(k.encode("utf-8") for k in kws) if kws else None
        self.anchors = self.finder.literals if self.finder else ()
        self.last: Dict[str, Union[float, str]] = {}
        self.updated_at: Optional[float] = None
        self.lines = 0          # lines that gave at least one value

    def feed_block(self, data: bytes, first_line_no: int, now: Optional[float]) -> None:
        """Complete lines from the tailer; only lines holding one of the pattern's literals
        are matched (the same C-speed prefilter the rules use)."""
        for _line_no, raw in candidate_lines(data, self.finder, first_line_no):
            self.feed_text(match_text(raw), now)

    def feed_partial(self, part: bytes, now: Optional[float]) -> None:
        """The line still being redrawn (tqdm): its last \\r segment, what a terminal shows."""
        if part:
            self.feed_text(decode(last_segment(part)), now)

    def feed_text(self, text: str, now: Optional[float]) -> bool:
        found = False
        for m in self.rx.finditer(user_text(text)):   # \r segments in order: the last is the newest
            for name, raw in m.groupdict().items():
                value = reading(raw)
                if value is not None:
                    self.last[name] = value
                    found = True
        if found:
            self.lines += 1
            self.updated_at = now
        return found

    def block(self) -> Optional[Dict[str, Union[float, str]]]:
        """{name: last value} in the pattern's group order (the first is the headline metric)."""
        if not self.last:
            return None
        return {n: self.last[n] for n in self.names if n in self.last}
