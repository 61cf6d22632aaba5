"""A second local unix user, for tests where a local attacker matters: `nobody`, a real second
uid (never a mock), acting in a forked child, and a folder shared the way /tmp is (sticky,
world-writable, under /tmp itself so that user can reach it)."""
from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest


def other_user() -> pwd.struct_passwd:
    """`nobody`, or a skip that says why there is none to act as."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as a second unix user")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no `nobody` user on this machine to play the other local user")


def as_user(user: pwd.struct_passwd, fn: Callable[[], None]) -> None:
    """Run fn() in a child process as `user`; its failure fails the test."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user's step failed"


@contextmanager
def shared_tmp() -> Iterator[Path]:
    """A folder like /tmp (1777), removed afterwards."""
    shared = Path(tempfile.mkdtemp(prefix="rgt-shared-tmp-", dir="/tmp"))
    try:
        os.chmod(shared, 0o1777)
        yield shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)
