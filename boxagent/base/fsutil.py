"""Files a client or a human may read mid-write: tmp -> fsync -> os.replace (STYLE 7)."""
from __future__ import annotations

import errno
import os

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Optional, Tuple

from boxagent.base import boxjson, quickjson, safefile


def atomic_write_bytes(path: str, data: bytes, mode: int = 0o644, durable: bool = True) -> None:
    """The data is fsynced before the rename, so a reader (or a crash) never sees a torn file.
    durable=False skips the directory fsync: after a power loss the previous version may come
    back, which is fine for a file rewritten every few seconds (status.json) and saves CPU.
    The tmp file is made O_EXCL|O_NOFOLLOW (a name planted in the dir is never written
    through); whatever is at `path` that is not a regular file is set aside (safefile)."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp, fd = _new_tmp(directory, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        safefile.clear_for_replace(path)
        try:
            os.replace(tmp, path)
        except IsADirectoryError:       # a directory came back between the check and the rename
            safefile.move_aside(path)
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(directory)


def _new_tmp(directory: str, mode: int) -> Tuple[str, int]:
    """A fresh tmp file in `directory` (tempfile's mkstemp without tempfile's imports: readers
    such as `status` need none of random or shutil)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, ".tmp-%d-%s" % (os.getpid(), os.urandom(6).hex()))
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, mode)
        except OSError:
            os.close(fd)
            os.unlink(tmp)
            raise
        return tmp, fd
    raise FileExistsError(errno.EEXIST, "no free tmp name", directory)


def _fsync_dir(directory: str) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def atomic_write_text(path: str, text: str, mode: int = 0o644, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode, durable)


def dumps(obj: Any) -> str:
    return quickjson.dumps(obj)      # = json.dumps(obj, indent=1, ensure_ascii=False, default=str)


def atomic_write_json(path: str, obj: Any, mode: int = 0o644, durable: bool = True) -> None:
    atomic_write_text(path, dumps(obj) + "\n", mode, durable)


def read_json(path: str, default: Any = None, cap: int = safefile.DEFAULT_CAP) -> Any:
    """Read a JSON file; a missing or corrupt file gives `default` (the caller decides), and so
    does anything at the path that is not a regular file within `cap` (a FIFO, a symlink to a
    device): see safefile."""
    try:
        return boxjson.loads(safefile.read_bytes(path, cap), cap)
    except (OSError, ValueError):      # boxjson.BadJSON is a ValueError: any hostile document
        return default


def jsonl_line(obj: Any) -> bytes:
    import json
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def parse_jsonl(raw: bytes, start: Optional[bytes] = None) -> Optional[dict]:
    """One JSON object from one line of a JSONL file (events.jsonl, a run's history); None for a
    blank line or one that holds none: a torn first line of a read window, a torn last line of
    a daemon killed mid-write. With `start` (the bytes every object begins with), an object after
    the torn bytes of a crashed append on the same line is still found."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        obj = boxjson.loads(raw)
        return obj if isinstance(obj, dict) else None
    except ValueError:      # boxjson.BadJSON too: a 1,000-deep line is skipped like a torn one
        pass
    at = raw.rfind(start) if start else -1
    if at <= 0:
        return None
    try:
        obj = boxjson.loads(raw[at:])
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def append_bytes(path: str, data: bytes, fsync: bool = False) -> None:
    """One write per record. A short write (the disk filled mid-record) is cut back off, so the
    file never holds a torn line that the next record would be glued onto."""
    fd = safefile.open_for_write(path)      # never blocks on a FIFO, never writes through a link
    try:
        start = os.fstat(fd).st_size
        try:
            done = os.write(fd, data)
        except OSError:
            _cut(fd, start)
            raise
        if done != len(data):
            _cut(fd, start)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _cut(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def read_tail(path: str, lines: int, chunk: int = 65536, stop_at: Optional[bytes] = None) -> bytes:
    """The end of a file holding at least `lines` complete lines (or the whole file), read
    backwards in chunks: cost follows what is returned, not the file's size. With `stop_at`, it
    also stops once a line of the window starts with a JSON id that sorts before `stop_at`
    (event logs: ids begin with their time). OSError propagates (safefile.Unsafe for a FIFO, a
    symlink or a device at the path)."""
    with os.fdopen(safefile.open_regular(path), "rb") as fh:
        fh.seek(0, os.SEEK_END)
        pos, data = fh.tell(), b""
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(chunk, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
            if stop_at is not None and _first_id_before(data, stop_at):
                break
    return data


def _first_id_before(data: bytes, stop_at: bytes) -> bool:
    start = data.find(b"\n") + 1          # the first line of the window may be torn
    head = data[start:start + 64]
    key = b'{"id":"'
    return head.startswith(key) and head[len(key):len(key) + len(stop_at)] < stop_at
