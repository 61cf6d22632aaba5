"""The no-rsync copy path, box side: send manifest files as one framed byte stream.

Boxes reached through a proxied SSH (RunPod's ssh.runpod.io) have no scp, sftp or rsync; a
plain ssh session with stdin/stdout is all there is. The client sends the wanted files with
the offset it already holds locally (its partial size), and gets for each:

    {"path": P, "offset": O, "bytes": N}\\n  followed by exactly N raw bytes
    {"path": P, "error": "..."}\\n           when the file cannot be sent
    {"end": true}\\n                          after the last one

Only paths in the run's manifest are served: the stream is for artifacts, not a file reader.
"""
from __future__ import annotations

import json
import os
import stat as stat_mod
import sys
from typing import Any, BinaryIO, Dict, List, Set

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CHUNK = 1 << 20
SMALL = 1 << 20


def _header(out: BinaryIO, obj: Dict[str, Any]) -> None:
    out.write((json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))


class _Inside(object):
    """Is root/path's real folder still under root (no symlinked parent)? Cached per folder:
    realpath costs an lstat per path component, and a run has thousands of files per folder."""

    def __init__(self, root: str):
        self.root = root
        self.real_root = os.path.realpath(root)
        self.seen = {}  # type: Dict[str, bool]

    def __call__(self, path: str) -> bool:
        folder = os.path.dirname(path)
        hit = self.seen.get(folder)
        if hit is None:
            real = os.path.realpath(os.path.join(self.root, folder))
            hit = real == self.real_root or real.startswith(self.real_root + os.sep)
            self.seen[folder] = hit
        return hit


def _send_one(out: BinaryIO, root: str, path: str, offset: int, inside: _Inside) -> None:
    if not inside(path):
        _header(out, {"path": path, "error": "a parent directory is a symlink out of the workdir"})
        return
    try:
        fd = os.open(os.path.join(root, path), os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        _header(out, {"path": path, "error": exc.strerror or str(exc)})
        return
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            _header(out, {"path": path, "error": "not a regular file"})
            return
        offset = min(max(0, offset), st.st_size)
        count = st.st_size - offset
        _header(out, {"path": path, "offset": offset, "bytes": count})
        _copy(fd, out, offset, count)
    finally:
        os.close(fd)


def _copy(fd: int, out: BinaryIO, offset: int, count: int) -> None:
    """Exactly `count` bytes from fd at offset; pads with zeros if the file shrank meanwhile,
    so the framing survives (verify then names the file)."""
    if count <= SMALL:  # small files ride in the output buffer: no flush and sendfile per file
        data = os.pread(fd, count, offset)
        out.write(data)
        if len(data) < count:
            out.write(b"\0" * (count - len(data)))
        return
    out.flush()
    sent = 0
    try:
        while sent < count:
            n = os.sendfile(out.fileno(), fd, offset + sent, min(CHUNK * 8, count - sent))
            if n == 0:
                break
            sent += n
    except (AttributeError, OSError, ValueError):  # no sendfile for this fd pair: plain reads
        os.lseek(fd, offset + sent, os.SEEK_SET)
        while sent < count:
            data = os.read(fd, min(CHUNK, count - sent))
            if not data:
                break
            out.write(data)
            sent += len(data)
    if sent < count:
        out.write(b"\0" * (count - sent))


def serve(root: str, allowed: Set[str], requests: List[Dict[str, Any]], out: BinaryIO) -> int:
    """Send each requested manifest file from its offset; returns how many were refused."""
    refused = 0
    inside = _Inside(root)
    for req in requests:
        path = req.get("path") if isinstance(req, dict) else None
        if not isinstance(path, str) or path not in allowed:
            _header(out, {"path": path, "error": "not in the run's manifest"})
            refused += 1
            continue
        try:
            offset = int(req.get("offset") or 0)
        except (TypeError, ValueError):
            offset = 0
        _send_one(out, root, path, offset, inside)
    _header(out, {"end": True})
    out.flush()
    return refused


def read_requests(stream: BinaryIO) -> List[Dict[str, Any]]:
    raw = stream.read()
    data = json.loads(raw.decode("utf-8")) if raw.strip() else []
    return data if isinstance(data, list) else []


def stdout_binary() -> BinaryIO:
    return sys.stdout.buffer
