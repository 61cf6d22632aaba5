"""The daemon: one per RGT_HOME (flock on daemon.lock), the single writer of runs/*/state.json,
status.json and events.jsonl. No socket: requests come through inbox/, results leave as files.

The loop: a fast pass (inbox, the scheduler's tick: stage exits, log polls of new bytes only,
the parts' cheap tick), woken early by SIGCHLD, SIGUSR1 and inotify; a slow pass every
`sample_every` (the parts' sample: health and its alerts, stall checks, heartbeat); status.json
after anything changed. SIGTERM = preemption: stop the stages (TERM, KILL after `stop_grace`),
record `preempted`, flush. `stop` (inbox) or SIGINT = exit, leaving stages running for the next
daemon to re-adopt (this is also the upgrade path).
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
from boxagent.base import profile as profile_view
from boxagent.base import safefile
from boxagent.base.optional import deps
from boxagent.base.fsutil import atomic_write_bytes, atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.storage import is_full, overwrite_in_place
from boxagent.base.units import iso_utc
from boxagent.wire import inbox
from boxagent.daemon.wake import DirWatch, Waker
from boxagent.daemon import verbs
from boxagent.daemon.assemble import Hooks, assemble
from boxagent.engine import contain
from boxagent.engine import states as S
from boxagent.wire import status as status_mod
from boxagent.base.errors import EXIT_ERROR, AgentError

STATUS_SLACK = 8192
FLUSH_TIMEOUT_S = 5.0    # what the parts' stop() may take on the way out (a spot grace is often ~5 s)
MIN_SLEEP_S = 0.02
RESUME_CAUSES = ("machine_restart", "preempted")
WATCHED_WORKDIRS = 16    # workdirs whose disks health samples, beside the state dir


def log_line(text: str) -> None:
    """daemon.log is the daemon's stderr (start redirects it there). A full disk must not turn a
    log line into the daemon's death: the line is lost, the daemon goes on."""
    try:
        sys.stderr.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), text))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


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
        self.started_at = time.time()
        self._config_mtime = self._mtime(home.config)
        self._lock_fd: Optional[int] = None
        self._tick_errors: set = set()
        self._storage_reported = False
        self._set_aside: List[Dict[str, Any]] = []     # alerts of box files set aside, for the next tick

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
        sched = getattr(self, "scheduler", None)    # absent when setup never finished
        busy = [name for name, job in (sched.finalizing.items() if sched is not None else ()) if not job.done()]
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
                                              "started_at": iso_utc(self.started_at)})

    def _setup(self) -> None:
        now = time.time()
        safefile.REPORTERS[:] = [self._file_set_aside]
        self.deps = deps()
        prev_boot = ((read_json(self.home.status) or {}).get("agent") or {}).get("boot_id")
        self.boot_id = self.roots.boot_id()
        made = assemble(self.home, self.roots, self.config, self.settings, self.boot_id, self.waker.wake,
                        Hooks(self._watched, self._running, self._published, lambda: self.last_status), log_line)
        self.profile, self.host, self.storage, self.events = made.profile, made.host, made.storage, made.events
        self.health, self.bus, self.journal, self.box = made.health, made.bus, made.journal, made.box
        self.scheduler = made.scheduler
        self.scheduler.load(now)
        contain.sweep(self.roots)
        self._first_sample = self.bus.sample(now)    # GPUs known before any run is given some
        signal.signal(signal.SIGHUP, signal.SIG_IGN)   # a closed ssh session must not stop us
        self.dirwatch = DirWatch(self.waker.wake, enabled=os.environ.get("RGT_NO_INOTIFY") != "1"
                                 and self.config.get("inotify", True) is not False)
        self.tick_s = self._tick_s()
        self.emit({"type": "daemon_started", "severity": "info", "summary": "rgt agent started (pid %d)" % os.getpid(),
                   "pid": os.getpid(), "tick_s": self.tick_s, "inotify": self.dirwatch.available})
        if prev_boot and self.boot_id and prev_boot != self.boot_id:
            self.machine_restarted = True
            live = [r.name for r in self.scheduler.runs.values() if r.state == S.RUNNING]
            self.emit({"type": "machine_restart", "severity": "critical" if live else "warning",
                       "summary": "the machine restarted (boot_id changed)%s"
                       % (": runs %s were running" % ", ".join(live) if live else ""),
                       "evidence": ["boot_id %s -> %s" % (prev_boot, self.boot_id)], "runs": live})
        self.scheduler.adopt_running(now)
        for spec in self._first_sample:
            self.emit(spec)

    def _tick_s(self) -> float:
        return self.settings["tick"] or (config_mod.INOTIFY_TICK if self.dirwatch.available else config_mod.POLL_TICK)

    def _teardown(self, reason: str) -> None:
        try:
            if not hasattr(self, "scheduler"):
                return                          # setup never finished
            sched = self.scheduler
            notes = ["stages keep running"] if reason == "stop" and sched.active else []
            if sched.finalizing:
                notes.append("the next start builds the manifest of run %s" % ", ".join(sorted(sched.finalizing)))
            self.emit({"type": "daemon_stopped", "severity": "warning" if reason == "preempted" else "info",
                       "summary": "rgt agent stopped (%s)%s" % (reason, "".join("; " + n for n in notes)),
                       "reason": reason})
            self.bus.stop(min(FLUSH_TIMEOUT_S, max(1.0, self.settings["stop_grace"])))
            # After the parts stopped: a message that went out during the stop counts as sent.
            self.write_status(time.time(), running=False)
            self.dirwatch.stop()
            self.waker.close()
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
        next_slow = mono + self.settings["sample_every"]       # setup took the first sample
        self.last_heartbeat = mono
        if self.resume_interrupted:
            self._resume_interrupted(time.time())
        while True:
            now, mono = time.time(), time.monotonic()
            if self.waker.flags.get("preempt"):
                self._end_everything("preempt")
                return "preempted"
            if self.waker.flags.get("kill"):
                self._end_everything("cancel")
                return "stop --kill"
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
            except Exception as exc:  # noqa: BLE001 - a bug costs one tick, never the daemon
                self._tick_failed(exc)
            mono = time.monotonic()
            due = min(self.tick_s, next_slow - mono, self.scheduler.views.next_deadline(time.time(), mono))
            if self.scheduler.views.behind():
                due = 0.0                         # a log to catch up on: the next slice now
            self.waker.wait(max(MIN_SLEEP_S, due))   # a deadline already past must not spin the loop

    def _tick_failed(self, exc: Exception) -> None:
        key = "%s: %s" % (type(exc).__name__, exc)
        if key not in self._tick_errors:
            self._tick_errors.add(key)
            log_line("tick failed (the loop goes on): %s\n%s" % (key, traceback.format_exc()))
        time.sleep(0.2)   # a persistent fault must not spin the CPU

    def _fast(self, now: float, mono: float) -> None:
        self._flush_storage(now)
        while self._set_aside:
            self.emit(self._set_aside.pop(0))
        for path, req in inbox.pending(self.home, aside=log_line):
            try:
                verbs.handle(self, req, now, mono)
            except OSError as exc:
                if is_full(exc):
                    break          # the state dir is full: the request waits in the inbox for space
                log_line("request %s failed: %s" % (os.path.basename(path), exc))
            except Exception as exc:  # noqa: BLE001 - one bad request must not stop the chain
                log_line("request %s failed: %s: %s" % (os.path.basename(path), type(exc).__name__, exc))
            inbox.done(path)
        self.scheduler.tick(now, mono)
        for spec in self.bus.tick(now):
            self.emit(spec)
        if self.dirwatch.available:
            dirs = {self.home.inbox} | {self.home.stage_dir(name) for name in self.scheduler.active}
            self.dirwatch.keep_only(dirs)

    def log(self, text: str) -> None:
        log_line(text)

    def _file_set_aside(self, path: str, what: str, moved: Optional[str]) -> None:
        """A file the agent writes held something else (a FIFO in place of events.jsonl froze the
        daemon once): one line in daemon.log now, and an alert at the next tick. Only a list
        append here: it may come from the middle of an append to events.jsonl itself."""
        where = "moved to %s" % moved if moved else "it could not be moved"
        log_line("set aside %s: %s, not a regular file; %s" % (path, what, where))
        self.dirty = True
        self._set_aside.append({"type": "box_file_set_aside", "severity": "warning",
                                "summary": "%s was %s, not a regular file: the agent set it aside and writes "
                                           "a fresh one" % (os.path.basename(path), what),
                                "evidence": ["%s: %s" % (path, what), where], "path": path, "moved_to": moved,
                                "remediation": "look at what made it (a stray mkfifo or ln -s?); the set-aside "
                                               "copy is kept for you"})

    def reload(self) -> None:
        """config.json (its intervals) and the parts' settings, read again (`configure`, `notify set`)."""
        self._maybe_reload_config()
        self.bus.reload(self.config, self.profile)

    def _slow(self, now: float, mono: float) -> None:
        self._maybe_reload_config()
        for spec in self.bus.sample(now):
            self.emit(spec)
        self.scheduler.views.stall_checks(now, self._default_stall(), self.box.gpu_busy())
        if mono - self.last_heartbeat >= self.settings["heartbeat_every"]:
            self.last_heartbeat = mono
            running = [r.name for r in self.scheduler.runs.values() if r.state == S.RUNNING]
            self.emit({"type": "heartbeat", "severity": "info", "summary": "agent alive; %d run(s) running"
                       % len(running), "runs": running})
        self.dirty = True

    def _default_stall(self) -> Optional[float]:
        value = self.config.get("stall_after")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def _watched(self) -> List[tuple]:
        """The state dir and the workdirs of the runs there are: the live ones first, then the
        most recently ended, at most WATCHED_WORKDIRS. A workdir whose disk filled vanished from
        status the moment its run failed, and its disk_low alert never fired."""
        out = [(self.home.root, "state")]
        runs = sorted(self.scheduler.runs.values(),
                      key=lambda r: (r.state not in S.LIVE, -(r.ended_at or r.created_at or 0.0)))
        for run in runs:
            if len(out) > WATCHED_WORKDIRS:
                break
            if run.workdir and (run.workdir, "workdir") not in out:
                out.append((run.workdir, "workdir"))
        return out

    def _running(self) -> List[tuple]:
        return self.scheduler.views.running_pairs()

    def _maybe_reload_config(self) -> None:
        mtime = self._mtime(self.home.config)
        if mtime != self._config_mtime:
            self._config_mtime = mtime
            self.config.clear()
            self.config.update(config_mod.load(self.home.config))
            self.settings.update(self._settings())
            self.host = self.events.host = config_mod.host_name(self.config)
            self.tick_s = self._tick_s()
            log_line("config.json changed: intervals now %s" % self.settings)

    def _resume_interrupted(self, now: float) -> None:
        for run in list(self.scheduler.runs.values()):
            if run.state == S.INTERRUPTED and (run.cause or {}).get("class") in RESUME_CAUSES:
                self.scheduler.requests.resume(run.name, now)

    def _end_everything(self, reason: str) -> None:
        """SIGTERM (spot preemption, scancel, pod delete: "preempt") or `stop --kill` ("cancel"):
        stop every stage and all of its processes (TERM, then KILL), record, flush."""
        mono = time.monotonic()
        pairs = [p for p in self.scheduler.views.running_pairs()
                 if reason != "preempt" or not self.scheduler.outlives_term(p[0])]
        if reason == "preempt":
            log_line("SIGTERM: stopping %d stage(s) (preemption?)" % len(pairs))
            self.emit({"type": "preempted", "severity": "critical",
                       "summary": "SIGTERM to the agent (preemption?): stopping %d stage(s)" % len(pairs),
                       "evidence": ["SIGTERM received by pid %d" % os.getpid()],
                       "stages": ["%s/%s" % p for p in pairs]})
        else:
            log_line("stop --kill: stopping %d stage(s)" % len(pairs))
        sched = self.scheduler
        sched.frozen = True
        sched.stop_all(reason, mono)
        deadline = mono + self.settings["stop_grace"] + 2.0
        while sched.active and time.monotonic() < deadline:
            now, mono = time.time(), time.monotonic()
            for backend in sched.backends.made():
                backend.procs.refresh(now)   # a scancel'ed Slurm job ends when Slurm says so
            sched.check_running(now, mono)
            if self.dirty:
                self.write_status(now)
            self.waker.wait(0.05)
        sched.end_all(time.time(), reason)
        self._flush_storage(time.time())
        self.write_status(time.time())

    # -- outputs
    def emit(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        return self.journal.emit(spec, time.time())

    def _published(self, event: Dict[str, Any]) -> None:
        self.bus.publish(event)
        self.dirty = True

    def build_status(self, now: float, running: bool = True) -> Dict[str, Any]:
        sched = self.scheduler
        runs, summary = status_mod.recent(sorted(sched.runs.values(), key=lambda r: r.seq), lambda r: r.state,
                                          retired=sched.retired.counts())
        finalizing = {}
        if running:
            # Every stage is done; run_succeeded waits for the manifest (a worker thread hashes).
            finalizing = {name: {"step": "manifest", "since": iso_utc(job.started_at),
                                 "elapsed_s": round(max(0.0, now - job.started_at), 1)}
                          for name, job in sched.finalizing.items()}
        agent = status_mod.agent_block(os.getpid(), running, now, now, self.boot_id, self.machine_restarted,
                                       self.deps)
        agent["storage"] = self.storage.state()
        status = status_mod.compose(now, self.host, profile_view.name(self.profile), agent,
                                    [r.to_dict() for r in runs], self.bus.status_blocks(),
                                    list(self.events.recent)[-status_mod.STATUS_EVENTS:],
                                    live={name: sched.views.live(name) for name in sched.active},
                                    artifacts=sched.artifacts, finalizing=finalizing, summary=summary)
        status_mod.add_verified_pulls(status, self.home)
        return status

    def write_status(self, now: float, running: bool = True) -> None:
        status = self.build_status(now, running)
        self.last_status = status
        self.dirty = False
        # Compact (4x cheaper to encode than indented): machines read it; people run `status`.
        data = (json.dumps(status, separators=(",", ":"), ensure_ascii=False, default=str) + "\n").encode("utf-8")
        # Padded to whole 8 KiB (trailing spaces are JSON whitespace): on a full disk the next
        # status must fit in the blocks this one holds.
        data += b" " * (-len(data) % STATUS_SLACK)
        try:
            atomic_write_bytes(self.home.status, data, durable=False)   # rewritten every sample_every
        except OSError as exc:
            if not is_full(exc):
                raise
            self.storage.became_full(exc)
            self._status_in_place(status)

    def _status_in_place(self, status: Dict[str, Any]) -> None:
        """The state dir is full: keep telling the truth inside the blocks status.json has,
        dropping what matters least until it fits."""
        slim = dict(status, agent=dict(status["agent"], storage=self.storage.state()))
        for drop in ("history", "events", "alerts", "health"):
            slim[drop] = {} if drop == "history" else ([] if drop != "health" else None)
            data = json.dumps(slim, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")
            if overwrite_in_place(self.home.status, data):
                return
        log_line("status.json cannot be rewritten: the state dir is full")

    def _flush_storage(self, now: float) -> None:
        was_full = self.storage.full
        recovered = self.storage.flush(now)
        if self.storage.full and not self._storage_reported:
            self._storage_reported = True
            self.dirty = True
            self.emit({"type": "state_dir_full", "severity": "critical",
                       "summary": "the agent's state dir %s is full: runs go on, state is kept in memory and "
                                  "written when space returns; no new stage starts" % self.home.root,
                       "evidence": [self.storage.error or "no space left"],
                       "remediation": "free space on that disk (df -h; df -i): delete old checkpoints or *.tmp"})
        elif recovered or (was_full and not self.storage.full):
            self._storage_reported = False
            self.dirty = True
            self.emit({"type": "state_dir_ok", "severity": "info",
                       "summary": "the agent's state dir has space again; everything kept in memory is written"})
