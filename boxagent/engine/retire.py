"""Ended runs leave the daemon's memory: it keeps the live runs and the last TAIL ended ones; the
rest stay on disk (runs/<run>/state.json, spec.json) and come back only when a request names
one (a submit under its name, a resume).

With 20,000 ended runs the idle daemon held 210 MB and used 1.7 % of a core, walking every run
on every tick; a box that runs sweeps for months must not pay for its history on every tick.
What is kept of a retired run is a count: runs by state, the highest queue position, and for a
sweep, how many of its runs ended and which failed (bounded), so `group_finished` still speaks
for the whole sweep.
"""
from __future__ import annotations

import heapq
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.engine import states as S
from boxagent.engine.records import SCHEMA, Run

TAIL = 50                 # ended runs kept in memory (status.json shows as many)
SLACK = 50                # retire in batches: not a sort on every tick
MAX_FAILED_NAMED = 8      # failed runs a sweep's tally names (group_finished names 8)


class Retired:
    """What the daemon remembers of the ended runs it let go (counts, not records)."""

    def __init__(self) -> None:
        self.by_state: Dict[str, int] = {}
        self.max_seq = 0
        self.groups: Dict[str, Dict[str, Any]] = {}

    def add(self, run: Run) -> None:
        self.by_state[run.state] = self.by_state.get(run.state, 0) + 1
        self.max_seq = max(self.max_seq, run.seq or 0)
        if run.group:
            g = self.groups.setdefault(run.group, {"ended": 0, "succeeded": 0, "failed": []})
            g["ended"] += 1
            if run.state == S.SUCCEEDED:
                g["succeeded"] += 1
            elif len(g["failed"]) < MAX_FAILED_NAMED:
                g["failed"].append({"run": run.name, "state": run.state, "class": (run.cause or {}).get("class"),
                                    "seq": run.seq})

    def back(self, run: Run) -> None:
        """A retired run is in memory again (resumed, replaced): it no longer counts here."""
        self.by_state[run.state] = max(0, self.by_state.get(run.state, 0) - 1)
        g = self.groups.get(run.group or "")
        if g is not None:
            g["ended"] = max(0, g["ended"] - 1)
            if run.state == S.SUCCEEDED:
                g["succeeded"] = max(0, g["succeeded"] - 1)
            g["failed"] = [f for f in g["failed"] if f["run"] != run.name]

    def counts(self) -> Dict[str, int]:
        return {k: v for k, v in self.by_state.items() if v}


def to_retire(runs: Dict[str, Run], busy: Any, tail: int = TAIL, slack: int = SLACK) -> List[str]:
    """The ended runs to let go now (oldest first), or [] while at most tail + slack are kept."""
    ended = [r for r in runs.values() if r.state not in S.LIVE and r.name not in busy]
    if len(ended) <= tail + slack:
        return []
    ended.sort(key=lambda r: (r.seq or 0, r.created_at or 0))
    return [r.name for r in ended[:len(ended) - tail]]


class _Brief:
    """What retiring needs of a run's state.json, without its stages (a Run's face for add())."""
    __slots__ = ("name", "state", "seq", "created_at", "group", "cause")

    def __init__(self, d: Dict[str, Any]) -> None:
        self.name, self.state, self.group = str(d.get("name")), d.get("state"), d.get("group")
        self.seq, self.created_at = d.get("seq") or 0, d.get("created_at") or 0
        cause = d.get("cause")
        self.cause = {"class": cause.get("class")} if isinstance(cause, dict) else None


def split_on_disk(home: Home, names: Iterable[str], retired: Retired, tail: int = TAIL) -> List[str]:
    """At start: the runs to load whole (the live ones and the last `tail` ended ones); the older
    ended ones go straight to `retired`, their state.json read once and let go. Loading every run
    whole held 210 MB for 20,000 runs; holding even a brief of each until the end left the heap
    fragmented: a heap of the `tail` newest is all that is kept while reading."""
    keep: List[str] = []
    newest: List[Tuple[Tuple[Any, Any], int, _Brief]] = []
    for i, name in enumerate(names):
        data = read_json(home.run_state(name))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("state") in S.LIVE:
            keep.append(name)                  # live, or unreadable (load() says why)
            continue
        brief = _Brief(data)
        heapq.heappush(newest, ((brief.seq, brief.created_at), i, brief))
        if len(newest) > tail:
            retired.add(heapq.heappop(newest)[2])                               # type: ignore[arg-type]
    return keep + [b.name for _key, _i, b in sorted(newest)]


def load_one(home: Home, name: str) -> Optional[Tuple[Run, Dict[str, Any]]]:
    """A retired run's record and spec from its files, or None."""
    if not name or name.startswith(".") or os.sep in name:
        return None
    data, spec = read_json(home.run_state(name)), read_json(home.run_spec(name))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(spec, dict):
        return None
    return Run.from_dict(data), spec
