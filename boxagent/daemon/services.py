"""The daemon's calls into the other parts (health, triage, notify, artifacts, profile), each one
guarded: a bug in a sampler or a notifier is logged and costs its own feature, never the chain.
Signatures are the contracts in docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base import profile as profile_mod
from boxagent.wire.errors import AgentError
from boxagent.base.home import Home
from boxagent.base.roots import Roots


def log_line(text: str) -> None:
    """daemon.log is the daemon's stderr (start redirects it there)."""
    sys.stderr.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), text))
    sys.stderr.flush()


class Services:
    def __init__(self, home: Home, roots: Roots, config: Dict[str, Any], settings: Dict[str, Any]):
        self.home, self.roots, self.config, self.settings = home, roots, config, settings
        self._reported: set = set()     # each broken call is logged once, not every tick
        self.profile = self._call("profile.load", lambda: profile_mod.load(home), {"name": "generic-ssh"})
        self.monitor = self._build_monitor()
        self.hub = self._build_hub()
        self.last_sample: Optional[Dict[str, Any]] = None
        self.emit: Callable[[Dict[str, Any]], Dict[str, Any]] = lambda spec: spec   # set by the daemon
        self.wake: Callable[[], None] = lambda: None    # set by the daemon: ends its loop's wait early

    def _call(self, what: str, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - see the module docstring
            if what not in self._reported:
                self._reported.add(what)
                log_line("error in %s: %s: %s\n%s" % (what, type(exc).__name__, exc, traceback.format_exc()))
            return default

    def _build_monitor(self) -> Any:
        def make() -> Any:
            from boxagent.health import HealthMonitor
            return HealthMonitor(self.roots, self.config, self.profile)
        return self._call("HealthMonitor()", make, None)

    def _build_hub(self) -> Any:
        def make() -> Any:
            from boxagent.notify import NotifyHub
            return NotifyHub(self.home, self.config, self.profile)
        return self._call("NotifyHub()", make, None)

    # -- profile
    def profile_name(self) -> str:
        return self._call("profile.name", lambda: profile_mod.name(self.profile), "generic-ssh")

    def watched_dirs(self) -> List[Tuple[str, str]]:
        return self._call("profile.watched_dirs", lambda: profile_mod.watched_dirs(self.profile), [])

    def env_hints(self) -> Dict[str, str]:
        return self._call("profile.stage_env_hints", lambda: profile_mod.stage_env_hints(self.profile), {}) or {}

    # -- health
    def sample(self, now: float, watched: List[Tuple[str, str]]) -> Optional[Dict[str, Any]]:
        if self.monitor is None:
            return None
        s = self._call("HealthMonitor.sample", lambda: self.monitor.sample(now, watched), None)
        if s is not None:
            self.last_sample = s
        return s

    def alert_events(self, sample: Dict[str, Any], running: List[Tuple[str, str]]) -> List[Dict[str, Any]]:
        if self.monitor is None or sample is None:
            return []
        return self._call("HealthMonitor.alert_events", lambda: self.monitor.alert_events(sample, running), []) or []

    def monitor_value(self, method: str, *args: Any, default: Any = None) -> Any:
        fn = getattr(self.monitor, method, None) if self.monitor is not None else None
        if fn is None:
            return default
        return self._call("HealthMonitor." + method, lambda: fn(*args), default)

    def preflight(self, preflight: Dict[str, Any], now: float, watched: List[Tuple[str, str]]) -> List[Dict[str, Any]]:
        sample = self.sample(now, watched) or {}

        def check() -> Any:
            from boxagent.health import preflight as pf
            return pf.check(preflight, sample, self.monitor)
        return self._call("preflight.check", check, []) or []

    def disks(self) -> List[Dict[str, Any]]:
        return list((self.last_sample or {}).get("disks") or [])

    def gpu_busy(self) -> Optional[bool]:
        gpus = (self.last_sample or {}).get("gpus") or []
        utils = [g.get("util_pct") for g in gpus if isinstance(g, dict) and g.get("util_pct") is not None]
        return (max(utils) >= 10) if utils else None

    # -- triage
    def rules(self, spec: Dict[str, Any]) -> Any:
        def make() -> Any:
            from boxagent.base import profile as profile_view
            from boxagent.triage import build_rules
            # profile.rules() fills defaults and drops malformed entries the daemon must not choke on
            return build_rules(profile_view.rules(self.profile), spec.get("rule") or [])
        return self._call("build_rules", make, [])

    def stage_watch(self, log_path: str, rules: Any, success: Optional[str], fail: Optional[str],
                    progress: Optional[str], started_at: float) -> Any:
        def make() -> Any:
            from boxagent.triage import StageWatch
            return StageWatch(log_path, rules, success, fail, progress, started_at)
        return self._call("StageWatch()", make, None)

    def diagnose(self, facts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        def run() -> Any:
            from boxagent.triage import diagnose
            return diagnose(facts)
        return self._call("diagnose", run, None)

    def success_warnings(self, facts: Dict[str, Any]) -> List[str]:
        def run() -> Any:
            from boxagent.triage import success_warnings
            return success_warnings(facts)
        return [str(w) for w in (self._call("success_warnings", run, []) or [])]

    def fast_spec(self, facts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        def run() -> Any:
            from boxagent.triage import fast_spec
            return fast_spec(facts)
        spec = self._call("fast_spec", run, None)
        return spec if isinstance(spec, dict) else None

    def watch_call(self, watch: Any, method: str, *args: Any, default: Any = None) -> Any:
        fn = getattr(watch, method, None) if watch is not None else None
        if fn is None:
            return default
        return self._call("StageWatch." + method, lambda: fn(*args), default)

    # -- artifacts
    def start_manifest(self, run: str, spec: Dict[str, Any]) -> ManifestJob:
        """Build the run's manifest on a worker thread; the loop polls job.done()."""
        def build() -> Any:
            from boxagent.artifacts import build_manifest
            return build_manifest(self.home, run, spec)
        return ManifestJob(run, build, lambda: self.wake())

    def artifacts_summary(self, run: str) -> Dict[str, Any]:
        def run_it() -> Any:
            from boxagent.artifacts import summary
            return summary(self.home, run)
        return self._call("artifacts.summary", run_it, None) or {"files": 0, "bytes": 0, "manifest": None}

    # -- notify
    def hub_call(self, method: str, *args: Any, default: Any = None) -> Any:
        fn = getattr(self.hub, method, None) if self.hub is not None else None
        if fn is None:
            return default
        return self._call("NotifyHub." + method, lambda: fn(*args), default)


class ManifestJob:
    """One manifest build on its own thread. Hashing a few hundred GB takes minutes at disk speed,
    and the daemon's loop must keep ticking meanwhile (status, heartbeats, requests, SIGTERM).
    hashlib and reads release the GIL, so the loop barely notices the hashing threads.

    The thread is a daemon thread and the daemon exits without waiting for it (daemon.py): the
    run is still `running` in state.json, and the next daemon builds the manifest again."""

    def __init__(self, run: str, build: Callable[[], Any], wake: Callable[[], None]):
        self.run = run
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.manifest: Optional[Dict[str, Any]] = None
        self.error: Optional[str] = None
        self.elapsed_s: Optional[float] = None
        self._build, self._wake = build, wake
        self._done = threading.Event()
        self.thread = threading.Thread(target=self._work, name="rgt-manifest-%s" % run, daemon=True)
        try:
            self.thread.start()
        except RuntimeError as exc:   # no thread to be had (pids.max): build inline, as before
            log_line("run %s: no thread for the manifest (%s); building it inline" % (run, exc))
            self._work()

    def _work(self) -> None:
        try:
            got = self._build()
            self.manifest = got if isinstance(got, dict) else None
        except Exception as exc:  # noqa: BLE001 - a failed manifest costs the manifest, never the run
            self.error = "%s: %s" % (type(exc).__name__, getattr(exc, "message", None) or exc)
            trace = "" if isinstance(exc, AgentError) else "\n" + traceback.format_exc()   # a bug, not a state
            log_line("run %s: building the manifest failed: %s%s" % (self.run, self.error, trace))
        finally:
            self.elapsed_s = round(time.monotonic() - self._t0, 3)
            self._done.set()
            self._wake()

    def done(self) -> bool:
        return self._done.is_set()
