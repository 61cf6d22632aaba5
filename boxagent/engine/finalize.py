"""A run's last step: its manifest, built on a worker thread while the loop keeps ticking.

Hashing a few hundred GB takes minutes at disk speed, and the daemon must go on meanwhile
(status, heartbeats, requests, SIGTERM); hashlib and reads release the GIL, so the loop barely
notices the hashing threads. The thread is a daemon thread and the daemon exits without waiting
for it: the run is still `running` in state.json and the next daemon builds the manifest again
(incrementally).
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import Any, Callable, Dict, Optional

from boxagent.artifacts import build_manifest, summary
from boxagent.artifacts.where import files_on_node
from boxagent.base.home import Home
from boxagent.base.errors import AgentError

NODE_MANIFEST = {"declared": True, "on_node": True, "files": [], "symlinks": [], "skipped": [], "hashed": 0,
                 "warnings": ["the run's files are on its Ray node: the manifest is built there, at pull"],
                 "totals": {"files": 0, "bytes": 0, "symlinks": 0, "skipped": 0}}


class ManifestJob:
    def __init__(self, run: str, build: Callable[[], Any], wake: Callable[[], None], log: Callable[[str], None]):
        self.run = run
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.manifest: Optional[Dict[str, Any]] = None
        self.error: Optional[str] = None
        self.elapsed_s: Optional[float] = None
        self._build, self._wake, self._log = build, wake, log
        self._done = threading.Event()
        self.thread = threading.Thread(target=self._work, name="rgt-manifest-%s" % run, daemon=True)
        try:
            self.thread.start()
        except RuntimeError as exc:   # no thread to be had (pids.max): build inline
            log("run %s: no thread for the manifest (%s); building it inline" % (run, exc))
            self._work()

    def _work(self) -> None:
        try:
            got = self._build()
            self.manifest = got if isinstance(got, dict) else None
        except Exception as exc:  # noqa: BLE001 - a failed manifest costs the manifest, never the run
            self.error = "%s: %s" % (type(exc).__name__, getattr(exc, "message", None) or exc)
            trace = "" if isinstance(exc, AgentError) else "\n" + traceback.format_exc()   # a bug, not a state
            self._log("run %s: building the manifest failed: %s%s" % (self.run, self.error, trace))
        finally:
            self.elapsed_s = round(time.monotonic() - self._t0, 3)
            self._done.set()
            self._wake()

    def done(self) -> bool:
        return self._done.is_set()


class Finisher:
    """The artifacts side of a run, as the scheduler uses it."""

    def __init__(self, home: Home, wake: Callable[[], None], log: Callable[[str], None]):
        self.home, self.wake, self.log = home, wake, log

    def start(self, run: str, spec: Dict[str, Any]) -> ManifestJob:
        if files_on_node(spec):
            # The files are on the node's own disk: this box would hash another disk at that path.
            # The node's agent builds the manifest when `rgt-client pull` asks it there.
            return ManifestJob(run, lambda: dict(NODE_MANIFEST), lambda: self.wake(), self.log)
        return ManifestJob(run, lambda: build_manifest(self.home, run, spec), lambda: self.wake(), self.log)

    def summary(self, run: str) -> Dict[str, Any]:
        return summary(self.home, run)
