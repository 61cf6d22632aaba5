"""`exec-stage`: the stage shim. The daemon starts it in a new session; it runs the command and
writes the exit file, so the daemon may die (kill -9, upgrade) and a later one still learns how
the stage ended.

Order of the files in runs/<run>/stages/ for attempt K of stage S:
  S.K.launch.json  (daemon)  command, workdir, env overlay: env values never reach argv
  S.K.claim        (shim)    created O_EXCL first: a second shim for the same attempt exits at once,
                             so an attempt never runs twice whatever the daemon did before it died
  S.K.pid          (shim)    shim + command pid, their start ticks, the pgid, boot_id, containment
  S.K.exit         (shim)    {exit_code, signal, ended_at} when the command ended
The command gets its own process group (pgid = its pid), apart from the shim's, and is contained
(contain.py: a cgroup of its own where possible, an inherited token always): the daemon signals
all of it (TERM, then KILL) and the shim survives to record the signal.

The pid and exit records are written into files made before the command starts (`.slot`): a
stage that dies of a full disk on the state dir's own filesystem still leaves its exit status.
On a disk already full at the start, nothing runs: the shim says so (EXIT_NO_SPACE) and the
daemon launches the attempt again when space returns.

On a Slurm node (the launch record says `slurm`) the shim is the batch job itself, and Slurm
starts the next stage's job on `afterok`: an exit status of 0 whatever the command did ran the
next stage after a failed one. There the shim judges the stage as the daemon does (exit 0, every
`expect` path non-empty, `success_pattern` seen, `fail_pattern` not), writes the marker on
success BEFORE it exits, and exits non-zero otherwise. It makes no cgroup of its own (Slurm
contains the job) and never signals daemon.pid: that pid names a process on the submit host.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from typing import Any, Dict, Optional

from boxagent.base import names, procs, safefile
from boxagent.base.fsutil import atomic_write_json, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.storage import is_full
from boxagent.base.units import iso_utc
from boxagent.engine import contain

EXIT_CLAIMED = 75     # another shim owns this attempt: do nothing
EXIT_NO_LAUNCH = 76   # the launch file is missing or unreadable
EXIT_NO_SPACE = 77    # no room for the attempt's own records: nothing ran
SLOT_BYTES = 4096
SPAWN_FAILED = 127    # the exit_code recorded when the command could not start at all
EXIT_UNMET = 79       # Slurm: the command exited 0 but an `expect`/pattern condition failed


def _claim(path: str) -> bool:
    try:
        fd = safefile.open_for_write(path, os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another shim's claim is a regular file. A FIFO or a directory planted at the path
        # would have made every attempt "claimed" and none run: it is set aside and claimed.
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
        except FileNotFoundError:
            regular = False
        if regular:
            return False
        safefile.move_aside(path)
        try:
            fd = safefile.open_for_write(path, os.O_CREAT | os.O_EXCL, 0o600)
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
    claim = home.stage_claim(run, stage, attempt)
    pid_path, exit_path = home.stage_pid(run, stage, attempt), home.stage_exit(run, stage, attempt)
    try:
        if not _claim(claim):
            return EXIT_CLAIMED
        slots = [_make_slot(pid_path), _make_slot(exit_path)]
    except OSError as exc:
        if not is_full(exc):
            raise
        for path in (claim, pid_path + ".slot", exit_path + ".slot"):
            _unlink(path)               # the relaunch claims afresh
        return EXIT_NO_SPACE
    roots = Roots.from_env()
    on_slurm = bool(launch.get("slurm"))
    elsewhere = on_slurm or bool(launch.get("ray"))
    token = contain.new_token()
    cgroup = None if elsewhere else contain.make_cgroup(roots)
    forwarder = _Forwarder()        # before the spawn: a TERM in the launch window is not lost
    child = _spawn(launch, token, cgroup)
    held: Dict[str, Any] = {"token": token, "cgroup": cgroup}
    if launch.get("ray"):
        # Where Ray placed it, as this process sees it: the node's name and the GPUs Ray gave it.
        held["ray"] = {"host": os.uname()[1], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if not isinstance(child, subprocess.Popen):
        _fill(slots[0], pid_path, _pid_record(roots, None, held))
        record = {"exit_code": SPAWN_FAILED, "signal": None, "ended_at": time.time(), "error": child}
    else:
        forwarder.attach(child.pid)
        started = time.time()
        _fill(slots[0], pid_path, _pid_record(roots, child.pid, held))
        rc = child.wait()
        record = {"exit_code": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None,
                  "ended_at": time.time(), "pid": child.pid}
        record["ran_s"] = round(record["ended_at"] - started, 3)
    if on_slurm:
        verdict = slurm_verdict(launch, record)    # the marker first: the next job may start at once
        _fill(slots[1], exit_path, record)
        return verdict
    _fill(slots[1], exit_path, record)
    if elsewhere:
        return 0        # daemon.pid names a process on the submit host, not on this node
    contain.remove_cgroup(cgroup)   # kept while a leftover process lives in it
    # A daemon that re-adopted this stage is not our parent (no SIGCHLD): wake it.
    procs.poke_daemon(home.pidfile, roots)
    return 0


def slurm_verdict(launch: Dict[str, Any], record: Dict[str, Any]) -> int:
    """The batch job's exit status: 0 only when the stage succeeded (then its marker is written
    first); the command's own code, 128 + its signal, or EXIT_UNMET otherwise."""
    from boxagent.engine.facts import expect_missing, scan_log
    if record.get("signal"):
        return min(255, 128 + int(record["signal"]))
    code = record.get("exit_code")
    if code != 0:
        return int(code) if isinstance(code, int) and 0 < code < 256 else 1
    missing = expect_missing(launch.get("workdir") or "/", launch.get("expect") or [])
    seen, fail = scan_log(launch["log"], launch.get("success_pattern"), launch.get("fail_pattern"))
    if missing or fail or (launch.get("success_pattern") and not seen):
        return EXIT_UNMET
    marker = launch.get("marker") or {}
    if marker.get("path"):
        body = dict(marker.get("record") or {}, exit_code=0, duration_s=record.get("ran_s"),
                    succeeded_at=iso_utc(record["ended_at"]))
        atomic_write_json(marker["path"], body)
    return 0


def _which(name: str) -> Optional[str]:
    """shutil.which without shutil's imports (the shim starts once per stage attempt)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _make_slot(final: str) -> int:
    """A file of SLOT_BYTES real blocks, open, for a record written later without new space."""
    fd = safefile.open_for_write(final + ".slot", os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, b" " * SLOT_BYTES)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        raise
    return fd


def _fill(fd: int, final: str, record: Dict[str, Any]) -> None:
    """The record over the slot's spaces (trailing spaces are valid JSON), then into place."""
    data = json.dumps(record).encode("utf-8")[:SLOT_BYTES]
    os.pwrite(fd, data, 0)
    os.fsync(fd)
    os.close(fd)
    safefile.clear_for_replace(final)    # a directory there would fail the rename for good
    os.replace(final + ".slot", final)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _spawn(launch: Dict[str, Any], token: str, cgroup: Optional[str]) -> Any:
    """The command as `bash -c`, output appended to the stage log; an error string if it cannot start."""
    env = dict(os.environ)
    for key, value in (launch.get("env") or {}).items():
        env[str(key)] = str(value)
    for key in launch.get("unset") or ():
        env.pop(key, None)
    env[contain.TOKEN_VAR] = token

    def in_child() -> None:
        os.setpgrp()
        contain.enroll(cgroup)
    log_path = launch["log"]
    shell = _which("bash") or "/bin/sh"
    try:
        # Not open(..., "ab"): a FIFO at the log's path would block the stage's start for good.
        log = os.fdopen(safefile.open_for_write(log_path), "ab")
    except OSError as exc:
        return "cannot open the stage log %s: %s" % (log_path, exc)
    try:
        return subprocess.Popen([shell, "-c", launch["command"]], cwd=launch.get("workdir") or None,
                                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                close_fds=True, preexec_fn=in_child)
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


def _pid_record(roots: Roots, child: Optional[int], held: Dict[str, Any]) -> Dict[str, Any]:
    me = os.getpid()
    where = {"ray": held["ray"]} if "ray" in held else {}
    return {**where, "shim_pid": me, "shim_start_ticks": roots.process_start_ticks(me), "pid": child, "pgid": child,
            "start_ticks": roots.process_start_ticks(child) if child else None, "boot_id": roots.boot_id(),
            "started_at": time.time(), "contain": {k: held[k] for k in ("token", "cgroup")}}


def main(argv: Optional[list] = None) -> int:
    """Fast path used by cli.main: `--home H --run R --stage S --attempt K`, as the daemon writes
    it. No argparse: its imports cost every stage start ~9 ms (the shim is internal; a malformed
    line is a bug, answered with the usage)."""
    args = list(sys.argv[1:] if argv is None else argv)
    opts = dict(zip(args[0::2], args[1::2])) if len(args) % 2 == 0 else {}
    try:
        if not (names.valid("run", opts["--run"]) and names.valid("stage", opts["--stage"])):
            raise ValueError("a run or stage name that is not one")
        return run_shim(Home.from_env(opts.get("--home")), opts["--run"], opts["--stage"], int(opts["--attempt"]))
    except (KeyError, ValueError):
        sys.stderr.write("usage: rgt-agent exec-stage [--home H] --run R --stage S --attempt K (internal)\n")
        return 2
