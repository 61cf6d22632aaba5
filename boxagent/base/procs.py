"""The process seam: how the agent starts itself again, and pid/process-group checks.

A pid alone is never trusted (pids are reused): liveness is pid + the start time in clock ticks
from /proc/PID/stat, and a zombie counts as gone (in containers PID 1 often never reaps).
"""
from __future__ import annotations

import errno
import os
import sys

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Dict, List, Optional

import boxagent
from boxagent.base.fsutil import read_json
from boxagent.base.roots import Roots


def running_pyz() -> Optional[str]:
    """The .pyz file this agent runs from, or None when it runs from a source tree."""
    path = os.path.dirname(os.path.abspath(boxagent.__file__))
    while path and path != os.path.dirname(path):
        if os.path.isfile(path):
            return path
        path = os.path.dirname(path)
    return None


def source_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(boxagent.__file__)))


def agent_argv(bare: bool = False) -> List[str]:
    """argv that runs this same agent (same interpreter, same -S, same .pyz or source tree).
    `bare`: without site-packages whatever we run with: the stage shim needs only the standard
    library, and a conda site with many .pth files costs every stage start tens of ms."""
    argv = [sys.executable]
    if sys.flags.no_site or bare:
        argv.append("-S")
    pyz = running_pyz()
    return argv + ([pyz] if pyz else ["-m", "boxagent"])


def agent_env(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment for a child agent: from source, the package must stay importable."""
    env = dict(os.environ if base is None else base)
    if running_pyz() is None:
        root = source_root()
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in parts:
            env["PYTHONPATH"] = os.pathsep.join([root] + parts)
    return env


_SHA_CACHE: Dict[str, Optional[str]] = {}


def build_sha256() -> Optional[str]:
    """sha256 of the running .pyz (what `install` compares); None from a source tree."""
    pyz = running_pyz()
    if pyz is None:
        return None
    if pyz not in _SHA_CACHE:
        import hashlib
        digest = hashlib.sha256()
        try:
            with open(pyz, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            _SHA_CACHE[pyz] = digest.hexdigest()
        except OSError:
            _SHA_CACHE[pyz] = None
    return _SHA_CACHE[pyz]


def proc_state(roots: Roots, pid: int) -> Optional[str]:
    """The one-letter state from /proc/PID/stat (R, S, Z...), None when there is no such pid."""
    fields = roots.stat(pid)
    return fields[0] if fields else None


def alive(roots: Roots, pid: Optional[int], start_ticks: Optional[int]) -> bool:
    """True when the process `pid` that started at `start_ticks` still runs (zombies are gone)."""
    if not pid:
        return False
    ticks = roots.process_start_ticks(pid)
    if ticks is None or (start_ticks is not None and ticks != start_ticks):
        return False
    return proc_state(roots, pid) not in (None, "Z", "X")


def signal_group(pgid: Optional[int], sig: int) -> bool:
    """killpg that never raises: False when the group is gone (or never existed)."""
    if not pgid or pgid <= 1:
        return False   # never signal init's group or every process we may signal
    try:
        os.killpg(pgid, sig)
        return True
    except OSError as exc:
        return exc.errno == errno.EPERM


def group_members(roots: Roots, pgid: int) -> List[int]:
    """Non-zombie pids whose process group is pgid (a /proc scan: not for the fast tick)."""
    out = []
    for pid in roots.pids():
        rest = roots.stat(pid)
        if rest and len(rest) > 2 and rest[2] == str(pgid) and rest[0] not in ("Z", "X"):
            out.append(pid)
    return out


def daemon_pid(pidfile: str, roots: Roots) -> Optional[int]:
    """The live daemon's pid from daemon.pid, or None. pid + start ticks: a reused pid is not ours."""
    info = read_json(pidfile, None, 1 << 16)     # a FIFO or a deep line there: no daemon, never a hang
    if not isinstance(info, dict):
        return None
    pid = info.get("pid")
    return pid if alive(roots, pid, info.get("start_ticks")) else None


def poke_daemon(pidfile: str, roots: Optional[Roots] = None) -> bool:
    """Wake the daemon now (SIGUSR1: its handler only ends the loop's sleep). Requests and exit
    files are picked up at once without inotify and without a fast polling tick: an idle daemon
    sleeps, which is what keeps it under 0.2 % of a core."""
    pid = daemon_pid(pidfile, roots or Roots.from_env())
    if pid is None:
        return False
    try:
        import signal   # here: its enum import was a tenth of what the box's `status` imported
        os.kill(pid, signal.SIGUSR1)
        return True
    except OSError:
        return False
