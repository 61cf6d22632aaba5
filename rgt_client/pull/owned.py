"""A pull replaces only files an earlier pull of the same run wrote: the record of what it wrote.

DEST is the user's (or, through the MCP server, rgt's own folder), but the paths in it come from
the box. A box that lists `__init__.py` or `conftest.py` once replaced the user's own files when
pulled into `src/` or `tests/`, and they ran its code. So before a byte moves, every manifest
entry (file or symlink) that already exists in DEST must be one rgt pulled there for the same host and run
(DEST/.rgt/written.json, kept by each pull; a pull made before the record existed is known by
its .rgt/manifest.json and pull.json). Anything else is refused, named, and left as it is. A
name counts as written once it stands in DEST after the pull's copy, not when the pull meant to
write it.
"""
from __future__ import annotations

import json
import stat as stat_mod
from typing import Any, Dict, List, Set

from rgt_client.errors import ClientError
from rgt_client.pull.destdir import Blocked, Dest
from rgt_client.pull.manifest_check import META_DIR, max_bytes
from rgt_client.textsafe import safe_line

RECORD = META_DIR + "/written.json"
SCHEMA = "rgt.written/1"
SHOWN = 3


def _read_json(d: Dest, rel: str) -> Any:
    try:
        return json.loads(d.read(rel, max_bytes()).decode("utf-8"))
    except (OSError, ValueError, Blocked):
        return None


def _key(host: str, run: str) -> str:
    return "%s\t%s" % (host, run)


def load(d: Dest) -> Dict[str, List[str]]:
    """{host<TAB>run: [paths an earlier pull wrote]} from DEST's record (and, where DEST has no
    record at all, an older pull's meta). A path a pull was about to write when it stopped
    (`pending`) counts only when what stands there is what it was to write (below)."""
    rec = _read_json(d, RECORD)
    ok = isinstance(rec, dict) and rec.get("schema") == SCHEMA
    by_run = rec.get("by_run") if ok else None
    out = {k: [p for p in v if isinstance(p, str)] for k, v in (by_run or {}).items()
           if isinstance(k, str) and isinstance(v, list)}
    pending = rec.get("pending") if ok else None
    for key, entries in (pending or {}).items():
        if isinstance(key, str) and isinstance(entries, dict):
            landed = [p for p, want in entries.items() if isinstance(p, str) and _landed(d, p, want)]
            out[key] = sorted(set(out.get(key, [])) | set(landed))
    if rec is not None:
        return out
    meta, old = _read_json(d, META_DIR + "/pull.json"), _read_json(d, META_DIR + "/manifest.json")
    if isinstance(meta, dict) and isinstance(old, dict) and isinstance(old.get("files"), list):
        key = _key(str(meta.get("host")), str(meta.get("run")))
        paths = [f.get("path") for f in old["files"] + (old.get("symlinks") or []) if isinstance(f, dict)]
        out.setdefault(key, [])
        out[key] = sorted(set(out[key]) | {p for p in paths if isinstance(p, str)})
    return out


def _landed(d: Dest, path: str, want: Any) -> bool:
    """Whether DEST/path is what a stopped pull was to write there: its symlink with the same
    target, or a file of the manifest's size and modification second (both methods set it)."""
    try:
        st = d.lstat(path)
        if st is None or not isinstance(want, dict):
            return False
        if "target" in want:
            return stat_mod.S_ISLNK(st.st_mode) and d.readlink(path) == want["target"]
        return (stat_mod.S_ISREG(st.st_mode) and st.st_size == want.get("bytes")
                and isinstance(want.get("mtime_ns"), int) and int(st.st_mtime) == want["mtime_ns"] // 10 ** 9)
    except (OSError, Blocked):
        return False


def check_one_run(d: Dest, host: str, run: str, record: Dict[str, List[str]]) -> None:
    """Refuse rgt's own folder for HOST/RUN when its record names another host or run: a pull
    of run r1 labelled v2 (r1-v2) must not add to the folder a pull of run `r1-v2` verified, nor
    one box's files land in another box's verified folder."""
    others = sorted(k for k in record if k != _key(host, run))
    if others:
        o_host, _, o_run = others[0].partition("\t")
        raise ClientError("%s holds the pull of run %s on %s, not of run %s on %s; refused, nothing was written"
                          % (d.path, safe_line(o_run)[:100], safe_line(o_host)[:100], safe_line(run), host),
                          "leave dest out (rgt's folder HOST/RUN), or give this pull another label")


def check(d: Dest, host: str, run: str, manifest: Dict[str, Any], record: Dict[str, List[str]]) -> None:
    """Refuse the pull when a manifest entry of any type (file or symlink: a box's
    `conftest.py -> new.txt` once replaced the user's tests/conftest.py) would replace an entry
    no pull of this run wrote."""
    ours: Set[str] = set(record.get(_key(host, run), []))
    foreign = []
    for path in [f["path"] for f in manifest["files"]] + [s["path"] for s in manifest.get("symlinks") or []]:
        if path in ours:
            continue
        try:
            st = d.lstat(path)
        except Blocked:
            continue            # check_parents names it
        if st is not None:
            foreign.append(path)
            if len(foreign) > SHOWN:
                break
    if foreign:
        shown = ", ".join(safe_line(p)[:200] for p in foreign[:SHOWN])
        raise ClientError("the manifest of %s on %s would replace %s in %s, which no pull of this run wrote; "
                          "refused, nothing was changed" % (safe_line(run), host, shown, d.path),
                          "pull into an empty folder (leave DEST out: rgt's own folder for HOST/RUN), or "
                          "move those files away first")


def save(d: Dest, host: str, run: str, manifest: Dict[str, Any], record: Dict[str, List[str]]) -> None:
    """Before a byte moves: this pull's paths as pending, each with what it will be (a pull the
    box breaks off before `conftest.py` arrives must not own that name: a file of the user's put
    there later would be replaced by "the same pull again")."""
    _write(d, record, {_key(host, run): _expected(manifest)})


def done(d: Dest, host: str, run: str, manifest: Dict[str, Any], record: Dict[str, List[str]]) -> None:
    """After the copy: the pull owns the names it wrote (each that now stands in DEST)."""
    key = _key(host, run)
    record = dict(record)
    landed = {p for p in _expected(manifest) if _exists(d, p)}
    record[key] = sorted(set(record.get(key, [])) | landed)
    _write(d, record, {})


def _expected(manifest: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {f["path"]: {"bytes": f["bytes"], "mtime_ns": f.get("mtime_ns")}
                                      for f in manifest["files"]}
    out.update({s["path"]: {"target": s["target"]} for s in manifest.get("symlinks") or []})
    return out


def _exists(d: Dest, path: str) -> bool:
    try:
        return d.lstat(path) is not None
    except (OSError, Blocked):
        return False


def _write(d: Dest, record: Dict[str, List[str]], pending: Dict[str, Dict[str, Any]]) -> None:
    doc = {"schema": SCHEMA, "by_run": record, "pending": pending}
    d.write_atomic(RECORD, (json.dumps(doc) + "\n").encode("utf-8"))
