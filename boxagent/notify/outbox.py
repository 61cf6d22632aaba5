"""outbox/: one file per pending message per notifier; the durable half of delivery.

A file is `<seq>-<notifier id>.json` where seq grows across restarts (time_ns based), so a
sorted listing is publish order and each notifier's files form its FIFO. A file holds the
notifier's id and the event, never the URL or a token (those live only in secrets.json).
Delivered files are unlinked; given-up ones move to outbox/failed/ with the reason (the last
FAILED_KEEP are kept). `.state.json` keeps counters, recently routed event ids and the
coalescing table across restarts (books.py); `.feed.json` the event-log cursor (feed.py).

The outbox owns the "pending" fact: how many messages each notifier still has to send is the
count of its files here (plus the few kept in memory when the disk refused a write), never the
length of a delivery thread's queue. A queue belongs to a thread that may have stopped; after a
preemption the status said "pending 1" of a message that had arrived.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base.fsutil import atomic_write_bytes, read_json

FAILED_KEEP = 200
_NAME = re.compile(r"^(\d{19,20})-([A-Za-z0-9_-]{1,40})\.json$")


def _owner(name: str) -> Optional[str]:
    """The notifier id in a message's name (on disk or `mem-<n>-<id>`)."""
    m = _NAME.match(name)
    if m:
        return m.group(2)
    if name.startswith("mem-"):
        return name.split("-", 2)[-1]
    return None


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


class Outbox:
    def __init__(self, path: str):
        self.dir = path
        self.failed_dir = os.path.join(path, "failed")
        self.state_path = os.path.join(path, ".state.json")
        self._seq = 0
        self._lock = threading.Lock()
        self._mem: Dict[str, Dict[str, Any]] = {}      # name -> record, when the disk refused it
        self._mem_seq = 0
        self._counts: Optional[Dict[str, int]] = None  # notifier id -> pending; None: not scanned yet

    def ensure(self) -> None:
        os.makedirs(self.failed_dir, exist_ok=True)
        for d in (self.dir, self.failed_dir):
            try:
                os.chmod(d, 0o700)
            except OSError:
                pass

    def _next_seq(self) -> int:
        with self._lock:
            self._seq = max(time.time_ns(), self._seq + 1)
            return self._seq

    def add(self, notifier_id: str, record: Dict[str, Any]) -> Tuple[str, Optional[str]]:
        """Write one pending message durably (tmp + fsync + rename): (its name, None). When the
        disk refuses (full, read-only) the message is kept in memory: (a `mem-` name, why)."""
        self.counts()                      # scan first, so this file is not counted twice
        name = "%020d-%s.json" % (self._next_seq(), notifier_id)
        path = os.path.join(self.dir, name)
        try:
            try:
                atomic_write_bytes(path, _dump(record), 0o600)
            except FileNotFoundError:      # outbox/ not made yet (one-shot use, or removed by hand)
                self.ensure()
                atomic_write_bytes(path, _dump(record), 0o600)
        except OSError as exc:
            with self._lock:
                self._mem_seq += 1
                name = "mem-%d-%s" % (self._mem_seq, notifier_id)
                self._mem[name] = record
            self._bump(notifier_id, 1)
            return name, "outbox write failed (%s): kept in memory only" % exc.strerror
        self._bump(notifier_id, 1)
        return name, None

    def pending(self) -> Dict[str, List[str]]:
        """{notifier id: [names in publish order]} from the directory (start, restart), then the
        ones kept in memory."""
        out: Dict[str, List[str]] = {}
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            names = []
        for name in names:
            m = _NAME.match(name)
            if m:
                out.setdefault(m.group(2), []).append(name)
                with self._lock:
                    self._seq = max(self._seq, int(m.group(1)))
        with self._lock:
            for name, rec in self._mem.items():
                out.setdefault(str(rec.get("notifier")), []).append(name)
        return out

    def counts(self) -> Dict[str, int]:
        """{notifier id: messages not yet sent nor given up}: scanned once, then kept current."""
        with self._lock:
            if self._counts is not None:
                return dict(self._counts)
        scanned = {nid: len(names) for nid, names in self.pending().items()}
        with self._lock:
            if self._counts is None:
                self._counts = scanned
            return dict(self._counts)

    def _bump(self, notifier_id: str, by: int) -> None:
        with self._lock:
            if self._counts is not None:
                self._counts[notifier_id] = max(0, self._counts.get(notifier_id, 0) + by)

    def read(self, name: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            if name in self._mem:
                return self._mem[name]
        rec = read_json(os.path.join(self.dir, name))
        return rec if isinstance(rec, dict) else None

    def update(self, name: str, record: Dict[str, Any]) -> None:
        with self._lock:
            if name in self._mem:
                self._mem[name] = record
                return
        atomic_write_bytes(os.path.join(self.dir, name), _dump(record), 0o600)

    def remove(self, name: str) -> None:
        """The message was sent (or moved to failed/): it no longer counts as pending."""
        nid = _owner(name)
        with self._lock:
            if self._mem.pop(name, None) is not None:
                gone = True
            else:
                gone = False
        if not gone:
            try:
                os.unlink(os.path.join(self.dir, name))
                gone = True
            except FileNotFoundError:
                pass
        if gone and nid:
            self._bump(nid, -1)

    def fail(self, name: str, record: Dict[str, Any], reason: str) -> None:
        """Move a message we stopped trying to failed/, with why; keep the newest FAILED_KEEP.
        A disk too full to keep the copy still ends the message: the books count it failed."""
        keep = name if _NAME.match(name) else "%020d-%s.json" % (self._next_seq(), _owner(name))
        rec = dict(record, failed_reason=reason, failed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        try:
            os.makedirs(self.failed_dir, exist_ok=True)
            atomic_write_bytes(os.path.join(self.failed_dir, keep), _dump(rec), 0o600)
        except OSError:
            pass
        self.remove(name)
        self._prune()

    def _prune(self) -> None:
        try:
            names = sorted(n for n in os.listdir(self.failed_dir) if _NAME.match(n))
        except OSError:
            return
        for old in names[:-FAILED_KEEP] if len(names) > FAILED_KEEP else []:
            try:
                os.unlink(os.path.join(self.failed_dir, old))
            except OSError:
                pass

    def load_state(self) -> Dict[str, Any]:
        st = read_json(self.state_path, {})
        return st if isinstance(st, dict) else {}

    def save_state(self, state: Dict[str, Any]) -> None:
        atomic_write_bytes(self.state_path, _dump(state), 0o600)
