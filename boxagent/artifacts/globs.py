"""Artifact globs: `**` globbing relative to the run's workdir, that never leaves it.

Patterns are POSIX paths relative to the workdir, matched against each file's whole relative
path: `*` and `?` stay inside one path segment, `**` spans any number of directories, `[ab]`
is a character class. A pattern that names a directory takes everything under it
(`checkpoints` == `checkpoints/**`). Absolute patterns, `~` and any `..` segment are refused:
an artifact list is a promise about the workdir, and a glob that escapes it would let a job
spec pull `/etc` or another user's files to the laptop.

Walking never follows a symlink: a symlink is recorded (path + target) and not descended, so
`ckpt -> /mnt/other-disk` can never drag a second disk into the manifest. Only the literal
prefix of each pattern is walked (`runs/7/ckpt/*.pt` walks `runs/7/ckpt`), so a workdir that
also holds a million-file dataset costs nothing when the artifacts live elsewhere.
"""
from __future__ import annotations

import os
import re
import stat as stat_mod
from typing import Dict, Iterable, List, Optional, Pattern, Tuple

from boxagent.base.errors import UsageError

_MAGIC = re.compile(r"[*?\[]")


class Entry(object):
    """One walked path: a regular file (with its lstat) or a symlink (with its target)."""

    __slots__ = ("path", "size", "mtime_ns", "target")

    def __init__(self, path: str, size: int, mtime_ns: int, target: Optional[str] = None):
        self.path = path
        self.size = size
        self.mtime_ns = mtime_ns
        self.target = target


def check_pattern(pattern: object) -> str:
    """Return the normalised pattern, or raise UsageError saying why it is refused."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise UsageError("artifact pattern %r is empty or not a string" % (pattern,),
                         'use paths relative to the workdir, e.g. "checkpoints/**/*.pt"')
    if "\0" in pattern:
        raise UsageError("artifact pattern %r contains a NUL byte" % (pattern,))
    if pattern.startswith("/") or pattern.startswith("~"):
        raise UsageError("artifact pattern %r is absolute; artifacts must lie inside the workdir" % pattern,
                         "write it relative to the workdir, or set the job's workdir to its parent")
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UsageError("artifact pattern %r uses `..` to leave the workdir" % pattern,
                         "artifacts must lie inside the workdir; move them there or change the workdir")
    if not parts:
        raise UsageError("artifact pattern %r names the workdir itself" % pattern,
                         'use "**" to take every file in the workdir')
    return "/".join(parts)


def _segment_regex(seg: str) -> str:
    out, i = [], 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = seg.find("]", i + 2 if seg[i + 1:i + 2] in ("!", "^") else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = seg[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_pattern(pattern: str) -> Pattern[str]:
    """Regex for a checked pattern; also matches everything below a matching directory."""
    segs = pattern.split("/")
    out = []
    for n, seg in enumerate(segs):
        last = n == len(segs) - 1
        if seg == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(seg) + ("" if last else "/"))
    return re.compile("^(?:" + "".join(out) + ")(?:/.*)?$", re.S)


def literal_root(pattern: str) -> str:
    """The directory part of a pattern before its first wildcard ("" = the workdir)."""
    lit = []
    for seg in pattern.split("/"):
        if _MAGIC.search(seg):
            break
        lit.append(seg)
    return "/".join(lit)


def _walk_roots(patterns: List[str]) -> List[str]:
    roots = sorted(set(literal_root(p) for p in patterns))
    kept: List[str] = []
    for r in roots:  # sorted: a parent comes before its children, which it already covers
        if not any(k == "" or r == k or r.startswith(k + "/") for k in kept):
            kept.append(r)
    return kept


def _utf8_ok(name: str) -> bool:
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:  # os.fsdecode's surrogate escapes: not valid UTF-8 on disk
        return False


def _scan(top: str, rel: str, out: List[Entry], skipped: List[Dict[str, str]]) -> None:
    """Depth-first scandir below top/rel; records files and symlinks, follows nothing.
    One tight loop: it runs once per file, 100,000 times for a big run."""
    stack = [rel]
    while stack:
        cur = stack.pop()
        prefix = cur + "/" if cur else ""
        try:
            it = os.scandir(os.path.join(top, cur) if cur else top)
        except OSError as exc:
            skipped.append({"path": cur or ".", "reason": exc.strerror or str(exc)})
            continue
        with it:
            for de in it:
                name = de.name
                if not name.isascii() and not _utf8_ok(name):
                    skipped.append({"path": (prefix + name).encode("utf-8", "surrogateescape").decode(
                        "utf-8", "backslashreplace"), "reason": "name is not valid UTF-8"})
                    continue
                try:
                    st = de.stat(follow_symlinks=False)
                except OSError as exc:
                    skipped.append({"path": prefix + name, "reason": exc.strerror or str(exc)})
                    continue
                if stat_mod.S_ISREG(st.st_mode):
                    out.append(Entry(prefix + name, st.st_size, st.st_mtime_ns))
                else:
                    _add(de.path, prefix + name, st, out, skipped, stack)


def _add(full: str, path: str, st: os.stat_result, out: List[Entry], skipped: List[Dict[str, str]],
         stack: Optional[List[str]]) -> None:
    mode = st.st_mode
    if stat_mod.S_ISDIR(mode):
        if stack is not None:
            stack.append(path)
    elif stat_mod.S_ISREG(mode):
        out.append(Entry(path, st.st_size, st.st_mtime_ns))
    elif stat_mod.S_ISLNK(mode):
        try:
            out.append(Entry(path, 0, st.st_mtime_ns, os.readlink(full)))
        except OSError as exc:
            skipped.append({"path": path, "reason": exc.strerror or str(exc)})
    else:
        skipped.append({"path": path, "reason": "not a regular file (socket, fifo or device)"})


def _root_entry(workdir: str, root: str, out: List[Entry], skipped: List[Dict[str, str]],
                forced: set) -> None:
    """Walk one literal root; a symlink on the way to it is recorded (kept even though the
    pattern names what lies beyond it, so the user sees it), never crossed."""
    parts = root.split("/") if root else []
    for n in range(1, len(parts) + 1):
        rel = "/".join(parts[:n])
        full = os.path.join(workdir, rel)
        try:
            st = os.lstat(full)
        except OSError:
            return  # the pattern names something that does not exist (yet): no files
        if not stat_mod.S_ISDIR(st.st_mode):
            _add(full, rel, st, out, skipped, None)
            if stat_mod.S_ISLNK(st.st_mode):
                forced.add(rel)
            return
    _scan(workdir, root, out, skipped)


def expand(workdir: str, include: Iterable[str], exclude: Iterable[str] = ()
           ) -> Tuple[List[Entry], List[Dict[str, str]]]:
    """Entries under workdir matching an include and no exclude, sorted by path; plus skipped."""
    inc = [check_pattern(p) for p in include]
    exc = [check_pattern(p) for p in exclude]
    if not inc:
        raise UsageError("the job declares no artifact patterns",
                         'add [artifacts] include = ["checkpoints/**"] to the job')
    walked: List[Entry] = []
    skipped: List[Dict[str, str]] = []
    forced: set = set()
    for root in _walk_roots(inc):
        _root_entry(workdir, root, walked, skipped, forced)
    inc_re = _combined(inc)
    exc_re = _combined(exc) if exc else None
    seen = set()
    kept = []
    for e in walked:
        if e.path in seen:
            continue
        seen.add(e.path)
        if exc_re is not None and exc_re.match(e.path):
            continue
        if e.path in forced or inc_re.match(e.path):
            kept.append(e)
    kept.sort(key=lambda e: e.path)
    return kept, skipped


def unmatched(include: Iterable[str], paths: List[str]) -> List[str]:
    """Include patterns that matched nothing: a typo (`checkpoint/` for `checkpoints/`) would
    otherwise give an empty manifest that verifies "OK" and a box torn down with the results."""
    out = []
    for p in include:
        r = compile_pattern(check_pattern(p))
        if not any(r.match(x) for x in paths):
            out.append(p)
    return out


def _combined(patterns: List[str]) -> Pattern[str]:
    """One regex for many patterns: one match call per path instead of one per pattern."""
    return re.compile("|".join("(?:%s)" % compile_pattern(p).pattern for p in patterns), re.S)
