"""Reading a file the box gives the agent (requests, configs, state, history, events) without
trusting what sits at its path.

A FIFO in inbox/ wedged the daemon for good: a plain open() blocks until a writer comes, so no
heartbeat, no stage watching, and `rgt-agent status` hung with it. A symlink to /dev/zero read
whole ate memory. So every such file is opened O_NOFOLLOW|O_NONBLOCK (a FIFO opens at once, a
symlink fails), must be a regular file by fstat AFTER the open (no race between check and use),
and is read to a size cap. Anything else raises Unsafe (an OSError), which readers treat like a
missing file; the daemon sets it aside (set_aside) with a line in daemon.log.
"""
from __future__ import annotations

import errno
import os
import stat
import sys
import time

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Callable, List, Optional

DEFAULT_CAP = 32 << 20        # status.json of a busy box is a few MB; nothing the agent reads is larger
ASIDE_DIR = ".aside"          # inbox/.aside/: what was set aside, kept for a person to look at


class Unsafe(OSError):
    """The path holds something other than a regular file within the cap."""


# The writing side. A FIFO in place of events.jsonl froze the daemon at the next stage's end: a
# blocking open(..., "ab") waits for a reader that never comes (status.json went stale, the next
# stage never started). So every append and replace of the agent opens O_NOFOLLOW|O_NONBLOCK (a
# FIFO without a reader, a socket: ENXIO; a symlink: ELOOP; a directory: EISDIR), checks the
# open descriptor is a regular file, and moves anything else aside to `<file>.setaside.<ns>`
# (rename never opens it) before writing a fresh file: never a block, never a write through a link.
_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_NOT_A_FILE = (errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP)
SET_ASIDE_TAG = ".setaside."


def _say_on_stderr(path: str, what: str, moved: Optional[str]) -> None:
    try:
        sys.stderr.write("rgt: set aside %s: %s%s\n" % (path, what, ", moved to %s" % moved if moved else ""))
    except (OSError, ValueError):
        pass


# Who hears of a set-aside file: stderr (daemon.log for the shim and the daemon); the daemon adds
# its alert (daemon/loop.py). One list for the process: every writer of the agent shares it.
REPORTERS: List[Callable[[str, str, Optional[str]], None]] = [_say_on_stderr]


def _report(path: str, what: str, moved: Optional[str]) -> None:
    for report in list(REPORTERS):
        try:
            report(path, what, moved)
        except Exception:  # noqa: BLE001 - a report that fails must not stop the write it guards
            pass


def move_aside(path: str) -> Optional[str]:
    """Rename whatever sits at `path` to `<path>.setaside.<ns>` next to it and say so; the new
    path, or None when nothing was there to move."""
    what = describe(path)
    dest = "%s%s%d" % (path, SET_ASIDE_TAG, time.time_ns())
    try:
        os.rename(path, dest)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _report(path, "%s (it could not be moved: %s)" % (what, exc.strerror), None)
        raise Unsafe(exc.errno or errno.EINVAL, "%s that could not be moved aside" % what, path) from None
    _report(path, what, dest)
    return dest


def open_for_write(path: str, flags: int = os.O_APPEND | os.O_CREAT, mode: int = 0o644) -> int:
    """An O_WRONLY fd on the regular file at `path` (plus `flags`: O_APPEND, O_CREAT, O_EXCL...).
    Anything else at the path is moved aside first and a fresh file opened; Unsafe when even that
    fails (it could not be moved, or something else came back at once)."""
    for _ in range(2):
        try:
            fd = os.open(path, _WRITE_FLAGS | flags, mode)
        except OSError as exc:
            if exc.errno not in _NOT_A_FILE:
                raise
            move_aside(path)
            continue
        try:
            kind = kind_of(os.fstat(fd).st_mode)
        except OSError:
            os.close(fd)
            raise
        if kind == "regular file":
            return fd
        os.close(fd)              # a FIFO that had a reader, a device node: never written to
        move_aside(path)
    raise Unsafe(errno.EINVAL, "not a regular file, even after it was set aside", path)


def clear_for_replace(path: str) -> None:
    """Before a rename onto `path`: whatever is there that is not a regular file (a directory
    would make the rename fail for good; a FIFO, a socket or a symlink would be dropped unseen)
    is moved aside and said."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        move_aside(path)


def open_regular(path: str, dir_fd: Optional[int] = None) -> int:
    """An fd on the regular file at `path` (O_RDONLY); Unsafe for a symlink, FIFO, device, socket
    or directory; OSError (ENOENT...) as open() gives it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):     # O_NOFOLLOW on a symlink (EMLINK on BSDs)
            raise Unsafe(exc.errno, "a symlink, not a regular file", path) from None
        raise
    try:
        kind = kind_of(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if kind != "regular file":
        os.close(fd)
        raise Unsafe(errno.EINVAL, "a %s, not a regular file" % kind, path)
    return fd


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symlink")):
        if test(mode):
            return name
    return "special file"


def read_bytes(path: str, cap: int = DEFAULT_CAP, whole: bool = True, dir_fd: Optional[int] = None) -> bytes:
    """The file's bytes. whole=True: Unsafe when it is larger than `cap` (a request, a config: half
    of one is worse than none). whole=False: its first `cap` bytes (a log-like file)."""
    fd = open_regular(path, dir_fd)
    try:
        size = os.fstat(fd).st_size
        if whole and size > cap:
            raise Unsafe(errno.EFBIG, "%d bytes, over the %d-byte cap" % (size, cap), path)
        # Read to the cap, not to st_size: a file that grows under us is cut at the cap too.
        chunks, left = [], cap + 1 if whole else cap
        while left > 0:
            data = os.read(fd, min(left, 1 << 20))
            if not data:
                break
            chunks.append(data)
            left -= len(data)
        out = b"".join(chunks)
        if whole and len(out) > cap:
            raise Unsafe(errno.EFBIG, "grew over the %d-byte cap while read" % cap, path)
        return out
    finally:
        os.close(fd)


def describe(path: str) -> str:
    """What sits at `path`, said for daemon.log ("a FIFO", "a symlink to /dev/zero")."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return "unreadable (%s)" % exc.strerror
    if stat.S_ISLNK(st.st_mode):
        try:
            return "a symlink to %s" % os.readlink(path)[:200]
        except OSError:
            return "a symlink"
    kind = kind_of(st.st_mode)
    return "a %s of %d bytes" % (kind, st.st_size) if kind == "regular file" else "a %s" % kind


def set_aside(path: str) -> Optional[str]:
    """Move `path` (whatever it is) into <its dir>/.aside/ so it is not read again; the new path,
    or None when it could not be moved (then the caller skips it each time)."""
    directory = os.path.join(os.path.dirname(path), ASIDE_DIR)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        dest = os.path.join(directory, os.path.basename(path))
        if os.path.lexists(dest):
            dest += ".%d" % os.getpid()
        os.rename(path, dest)       # rename never opens it: safe on a FIFO or a device
        return dest
    except OSError:
        return None
