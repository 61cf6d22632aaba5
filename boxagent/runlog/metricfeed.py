"""Every value a stage's log prints for its `metrics_pattern`, for the run's history.

status.json carries only the last value of each metric, and a history point a sample: a 39 s
training that logged five losses drew two of them and ended at 0.77 while its own table said the
last value was 0.1832. Here the run log reads each stage's log from where it stopped (new bytes
only, the same literal prefilter the rules use) and keeps every reading, in log order, as an `m`
record of history.jsonl; the report draws the curve from them. A reading's time is spread over
the interval in which it was read (the log has no clock rgt can trust), so the curve keeps the
log's order and the run's time axis.

Bounded: at most READ_MAX bytes of a log per sample (a flood of output past that is skipped,
and the skip is counted), and the history file thins old readings as it thins points.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base import safefile
from boxagent.runlog.points import parse_iso
from boxagent.triage.anchors import Finder, candidate_lines
from boxagent.triage.metrics import compile_metrics_pattern, reading
from boxagent.triage.rules import derive_keywords
from boxagent.triage.text import match_text, user_text

READ_MAX = 8 << 20          # bytes of one log read per sample
MAX_PER_READ = 4096         # readings kept from one read (a tqdm postfix redrawn 10x a second)


class _Cursor:
    """Where the run log stopped in one stage attempt's log."""

    def __init__(self, pattern: str):
        self.rx = compile_metrics_pattern(pattern)
        kws = derive_keywords(pattern)
        self.finder = Finder(k.encode("utf-8") for k in kws) if kws else None
        self.offset = 0
        self.line_no = 1
        self.skipped_bytes = 0
        self.read_at: Optional[float] = None


class MetricFeed:
    """One run's readings, stage by stage."""

    def __init__(self) -> None:
        self.cursors: Dict[str, Optional[_Cursor]] = {}

    def read(self, stages: List[Dict[str, Any]], patterns: Dict[str, str], now: float) -> List[Dict[str, Any]]:
        """The `m` records of every new reading in the logs of `stages` (status.json's
        runs[].stages[]) whose stage has a metrics_pattern in `patterns`, in time order."""
        out: List[Dict[str, Any]] = []
        for st in stages:
            name, log = st.get("name"), st.get("log")
            if not isinstance(name, str) or not isinstance(log, str) or name not in patterns \
                    or st.get("state") == "skipped":
                continue
            cur = self._cursor(log, patterns[name])
            if cur is None:
                continue
            since, until = _attempt_window(cur, st, now)
            found = _new_readings(cur, log)
            cur.read_at = until
            attempt = st.get("attempt") if isinstance(st.get("attempt"), int) else None
            out += _records(name, attempt, found, since, until)
        out.sort(key=lambda r: r["t"])
        return out

    def _cursor(self, log: str, pattern: str) -> Optional[_Cursor]:
        if log not in self.cursors:
            try:
                self.cursors[log] = _Cursor(pattern)
            except ValueError:        # refused at submit; a bad one here costs only the metrics
                self.cursors[log] = None
        return self.cursors[log]


def _attempt_window(cur: _Cursor, st: Dict[str, Any], now: float) -> Tuple[float, float]:
    """The interval the new lines of this attempt's log were printed in: from the last read (or
    the attempt's start) to now (or the attempt's end). A daemon restarted under a running stage
    reads its log from the start, and drew every reading at the restart."""
    started, ended = parse_iso(st.get("started_at")), parse_iso(st.get("ended_at"))
    until = min(now, ended) if ended is not None else now
    since = cur.read_at if cur.read_at is not None else (started if started is not None else until)
    return min(since, until), until


def _new_readings(cur: _Cursor, path: str) -> List[Tuple[int, Dict[str, Any]]]:
    try:
        size = os.stat(path).st_size
    except OSError:
        return []
    if size < cur.offset:             # the log was truncated or replaced: read it anew
        cur.offset, cur.line_no = 0, 1
    if size - cur.offset > READ_MAX:  # a flood: keep the newest READ_MAX bytes, count the rest
        skip = size - cur.offset - READ_MAX
        cur.skipped_bytes += skip
        cur.offset += skip
    try:
        with os.fdopen(safefile.open_regular(path), "rb") as fh:
            fh.seek(cur.offset)
            data = fh.read(size - cur.offset)
    except OSError:
        return []
    end = data.rfind(b"\n") + 1       # complete lines only: the next read takes the rest
    block = data[:end]
    out: List[Tuple[int, Dict[str, Any]]] = []
    for line_no, raw in candidate_lines(block, cur.finder, cur.line_no):
        values = _values(cur, raw)
        if values:
            out.append((line_no, values))
    cur.offset += end
    cur.line_no += block.count(b"\n")
    return out[-MAX_PER_READ:]


def _values(cur: _Cursor, raw: bytes) -> Dict[str, Any]:
    """The line's readings; a line redrawn with \\r keeps the last value of each name."""
    values: Dict[str, Any] = {}
    assert cur.rx is not None
    for m in cur.rx.finditer(user_text(match_text(raw))):
        for name, text in m.groupdict().items():
            value = reading(text)
            if isinstance(value, (int, float)):    # a chart draws numbers; nan is status's news
                values[name] = value
    return values


def _records(stage: str, attempt: Optional[int], found: List[Tuple[int, Dict[str, Any]]],
             since: float, until: float) -> List[Dict[str, Any]]:
    n = len(found)
    span = max(until - since, 0.0)
    out = []
    for i, (line, values) in enumerate(found):
        rec: Dict[str, Any] = {"t": round(since + span * (i + 1) / n, 3), "st": stage, "l": line, "x": values}
        if attempt is not None:
            rec["a"] = attempt
        out.append(rec)
    return out
