"""The daemon's writes to its state dir, which may fill up (a stage writing checkpoints onto the
same disk) or turn read-only: a full disk is a state, never a crash.

Every durable write goes through `Storage`: written now when it can be; when the disk says
ENOSPC, EDQUOT or EROFS it is kept in memory, in order, and retried with backoff until space
returns (a later replace of the same file supersedes the queued one; appends are kept each).
The daemon keeps working from memory meanwhile and says so in status. A small reserve file is
freed the moment the disk fills, so the writes of that moment (the stage that died of it) can
still land.
"""
from __future__ import annotations

import errno
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base import safefile
from boxagent.base.fsutil import append_bytes, atomic_write_bytes
from boxagent.base.units import iso_utc

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
RESERVE_BYTES = 1 << 20
NEED_FREE_BYTES = 2 * RESERVE_BYTES     # free room that ends "full": the reserve, and as much again
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.5, 30.0

Op = Tuple[str, str, bytes, int, bool]      # (kind: replace|append, path, data, mode, durable)


def is_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


class Storage:
    def __init__(self, root: str, reserve: bool = True):
        self.root = root
        self.reserve_path = os.path.join(root, ".reserve")
        self.pending: List[Op] = []
        self.full_since: Optional[float] = None
        self.error: Optional[str] = None
        self._next_try = 0.0
        self._backoff = BACKOFF_MIN_S
        if reserve:
            self._make_reserve()

    # -- writing
    def replace(self, path: str, data: bytes, mode: int = 0o644, durable: bool = True) -> bool:
        """Atomically replace `path` (now, or later from memory). True when it is on disk now."""
        self.pending = [op for op in self.pending if not (op[0] == "replace" and op[1] == path)]
        return self._write(("replace", path, data, mode, durable))

    def append(self, path: str, data: bytes) -> bool:
        return self._write(("append", path, data, 0o644, False))

    def _write(self, op: Op) -> bool:
        if self.pending:
            self.pending.append(op)       # order: nothing overtakes what waits
            return False
        try:
            _apply(op)
            return True
        except OSError as exc:
            if not is_full(exc):
                raise
            self.became_full(exc)
            self.pending.append(op)
            self.flush(time.time(), retry_now=True)   # the reserve was just freed: try at once
            return not self.pending

    def became_full(self, exc: OSError) -> None:
        """A write (ours or one outside this queue, like status.json) met a full disk."""
        if self.full_since is None:
            self.full_since = time.time()
            self._backoff = BACKOFF_MIN_S
        self.error = "%s (%s)" % (os.strerror(exc.errno or 0), exc.filename or self.root)
        try:
            os.unlink(self.reserve_path)   # room for the writes of this very moment
        except OSError:
            pass

    def flush(self, now: float, retry_now: bool = False) -> Optional[str]:
        """Retry what waits, in order. Returns "recovered" when the last of it landed and the
        reserve could be made again (the disk has room, not just a few bytes). `retry_now`:
        right after the reserve was freed for them, and without taking the room back."""
        if self.full_since is None or (not retry_now and now < self._next_try):
            return None
        while self.pending:
            try:
                _apply(self.pending[0])
            except OSError as exc:
                if not is_full(exc):
                    raise
                self._retry_later(now, exc)
                return None
            self.pending.pop(0)
        if retry_now:
            return None
        # Room again means room beyond what freeing the reserve gave back, or the daemon would
        # call a still-full disk healthy the moment it re-took its own reserve.
        if _free_bytes(self.root) < NEED_FREE_BYTES or not self._make_reserve():
            self._retry_later(now, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.reserve_path))
            return None
        self.full_since, self.error = None, None
        return "recovered"

    def _retry_later(self, now: float, exc: OSError) -> None:
        self.error = "%s (%s)" % (os.strerror(exc.errno or 0), exc.filename or self.root)
        self._next_try = now + self._backoff
        self._backoff = min(BACKOFF_MAX_S, self._backoff * 2)

    @property
    def full(self) -> bool:
        return self.full_since is not None

    def state(self) -> Dict[str, Any]:
        """status.json agent.storage; while full, the room the daemon needs to call the disk
        healthy again and the room there is ("free space there" alone left a user guessing
        how much, on a small disk that stayed FULL at 86 % used)."""
        out = {"state": "full" if self.full else "ok", "since": iso_utc(self.full_since), "error": self.error,
               "pending_writes": len(self.pending)}
        if self.full:
            out["need_free_bytes"] = NEED_FREE_BYTES
            out["free_bytes"] = _free_bytes(self.root)
        return out

    def _make_reserve(self) -> bool:
        try:
            with os.fdopen(safefile.open_for_write(self.reserve_path, os.O_CREAT | os.O_TRUNC), "wb") as fh:
                fh.write(b"\0" * RESERVE_BYTES)   # real blocks, not a sparse hole
            return True
        except OSError:
            try:
                os.unlink(self.reserve_path)     # half a reserve is worse than none
            except OSError:
                pass
            return False


def _free_bytes(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def _apply(op: Op) -> None:
    kind, path, data, mode, durable = op
    if kind == "append":
        append_bytes(path, data)
    else:
        atomic_write_bytes(path, data, mode, durable)


def overwrite_in_place(path: str, data: bytes) -> bool:
    """Rewrite an existing file inside the blocks it already has (no new space needed): for a
    status.json that must keep telling the truth on a full disk. Padded with spaces (valid JSON
    whitespace) to the old size; False when `data` does not fit."""
    try:
        fd = safefile.open_for_write(path, 0)    # never creates: the blocks it has are the point
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if len(data) > size:
            return False
        os.pwrite(fd, data + b" " * (size - len(data)), 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
