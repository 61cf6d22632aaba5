"""StageWatch: follows one stage's log. CONTRACT stub; issue 5 replaces it with the real tailer.

The daemon creates one per running stage attempt and calls poll(now) every tick.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional


class StageWatch:
    def __init__(self, log_path: str, rules: Any = None, success_pattern: Optional[str] = None,
                 fail_pattern: Optional[str] = None, progress_pattern: Optional[str] = None,
                 started_at: Optional[float] = None):
        self.log_path = log_path
        self.offset = 0
        self.success_re = re.compile(success_pattern) if success_pattern else None
        self.fail_re = re.compile(fail_pattern) if fail_pattern else None
        self.success_seen = False
        self.fail_line: Optional[str] = None       # first line that matched fail_pattern
        self.hits: List[Dict[str, Any]] = []        # [{class, severity, retryable, line_no, line}]
        self.progress: Optional[Dict[str, Any]] = None
        self.last_output_at: Optional[float] = None
        self._tail: List[str] = []
        self._partial = b""

    def poll(self, now: float) -> List[Dict[str, Any]]:
        """Read the new bytes; update patterns/progress/hits. Returns event specs (e.g. stalled)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(1 << 20)
        except OSError:
            return []
        if not data:
            return []
        self.offset += len(data)
        self.last_output_at = now
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if self.success_re and self.success_re.search(line):
                self.success_seen = True
            if self.fail_re and self.fail_line is None and self.fail_re.search(line):
                self.fail_line = line
            self._tail = (self._tail + [line])[-50:]
        return []

    def finish(self, now: float) -> None:
        """The stage ended: read what is left, including a last line without a newline."""
        self.poll(now)
        if self._partial:
            self._partial += b"\n"
            tail, self._partial = self._partial, b""
            self.offset -= len(tail) - 1
            self.poll(now)

    def last_lines(self, n: int = 20) -> List[str]:
        return self._tail[-n:]

    def stall_check(self, now: float, stall_after: float, artifacts_mtime: Optional[float],
                    gpu_busy: Optional[bool]) -> List[Dict[str, Any]]:
        """Event specs for `stalled` (or the buffered-stdout hint). Stub: none."""
        return []

    def status_block(self) -> Dict[str, Any]:
        return {"progress": self.progress}
