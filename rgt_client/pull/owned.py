"""A pull replaces only files an earlier pull of the same run wrote: the record of what it wrote.

DEST is the user's (or, through the MCP server, rgt's own folder), but the paths in it come from
the box. A box that lists `__init__.py` or `conftest.py` once replaced the user's own files when
pulled into `src/` or `tests/`, and they ran its code. So before a byte moves, every manifest
entry (file or symlink) that already exists in DEST must be one rgt pulled there for the same host and run
(DEST/.rgt/written.json, kept by each pull; a pull made before the record existed is known by
its .rgt/manifest.json and pull.json). Anything else is refused, named, and left as it is.
"""
from __future__ import annotations

import json
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
    """{host<TAB>run: [paths an earlier pull wrote]} from DEST's record (and an older pull's meta)."""
    rec = _read_json(d, RECORD)
    by_run = rec.get("by_run") if isinstance(rec, dict) and rec.get("schema") == SCHEMA else None
    out = {k: [p for p in v if isinstance(p, str)] for k, v in (by_run or {}).items()
           if isinstance(k, str) and isinstance(v, list)}
    meta, old = _read_json(d, META_DIR + "/pull.json"), _read_json(d, META_DIR + "/manifest.json")
    if isinstance(meta, dict) and isinstance(old, dict) and isinstance(old.get("files"), list):
        key = _key(str(meta.get("host")), str(meta.get("run")))
        paths = [f.get("path") for f in old["files"] + (old.get("symlinks") or []) if isinstance(f, dict)]
        out.setdefault(key, [])
        out[key] = sorted(set(out[key]) | {p for p in paths if isinstance(p, str)})
    return out


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
    """Add this pull's paths to DEST's record, before any of them is written."""
    paths = {f["path"] for f in manifest["files"]} | {s["path"] for s in manifest.get("symlinks") or []}
    key = _key(host, run)
    record = dict(record)
    record[key] = sorted(set(record.get(key, [])) | paths)
    d.write_atomic(RECORD, (json.dumps({"schema": SCHEMA, "by_run": record}) + "\n").encode("utf-8"))
