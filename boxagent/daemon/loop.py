"""The daemon: one per RGT_HOME (flock on daemon.lock), the single writer of runs/*/state.json,
status.json and events.jsonl. No socket: requests come through inbox/, results leave as files.

The loop: a fast tick (inbox, stage exits, log polls: stat()s and reads of new bytes only),
woken early by SIGCHLD and inotify; a slow tick every `sample_every` (health, alerts, stall
checks, heartbeat, status.json). SIGTERM = preemption: stop the stages (TERM, KILL after
`stop_grace`), record `preempted`, flush. `stop` (inbox) or SIGINT = exit, leaving stages running
for the next daemon to re-adopt (this is also the upgrade path).
"""
from __future__ import annotations

import fcntl
import gc
import json
import os
import signal
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

from boxagent.base import config as config_mod
from boxagent.daemon import inbox
from boxagent.engine import state
from boxagent.wire import status as status_mod
from boxagent.engine.chain import Chain
from boxagent.wire.errors import EXIT_ERROR, AgentError
from boxagent.wire.events import EventLog
from boxagent.base.fsutil import atomic_write_bytes, atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.daemon.services import Services, log_line
from boxagent.base.units import iso_utc
from boxagent.daemon.wake import DirWatch, Waker

HUB_TICK_S = 1.0        # NotifyHub.tick cadence (heartbeats, dead-man pings, retries)
FLUSH_TIMEOUT_S = 5.0
MIN_SLEEP_S = 0.02   # what hub.stop() may take on the way out (a spot grace is often ~5 s)
RESUME_CAUSES = ("machine_restart", "preempted")


class Daemon:
    def __init__(self, home: Home, roots: Optional[Roots] = None, resume_interrupted: bool = False):
        self.home = home
        self.roots = roots or Roots.from_env()
        self.resume_interrupted = resume_interrupted
        self.config = config_mod.load(home.config)
        self.settings = self._settings()
        self.dirty = True
        self.machine_restarted = False
        self.last_status: Dict[str, Any] = {}
        self._config_mtime = self._mtime(home.config)
        self._lock_fd: Optional[int] = None
        self._tick_errors: set = set()

    def _settings(self) -> Dict[str, Any]:
        return {name: config_mod.interval(self.config, name) for name in config_mod.INTERVALS}

    @staticmethod
    def _mtime(path: str) -> Optional[float]:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    # -- lifetime
    def run(self) -> int:
        self.home.ensure()
        # Handlers first: a command may SIGUSR1 us as soon as daemon.pid names us, and SIGUSR1's
        # default action would kill the daemon. (Handlers, unlike SIG_IGN, do not reach the stages.)
        self.waker = Waker()
        self.waker.install({signal.SIGTERM: "preempt", signal.SIGINT: "stop", signal.SIGCHLD: "",
                            signal.SIGUSR1: ""})
        self._lock()
        reason = "stop"
        try:
            self._setup()
            reason = self._loop()
        finally:
            self._teardown(reason)
            self._leave_manifest_builds()
        return 0

    def _leave_manifest_builds(self) -> None:
        """Exit now if a manifest still builds. Its hashing threads would keep the interpreter
        alive to the end (minutes for hundreds of GB: past a spot grace, and with daemon.lock
        already free for the next daemon). Nothing is lost: state.json still says `running` with
        every stage done, the next daemon builds the manifest again, and manifest.json is only
        ever replaced whole (tmp -> rename)."""
        chain = getattr(self, "chain", None)
        busy = [name for name, job in (chain.finalizing.items() if chain is not None else ()) if not job.done()]
        if not busy:
            return
        failed = sys.exc_info()[0] is not None
        if failed:
            log_line("daemon failed: %s" % traceback.format_exc())
        log_line("exiting while the manifest of run %s builds; the next daemon builds it again" % ", ".join(busy))
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(EXIT_ERROR if failed else 0)

    def _lock(self) -> None:
        fd = os.open(self.home.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            other = (read_json(self.home.pidfile) or {}).get("pid")
            raise AgentError("another rgt daemon already runs for %s (pid %s)" % (self.home.root, other),
                             "see it with `rgt-agent status`; stop it with `rgt-agent stop`", EXIT_ERROR)
        self._lock_fd = fd
        atomic_write_json(self.home.pidfile, {"pid": os.getpid(), "start_ticks": self.roots.process_start_ticks(os.getpid()),
                                              "started_at": iso_utc(time.time())})

    def _setup(self) -> None:
        self.svc = Services(self.home, self.roots, self.config, self.settings)
        self.host = config_mod.host_name(self.config)
        self.events = EventLog(self.home.events, self.host)
        self.svc.emit = self.emit
        self.svc.wake = self.waker.wake        # a manifest worker thread ends the loop's wait
        self.deps = status_mod.deps()
        prev_boot = ((read_json(self.home.status) or {}).get("agent") or {}).get("boot_id")
        self.chain = Chain(self.home, self.roots, self.svc)
        self.chain.load()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)   # a closed ssh session must not stop us
        self.dirwatch = DirWatch(self.waker.wake, enabled=os.environ.get("RGT_NO_INOTIFY") != "1"
                                 and self.config.get("inotify", True) is not False)
        self.tick_s = self.settings["tick"] or (config_mod.INOTIFY_TICK if self.dirwatch.available
                                                else config_mod.POLL_TICK)
        self.svc.hub_call("start")
        boot = self.chain.boot_id
        self.emit({"type": "daemon_started", "severity": "info", "summary": "rgt agent started (pid %d)" % os.getpid(),
                   "pid": os.getpid(), "tick_s": self.tick_s, "inotify": self.dirwatch.available})
        if prev_boot and boot and prev_boot != boot:
            self.machine_restarted = True
            live = [r["name"] for r in self.chain.runs.values() if r["state"] == state.RUNNING]
            self.emit({"type": "machine_restart", "severity": "critical" if live else "warning",
                       "summary": "the machine restarted (boot_id changed)%s"
                       % (": runs %s were running" % ", ".join(live) if live else ""),
                       "evidence": ["boot_id %s -> %s" % (prev_boot, boot)], "runs": live})

    def _teardown(self, reason: str) -> None:
        try:
            now = time.time()
            self.svc.wake = lambda: None       # the waker's fds close below; a worker may still end
            notes = ["stages keep running"] if reason == "stop" and self.chain.active else []
            if self.chain.finalizing:
                notes.append("the next start builds the manifest of run %s" % ", ".join(sorted(self.chain.finalizing)))
            self.emit({"type": "daemon_stopped", "severity": "warning" if reason == "preempted" else "info",
                       "summary": "rgt agent stopped (%s)%s" % (reason, "".join("; " + n for n in notes)),
                       "reason": reason})
            self.write_status(now, running=False)
            self.svc.hub_call("stop", min(FLUSH_TIMEOUT_S, max(1.0, self.settings["stop_grace"])))
            self.svc.monitor_value("close")
            self.dirwatch.stop()
            self.waker.close()
        except AttributeError:
            pass   # setup never finished
        finally:
            if (read_json(self.home.pidfile) or {}).get("pid") == os.getpid():
                try:
                    os.unlink(self.home.pidfile)
                except OSError:
                    pass
            if self._lock_fd is not None:
                os.close(self._lock_fd)

    # -- the loop
    def _loop(self) -> str:
        # Everything imported and built so far lives as long as the daemon: keep it out of the
        # garbage collector's scans (cheaper collections for the rest of the daemon's life).
        gc.collect()
        gc.freeze()
        mono = time.monotonic()
        next_slow = mono
        last_hub = mono - HUB_TICK_S
        self.last_heartbeat = mono
        if self.resume_interrupted:
            self.chain.tick(time.time(), mono)   # re-adopt first: a reboot turns running stages interrupted
            self._resume_interrupted(time.time())
        while True:
            now, mono = time.time(), time.monotonic()
            if self.waker.flags.get("preempt"):
                self._preempt()
                return "preempted"
            if self.waker.flags.get("stop"):
                return "stop"
            try:
                self._fast(now, mono)
                if mono >= next_slow:
                    self._slow(now, mono)
                    next_slow += self.settings["sample_every"]
                    if next_slow <= mono:
                        next_slow = mono + self.settings["sample_every"]
                if self.dirty:
                    self.write_status(now)
                if mono - last_hub >= HUB_TICK_S:
                    self.svc.hub_call("tick", now, self.last_status)
                    for spec in self.svc.hub_call("drain_events", default=[]) or []:
                        if isinstance(spec, dict):
                            self.emit(spec)      # e.g. notify_failed: a message given up on
                    last_hub = mono
            except Exception as exc:  # noqa: BLE001 - a bug costs one tick, never the daemon
                self._tick_failed(exc)
            mono = time.monotonic()
            due = min(self.tick_s, next_slow - mono, self.chain.next_deadline(time.time(), mono))
            self.waker.wait(max(MIN_SLEEP_S, due))   # a deadline already past must not spin the loop

    def _tick_failed(self, exc: Exception) -> None:
        key = "%s: %s" % (type(exc).__name__, exc)
        if key not in self._tick_errors:
            self._tick_errors.add(key)
            log_line("tick failed (the loop goes on): %s\n%s" % (key, traceback.format_exc()))
        time.sleep(0.2)   # a persistent fault must not spin the CPU

    def _fast(self, now: float, mono: float) -> None:
        for path, req in inbox.pending(self.home):
            try:
                self._handle(req, now, mono)
            except Exception as exc:  # noqa: BLE001 - one bad request must not stop the chain
                log_line("request %s failed: %s: %s" % (os.path.basename(path), type(exc).__name__, exc))
            inbox.done(path)
        self.chain.tick(now, mono)
        if self.dirwatch.available:
            dirs = {self.home.inbox} | {self.home.stage_dir(name) for name in self.chain.active}
            self.dirwatch.keep_only(dirs)

    def _handle(self, req: Dict[str, Any], now: float, mono: float) -> None:
        kind = req.get("kind")
        if kind == "submit":
            self.chain.submit(req, now)
        elif kind == "cancel":
            self.chain.cancel(str(req.get("run")), now, mono)
        elif kind == "resume":
            self.chain.resume(str(req.get("run")), now)
        elif kind == "stop":
            self.waker.flags["stop"] = True
        elif kind in ("reload", "notify-set"):
            self._maybe_reload_config()
            self.svc.hub_call("reload")
        else:
            log_line("ignored a request of unknown kind %r" % (kind,))

    def _slow(self, now: float, mono: float) -> None:
        self._maybe_reload_config()
        sample = self.svc.sample(now, self._watched())
        for spec in self.svc.alert_events(sample, self.chain.running_pairs()):
            if isinstance(spec, dict):
                self.emit(spec)
        self.chain.stages.stall_checks(now, self._default_stall())
        if mono - self.last_heartbeat >= self.settings["heartbeat_every"]:
            self.last_heartbeat = mono
            running = [r["name"] for r in self.chain.runs.values() if r["state"] == state.RUNNING]
            self.emit({"type": "heartbeat", "severity": "info", "summary": "agent alive; %d run(s) running"
                       % len(running), "runs": running})
        self.dirty = True

    def _default_stall(self) -> Optional[float]:
        value = self.config.get("stall_after")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def _watched(self) -> List[tuple]:
        out = [(self.home.root, "state")]
        for run in self.chain.runs.values():
            if run["state"] in state.LIVE and (run.get("workdir"), "workdir") not in out:
                out.append((run.get("workdir"), "workdir"))
        return out + list(self.svc.watched_dirs())

    def _maybe_reload_config(self) -> None:
        mtime = self._mtime(self.home.config)
        if mtime != self._config_mtime:
            self._config_mtime = mtime
            self.config.clear()
            self.config.update(config_mod.load(self.home.config))
            self.settings.update(self._settings())
            self.host = self.events.host = config_mod.host_name(self.config)
            self.tick_s = self.settings["tick"] or (config_mod.INOTIFY_TICK if self.dirwatch.available
                                                    else config_mod.POLL_TICK)
            log_line("config.json changed: intervals now %s" % self.settings)

    def _resume_interrupted(self, now: float) -> None:
        for run in list(self.chain.runs.values()):
            if run["state"] == state.INTERRUPTED and (run.get("cause") or {}).get("class") in RESUME_CAUSES:
                self.chain.resume(run["name"], now)

    def _preempt(self) -> None:
        """SIGTERM (spot preemption, scancel, pod delete): stop every stage, record, flush."""
        mono = time.monotonic()
        pairs = self.chain.running_pairs()
        self.emit({"type": "preempted", "severity": "critical",
                   "summary": "SIGTERM to the agent (preemption?): stopping %d stage(s)" % len(pairs),
                   "evidence": ["SIGTERM received by pid %d" % os.getpid()],
                   "stages": ["%s/%s" % p for p in pairs]})
        self.chain.frozen = True
        self.chain.stages.stop_all("preempt", mono)
        deadline = mono + self.settings["stop_grace"] + 2.0
        while self.chain.active and time.monotonic() < deadline:
            now, mono = time.time(), time.monotonic()
            for act in list(self.chain.active.values()):
                self.chain.stages.check(act, now, mono)
            if self.dirty:
                self.write_status(now)
            self.waker.wait(0.05)
        self.chain.interrupt_all(time.time())
        self.write_status(time.time())

    # -- outputs
    def emit(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        event = self.events.emit(spec, time.time())
        self.svc.hub_call("publish", event)
        self.dirty = True
        return event

    def build_status(self, now: float, running: bool = True) -> Dict[str, Any]:
        runs = sorted(self.chain.runs.values(), key=lambda r: r.get("seq", 0))
        return {
            "schema": status_mod.SCHEMA, "observed_at": iso_utc(now), "host": self.host,
            "profile": self.svc.profile_name(),
            "agent": status_mod.agent_block(os.getpid(), running, now, now, self.chain.boot_id,
                                            self.machine_restarted, self.deps),
            "health": self.svc.last_sample,
            "runs": [self._run_block(r, now, running) for r in runs],
            "alerts": self.svc.monitor_value("active_alerts", default=[]) or [],
            "notifications": self.svc.hub_call("summary", default=None)
            or {"sent": 0, "pending": 0, "failed": 0, "last_error": None},
            "history": self.svc.monitor_value("history", default={}) or {},
            "events": list(self.events.recent)[-status_mod.STATUS_EVENTS:],
        }

    def _run_block(self, run: Dict[str, Any], now: float, running: bool) -> Dict[str, Any]:
        block = status_mod.run_block(run, self.chain.stages.progress(run["name"]),
                                     self.chain.artifacts.get(run["name"]), now)
        job = self.chain.finalizing.get(run["name"])
        if job is not None and running:
            # Every stage is done; run_succeeded waits for the manifest (a worker thread hashes).
            block["finalizing"] = {"step": "manifest", "since": iso_utc(job.started_at),
                                   "elapsed_s": round(max(0.0, now - job.started_at), 1)}
        return block

    def write_status(self, now: float, running: bool = True) -> None:
        status = self.build_status(now, running)
        # Compact (4x cheaper to encode than indented): machines read it; people run `status`.
        data = json.dumps(status, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"
        atomic_write_bytes(self.home.status, data.encode("utf-8"), durable=False)   # rewritten every sample_every
        self.last_status = status
        self.dirty = False
