"""rgt-client as a real process, for tests that need what a user's machine sees: its peak
memory (measured through a small launcher) and, on a real pseudo-terminal, every byte a
terminal would receive. Re-exported by tests/hostile.py, next to the hostile agent."""
from __future__ import annotations

import errno
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

OUT_CAP = 4 << 20


@dataclass
class ClientRun:
    rc: int
    out: bytes                 # stdout (first OUT_CAP bytes); on a pty: all the terminal received
    err: bytes                 # stderr (first OUT_CAP bytes); empty on a pty when merged there
    out_bytes: int             # how much stdout really came (a flood is counted, not kept)
    maxrss_bytes: int          # the client process's peak resident memory
    elapsed_s: float
    argv: List[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def err_text(self) -> str:
        return self.err.decode("utf-8", "replace")


def client_argv(args: Sequence[str], ssh_config: Optional[Path] = None) -> List[str]:
    pre = ["--ssh-config", str(ssh_config)] if ssh_config else []
    return [sys.executable, "-c", "from rgt_client.cli import main; main()", *pre, *args]


def _env(env: Optional[Dict[str, str]]) -> Dict[str, str]:
    e = dict(os.environ)
    e.pop("RGT_HOME", None)
    e.update(env or {})
    return e


# The client runs under this small launcher, which reports the client's peak RSS from wait4.
# Not the test process itself: a forked child starts with its parent's high-water mark, so a
# test holding 300 MB would "measure" 300 MB for any client it starts.
_LAUNCHER = r'''
import os, sys
report, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as fh:
    fh.write(str(usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
'''


def _launch(argv: List[str], report: str) -> List[str]:
    return [sys.executable, "-c", _LAUNCHER, report, *argv]


def _wait_rss(proc: subprocess.Popen, deadline: float, report: str) -> tuple:
    """(exit code, peak RSS bytes of the command) once the launcher ends (killed at deadline)."""
    while proc.poll() is None:
        if time.monotonic() > deadline:
            os.killpg(proc.pid, 9)
            proc.wait()
            break
        time.sleep(0.02)
    try:
        rss = int(Path(report).read_text() or 0)
    except (OSError, ValueError):
        rss = 0
    return proc.returncode, rss


def run_client(args: Sequence[str], ssh_config: Optional[Path] = None, env: Optional[Dict[str, str]] = None,
               timeout: float = 120, cwd: Optional[Path] = None) -> ClientRun:
    """rgt-client ARGS as a real process, stdout and stderr to files (a flood is counted on
    disk, never held here); returns its exit code, output and peak RSS."""
    return run_argv(client_argv(args, ssh_config), env=env, timeout=timeout, cwd=cwd)


def run_on_pty(args: Sequence[str], ssh_config: Optional[Path] = None, env: Optional[Dict[str, str]] = None,
               timeout: float = 120, stderr_on_tty: bool = True, cwd: Optional[Path] = None) -> ClientRun:
    """rgt-client ARGS with stdout (and stderr) on a real pseudo-terminal; `out` is every byte
    the terminal received (the line discipline turns LF into CR LF on the way)."""
    return run_argv(client_argv(args, ssh_config), tty=True, stderr_on_tty=stderr_on_tty, env=env,
                    timeout=timeout, cwd=cwd)


def run_argv(argv: List[str], tty: bool = False, stderr_on_tty: bool = True,
             env: Optional[Dict[str, str]] = None, timeout: float = 120, cwd: Optional[Path] = None) -> ClientRun:
    """Any command, as run_client/run_on_pty run rgt-client."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(prefix="rss-") as report:
        launched = _launch(argv, report.name)
        if not tty:
            proc = subprocess.Popen(launched, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=_env(env),
                                    cwd=cwd, start_new_session=True)
            rc, rss = _wait_rss(proc, t0 + timeout, report.name)
            size = out.seek(0, os.SEEK_END)
            out.seek(0)
            got = out.read(OUT_CAP)
        else:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            try:
                proc = subprocess.Popen(launched, stdin=subprocess.DEVNULL, stdout=slave,
                                        stderr=slave if stderr_on_tty else err, env=_env(env), cwd=cwd,
                                        start_new_session=True)
            finally:
                os.close(slave)
            got, size = _drain_pty(master, t0 + timeout, proc)
            rc, rss = _wait_rss(proc, t0 + timeout, report.name)
        err.seek(0)
        return ClientRun(rc, got, err.read(OUT_CAP), size, rss, time.monotonic() - t0, argv)


def _drain_pty(master: int, deadline: float, proc: subprocess.Popen) -> tuple:
    chunks: List[bytes] = []
    kept = total = 0
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError as exc:          # EIO: every writer of the slave side closed it
                if exc.errno == errno.EIO:
                    break
                raise
            if not data:
                break
            total += len(data)
            if kept < OUT_CAP:
                chunks.append(data[:OUT_CAP - kept])
                kept += len(chunks[-1])
    finally:
        os.close(master)
    return b"".join(chunks), total


# Bytes a terminal acts on: C0 controls except TAB, LF and CR (a CR is checked by the tests that
# plant one: our own progress bar uses it), DEL, and C1 controls and bidi overrides as UTF-8.
_RAW_CONTROLS = re.compile(b"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def raw_controls(data: bytes) -> List[bytes]:
    """The control sequences a terminal would act on (ESC, BEL, BS, C1, bidi overrides...)."""
    return _RAW_CONTROLS.findall(data)


def assert_terminal_safe(data: bytes, planted: Iterable[bytes] = ()) -> None:
    """No raw control byte reached the terminal, nor any of the `planted` raw sequences."""
    found = raw_controls(data)
    assert not found, "raw control bytes reached the terminal: %r in %r" % (found[:5], data[-2000:])
    for p in planted:
        assert p not in data, "%r reached the terminal raw" % p
