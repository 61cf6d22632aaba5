"""The real StageProcesses: each attempt runs under the agent's own shim (`exec-stage`, shim.py),
in its own session, which records the command's pid and its exit in files. So the daemon may die
and a later one still learns how the stage ended, and never starts an attempt twice.

Everything here is cheap enough for the fast tick: a few stat()s and a waitpid(WNOHANG).
"""
from __future__ import annotations

import os
import subprocess
from typing import Any, Dict, List, Optional

from boxagent.base import procs, safefile
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.storage import is_full
from boxagent.engine import contain, shim
from boxagent.engine.ports import AttemptRef


class ShimProcesses:
    def __init__(self, home: Home, roots: Roots, stderr_path: Optional[str] = None):
        self.home, self.roots = home, roots
        self.stderr_path = stderr_path
        self.popens: Dict[AttemptRef, subprocess.Popen] = {}
        self._pidinfo: Dict[AttemptRef, Dict[str, Any]] = {}
        self._reaping: List[subprocess.Popen] = []
        self._doomed: List[str] = []       # cgroups to remove once their last process is reaped

    # -- starting
    def launch(self, ref: AttemptRef, launch: Dict[str, Any], now: float) -> None:
        try:
            self.home.ensure_run(ref.run)
            atomic_write_json(self.home.stage_launch(*ref), launch, mode=0o600)   # job env may hold tokens
        except OSError as exc:
            if not is_full(exc):
                raise
            return      # nothing claims it: the scheduler launches it again after the grace
        argv = procs.agent_argv(bare=True) + ["exec-stage", "--home", self.home.root, "--run", ref.run,
                                     "--stage", ref.stage, "--attempt", str(ref.attempt)]
        try:
            if launch.get("log"):
                # Made here, not only in the shim: what is not a regular file at the log's path
                # is set aside by the daemon, which raises the alert (the shim only logs).
                os.close(safefile.open_for_write(launch["log"]))
            # The shim's own stderr (a traceback, never the command's output) goes where the
            # daemon's goes: daemon.log when started by `start`.
            err = os.fdopen(safefile.open_for_write(self.stderr_path), "ab") if self.stderr_path else None
            try:
                self.popens[ref] = subprocess.Popen(argv, env=procs.agent_env(), cwd="/", stdin=subprocess.DEVNULL,
                                                    stdout=subprocess.DEVNULL, stderr=err, close_fds=True,
                                                    start_new_session=True)
            finally:
                if err is not None:
                    err.close()
        except OSError as exc:
            # No shim at all (no python? fd limit?): the attempt ends with the reason.
            atomic_write_json(self.home.stage_exit(*ref), {"exit_code": shim.SPAWN_FAILED, "signal": None,
                                                           "ended_at": now,
                                                           "error": "cannot start the stage shim: %s" % exc})

    # -- files the shim writes
    def exit_info(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        path = self.home.stage_exit(*ref)
        if not os.path.exists(path):
            return None
        info = read_json(path)
        return info if isinstance(info, dict) else None

    def claimed_for(self, ref: AttemptRef, now: float) -> Optional[float]:
        try:
            return max(0.0, now - os.stat(self.home.stage_claim(*ref)).st_mtime)
        except OSError:
            return None

    def pidinfo(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        if ref not in self._pidinfo:
            info = read_json(self.home.stage_pid(*ref))
            if not isinstance(info, dict):
                return None
            self._pidinfo[ref] = info
        return self._pidinfo[ref]

    # -- liveness
    def shim_state(self, ref: AttemptRef) -> str:
        popen = self.popens.get(ref)
        if popen is not None:
            rc = popen.poll()                     # reaps our own child
            if rc is None:
                return "alive"
            if rc == shim.EXIT_CLAIMED:
                del self.popens[ref]              # an earlier shim owns the attempt: follow that one
                return "refused"
            if rc in (shim.EXIT_NO_SPACE, shim.EXIT_NO_LAUNCH):
                del self.popens[ref]              # nothing ran (a full disk): launch it again later
                return "unknown"
            return "gone"
        info = self.pidinfo(ref)
        if info is None:
            return "unknown"
        return "alive" if procs.alive(self.roots, info.get("shim_pid"), info.get("shim_start_ticks")) else "gone"

    def command_alive(self, ref: AttemptRef) -> bool:
        return bool(self.members(ref))

    def members(self, ref: AttemptRef) -> List[int]:
        """Every live process of the attempt's command (contain.py), the shim excluded."""
        info = self.pidinfo(ref)
        if not info:
            return []
        shim_pid = info.get("shim_pid")
        return [p for p in contain.members(self.roots, info.get("contain"), info.get("pgid")) if p != shim_pid]

    def identity(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        info = self.pidinfo(ref)
        if not info:
            return None
        held = info.get("contain") or {}
        return {"token": held.get("token"), "cgroup": held.get("cgroup"),
                "shim_pid": info.get("shim_pid"), "shim_start_ticks": info.get("shim_start_ticks")}

    def cpu_seconds(self, ref: AttemptRef) -> Optional[float]:
        """CPU seconds the attempt's live processes have used, None when they are not known."""
        pids = self.members(ref)
        return contain.cpu_seconds(self.roots, pids) if pids else None

    def leftovers(self, ref: AttemptRef) -> List[str]:
        """'pid (command)' of the processes an ended attempt left running."""
        return contain.describe(self.roots, self.members(ref))

    def signal(self, ref: AttemptRef, sig: int) -> None:
        info = self.pidinfo(ref)
        if info and info.get("pgid"):
            contain.signal_all(self.roots, info.get("contain"), info["pgid"], sig)
            return
        popen = self.popens.get(ref)
        if popen is not None and popen.poll() is None:
            # The shim has not recorded the command yet: its session holds it.
            procs.signal_group(popen.pid, sig)

    def release(self, ref: AttemptRef) -> None:
        info = self._pidinfo.pop(ref, None) or {}
        cgroup = (info.get("contain") or {}).get("cgroup")
        if cgroup and os.path.isdir(cgroup):
            self._doomed.append(cgroup)
        popen = self.popens.pop(ref, None)
        if popen is not None and popen.poll() is None:
            self._reaping.append(popen)           # it exits right after its exit file

    def reap(self) -> None:
        if self._reaping:
            self._reaping = [p for p in self._reaping if p.poll() is None]
        if self._doomed:
            # A process killed a moment ago holds its cgroup until it is reaped; a live leftover
            # (a stage that exited 0 and left a server running) holds it for as long as it lives.
            for cgroup in self._doomed:
                contain.remove_cgroup(cgroup)
            self._doomed = [c for c in self._doomed if os.path.isdir(c)]

    # -- processes we did not start
    def pid_alive(self, pid: int, start_ticks: Optional[int]) -> bool:
        return procs.alive(self.roots, pid, start_ticks)

    def start_ticks(self, pid: int) -> Optional[int]:
        return self.roots.process_start_ticks(pid)

    # -- nothing is queued elsewhere: the shim's files and our children say everything
    def refresh(self, now: float) -> bool:
        return False

    def wake_in(self, now: float) -> Optional[float]:
        return None

    def queue_view(self, run: str) -> Dict[str, Dict[str, Any]]:
        return {}

    def run_ended(self, run: str) -> None:
        pass
