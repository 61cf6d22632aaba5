"""The engine's files under RGT_HOME/runs/<run>/: spec.json, state.json, markers, HANDBOOK.md.
The daemon is their only writer; everything a reader may see mid-write is replaced atomically.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base.fsutil import dumps, read_json
from boxagent.base.storage import Storage
from boxagent.base.home import Home
from boxagent.engine import handbook
from boxagent.engine.records import SCHEMA, Run


def _json(obj: Any) -> bytes:
    return (dumps(obj) + "\n").encode("utf-8")


def read_state(home: Home, name: str) -> Optional[Dict[str, Any]]:
    """A run's state.json as a dict (for readers: the commands), or None."""
    data = read_json(home.run_state(name))
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


class RunStore:
    def __init__(self, home: Home, log: Any, storage: Optional[Storage] = None):
        self.home = home
        self.log = log
        self.storage = storage or Storage(home.root, reserve=False)

    # -- reading
    def names(self) -> List[str]:
        try:
            names = [n for n in os.listdir(self.home.runs) if not n.startswith(".")]
        except OSError:
            return []
        return [n for n in names if os.path.exists(self.home.run_state(n))]

    def load_all(self, names: Optional[List[str]] = None) -> List[Tuple[Run, Dict[str, Any]]]:
        """(run, spec) for every readable run (or those of `names`), oldest queue position first."""
        out = []
        for name in self.names() if names is None else names:
            data = read_json(self.home.run_state(name))
            spec = read_json(self.home.run_spec(name))
            if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                self.log("run %s: state.json missing or unreadable; ignoring the run" % name)
                continue
            if not isinstance(spec, dict):
                self.log("run %s: spec.json missing or unreadable; ignoring the run" % name)
                continue
            out.append((Run.from_dict(data), spec))
        out.sort(key=lambda rs: (rs[0].seq, rs[0].created_at or 0))
        return out

    # -- writing
    def create(self, run: Run, spec: Dict[str, Any], config: Dict[str, Any]) -> None:
        """The run's folders, spec and handbook (its state comes with its first commit). Raises
        on a full disk before anything is queued: the request stays in the inbox for later."""
        self.home.ensure_run(run.name)
        self.storage.replace(self.home.run_spec(run.name), _json(spec), mode=0o600)   # job env may hold tokens
        self._handbook(spec, config)

    def save(self, run: Run) -> None:
        self.storage.replace(self.home.run_state(run.name), _json(run.to_dict()))

    def _handbook(self, spec: Dict[str, Any], config: Dict[str, Any]) -> None:
        self.storage.replace(self.home.handbook(spec["name"]), handbook.render(self.home, spec, config).encode("utf-8"))

    def ensure_handbook(self, spec: Dict[str, Any], config: Dict[str, Any]) -> None:
        """A crash between a run's state and its handbook leaves the handbook missing: rebuild it."""
        if not os.path.exists(self.home.handbook(spec["name"])):
            self._handbook(spec, config)
            self.log("run %s: HANDBOOK.md was missing; rebuilt it" % spec["name"])

    def marker_path(self, run: str, stage: str) -> str:
        return self.home.marker(run, stage)

    def has_marker(self, run: str, stage: str) -> bool:
        return os.path.exists(self.home.marker(run, stage))

    def write_marker(self, run: str, stage: str, record: Dict[str, Any]) -> str:
        path = self.home.marker(run, stage)
        self.storage.replace(path, _json(record))     # before the state that names it: order kept
        return path

    def log_path(self, run: str, stage: str, attempt: int) -> str:
        return self.home.stage_log(run, stage, attempt)

    def archive(self, name: str, now: float) -> Optional[str]:
        """`submit --replace`: the old run moves aside, never deleted."""
        os.makedirs(self.home.archive, exist_ok=True)
        dest = os.path.join(self.home.archive, "%s.%s" % (name, time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))))
        os.replace(self.home.run_dir(name), dest)
        self.log("run %s: replaced; the old run is kept in %s" % (name, dest))
        return dest
