"""outbox/: one file per pending message per notifier; the durable half of delivery.

A file is `<seq>-<notifier id>.json` where seq grows across restarts (time_ns based), so a
sorted listing is publish order and each notifier's files form its FIFO. A file holds the
notifier's id and the event, never the URL or a token (those live only in secrets.json).
Delivered files are unlinked; given-up ones move to outbox/failed/ with the reason (the last
FAILED_KEEP are kept). `.state.json` keeps counters, recently routed event ids and the
coalescing table across restarts.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Any, Dict, List, Optional

from boxagent.base.fsutil import atomic_write_bytes, read_json

FAILED_KEEP = 200
_NAME = re.compile(r"^(\d{19,20})-([A-Za-z0-9_-]{1,40})\.json$")


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


class Outbox:
    def __init__(self, path: str):
        self.dir = path
        self.failed_dir = os.path.join(path, "failed")
        self.state_path = os.path.join(path, ".state.json")
        self._seq = 0
        self._lock = threading.Lock()

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

    def add(self, notifier_id: str, record: Dict[str, Any]) -> str:
        """Write one pending message durably (tmp + fsync + rename); return its name."""
        name = "%020d-%s.json" % (self._next_seq(), notifier_id)
        path = os.path.join(self.dir, name)
        try:
            atomic_write_bytes(path, _dump(record), 0o600)
        except FileNotFoundError:          # outbox/ not made yet (one-shot use, or removed by hand)
            self.ensure()
            atomic_write_bytes(path, _dump(record), 0o600)
        return name

    def pending(self) -> Dict[str, List[str]]:
        """{notifier id: [names in publish order]} from the directory (start, restart)."""
        out: Dict[str, List[str]] = {}
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            return out
        for name in names:
            m = _NAME.match(name)
            if m:
                out.setdefault(m.group(2), []).append(name)
                self._seq = max(self._seq, int(m.group(1)))
        return out

    def read(self, name: str) -> Optional[Dict[str, Any]]:
        rec = read_json(os.path.join(self.dir, name))
        return rec if isinstance(rec, dict) else None

    def update(self, name: str, record: Dict[str, Any]) -> None:
        if name.startswith("mem-"):
            return
        atomic_write_bytes(os.path.join(self.dir, name), _dump(record), 0o600)

    def remove(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.dir, name))
        except FileNotFoundError:
            pass

    def fail(self, name: str, record: Dict[str, Any], reason: str) -> None:
        """Move a message we stopped trying to failed/, with why; keep the newest FAILED_KEEP."""
        rec = dict(record, failed_reason=reason, failed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        os.makedirs(self.failed_dir, exist_ok=True)
        atomic_write_bytes(os.path.join(self.failed_dir, name), _dump(rec), 0o600)
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
