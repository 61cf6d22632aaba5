"""Bounded memory of rule hits: a log with a million `loss=nan` lines keeps a few of them.

Kept: the first FIRST_PER_CLASS hits of each class, the last KEEP_RECENT hits, and per class
the count and the first/last line numbers.
"""
from __future__ import annotations

import collections
from typing import Any, Deque, Dict, List, Optional, Tuple

FIRST_PER_CLASS = 3
KEEP_RECENT = 50


class HitStore:
    def __init__(self, first_per_class: int = FIRST_PER_CLASS, keep_recent: int = KEEP_RECENT):
        self._n_first = first_per_class
        self._seq = 0
        self._first: Dict[str, List[Tuple[int, Dict[str, Any]]]] = {}
        self._recent: Deque[Tuple[int, Dict[str, Any]]] = collections.deque(maxlen=keep_recent)
        self.classes: Dict[str, Dict[str, Any]] = {}

    def add(self, h: Dict[str, Any]) -> None:
        self._seq += 1
        cls = h["class"]
        c = self.classes.get(cls)
        if c is None:
            c = self.classes[cls] = {"count": 0, "severity": h.get("severity"),
                                     "first_line": h.get("line_no"), "last_line": None}
        c["count"] += 1
        c["last_line"] = h.get("line_no")
        firsts = self._first.setdefault(cls, [])
        if len(firsts) < self._n_first:
            firsts.append((self._seq, h))
        else:
            self._recent.append((self._seq, h))

    @property
    def counts(self) -> Dict[str, int]:
        return dict((k, v["count"]) for k, v in self.classes.items())

    def listing(self, progress_line_no: Optional[int]) -> List[Dict[str, Any]]:
        """Hits in log order, each marked `after_progress` (after the last progress line;
        None when no progress line was seen)."""
        rows = sorted([x for v in self._first.values() for x in v] + list(self._recent),
                      key=lambda x: x[0])
        out = []
        for _, h in rows:
            h = dict(h)
            h["after_progress"] = None if progress_line_no is None else h["line_no"] > progress_line_no
            out.append(h)
        return out
