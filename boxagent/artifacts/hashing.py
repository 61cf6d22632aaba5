"""sha256 of many files on a thread pool.

hashlib releases the GIL while it hashes a buffer (and reads release it too), so threads use
every core without a process pool: the agent stays one process with no pickling. Small files
go in batches (one task per file would cost more in scheduling than in hashing), and the big
batches start first so the pool ends together instead of waiting on one late giant.
The same code hashes on the laptop for `verify` (rgt_client imports it).
"""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

CHUNK = 1 << 20
SMALL = 256 << 10       # files below this are read in one call
BATCH_BYTES = 8 << 20      # small files are grouped until a batch holds this much...
BATCH_FILES = 256          # ...or this many files
TINY = 16 << 10            # below this a file costs syscalls, not hashing
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class Hashed(object):
    """The digest and the fd's stat around the read; stable=False: the file changed meanwhile."""

    __slots__ = ("sha256", "size", "mtime_ns", "stable", "error")

    def __init__(self, sha256: Optional[str], size: int = 0, mtime_ns: int = 0, stable: bool = True,
                 error: Optional[str] = None):
        self.sha256 = sha256
        self.size = size
        self.mtime_ns = mtime_ns
        self.stable = stable
        self.error = error


def default_workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    # A couple more threads than cores keeps the CPUs busy while some threads wait on the disk
    # (network filesystems like autodl-fs answer slowly per file).
    return max(2, min(16, cores + 2))


def hash_file(path: str, buf: Optional[bytearray] = None) -> Hashed:
    """sha256 of one regular file, never following a symlink in its last component."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        return Hashed(None, error=exc.strerror or str(exc))
    try:
        st0 = os.fstat(fd)
        if st0.st_size < SMALL:
            # Small files (most of a 100,000-file run) in one read: per-call overhead, not
            # hashing, is their cost. A file that grew since fstat falls through to the loop.
            data = os.read(fd, st0.st_size + 1)
            h = hashlib.sha256(data)
            if len(data) > st0.st_size:
                _hash_rest(fd, h, buf)
        else:
            h = hashlib.sha256()
            _hash_rest(fd, h, buf)
        st1 = os.fstat(fd)
    except OSError as exc:
        return Hashed(None, error=exc.strerror or str(exc))
    finally:
        os.close(fd)
    stable = st0.st_size == st1.st_size and st0.st_mtime_ns == st1.st_mtime_ns
    return Hashed(h.hexdigest(), st1.st_size, st1.st_mtime_ns, stable)


def _hash_rest(fd: int, h: Any, buf: Optional[bytearray]) -> None:
    buf = buf if buf is not None else bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        n = os.readv(fd, [buf]) if hasattr(os, "readv") else _read_into(fd, buf)
        if not n:
            break
        h.update(view[:n])


def _read_into(fd: int, buf: bytearray) -> int:
    data = os.read(fd, len(buf))
    buf[:len(data)] = data
    return len(data)


def _batches(items: List[Tuple[str, int]]) -> Tuple[List[List[str]], List[str]]:
    """(tasks for the pool, biggest first; the tiny files, for one thread).

    Tiny files cost syscalls, not hashing: on several threads each syscall hands the GIL over
    and the handovers cost more than the work (measured: 100,000 six-byte files hash faster on
    one thread). So they run as one sequential task beside the pool's big files."""
    items = sorted(items, key=lambda it: -it[1])
    out: List[List[str]] = []
    tiny: List[str] = []
    cur: List[str] = []
    cur_bytes = 0
    for path, size in items:
        if size >= BATCH_BYTES:
            out.append([path])
        elif size < TINY:
            tiny.append(path)
        else:
            cur.append(path)
            cur_bytes += size
            if cur_bytes >= BATCH_BYTES or len(cur) >= BATCH_FILES:
                out.append(cur)
                cur, cur_bytes = [], 0
    if cur:
        out.append(cur)
    return out, tiny


def hash_many(items: Iterable[Tuple[str, int]], workers: Optional[int] = None,
              on_done: Optional[Callable[[str, Hashed], None]] = None) -> Dict[str, Hashed]:
    """{path: Hashed} for (path, expected size) pairs, hashed on `workers` threads."""
    batches, tiny = _batches(list(items))
    results: Dict[str, Hashed] = {}

    def work(batch: List[str]) -> List[Tuple[str, Hashed]]:
        buf = bytearray(CHUNK)  # one buffer per task: no allocation per read
        done = []
        for p in batch:
            r = hash_file(p, buf)
            if on_done is not None:
                on_done(p, r)
            done.append((p, r))
        return done

    n = workers or default_workers()
    if n <= 1 or len(batches) <= 1:
        for b in batches + ([tiny] if tiny else []):
            results.update(work(b))
        return results
    with ThreadPoolExecutor(max_workers=min(n, len(batches) + 1)) as pool:
        futures = [pool.submit(work, tiny)] if tiny else []
        futures += [pool.submit(work, b) for b in batches]
        for f in futures:
            results.update(f.result())
    return results
