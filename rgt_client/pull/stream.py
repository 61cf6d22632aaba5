"""The no-rsync copy path: one ssh session streams the manifest's files, each resuming from
the local partial size.

Works where only a bare ssh channel exists (proxied SSH with no scp/sftp/rsync). Partial files
live in DEST/.rgt/partial/ under their own path and move into place only when whole, so a file
at its final name is never half of itself. Each file is hashed as it arrives (the partial's
prefix first, on resume), so verify need not read it again.

The stream comes from a box that may be compromised, so each frame is held to what this pull
asked for: a path it requested and has not had yet, an offset no later than the one it sent,
and at most the manifest entry's size (a frame announcing 200 MB for a 6-byte entry is a broken
stream, refused before a byte is written). Header lines are read with a cap. Every write goes
through DEST's descriptors (destdir.py), never through a symlink.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat as stat_mod
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.api import box_json
from rgt_client import exitcodes
from rgt_client.box import transport
from rgt_client.box.bounded import AgentStream
from rgt_client.pull.destdir import Blocked, Dest
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line
from rgt_client.pull.verify import META_DIR, Known

CHUNK = 1 << 20
PARTIAL = META_DIR + "/partial"
MAX_ERROR_TEXT = 300
Progress = Callable[[int, int], None]


def partial_rel(rel: str) -> str:
    return PARTIAL + "/" + rel


def blocked_error(host: str, rel: str, b: Blocked, dest: str) -> ClientError:
    """A manifest path whose folder in DEST is a symlink or a file: refused, named."""
    to = " -> %s" % safe_line(b.target) if b.target is not None else ""
    return ClientError("%s from %s would be written through %s in %s (%s%s); refused"
                       % (safe_line(rel), host, safe_line(b.at), dest, b.why, to),
                       "an earlier pull left it there, or the box lies: check %s, remove it (or pull "
                       "into a fresh DEST), then pull again" % safe_line(b.at))


def check_parents(dest: Dest, host: str, paths: List[str]) -> None:
    """Before anything moves: no manifest path may lie under a symlink or a file in DEST."""
    seen = set()
    for rel in paths:
        folder = rel.rpartition("/")[0]
        if not folder or folder in seen:
            continue
        try:
            os.close(dest.dir(folder))
        except FileNotFoundError:
            pass        # made when the file arrives (and refused then if it became a link)
        except Blocked as b:
            raise blocked_error(host, rel, b, dest.path)
        seen.add(folder)


def plan(dest: Dest, files: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], int]:
    """Requests [{path, offset}] for files not already in place, and the bytes already held."""
    wants, held = [], 0
    for f in files:
        try:
            st = dest.lstat(f["path"])
        except Blocked:
            st = None       # check_parents named it already; never read through it
        if st is not None and st.st_size == f["bytes"] and st.st_mtime_ns == f["mtime_ns"] \
                and stat_mod.S_ISREG(st.st_mode):
            held += f["bytes"]
            continue
        part = dest.lstat(partial_rel(f["path"]))
        have = part.st_size if part is not None and stat_mod.S_ISREG(part.st_mode) else 0
        offset = have if have <= f["bytes"] else 0
        held += offset
        wants.append({"path": f["path"], "offset": offset})
    return wants, held


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
    def __init__(self, dest: Dest, host: str, files: List[Dict[str, Any]], wants: List[Dict[str, Any]],
                 held: int, progress: Optional[Progress], bwlimit_kbps: Optional[int]):
        self.dest, self.host = dest, host
        self.by_path = {f["path"]: f for f in files}
        self.asked = {w["path"]: w["offset"] for w in wants}   # each is answered once, then gone
        self.done = held
        self.total = sum(f["bytes"] for f in files)
        self.moved = 0
        self.progress = progress
        self.throttle = _Throttle(bwlimit_kbps)
        self.known: Known = {}
        self.errors: List[Tuple[str, str]] = []

    def broken(self, what: str) -> ClientError:
        return ClientError("%s sent a broken stream: %s" % (self.host, what),
                           "nothing was written outside DEST/.rgt/partial; the box does not behave like "
                           "an rgt agent: check it, then `rgt-client install %s`" % self.host)

    def run(self, s: AgentStream) -> bool:
        """Consume frames until {"end"}; False when the stream broke off first."""
        while True:
            line = s.line("a frame header")
            if not line.endswith(b"\n"):
                return False
            head = self._header(line)
            if head.get("end") is True:
                return True
            rel = head["path"]
            asked = self.asked.pop(rel)
            if "error" in head:
                self.errors.append((rel, safe_line(head["error"])[:MAX_ERROR_TEXT]))
                continue
            offset, count = self._span(head, rel, asked)
            if not self._receive(s, rel, offset, count):
                return False

    def _header(self, line: bytes) -> Dict[str, Any]:
        try:
            head = box_json(line)
        except ValueError:
            raise self.broken("a frame header that is not JSON: %s" % safe_line(line[:80]))
        if not isinstance(head, dict):
            raise self.broken("a frame header that is not an object: %s" % safe_line(line[:80]))
        if head.get("end") is True:
            return head
        rel = head.get("path")
        if not isinstance(rel, str) or rel not in self.asked:
            raise self.broken("%s, which this pull did not ask for (or had already)" % safe_line(repr(rel)[:200]))
        if "error" in head and not isinstance(head["error"], str):
            raise self.broken("an error for %s that is not text" % safe_line(rel))
        return head

    def _span(self, head: Dict[str, Any], rel: str, asked: int) -> Tuple[int, int]:
        offset, count = head.get("offset"), head.get("bytes")
        size = self.by_path[rel]["bytes"]
        for name, v in (("offset", offset), ("bytes", count)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise self.broken("%s %s for %s" % (name, safe_line(json.dumps(v))[:40], safe_line(rel)))
        assert isinstance(offset, int) and isinstance(count, int)     # what the loop above checked
        if offset > asked:
            raise self.broken("%s from offset %d, past the %d bytes asked from" % (safe_line(rel), offset, asked))
        if offset + count > size:
            raise self.broken("%d bytes from offset %d for %s, whose manifest entry has %d bytes"
                              % (count, offset, safe_line(rel), size))
        return offset, count

    def _receive(self, s: AgentStream, rel: str, offset: int, count: int) -> bool:
        entry = self.by_path[rel]
        part = partial_rel(rel)
        fd = self.dest.open(part, os.O_RDWR | os.O_CREAT, 0o644, create_parents=True)
        try:
            os.ftruncate(fd, offset)        # the box may answer from less than we hold
            h = _hash_prefix(fd, offset)
            left = count
            while left:
                data = s.read(min(CHUNK, left))
                if not data:
                    return False            # connection lost: what is written stays for resume
                _write_all(fd, data)
                h.update(data)
                left -= len(data)
                self._account(len(data))
            mtime = entry["mtime_ns"]
            os.utime(fd, ns=(mtime, mtime))
        finally:
            os.close(fd)
        self._finish(rel, part, offset + count, h.hexdigest())
        return True

    def _account(self, n: int) -> None:
        self.moved += n
        self.done += n
        self.throttle.account(n)
        if self.progress:
            self.progress(self.done, self.total)

    def _finish(self, rel: str, part: str, size: int, sha: str) -> None:
        try:
            self.dest.replace(part, rel)
        except Blocked as b:
            self.errors.append((rel, "%s %s in DEST; not followed" % (safe_line(b.at), b.why)))
            return
        except OSError as exc:
            self.errors.append((rel, "cannot put it in place: %s" % (exc.strerror or exc)))
            return
        self.known[rel] = (size, self.by_path[rel]["mtime_ns"], sha)


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


def make_symlinks(dest: Dest, host: str, links: List[Dict[str, Any]]) -> None:
    """Recreate the manifest's symlinks: an absent one is made, an earlier pull's link with
    another target is replaced (owned.check let only this run's own names through), anything
    else is left alone (verify names it). Made by descriptor: a link is created, never followed."""
    for s in links:
        try:
            st = dest.lstat(s["path"])
            if st is None:
                dest.symlink(s["target"], s["path"])
            elif stat_mod.S_ISLNK(st.st_mode) and dest.readlink(s["path"]) != s["target"]:
                tmp = s["path"].rpartition("/")[0] + "/.rgt-link.tmp" if "/" in s["path"] else ".rgt-link.tmp"
                if dest.lstat(tmp) is None:
                    dest.symlink(s["target"], tmp)
                    dest.replace(tmp, s["path"])
        except Blocked as b:
            raise blocked_error(host, s["path"], b, dest.path)


def stream_pull(target: transport.Target, run: str, manifest: Dict[str, Any], dest: Dest,
                progress: Optional[Progress] = None, bwlimit_kbps: Optional[int] = None) -> Tuple[int, Known]:
    """Copy the manifest's files over one agent stream; returns (bytes moved, known hashes)."""
    files = manifest["files"]
    wants, held = plan(dest, files)
    rx = Receiver(dest, target.host, files, wants, held, progress, bwlimit_kbps)
    if wants:
        try:
            _run_stream(target, run, wants, rx)
        finally:
            dest.remove_empty_dirs(PARTIAL)
    if rx.errors:
        rel, why = rx.errors[0]
        raise ClientError("%d file(s) could not be sent, first %s: %s" % (len(rx.errors), safe_line(rel), why),
                          "check the file on the box; `rgt-client pull` again resumes the rest")
    return rx.moved, rx.known


def _run_stream(target: transport.Target, run: str, wants: List[Dict[str, Any]], rx: Receiver) -> None:
    # ASCII JSON: a name that is not UTF-8 on the box travels as its \udcXX escapes, both ways
    body = json.dumps(wants).encode("ascii")
    with AgentStream(target, ["pull-stream", run], stdin=body) as s:
        ended = rx.run(s)
        res = s.finish(hang_up=ended)   # after {"end"} nothing more is read, whatever follows
    if not ended:
        _broken(target, res, rx.moved)


def _broken(target: transport.Target, res: transport.Result, moved: int) -> None:
    lines = [safe_line(ln.rstrip("\r")) for ln in res.err.strip().split("\n") if ln.strip()]  # (LF only: keep what a CR hid)
    if res.rc == 255 and not target.is_local:
        raise ClientError("the connection to %s broke off after %d bytes: %s"
                          % (target.host, moved, " ".join(lines[-2:])[:MAX_ERROR_TEXT] or "ssh failed"),
                          "run the same pull again: it resumes from the partial files",
                          exitcodes.UNREACHABLE)
    msg = next((ln[7:] for ln in lines if ln.startswith("Error: ")), None)
    hint = next((ln[6:] for ln in lines if ln.startswith("Hint: ")), None)
    raise ClientError("the transfer stopped after %d bytes: %s"
                      % (moved, (msg or " ".join(lines[-2:]))[:MAX_ERROR_TEXT] or "agent exit %d" % res.rc),
                      (hint or "")[:MAX_ERROR_TEXT] or "run the same pull again: it resumes from the partial files")


__all__ = ["stream_pull", "plan", "make_symlinks", "check_parents", "blocked_error", "Receiver"]
