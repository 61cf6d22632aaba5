"""`exec-stage`: the stage shim. The daemon starts it in a new session; it runs the command and
writes the exit file, so the daemon may die (kill -9, upgrade) and a later one still learns how
the stage ended.

Order of the files in runs/<run>/stages/ for attempt K of stage S:
  S.K.launch.json  (daemon)  command, workdir, env overlay: env values never reach argv
  S.K.claim        (shim)    created O_EXCL first: a second shim for the same attempt exits at once,
                             so an attempt never runs twice whatever the daemon did before it died
  S.K.pid          (shim)    shim + command pid, their start ticks, the pgid, boot_id
  S.K.exit         (shim)    {exit_code, signal, ended_at} when the command ended
The command gets its own process group (pgid = its pid), apart from the shim's: the daemon
signals that group (TERM, then KILL) and the shim survives to record the signal.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, Optional

from boxagent.base import procs
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots

EXIT_CLAIMED = 75     # another shim owns this attempt: do nothing
EXIT_NO_LAUNCH = 76   # the launch file is missing or unreadable
SPAWN_FAILED = 127    # the exit_code recorded when the command could not start at all


def register(sub) -> None:
    p = sub.add_parser("exec-stage", help="(internal) the stage shim the daemon starts")
    p.add_argument("--run", required=True)
    p.add_argument("--stage", required=True)
    p.add_argument("--attempt", required=True, type=int)
    p.set_defaults(func=lambda args: run_shim(Home.from_env(args.home), args.run, args.stage, args.attempt))


def _claim(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.fsync(fd)
    os.close(fd)
    return True


def run_shim(home: Home, run: str, stage: str, attempt: int) -> int:
    # Hang-ups (a closed terminal, a dropped ssh) must not end the stage: SIG_IGN is inherited
    # by the command, like nohup. TERM/INT are forwarded to the command's group instead.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    launch = read_json(home.stage_launch(run, stage, attempt))
    if not isinstance(launch, dict) or not launch.get("command"):
        return EXIT_NO_LAUNCH
    if not _claim(home.stage_claim(run, stage, attempt)):
        return EXIT_CLAIMED
    roots = Roots.from_env()
    forwarder = _Forwarder()        # before the spawn: a TERM in the launch window is not lost
    child = _spawn(launch)
    exit_path = home.stage_exit(run, stage, attempt)
    if not isinstance(child, subprocess.Popen):
        _write_pid(home.stage_pid(run, stage, attempt), roots, None)
        atomic_write_json(exit_path, {"exit_code": SPAWN_FAILED, "signal": None, "ended_at": time.time(),
                                      "error": child})
        procs.poke_daemon(home.pidfile, roots)
        return 0
    forwarder.attach(child.pid)
    _write_pid(home.stage_pid(run, stage, attempt), roots, child.pid)
    rc = child.wait()
    atomic_write_json(exit_path, {"exit_code": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None,
                                  "ended_at": time.time(), "pid": child.pid})
    # A daemon that re-adopted this stage is not our parent (no SIGCHLD): wake it.
    procs.poke_daemon(home.pidfile, roots)
    return 0


def _spawn(launch: Dict[str, Any]) -> Any:
    """The command as `bash -c`, output appended to the stage log; an error string if it cannot start."""
    env = dict(os.environ)
    for key, value in (launch.get("env") or {}).items():
        env[str(key)] = str(value)
    for key in launch.get("unset") or ():
        env.pop(key, None)
    log_path = launch["log"]
    shell = shutil.which("bash") or "/bin/sh"
    try:
        log = open(log_path, "ab")
    except OSError as exc:
        return "cannot open the stage log %s: %s" % (log_path, exc)
    try:
        return subprocess.Popen([shell, "-c", launch["command"]], cwd=launch.get("workdir") or None,
                                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                close_fds=True, preexec_fn=os.setpgrp)
    except OSError as exc:
        msg = "rgt: cannot start the stage: %s (workdir %s)\n" % (exc, launch.get("workdir"))
        log.write(msg.encode("utf-8", "replace"))
        return msg.strip()
    finally:
        log.close()


class _Forwarder:
    """TERM/INT to the shim go to the command's process group. A signal that arrives while the
    command is being spawned is kept and passed on as soon as the command exists."""

    def __init__(self) -> None:
        self.pgid: Optional[int] = None
        self.early: Optional[int] = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.handle)

    def handle(self, signum: int, _frame: Any) -> None:
        if self.pgid:
            _kill_group(self.pgid, signum)
        else:
            self.early = signum

    def attach(self, pgid: int) -> None:
        self.pgid = pgid
        if self.early:
            _kill_group(pgid, self.early)


def _kill_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except OSError:
        pass


def _write_pid(path: str, roots: Roots, child: Optional[int]) -> None:
    me = os.getpid()
    atomic_write_json(path, {"shim_pid": me, "shim_start_ticks": roots.process_start_ticks(me),
                             "pid": child, "pgid": child,
                             "start_ticks": roots.process_start_ticks(child) if child else None,
                             "boot_id": roots.boot_id(), "started_at": time.time()})


def main(argv: Optional[list] = None) -> int:
    """Fast path used by cli.main: the shim needs none of the other commands' imports."""
    import argparse
    p = argparse.ArgumentParser(prog="rgt-agent exec-stage")
    p.add_argument("--home")
    p.add_argument("--run", required=True)
    p.add_argument("--stage", required=True)
    p.add_argument("--attempt", required=True, type=int)
    args = p.parse_args(argv if argv is not None else sys.argv[1:])
    return run_shim(Home.from_env(args.home), args.run, args.stage, args.attempt)
