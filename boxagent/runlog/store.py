"""A run's history on the box: runs/<run>/history.jsonl, one JSON object a line.

  {"k": "h", "schema", "run", "step_s", "gpu_cols", "throttle_bits"}   header (first line)
  {"k": "i", "t", "gpus": {"0": {name, memory_total_mib, sm_clock_max_mhz}}, "workdir_disk", "cgroup"}
  {"k": "p", "t", "s", "m", "d", "p", "g", "x", "st"}                    one point (see points.py)
  {"k": "m", "t", "st", "a", "l", "x"}                                    one logged metric reading:
                                                    its stage, log line and values (metricfeed.py)
  {"k": "e", "e": {...}}                                                 one event, as in events.jsonl

Appending is one O_APPEND write: a point never rewrites the file. When the file passes
COMPACT_AT it is rewritten once (tmp -> fsync -> replace) with its older points merged in pairs
(see thin()) until it fits COMPACT_TO: the rewrite costs a few MB every few hundred points, and
the file stays under BUDGET (3 MB: a week at one point a minute on 8 GPUs thins only to 2
minutes). Thinning never drops an event; a flood of routine events past EVENT_BYTES is counted
instead of kept (a fault that repeats every second must not push the run's story out).
Readers tolerate a torn last line and duplicates (an event or a minute written twice around a
daemon restart): events are unique by id, points by time.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base import numbers, safefile
from boxagent.base.fsutil import atomic_write_bytes, parse_jsonl
from boxagent.runlog import points

SCHEMA = "rgt.runlog/1"
FILE = "history.jsonl"
BUDGET = 3_000_000          # bytes: the file never grows past this
COMPACT_AT = 2_700_000      # rewrite (thin) when the file passes this ...
COMPACT_TO = 2_000_000      # ... down to this, so the rewrite is amortised over ~700 KB of appends
EVENT_BYTES = 1_000_000     # beyond this much of events, routine (info) ones are only counted
MAX_EVENT_BYTES = 8_192     # one event, clipped (a stage_failed carries its last 20 log lines)
KEEP_RECENT = 360           # points (6 h at 1/min) thinned last
MIN_POINTS = 240            # never thin below this many points
METRIC_KEEP = 8000          # logged metric readings kept whole; older ones thin past this
_KEEP_ALWAYS = ("run_", "stage_")   # lifecycle events are kept even past EVENT_BYTES


def path_for(run_dir: str) -> str:
    return os.path.join(run_dir, FILE)


def header(run: str, step_s: float) -> Dict[str, Any]:
    return {"k": "h", "schema": SCHEMA, "run": run, "step_s": step_s, "gpu_cols": list(points.GPU_COLS),
            "throttle_bits": {name: bit for bit, name in points.THROTTLE_BITS}}


def _line(rec: Dict[str, Any]) -> bytes:
    return (json.dumps(rec, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


class HistoryFile:
    """The writer of one run's history (the daemon is its only writer)."""

    def __init__(self, run_dir: str, run: str, step_s: float, compact_at: int = COMPACT_AT,
                 compact_to: int = COMPACT_TO, event_bytes: int = EVENT_BYTES):
        self.path = path_for(run_dir)
        self.run, self.step_s = run, step_s
        self.compact_at, self.compact_to, self.event_bytes_max = compact_at, compact_to, event_bytes
        try:
            self.size = os.stat(self.path).st_size
        except OSError:
            self.size = 0
        self.event_bytes = 0 if self.size == 0 else -1   # -1: unknown until the first compaction
        self.dropped = 0
        self.compactions = 0

    def add_point(self, point: Dict[str, Any]) -> None:
        rec = dict(point)
        rec["k"] = "p"
        self._append(_line(rec))

    def add_metrics(self, readings: List[Dict[str, Any]]) -> None:
        if readings:
            self._append(b"".join(_line(dict(r, k="m")) for r in readings))

    def add_info(self, info: Dict[str, Any]) -> None:
        rec = dict(info)
        rec["k"] = "i"
        self._append(_line(rec))

    def add_event(self, event: Dict[str, Any]) -> bool:
        """False when the event was only counted (routine events past the events budget)."""
        data = _line({"k": "e", "e": clip_event(event)})
        if self.event_bytes < 0:
            self.event_bytes = _measure_events(self.path)
        routine = event.get("severity") == "info" and not str(event.get("type")).startswith(_KEEP_ALWAYS)
        if routine and self.event_bytes + len(data) > self.event_bytes_max:
            self.dropped += 1
            return False
        self.event_bytes += len(data)
        self._append(data)
        return True

    def note_dropped(self, now: float) -> None:
        if self.dropped:
            self._append(_line({"k": "n", "t": now, "dropped_events": self.dropped}))
            self.dropped = 0

    def _append(self, data: bytes) -> None:
        if self.size == 0 and not os.path.exists(self.path):
            data = _line(header(self.run, self.step_s)) + data
        fd = safefile.open_for_write(self.path)   # a FIFO there once froze the daemon at a stage's end
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.size += len(data)
        if self.size > self.compact_at:
            self.compact()

    def compact(self) -> None:
        hist = read(self.path)
        if hist is None:
            return
        hist["metrics"] = thin_readings(hist.get("metrics") or [])
        hist["points"] = thin(hist["points"], self.compact_to - _records_bytes(hist))
        body = render(hist, self.run, self.step_s)
        atomic_write_bytes(self.path, body)
        self.size = len(body)
        self.event_bytes = sum(len(_line({"k": "e", "e": e})) for e in hist["events"])
        self.compactions += 1


def _measure_events(path: str) -> int:
    hist = read(path)
    return sum(len(_line({"k": "e", "e": e})) for e in (hist or {}).get("events") or [])


def _records_bytes(hist: Dict[str, Any]) -> int:
    """Bytes of everything compaction keeps whole: header, info records, events, notes."""
    n = len(_line(header(hist.get("run") or "", hist.get("step_s") or 60)))
    n += sum(len(_line(dict(i, k="i"))) for i in hist["info"])
    n += sum(len(_line({"k": "e", "e": e})) for e in hist["events"])
    n += sum(len(_line(dict(r, k="m"))) for r in hist.get("metrics") or [])
    return n + 64


def render(hist: Dict[str, Any], run: str, step_s: float) -> bytes:
    """The file's bytes for `hist` (read()'s shape): header, then records in time order."""
    recs: List[Tuple[float, int, bytes]] = []
    for i, info in enumerate(hist["info"]):
        recs.append((_num(info.get("t")), 0, _line(dict(info, k="i"))))
    for p in hist["points"]:
        recs.append((_num(p.get("t")), 1, _line(dict(p, k="p"))))
    for e in hist["events"]:
        recs.append((_num(e.get("ts")), 2, _line({"k": "e", "e": e})))
    for r in hist.get("metrics") or []:
        recs.append((_num(r.get("t")), 1, _line(dict(r, k="m"))))
    if hist.get("dropped_events"):
        recs.append((float("inf"), 3, _line({"k": "n", "dropped_events": hist["dropped_events"]})))
    recs.sort(key=lambda r: (r[0], r[1]))
    return _line(header(run, step_s)) + b"".join(r[2] for r in recs)


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def read(path: str, max_bytes: int = 4 * BUDGET) -> Optional[Dict[str, Any]]:
    """{header, run, step_s, info[], points[], metrics[], events[], dropped_events}, or None
    without a file. Duplicates are dropped (events by id, points by t, metric readings by stage,
    attempt and log line: the first written wins, it was timed while its attempt ran; an agent
    that read a skipped stage's log anew after a resume wrote its readings again, later)."""
    try:
        data = safefile.read_bytes(path, max_bytes, whole=False)   # a FIFO or a device is no history
    except OSError:
        return None
    head: Dict[str, Any] = {}
    info: List[Dict[str, Any]] = []
    pts: Dict[float, Dict[str, Any]] = {}
    events: Dict[str, Dict[str, Any]] = {}
    readings: Dict[Tuple[str, Any, int], Dict[str, Any]] = {}
    dropped = 0
    for raw in data.split(b"\n"):
        rec = parse_line(raw)
        if rec is None:
            continue
        kind = rec.pop("k", None)
        if kind == "h" and not head:
            head = rec
        elif kind == "i":
            info.append(rec)
        elif kind == "p" and numbers.number("epoch_s", rec.get("t")) is not None:
            pts[float(rec["t"])] = rec        # `"t": 1e308` or Infinity is skipped, not drawn
        elif kind == "m" and numbers.number("epoch_s", rec.get("t")) is not None and isinstance(rec.get("l"), int):
            attempt = rec.get("a") if isinstance(rec.get("a"), int) else None
            readings.setdefault((str(rec.get("st")), attempt, rec["l"]), rec)
        elif kind == "e" and isinstance(rec.get("e"), dict):
            ev = rec["e"]
            events[str(ev.get("id") or len(events))] = ev
        elif kind == "n" and isinstance(rec.get("dropped_events"), int):
            dropped += rec["dropped_events"]
    return {"header": head, "run": head.get("run"), "step_s": head.get("step_s"), "info": info,
            "points": [pts[t] for t in sorted(pts)], "events": sorted(events.values(), key=_event_order),
            "metrics": sorted(readings.values(), key=lambda r: (_num(r.get("t")), r["l"])),
            "dropped_events": dropped}


def _event_order(ev: Dict[str, Any]) -> Tuple[float, str]:
    return (_num(ev.get("ts")), str(ev.get("id") or ""))


def parse_line(raw: bytes) -> Optional[Dict[str, Any]]:
    """One record; None for a torn last line (the daemon killed mid-write)."""
    return parse_jsonl(raw)


def thin(pts: List[Dict[str, Any]], budget: int, keep_recent: int = KEEP_RECENT,
         min_points: int = MIN_POINTS) -> List[Dict[str, Any]]:
    """Merge older points in pairs, oldest and finest first, until the points fit `budget`
    bytes: the resolution falls with age (1 min recent, 2 min older, 4 min oldest...). The newest
    `keep_recent` points are merged last; never below `min_points` points."""
    total = sum(len(_line(p)) for p in pts)
    keep = keep_recent
    for _ in range(64):
        if total <= budget or len(pts) <= min_points:
            break
        cut = max(len(pts) - keep, 0)
        old, new = pts[:cut], pts[cut:]
        merged = _merge_finest(old, total - budget)
        if len(merged) == len(old):
            if keep == 0:
                break
            keep //= 2              # the old points are as coarse as they can get: thin recent ones too
            continue
        pts = merged + new
        total = sum(len(_line(p)) for p in pts)
    return pts


def thin_readings(readings: List[Dict[str, Any]], keep: int = METRIC_KEEP) -> List[Dict[str, Any]]:
    """Every logged reading up to `keep`; past it, the older half loses every other reading
    (the newest half and the last reading stay whole), until they fit."""
    while len(readings) > keep:
        half = len(readings) // 2
        readings = readings[:half][1::2] + readings[half:]
    return readings


def _merge_finest(old: List[Dict[str, Any]], need: float = float("inf")) -> List[Dict[str, Any]]:
    """One pass from the oldest: neighbouring points of the finest span that can merge (same
    span, contiguous in time) merge in pairs until about `need` bytes are saved. Only when no
    span level can, pairs merge across the gaps (the daemon was down between most points)."""
    for level in sorted({_num(p.get("s")) for p in old}):
        out = _merge_pairs(old, need, level)
        if len(out) < len(old):
            return out
    return _merge_pairs(old, need, None)


def _merge_pairs(old: List[Dict[str, Any]], need: float, level: Optional[float]) -> List[Dict[str, Any]]:
    out, i, saved = [], 0, 0
    while i < len(old):
        a = old[i]
        b = old[i + 1] if i + 1 < len(old) else None
        if saved < need and b is not None and (level is None or _pairable(a, b, level)):
            out.append(points.merge(a, b))
            saved += len(_line(b))
            i += 2
        else:
            out.append(a)
            i += 1
    return out


def _pairable(a: Dict[str, Any], b: Dict[str, Any], level: float) -> bool:
    sa, sb = _num(a.get("s")), _num(b.get("s"))
    return (abs(sa - level) <= level * 0.01 and abs(sb - level) <= level * 0.01
            and _num(b.get("t")) - _num(a.get("t")) <= 1.5 * max(sa, 1e-9))


def clip_event(ev: Dict[str, Any], limit: int = MAX_EVENT_BYTES) -> Dict[str, Any]:
    """The event, smaller than `limit` bytes as JSON: long lists and strings shortened first,
    then only its identifying fields. `ts` (epoch seconds) is added for ordering."""
    out = dict(ev)
    if "ts" not in out:
        out["ts"] = points.parse_iso(ev.get("at"))
    if len(_line(out)) <= limit:
        return out
    for key, value in list(out.items()):
        if isinstance(value, list):
            out[key] = [_clip_value(v, 300) for v in value[-10:]]
        elif isinstance(value, (str, dict)):
            out[key] = _clip_value(value, 1000)
    if len(_line(out)) <= limit:
        return out
    keep = ("id", "at", "ts", "type", "severity", "run", "stage", "summary", "key", "resolved", "attempt")
    return {k: _clip_value(out[k], 500) for k in keep if k in out}


def _clip_value(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit - 3] + "..."
    if isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, default=str)
        if len(text) <= limit:
            return value
        return {k: _clip_value(v, limit // 4) for k, v in list(value.items())[:12]
                if isinstance(v, (str, int, float, bool)) or v is None}
    return value
