"""Is this a manifest the laptop can act on? Size, shape, every field, every path.

The manifest comes from a box that may be compromised, and pull writes where it says. So before
anything is written: its size is capped (a 1 GB "manifest" must not take the laptop's memory),
its JSON must be shaped like a manifest (`[0,0,0,...]` and `[[[[...` cost far more memory and
stack than their bytes), every field the client uses has its type and range (a huge integer, a
negative size, a non-string path or a sha256 that is not hex is named, never an internal
KeyError/OverflowError), and every path is a plain relative path that stays inside DEST: no
`..`, no absolute path, no NUL, no backslash, no rgt name, no duplicate, nothing below another
entry (a file under a symlink entry would be written through the link), nothing hidden (a
`.git/hooks/` file is code that runs).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from boxagent.api import box_json
from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line

SCHEMA = "rgt.manifest/1"
META_DIR = ".rgt"                 # DEST/.rgt: the manifest's copy, pull.json, partial files
VERIFIED_NAME = "PULL_VERIFIED.json"
RSYNC_PARTIAL = ".rgt-partial"    # rsync's partial dir, one per folder
DEFAULT_MAX_BYTES = 64 << 20      # ~400,000 files; RGT_MAX_MANIFEST_BYTES raises it
MAX_PATH_BYTES = 4096             # PATH_MAX
MAX_NAME_BYTES = 255              # NAME_MAX
MAX_DEPTH = 256
MAX_SIZE = (1 << 63) - 1          # off_t
# A real manifest holds one `{` and about five `,` per ~100 bytes (one file per line); a value
# every few bytes is no manifest, only memory: 64 MB of `[0,0,...` is 256 MB of list.
DENSITY = 8
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
HIDDEN = "a hidden path"


def hint(host: Optional[str] = None) -> str:
    return ("no rgt agent sends that: check the box (it may be compromised), and put the real agent "
            "back with `rgt-client install %s`" % (host or "HOST"))


class _Bad(Exception):
    def __init__(self, field: str, problem: str):
        super().__init__(problem)
        self.field, self.problem = field, problem


def max_bytes() -> int:
    try:
        return max(1 << 20, int(os.environ.get("RGT_MAX_MANIFEST_BYTES") or DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


def too_big(where: str, size: int, code: int = exitcodes.ERROR) -> ClientError:
    return ClientError("%s is %d MiB, over the %d MiB a manifest may have; refused"
                       % (where, size >> 20, max_bytes() >> 20),
                       "a run with that many files: pack them on the box (tar) and pull the archive, "
                       "or raise the limit with RGT_MAX_MANIFEST_BYTES=<bytes>", code)


def parse(raw: bytes, where: str, code: int = exitcodes.ERROR, host: Optional[str] = None) -> Dict[str, Any]:
    """The manifest in raw, checked; ClientError naming `where` and the field otherwise."""
    if len(raw) > max_bytes():
        raise too_big(where, len(raw), code)
    values = raw.count(b",") + raw.count(b"{") + raw.count(b"[")
    if values > len(raw) // DENSITY + 1024:
        raise ClientError("%s is not shaped like a manifest (%d JSON values in %d bytes); refused"
                          % (where, values, len(raw)), hint(host), code)
    try:
        m = box_json(raw.decode("utf-8"), max_bytes())     # strict: a path is its bytes
    except ValueError as exc:
        raise ClientError("%s is not valid JSON: %s" % (where, safe_line(str(exc))[:200]),
                          "pull again to fetch it whole", code)
    check(m, where, code, host)
    return m


def check(m: Any, where: str, code: int = exitcodes.USAGE, host: Optional[str] = None) -> None:
    """Refuse a manifest that is not one, or whose paths would leave DEST."""
    try:
        _check(m)
    except _Bad as b:
        why = hint(host)
        if HIDDEN in b.problem:     # an agent older than this client still lists hidden files
            why = ("an agent older than this client lists hidden files: `rgt-client install %s` updates it "
                   "(it then skips them); else check the box, it may be compromised" % (host or "HOST"))
        raise ClientError("%s: %s: %s" % (where, b.field, b.problem), why, code) from None


def _check(m: Any) -> None:
    if not isinstance(m, dict) or m.get("schema") != SCHEMA:
        raise _Bad("schema", "not an rgt manifest (schema %s)" % SCHEMA)
    files = _list(m, "files", required=True)
    links = _list(m, "symlinks")
    for key in ("skipped", "warnings"):
        _list(m, key)
    if not isinstance(m.get("run", ""), (str, type(None))):
        raise _Bad("run", "expected a string")
    kinds: Dict[str, Tuple[str, str]] = {}
    for i, f in enumerate(files):
        field = "files[%d]" % i
        _entry(f, field, kinds, "file")
        _number(f.get("bytes"), field + ".bytes", 0, MAX_SIZE)
        _number(f.get("mtime_ns"), field + ".mtime_ns", -(1 << 63), (1 << 63) - 1)
        sha = f.get("sha256")
        if not isinstance(sha, str) or not _HEX64.match(sha):
            raise _Bad(field + ".sha256", "expected 64 lowercase hex digits, got %s" % _show(sha))
    for i, s in enumerate(links):
        field = "symlinks[%d]" % i
        _entry(s, field, kinds, "symlink")
        t = s.get("target")
        if not isinstance(t, str) or not t or "\0" in t or len(t.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise _Bad(field + ".target", "expected a symlink target (text without NUL), got %s" % _show(t))
    _nesting(kinds)


def _list(m: Dict[str, Any], key: str, required: bool = False) -> List[Any]:
    v = m.get(key)
    if v is None and not required:
        return []
    if not isinstance(v, list):
        raise _Bad(key, "expected a list, got %s" % _show(v))
    return v


def _entry(e: Any, field: str, kinds: Dict[str, Tuple[str, str]], kind: str) -> None:
    if not isinstance(e, dict):
        raise _Bad(field, "expected an object, got %s" % _show(e))
    path = e.get("path")
    why = bad_path(path)
    if why or not isinstance(path, str):
        raise _Bad(field + ".path", "%s: %s" % (_show(path), why))
    if path in kinds:
        raise _Bad(field + ".path", "%s: listed twice (also %s)" % (_show(path), kinds[path][1]))
    kinds[path] = (kind, field)


def _number(v: Any, field: str, low: int, high: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(field, "expected a whole number, got %s" % _show(v))
    if not low <= v <= high:
        raise _Bad(field, "%s is out of range" % _show(v))


def bad_path(p: Any) -> Optional[str]:
    """Why p cannot be a path below DEST; None when it can."""
    if not isinstance(p, str) or not p:
        return "expected a non-empty string"
    if "\0" in p:
        return "a NUL byte in a path"
    if "\\" in p:
        return "a backslash in a path (a separator on Windows)"
    if p.startswith("/"):
        return "an absolute path (paths must stay inside DEST)"
    try:
        raw = os.fsencode(p)
    except UnicodeError:
        return "not a file name this system can write"
    parts = p.split("/")
    if any(s in ("", ".", "..") for s in parts):
        return "an empty, `.` or `..` component (paths must stay inside DEST)"
    if len(raw) > MAX_PATH_BYTES or len(parts) > MAX_DEPTH or any(len(os.fsencode(s)) > MAX_NAME_BYTES for s in parts):
        return "longer or deeper than a file system allows"
    if parts[0] == VERIFIED_NAME:
        return "one of rgt's own names in DEST"
    # `.git/hooks/post-commit` in a manifest once ran box code at the next commit in DEST
    if any(s.startswith(".") for s in parts):
        return HIDDEN + " (rgt never writes one: .git, .env, .ssh...)"
    return None


def _nesting(kinds: Dict[str, Tuple[str, str]]) -> None:
    """No entry lies below another: below a symlink it would be written through the link."""
    for path, (_kind, field) in kinds.items():
        parts = path.split("/")
        for n in range(1, len(parts)):
            above = kinds.get("/".join(parts[:n]))
            if above:
                raise _Bad(field + ".path", "%s lies below the %s %s (%s)"
                           % (_show(path), above[0], _show("/".join(parts[:n])), above[1]))


def check_head(line: bytes, host: str) -> Dict[str, Any]:
    """The pull-info header line, every field the client uses checked."""
    try:
        head = box_json(line)
    except ValueError:
        head = None
    where = "the pull-info header from %s" % host
    if not isinstance(head, dict):
        raise ClientError("%s is not a JSON object: %s" % (where, safe_line(line[:80])), hint(host))
    try:
        _number(head.get("manifest_bytes"), "manifest_bytes", 0, MAX_SIZE)
        sha = head.get("manifest_sha256")
        if not isinstance(sha, str) or not _HEX64.match(sha):
            raise _Bad("manifest_sha256", "expected 64 lowercase hex digits, got %s" % _show(sha))
        root = head.get("root")
        if not isinstance(root, str) or not root.startswith("/") or "\0" in root or "\n" in root:
            raise _Bad("root", "expected an absolute path, got %s" % _show(root))
        for key in ("rsync", "rsync_version", "run_state", "host", "run"):
            v = head.get(key)
            if v is not None and (not isinstance(v, str) or "\0" in v or "\n" in v or len(v) > MAX_PATH_BYTES):
                raise _Bad(key, "expected a line of text, got %s" % _show(v))
        if not isinstance(head.get("profile") or {}, dict):
            raise _Bad("profile", "expected an object, got %s" % _show(head.get("profile")))
    except _Bad as b:
        raise ClientError("%s: %s: %s" % (where, b.field, b.problem), hint(host)) from None
    return head


def _show(v: Any) -> str:
    """A value from the box, quoted for an error line: sanitised and cut short."""
    text = safe_line(json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else "'%s'" % v)
    return text if len(text) <= 120 else text[:117] + "..."


__all__ = ["parse", "check", "check_head", "hint", "bad_path", "max_bytes", "too_big", "SCHEMA", "META_DIR", "VERIFIED_NAME",
           "RSYNC_PARTIAL"]
