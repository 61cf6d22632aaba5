"""The hub's durable feed: events.jsonl read from a saved cursor, so no event is lost between
the daemon appending it and the hub routing it.

Before, the daemon appended an event and then handed it to the hub; a daemon killed between
the two never sent that message. Now the hub reads the log itself: at start from the cursor it
saved last (routing what a dead daemon appended but never routed), and on every event from
where it stopped. The cursor is saved only after the outbox files of the events it passes are
on disk (the hub's job, see hub.py), so a crash at any point re-reads at most events whose
files may already exist, and the hub skips those by (notifier, event id).

The cursor names its file by inode and the id of its first event (an inode alone may be reused
after the rotation deletes events.jsonl.1). wire/events.py rotates by renaming events.jsonl to
events.jsonl.1: a cursor on the renamed file finishes it there, then starts the new file at 0.
Only complete lines are consumed; a torn line (a crash mid-append, then the next daemon's event
appended after the torn bytes) is skipped, and a whole event after it on the same line kept.
"""
from __future__ import annotations

import json
import os
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from boxagent.base import safefile
from boxagent.base.fsutil import atomic_write_bytes, parse_jsonl, read_json

_EVENT_START = b'{"id":'      # wire/events.make_event puts the id first
FIRST_LINE_MAX = 65536


class Cursor:
    def __init__(self, ino: Optional[int], first_id: Optional[str], offset: int, last_id: Optional[str] = None):
        self.ino = ino
        self.first_id = first_id
        self.offset = offset
        self.last_id = last_id

    def to_json(self) -> Dict[str, Any]:
        return {"v": 1, "ino": self.ino, "first_id": self.first_id, "offset": self.offset, "last_id": self.last_id}

    @classmethod
    def from_json(cls, data: Any) -> Optional["Cursor"]:
        if not isinstance(data, dict) or not isinstance(data.get("offset"), int):
            return None
        return cls(data.get("ino"), data.get("first_id"), data["offset"], data.get("last_id"))


def parse_line(raw: bytes) -> Optional[Dict[str, Any]]:
    """One event from one complete line; None for a line that holds none (torn and alone). Torn
    bytes of a crashed append, then a whole event on the same line: the event."""
    return parse_jsonl(raw, _EVENT_START)


def _first_id(path: str) -> Optional[str]:
    try:
        with os.fdopen(safefile.open_regular(path), "rb") as fh:
            return _first_id_of(fh)
    except OSError:
        return None


def _first_id_of(fh: BinaryIO) -> Optional[str]:
    """The id of the first event of an open file (its position is left where it was)."""
    head = os.pread(fh.fileno(), FIRST_LINE_MAX, 0)
    if b"\n" not in head:
        return None
    event = parse_line(head.split(b"\n", 1)[0])
    return str(event.get("id")) if event and event.get("id") else None


def _id_ms(eid: Optional[str]) -> int:
    """The millisecond stamp that starts an event id (wire/events.EventLog._next_id); -1 if none."""
    head = str(eid or "").split("-", 1)[0]
    return int(head) if head.isdigit() else -1


class EventFeed:
    def __init__(self, log_path: str, cursor_path: str):
        self.path = log_path
        self.cursor_path = cursor_path
        self.cursor: Optional[Cursor] = None

    def open(self) -> List[Dict[str, Any]]:
        """At start: the events after the saved cursor (none on the first start: the log's past
        was never this hub's to send). Call commit() once their files are on disk."""
        saved = Cursor.from_json(read_json(self.cursor_path, None))
        if saved is None:
            self.cursor = self._at_end()
            self.save()
            return []
        self.cursor = saved
        events, self.cursor = self._read_from(saved, check_identity=True)
        return events

    def read_new(self) -> Tuple[List[Dict[str, Any]], Cursor]:
        """The complete events appended since the cursor, and the cursor past them (not kept yet)."""
        assert self.cursor is not None, "open() first"
        return self._read_from(self.cursor, check_identity=False)

    def advance(self, cursor: Cursor) -> None:
        self.cursor = cursor

    def save(self) -> None:
        assert self.cursor is not None
        data = (json.dumps(self.cursor.to_json(), separators=(",", ":")) + "\n").encode("utf-8")
        atomic_write_bytes(self.cursor_path, data, 0o600)

    # -- reading ----------------------------------------------------------------------------------
    def _at_end(self) -> Cursor:
        try:
            st = os.stat(self.path)
        except OSError:
            return Cursor(None, None, 0)
        return Cursor(st.st_ino, _first_id(self.path), st.st_size)

    def _open(self, path: str) -> Optional[BinaryIO]:
        """The file at `path`, open (identity is then checked on the descriptor, not by a stat
        before the open: a rotation between the two once lost the events in between)."""
        try:
            return os.fdopen(safefile.open_regular(path), "rb")     # a FIFO there must not stop the hub
        except OSError:
            return None

    def _is_cursors(self, fh: Optional[BinaryIO], cur: Cursor, check_identity: bool) -> bool:
        if fh is None or cur.ino is None or os.fstat(fh.fileno()).st_ino != cur.ino:
            return False
        return not check_identity or cur.first_id is None or _first_id_of(fh) == cur.first_id

    def _read_from(self, cur: Cursor, check_identity: bool) -> Tuple[List[Dict[str, Any]], Cursor]:
        rotated = self.path + ".1"
        if cur.ino is None:     # no log when the cursor was made: all there is came after it
            return self._both(cur, 0, self._open(rotated))
        current = self._open(self.path)
        if self._is_cursors(current, cur, check_identity):
            assert current is not None
            return self._read_file(current, cur.offset, cur.last_id)
        _close(current)
        old = self._open(rotated)
        if self._is_cursors(old, cur, check_identity):
            return self._both(cur, cur.offset, old)
        # Neither file is the cursor's (rotated twice while no hub read): read both whole and
        # keep only events newer than the last one routed (ids start with their millisecond).
        events, cur2 = self._both(cur, 0, old)
        floor = _id_ms(cur.last_id)
        return [e for e in events if _id_ms(e.get("id")) >= floor], cur2

    def _both(self, cur: Cursor, offset: int, old: Optional[BinaryIO]) -> Tuple[List[Dict[str, Any]], Cursor]:
        """The rotated file from `offset`, then the current one from its start, opened only now:
        a rotation in between leaves what it moved in the file read first."""
        older, end = self._read_file(old, offset, cur.last_id) if old is not None else ([], Cursor(None, None, 0, cur.last_id))
        current = self._open(self.path)
        if current is None:
            return older, end
        newer, cur2 = self._read_file(current, 0, end.last_id)
        return older + newer, cur2

    def _read_file(self, fh: BinaryIO, offset: int, last_id: Optional[str]) -> Tuple[List[Dict[str, Any]], Cursor]:
        with fh:
            st = os.fstat(fh.fileno())
            if st.st_size < offset:                # truncated under us: start it over
                offset = 0
            fh.seek(offset)
            data = fh.read(max(0, st.st_size - offset))
            end = data.rfind(b"\n") + 1            # only complete lines; a partial one waits
            events = [e for e in (parse_line(raw) for raw in data[:end].split(b"\n")) if e is not None]
            if events and events[-1].get("id"):
                last_id = str(events[-1]["id"])
            known = self.cursor is not None and self.cursor.ino == st.st_ino and offset > 0
            first = self.cursor.first_id if known and self.cursor is not None else None
            if first is None and offset + end > 0:
                first = _first_id_of(fh)
        return events, Cursor(st.st_ino, first, offset + end, last_id)


def _close(fh: Optional[BinaryIO]) -> None:
    if fh is not None:
        fh.close()
