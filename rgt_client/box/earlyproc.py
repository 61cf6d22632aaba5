"""A process started before the client has imported subprocess: `status`'s ssh call.

subprocess imports locale, re, threading, signal, selectors and contextlib: on a 2-core laptop it
was the largest import before `status` could start its ssh call, for one fork and exec. So the
head start (prefetch.py) starts its call with os.posix_spawnp, with subprocess.Popen's manners
(pipes for stdin, stdout and stderr; no other descriptor passed on; SIGPIPE and SIGXFSZ back to
their defaults, which Python set to ignored), and hands run_remote the part of Popen's face it
uses: stdin, stdout, stderr, poll, wait, kill, returncode.
"""
from __future__ import annotations

import os
import time

TYPE_CHECKING = False   # annotations only: typing would add a few ms before a status's ssh call
if TYPE_CHECKING:
    from typing import IO


def available() -> bool:
    return hasattr(os, "posix_spawnp")


class EarlyProcess:
    """What subprocess.Popen(argv, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE) gives, unbuffered."""

    def __init__(self, argv: list[str], env: dict | None) -> None:
        import _signal  # type: ignore[import-not-found]  # the C module: `signal` would import enum
        self.args = argv
        self.returncode: int | None = None
        ours: list[int] = []
        try:
            child_in, self_in = os.pipe()
            ours += [child_in, self_in]
            self_out, child_out = os.pipe()
            ours += [self_out, child_out]
            self_err, child_err = os.pipe()
            ours += [self_err, child_err]
            if min(ours) <= 2:    # a client started with stdio closed: Popen knows how to shuffle those
                raise OSError("a standard descriptor of this process is closed")
            actions: list[tuple[int, ...]] = [(os.POSIX_SPAWN_DUP2, child_in, 0), (os.POSIX_SPAWN_DUP2, child_out, 1),
                       (os.POSIX_SPAWN_DUP2, child_err, 2)]
            actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _passed_on()]
            self.pid = os.posix_spawnp(argv[0], argv, os.environ if env is None else env,
                                       file_actions=actions,
                                       setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        for fd in (child_in, child_out, child_err):
            os.close(fd)
        self.stdin: IO[bytes] = open(self_in, "wb", buffering=0)
        self.stdout: IO[bytes] = open(self_out, "rb", buffering=0)
        self.stderr: IO[bytes] = open(self_err, "rb", buffering=0)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            if self.returncode is None:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            return self.returncode
        deadline, delay = time.monotonic() + timeout, 0.0005
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                import subprocess
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            import _signal  # type: ignore[import-not-found]
            os.kill(self.pid, _signal.SIGKILL)


def _passed_on() -> list[int]:
    """This process's descriptors from 3 up that a child would inherit (Popen's close_fds):
    a pipe the client's caller left open must not be held by ssh's master for a minute after."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        out = []
        for name in names:
            fd = int(name)
            try:
                if fd > 2 and os.get_inheritable(fd):
                    out.append(fd)
            except OSError:       # the listing's own descriptor, closed by now
                pass
        return out
    return []
