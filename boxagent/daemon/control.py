"""The daemon's own verbs: start it, stop it, configure it, say its version. None of them writes
state.json: the daemon acts (it is the single writer). The run verbs a command posts to the inbox
(submit, cancel, resume) are in runverbs.py, the reading verbs (logs, handbook) in reading.py.
Modules only some commands need (config, status, subprocess) are imported where used, so
`version` stays cheap to start (commands.py).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, Optional, Tuple

import boxagent
from boxagent.wire import inbox
from boxagent.base import procs, safefile
from boxagent.base.errors import AgentError, UsageError
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots

DAEMON_LOG_ROTATE = 5 * 1024 * 1024
POLL_S = 0.05


def daemon_pid(home: Home, roots: Roots) -> Optional[int]:
    from boxagent.wire import status as status_mod
    return status_mod.daemon_pid(home, roots)


# -- daemon lifetime
def start(home: Home, roots: Roots, timeout: float = 20.0, resume_interrupted: bool = False) -> Tuple[int, bool]:
    """(pid, started_now). Idempotent: a running daemon's pid comes back with started_now False."""
    import subprocess
    home.ensure()
    pid = daemon_pid(home, roots)
    if pid is not None:
        return pid, False
    _rotate(home.daemon_log)
    argv = procs.agent_argv() + ["--home", home.root, "daemon"]
    if resume_interrupted:
        argv.append("--resume-interrupted")
    with os.fdopen(safefile.open_for_write(home.daemon_log), "ab") as log:   # a FIFO there: set aside
        child = subprocess.Popen(argv, env=procs.agent_env(), cwd=home.root, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=log, close_fds=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            other = daemon_pid(home, roots)
            if other is not None:          # another `start` won the race: fine, it runs
                return other, False
            raise AgentError("the daemon exited at once (exit code %s): %s" % (child.returncode, _log_tail(home)),
                             "read %s" % home.daemon_log)
        st = read_json(home.status) or {}
        if (st.get("agent") or {}).get("pid") == child.pid and st["agent"].get("running"):
            return child.pid, True
        time.sleep(POLL_S)
    raise AgentError("the daemon (pid %d) wrote no status.json within %ss" % (child.pid, timeout),
                     "read %s" % home.daemon_log)


def _rotate(path: str) -> None:
    try:
        if os.stat(path).st_size > DAEMON_LOG_ROTATE:
            os.replace(path, path + ".1")
    except OSError:
        pass


def _log_tail(home: Home, n: int = 5) -> str:
    from boxagent.daemon.reading import tail_lines
    return " | ".join(tail_lines(home.daemon_log, n).strip().splitlines()[-n:]) or "(daemon.log is empty)"


def stop(home: Home, roots: Roots, timeout: float = 15.0, kill: bool = False) -> Optional[int]:
    """Stop the daemon, leaving stages running (or, with `kill`, ending every stage and all of
    its processes first). Returns the pid it stopped, None if none ran."""
    pid = daemon_pid(home, roots)
    if pid is None:
        return None
    request = inbox.post(home, "stop", {"kill": bool(kill)})    # the post wakes it
    if not kill:
        try:
            os.kill(pid, signal.SIGINT)   # verified by start ticks above; SIGINT = stop, never preempt
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon_pid(home, roots) is None:
            # The daemon may exit on SIGINT before reading the request; left behind, it would
            # stop the NEXT daemon (`install` = stop + start) on its first tick.
            inbox.done(request)
            return pid
        time.sleep(POLL_S)
    raise AgentError("the daemon (pid %d) did not stop within %ss" % (pid, timeout),
                     "look at %s; `kill -INT %d` stops it and leaves the stages running" % (home.daemon_log, pid))


def configure(home: Home, text: str) -> str:
    try:
        cfg = json.loads(text or "")
    except ValueError as exc:
        raise UsageError("config is not valid JSON: %s" % exc, 'send e.g. {"host": "box1"} on stdin')
    from boxagent.base import config as config_mod
    cfg = config_mod.merge_cost(config_mod.load(home.config), cfg)   # install --price alone keeps the rest
    config_mod.validate(cfg)
    home.ensure()
    atomic_write_json(home.config, cfg, mode=0o600)
    if daemon_pid(home, Roots.from_env()) is not None:
        inbox.post(home, "reload", {})   # a running daemon takes the new intervals now
    return home.config


def version_info() -> Dict[str, Any]:
    return {"version": boxagent.__version__, "build_sha256": procs.build_sha256(),
            "python": "%d.%d.%d" % sys.version_info[:3], "pyz": procs.running_pyz()}


