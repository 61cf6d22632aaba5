"""events.jsonl: the durable, append-only record of everything that happened.

Subsystems return event *specs* ({type, severity, run, stage, summary, evidence, key?, ...});
only the daemon turns them into events here: it adds `id` (unique and stable, the notifiers
dedupe on it), `at` (ISO 8601 UTC) and `host`, appends one line, and hands the event on.
The file rotates at ~10 MB to events.jsonl.1 (one old file kept).
"""
from __future__ import annotations

import collections
import os
TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Callable, Deque, Dict, List, Optional

from boxagent.base.fsutil import append_bytes, jsonl_line
from boxagent.base.units import iso_utc

ROTATE_BYTES = 10 * 1024 * 1024
SEVERITIES = ("info", "warning", "critical")
RECENT = 50


class EventLog:
    def __init__(self, path: str, host: str, rotate_bytes: int = ROTATE_BYTES,
                 write: Optional[Callable[[str, bytes], Any]] = None):
        self.path = path
        self._write = write or append_bytes       # the daemon's Storage.append: a full disk waits
        self.host = host
        self.rotate_bytes = rotate_bytes
        self.recent: Deque[Dict[str, Any]] = collections.deque(tail(path, RECENT), maxlen=RECENT)
        import secrets   # here: `status --events N` reads the log and needs no hmac/hashlib
        self._prefix = secrets.token_hex(3)   # two daemons in the same millisecond still differ
        self._seq = 0
        # The daemon's parts may add facts to an event before it is written (Part.annotate).
        self.annotate: Optional[Callable[[Dict[str, Any], float], Dict[str, Any]]] = None

    def make(self, spec: Dict[str, Any], now: float) -> Dict[str, Any]:
        """The event of a spec, with its id and time, not yet written anywhere."""
        extra = self.annotate(spec, now) if self.annotate is not None else None
        if extra:
            merged = dict(extra)
            merged.update(spec)          # the spec's own fields win
            spec = merged
        return make_event(spec, now, self.host, self._next_id(now))

    def append(self, event: Dict[str, Any]) -> None:
        self._rotate_if_big()
        self._write(self.path, jsonl_line(event))
        self.recent.append(event)

    def emit(self, spec: Dict[str, Any], now: float) -> Dict[str, Any]:
        event = self.make(spec, now)
        self.append(event)
        return event

    def missing(self, events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Those of `events` that are not in the log (a crash came between a run's state and its
        events). Reads back from the end only as far as the oldest of them (ids sort by time)."""
        if not events:
            return []
        oldest = min(str(e.get("id")) for e in events)
        seen = set()
        for path in (self.path, self.path + ".1"):
            done = False
            for event in reversed(tail(path, 100000, stop_before=oldest)):
                seen.add(event.get("id"))
                done = done or str(event.get("id")) < oldest
            if done:
                break
        return [e for e in events if e.get("id") not in seen]

    def _next_id(self, now: float) -> str:
        self._seq += 1
        return "%013d-%s-%d" % (int(now * 1000), self._prefix, self._seq)

    def _rotate_if_big(self) -> None:
        try:
            if os.stat(self.path).st_size >= self.rotate_bytes:
                os.replace(self.path, self.path + ".1")
        except OSError:
            pass


def make_event(spec: Dict[str, Any], now: float, host: str, event_id: str) -> Dict[str, Any]:
    event = {"id": event_id, "at": iso_utc(now), "host": host, "type": spec.get("type") or "unknown",
             "severity": spec.get("severity") if spec.get("severity") in SEVERITIES else "info",
             "run": spec.get("run"), "stage": spec.get("stage"), "summary": spec.get("summary") or "",
             "evidence": [str(e) for e in (spec.get("evidence") or [])]}
    for key, value in spec.items():
        if key not in event:
            event[key] = value
    return event


def tail(path: str, n: int, chunk: int = 65536, stop_before: Optional[str] = None) -> List[Dict[str, Any]]:
    """The last n events (oldest first), reading only the end of the file; with `stop_before`,
    reading back no further than the first event whose id sorts before it."""
    if n <= 0:
        return []
    from boxagent.base.fsutil import parse_jsonl, read_tail
    try:
        data = read_tail(path, n, chunk, stop_before.encode() if stop_before else None)
    except OSError:
        return []
    out: List[Dict[str, Any]] = []
    for raw in data.split(b"\n")[-(n + 1):]:
        event = parse_jsonl(raw)
        if event is not None:
            out.append(event)
    return out[-n:]
