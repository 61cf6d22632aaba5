"""Starting, watching and stopping one stage attempt (the daemon's side of the shim).

`Active` is the daemon's handle on a running attempt, whether the daemon launched it (it has the
Popen, so SIGCHLD wakes the loop) or re-adopted it after a restart (pid + start ticks only).
Everything here is cheap enough for the fast tick: a few stat()s and a waitpid(WNOHANG).
"""
from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from typing import Any, Dict, List, Optional

from boxagent.base import procs
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def stage_env(spec: Dict[str, Any], stage: Dict[str, Any], run: str, attempt: int,
              quota_cores: Optional[float], hints: Dict[str, str], home: Home) -> Dict[str, str]:
    """The env overlay for a stage: profile hints < job env < stage env; then what rgt always sets."""
    env: Dict[str, str] = {}
    env.update({k: str(v) for k, v in (hints or {}).items() if k not in os.environ})
    env.update(spec.get("env") or {})
    env.update(stage.get("env") or {})
    # Buffered stdout makes a live job look silent (and stalled) for minutes.
    env["PYTHONUNBUFFERED"] = "1"
    if quota_cores:
        # Thread pools sized to the host's cores under a small cgroup quota thrash (GPU idles).
        cap = str(max(1, int(math.floor(quota_cores))))
        for var in THREAD_VARS:
            if var not in env:
                env[var] = cap
    env.update({"RGT_HOME": home.root, "RGT_RUN": run, "RGT_STAGE": stage["name"], "RGT_ATTEMPT": str(attempt)})
    return env


def launch(home: Home, run: str, stage: Dict[str, Any], attempt: int, workdir: str,
           env_overlay: Dict[str, str], stderr_path: Optional[str] = None) -> subprocess.Popen:
    """Write the launch file, then start the shim in its own session."""
    home.ensure_run(run)
    log = home.stage_log(run, stage["name"], attempt)
    atomic_write_json(home.stage_launch(run, stage["name"], attempt),
                      {"command": stage["run"], "workdir": workdir, "env": env_overlay, "log": log},
                      mode=0o600)   # job env may hold tokens
    argv = procs.agent_argv() + ["exec-stage", "--home", home.root, "--run", run,
                                 "--stage", stage["name"], "--attempt", str(attempt)]
    # The shim's own stderr (a traceback, never the command's output) goes where the daemon's goes:
    # daemon.log when started by `start`.
    err = open(stderr_path, "ab") if stderr_path else None
    try:
        return subprocess.Popen(argv, env=procs.agent_env(), cwd="/", stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, close_fds=True,
                                start_new_session=True)
    finally:
        if stderr_path:
            err.close()   # type: ignore[union-attr]


class Active:
    """A running attempt: launched by this daemon (popen) or re-adopted (pid info only)."""

    def __init__(self, home: Home, roots: Roots, run: str, stage: str, attempt: int, kind: str,
                 popen: Optional[subprocess.Popen] = None):
        self.home, self.roots = home, roots
        self.run, self.stage, self.attempt, self.kind = run, stage, attempt, kind
        self.popen = popen
        self.pidinfo: Optional[Dict[str, Any]] = None
        self.watch: Any = None
        self.stop_reason: Optional[str] = None     # cancel | timeout | preempt
        self.kill_at: Optional[float] = None       # monotonic deadline to escalate TERM -> KILL
        self.killed = False
        self.shim_gone_at: Optional[float] = None
        self.wait_pid_ticks: Optional[int] = None  # wait.pid: the waited process's start ticks

    # -- files written by the shim
    def load_pidinfo(self) -> Optional[Dict[str, Any]]:
        if self.pidinfo is None:
            info = read_json(self.home.stage_pid(self.run, self.stage, self.attempt))
            if isinstance(info, dict):
                self.pidinfo = info
        return self.pidinfo

    def exit_info(self) -> Optional[Dict[str, Any]]:
        path = self.home.stage_exit(self.run, self.stage, self.attempt)
        if not os.path.exists(path):
            return None
        info = read_json(path)
        return info if isinstance(info, dict) else None

    def claimed(self) -> bool:
        return os.path.exists(self.home.stage_claim(self.run, self.stage, self.attempt))

    # -- liveness
    def shim_alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None       # reaps our own child
        info = self.load_pidinfo()
        if info is None:
            return False
        return procs.alive(self.roots, info.get("shim_pid"), info.get("shim_start_ticks"))

    def command_alive(self) -> bool:
        info = self.load_pidinfo()
        return bool(info and info.get("pgid") and procs.group_alive(info["pgid"], self.roots))

    # -- stopping
    def terminate(self, reason: str, grace: float, now_mono: float) -> None:
        """TERM the command's process group now; the tick sends KILL after `grace`."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self.kill_at = now_mono + grace
        self._signal(signal.SIGTERM)

    def kill_leftovers(self) -> None:
        """After a stop (cancel/timeout/preempt) nothing of the command's group may survive it:
        a background child that ignored TERM would hold the GPU for ever."""
        if self.stop_reason and self.kind == "run":
            info = self.load_pidinfo()
            if info and info.get("pgid"):
                procs.signal_group(info["pgid"], signal.SIGKILL)

    def escalate(self, now_mono: float) -> None:
        if self.kill_at is not None and now_mono >= self.kill_at and not self.killed:
            self.killed = True
            self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        info = self.load_pidinfo()
        if info and info.get("pgid"):
            procs.signal_group(info["pgid"], sig)
        elif self.popen is not None and self.popen.poll() is None:
            # The shim has not recorded the command yet: stop the shim's session instead.
            procs.signal_group(self.popen.pid, sig)


def read_exit_file(home: Home, run: str, stage: str, attempt: int) -> Optional[Dict[str, Any]]:
    info = read_json(home.stage_exit(run, stage, attempt))
    return info if isinstance(info, dict) else None


def expect_missing(workdir: str, expect: List[str]) -> List[str]:
    """The `expect` paths that do not exist or are empty (a file of 0 bytes, an empty directory)."""
    missing = []
    for rel in expect:
        path = rel if os.path.isabs(rel) else os.path.join(workdir, rel)
        try:
            if os.path.isdir(path):
                ok = bool(os.listdir(path))
            else:
                ok = os.stat(path).st_size > 0
        except OSError:
            ok = False
        if not ok:
            missing.append(rel)
    return missing


def newest_mtime(workdir: str, paths: List[str]) -> Optional[float]:
    best = None
    for rel in paths:
        try:
            m = os.stat(rel if os.path.isabs(rel) else os.path.join(workdir, rel)).st_mtime
        except OSError:
            continue
        best = m if best is None else max(best, m)
    return best


def wall() -> float:
    return time.time()
