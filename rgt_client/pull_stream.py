"""The no-rsync copy path: one ssh session streams the manifest's files, each resuming from
the local partial size.

Works where only a bare ssh channel exists (proxied SSH with no scp/sftp/rsync). Partial files
live in DEST/.rgt/partial/ under their own path and move into place only when whole, so a file
at its final name is never half of itself. Each file is hashed as it arrives (the partial's
prefix first, on resume), so verify need not read it again.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from rgt_client import exitcodes, transport
from rgt_client.errors import ClientError
from rgt_client.verify import META_DIR, Known

CHUNK = 1 << 20
Progress = Callable[[int, int], None]


def partial_path(dest: str, rel: str) -> str:
    return os.path.join(dest, META_DIR, "partial", rel)


def inside(dest: str, path: str) -> bool:
    """True when path's parent really lies under dest (no symlinked directory on the way)."""
    real_dest = os.path.realpath(dest)
    real = os.path.realpath(os.path.dirname(path))
    return real == real_dest or real.startswith(real_dest + os.sep)


def plan(dest: str, files: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], int]:
    """Requests [{path, offset}] for files not already in place, and the bytes already held."""
    wants, held = [], 0
    for f in files:
        final = os.path.join(dest, f["path"])
        try:
            st = os.lstat(final)
            if st.st_size == f["bytes"] and st.st_mtime_ns == f["mtime_ns"] and os.path.isfile(final):
                held += f["bytes"]
                continue
        except OSError:
            pass
        try:
            have = os.path.getsize(partial_path(dest, f["path"]))
        except OSError:
            have = 0
        offset = have if have <= f["bytes"] else 0
        held += offset
        wants.append({"path": f["path"], "offset": offset})
    return wants, held


def spawn_agent(target: transport.Target, args: List[str]) -> subprocess.Popen:
    """The agent with stdin/stdout pipes, over ssh or here (`local`)."""
    cmd = transport.agent_command(target, args)
    kw = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    spawn = getattr(transport, "spawn", None)
    if spawn is not None:
        return spawn(target, cmd, **kw)
    if target.is_local:
        return subprocess.Popen(["/bin/sh", "-c", cmd], env=dict(os.environ, RGT_HOME=target.local_home()), **kw)
    return subprocess.Popen(transport.ssh_argv(target, cmd), **kw)


class _Throttle:
    """Client-side --bwlimit (KiB/s): reading slower makes ssh's window hold the sender back."""

    def __init__(self, kbps: Optional[int]):
        self.rate = (kbps or 0) * 1024.0
        self.t0 = time.monotonic()
        self.n = 0

    def account(self, n: int) -> None:
        if self.rate <= 0:
            return
        self.n += n
        ahead = self.n / self.rate - (time.monotonic() - self.t0)
        if ahead > 0:
            time.sleep(ahead)


class Receiver:
    def __init__(self, dest: str, files: List[Dict[str, Any]], held: int, total: int,
                 progress: Optional[Progress], bwlimit_kbps: Optional[int]):
        self.dest = dest
        self.by_path = {f["path"]: f for f in files}
        self.done = held
        self.total = total
        self.moved = 0
        self.progress = progress
        self.throttle = _Throttle(bwlimit_kbps)
        self.known: Known = {}
        self.errors: List[Tuple[str, str]] = []
        self.made: set = set()      # directories known to exist: one mkdir per folder, not per file
        self.checked: set = set()   # final folders known to lie inside dest

    def _dir(self, path: str) -> str:
        d = os.path.dirname(path)
        if d not in self.made:
            os.makedirs(d, exist_ok=True)
            self.made.add(d)
        return d

    def run(self, rd) -> bool:
        """Consume frames until {"end"}; False when the stream broke off first."""
        while True:
            line = rd.readline()
            if not line.endswith(b"\n"):
                return False
            head = json.loads(line.decode("utf-8"))
            if head.get("end"):
                return True
            if "error" in head:
                self.errors.append((str(head.get("path")), str(head["error"])))
                continue
            if not self._receive(rd, head["path"], int(head["offset"]), int(head["bytes"])):
                return False

    def _receive(self, rd, rel: str, offset: int, count: int) -> bool:
        entry = self.by_path.get(rel)
        part = partial_path(self.dest, rel)
        if entry is None:   # (where it lands is checked in _finish, once per folder)
            raise ClientError("the box sent %r, which this pull did not ask for" % rel)
        self._dir(part)
        fd = os.open(part, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, offset)        # the box may answer from less than we hold
            h = _hash_prefix(fd, offset)
            left = count
            while left:
                data = rd.read(min(CHUNK, left))
                if not data:
                    return False            # connection lost: what is written stays for resume
                _write_all(fd, data)
                h.update(data)
                left -= len(data)
                self.moved += len(data)
                self.done += len(data)
                self.throttle.account(len(data))
                if self.progress:
                    self.progress(self.done, self.total)
        finally:
            os.close(fd)
        self._finish(rel, part, entry, offset + count, h.hexdigest())
        return True

    def _finish(self, rel: str, part: str, entry: Dict[str, Any], size: int, sha: str) -> None:
        final = os.path.join(self.dest, rel)
        d = self._dir(final)
        if d not in self.checked:
            if not inside(self.dest, final):
                self.errors.append((rel, "its directory is a symlink out of %s" % self.dest))
                return
            self.checked.add(d)
        os.replace(part, final)
        mtime = int(entry["mtime_ns"])
        os.utime(final, ns=(mtime, mtime))
        self.known[rel] = (size, mtime, sha)


def _hash_prefix(fd: int, n: int):
    h = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while n > 0:
        data = os.read(fd, min(CHUNK, n))
        if not data:
            break
        h.update(data)
        n -= len(data)
    os.lseek(fd, 0, os.SEEK_END)
    return h


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def tidy_partials(dest: str) -> None:
    """Remove the empty folders under .rgt/partial (only folders, only empty, only there)."""
    top = os.path.join(dest, META_DIR, "partial")
    for d, _subs, _files in os.walk(top, topdown=False):
        try:
            os.rmdir(d)
        except OSError:
            pass


def make_symlinks(dest: str, links: List[Dict[str, Any]]) -> None:
    """Recreate the manifest's symlinks that are absent; anything already there is left alone
    (verify names it if it differs)."""
    for s in links:
        final = os.path.join(dest, s["path"])
        if os.path.lexists(final):
            continue
        os.makedirs(os.path.dirname(final), exist_ok=True)
        if inside(dest, final):
            os.symlink(s["target"], final)


def stream_pull(target: transport.Target, run: str, manifest: Dict[str, Any], dest: str,
                progress: Optional[Progress] = None, bwlimit_kbps: Optional[int] = None) -> Tuple[int, Known]:
    """Copy the manifest's files over one agent stream; returns (bytes moved, known hashes)."""
    files = manifest["files"]
    total = sum(f["bytes"] for f in files)
    wants, held = plan(dest, files)
    rx = Receiver(dest, files, held, total, progress, bwlimit_kbps)
    if wants:
        try:
            _run_stream(target, run, wants, rx)
        finally:
            tidy_partials(dest)
    make_symlinks(dest, manifest.get("symlinks") or [])
    if rx.errors:
        rel, why = rx.errors[0]
        raise ClientError("%d file(s) could not be sent, first %s: %s" % (len(rx.errors), rel, why),
                          "check the file on the box; `rgt-client pull` again resumes the rest")
    return rx.moved, rx.known


def _run_stream(target: transport.Target, run: str, wants: List[Dict[str, Any]], rx: Receiver) -> None:
    proc = spawn_agent(target, ["pull-stream", run])
    err: List[bytes] = []
    drain = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    drain.start()
    try:
        proc.stdin.write(json.dumps(wants, ensure_ascii=False).encode("utf-8"))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        ended = rx.run(proc.stdout)
    finally:
        if proc.poll() is None and not proc.stdout.closed:
            proc.stdout.close()
        rc = proc.wait()
        drain.join(5)
    if not ended:
        _broken(target, rc, b"".join(err).decode("utf-8", "replace"), rx.moved)


def _broken(target: transport.Target, rc: int, stderr: str, moved: int) -> None:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if rc == 255 and not target.is_local:
        raise ClientError("the connection to %s broke off after %d bytes: %s"
                          % (target.host, moved, " ".join(lines[-2:]) or "ssh failed"),
                          "run the same pull again: it resumes from the partial files",
                          exitcodes.UNREACHABLE)
    msg = next((ln[7:] for ln in lines if ln.startswith("Error: ")), None)
    hint = next((ln[6:] for ln in lines if ln.startswith("Hint: ")), None)
    raise ClientError("the transfer stopped after %d bytes: %s" % (moved, msg or " ".join(lines[-2:])
                                                                    or "agent exit %d" % rc),
                      hint or "run the same pull again: it resumes from the partial files")


__all__ = ["stream_pull", "plan", "make_symlinks", "spawn_agent"]
