"""manifest.json (`rgt.manifest/1`): what a run's declared artifacts are, byte for byte.

"Synced" is a claim; the manifest is the evidence the laptop checks its copy against. It is
incremental (a file whose size and mtime_ns are unchanged keeps its hash, so refreshing a
100,000-file manifest after one checkpoint costs a walk and one hash), written atomically,
and laid out one file per line so a 100,000-file manifest stays a few MB and diffable.

    {"schema": "rgt.manifest/1", "run", "created_at", "root", "include", "exclude",
     "totals": {"files", "bytes", "symlinks", "skipped"},
     "files": [{"path", "bytes", "mtime_ns", "sha256"}],      # POSIX paths relative to root
     "symlinks": [{"path", "target"}],                         # recorded, never followed
     "skipped": [{"path", "reason"}], "warnings": [str]}
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.artifacts import globs, hashing
from boxagent.base import boxjson, safefile
from boxagent.base.errors import AgentError, UsageError
from boxagent.base.fsutil import atomic_write_bytes, read_json
from boxagent.base.home import Home

SCHEMA = "rgt.manifest/1"
_ENC = json.encoder.encode_basestring  # type: ignore[attr-defined]  # the C one when available
_RUNNING = ("running", "starting", "waiting")


def artifact_spec(spec: Dict[str, Any]) -> Tuple[str, List[str], List[str], Optional[str]]:
    """(workdir, include, exclude, writer stage) from a job spec; UsageError when unusable."""
    art = spec.get("artifacts")
    if isinstance(art, (str, list)):
        art = {"include": art}
    if not isinstance(art, dict) or not art.get("include"):
        raise UsageError("run %r declares no artifacts" % spec.get("name", "?"),
                         'add to the job: [artifacts] include = ["checkpoints/**", "results/*.json"]')
    inc, exc = _strings(art.get("include")), _strings(art.get("exclude") or [])
    workdir = spec.get("workdir")
    if not isinstance(workdir, str) or not workdir:
        raise UsageError("run %r has no workdir to take artifacts from" % spec.get("name", "?"),
                         "set workdir in the job")
    workdir = os.path.abspath(os.path.expanduser(workdir))
    stage = art.get("stage")
    return workdir, inc, exc, stage if isinstance(stage, str) else None


def _strings(value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return list(value)  # globs.check_pattern names any non-string item
    raise UsageError("artifact patterns must be a string or a list, got %r" % (value,))


def running_stages(state: Any) -> List[str]:
    """Names of stages state.json says are running (tolerates a list or a name-keyed dict)."""
    stages = state.get("stages") if isinstance(state, dict) else None
    if isinstance(stages, dict):
        stages = [dict(v, name=k) for k, v in stages.items() if isinstance(v, dict)]
    if not isinstance(stages, list):
        return []
    return [str(s.get("name")) for s in stages
            if isinstance(s, dict) and s.get("state") in _RUNNING]


def check_quiet(home: Home, run: str, writer: Optional[str], force: bool) -> None:
    """Refuse while the stage writing the artifacts runs: a half-written checkpoint would be
    hashed, pulled, verified against itself and called safe."""
    if force:
        return
    busy = running_stages(read_json(home.run_state(run), {}) or {})
    if writer:
        busy = [s for s in busy if s == writer]
    if busy:
        raise AgentError("stage %s of run %s is still running and may be writing its artifacts"
                         % (busy[0], run),
                         "wait for it to finish, or pass --force to take the files as they are now")


def _read_old(path: str) -> Tuple[bytes, Dict[str, Any]]:
    try:
        raw = safefile.read_bytes(path)
        old = boxjson.loads(raw)
    except (OSError, ValueError):       # a FIFO, a device, a deep or torn document: no old manifest
        return b"", {}
    return raw, old if isinstance(old, dict) and old.get("schema") == SCHEMA else {}


def _old_files(old: Dict[str, Any], root: str) -> Dict[str, Dict[str, Any]]:
    """path -> the previous manifest's entry, reused as is when the file is unchanged.
    Types are checked where an entry is reused (collect), not here: this runs per file."""
    if old.get("root") != root or not isinstance(old.get("files"), list):
        return {}
    try:
        return {f["path"]: f for f in old["files"]}
    except (TypeError, KeyError):  # a hand-edited manifest: start afresh
        return {}


def _hash_entries(root: str, todo: List[globs.Entry], workers: Optional[int]
                  ) -> Dict[str, hashing.Hashed]:
    full = {os.path.join(root, e.path): e for e in todo}
    got = hashing.hash_many(((p, e.size) for p, e in full.items()), workers)
    # A file that changed while it was read gets one more try; a writer still at work will
    # show up as unstable again and be flagged.
    again = [p for p, h in got.items() if h.sha256 and not h.stable]
    if again:
        got.update(hashing.hash_many(((p, full[p].size) for p in again), workers))
    return {full[p].path: h for p, h in got.items()}


HIDDEN_REASON = "hidden: a pull never writes a hidden path (.git/hooks would run, .env holds secrets)"


def _not_hidden(entries: List[Any], skipped: List[Dict[str, str]]) -> List[Any]:
    """The entries without a hidden component; each hidden folder or file is skipped once, named.
    The client refuses a manifest listing one, so a run whose outputs hold `.hydra/` still pulls
    the rest."""
    kept, seen = [], set()
    for e in entries:
        parts = e.path.split("/")
        at = next((i for i, p in enumerate(parts) if p.startswith(".")), None)
        if at is None:
            kept.append(e)
            continue
        top = "/".join(parts[:at + 1])
        if top not in seen:
            seen.add(top)
            skipped.append({"path": top, "reason": HIDDEN_REASON})
    return kept


def collect(root: str, include: List[str], exclude: List[str], old: Dict[str, Dict[str, Any]],
            workers: Optional[int] = None) -> Dict[str, Any]:
    """files/symlinks/skipped/warnings for the workdir, reusing old hashes where size+mtime match."""
    if not os.path.isdir(root):
        raise UsageError("workdir %s does not exist on this box" % root,
                         "check the job's workdir, or that the disk holding it is mounted")
    found, skipped = globs.expand(root, include, exclude)
    entries = _not_hidden(found, skipped)
    links = [{"path": e.path, "target": e.target} for e in entries if e.target is not None]
    slots: List[Any] = []   # the reused old entry, or the Entry still to hash, in walk order
    todo = []
    for e in entries:
        if e.target is not None:
            continue
        o = old.get(e.path)
        if o is None or o.get("bytes") != e.size or o.get("mtime_ns") != e.mtime_ns \
                or type(o.get("sha256")) is not str:
            todo.append(e)
            slots.append(e)
        else:
            slots.append(o)
    fresh = _hash_entries(root, todo, workers)
    files, warnings = [], []
    for o in slots:
        if type(o) is dict:
            files.append(o)
            continue
        h = fresh[o.path]
        if h.sha256 is None:
            skipped.append({"path": o.path, "reason": h.error or "unreadable"})
        else:
            files.append({"path": o.path, "bytes": h.size, "mtime_ns": h.mtime_ns, "sha256": h.sha256})
            if not h.stable:
                warnings.append("%s changed while it was hashed (still being written?)" % o.path)
    for pat in globs.unmatched(include, [e.path for e in found]):
        warnings.append("include pattern %r matched no file" % pat)
    return {"files": files, "symlinks": links, "skipped": skipped, "warnings": warnings,
            "hashed": len(todo)}


def serialize(m: Dict[str, Any], body: Optional[str] = None) -> bytes:
    """The manifest as UTF-8 JSON with one file entry per line (fast for 100,000 files)."""
    head = ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(m[k], ensure_ascii=False))
                      for k in m if k not in ("files", "symlinks", "skipped"))
    return ("{\n" + head + ",\n" + (body if body is not None else _body(m)) + "\n}\n").encode("utf-8")


def _body(m: Dict[str, Any]) -> str:
    rows = ['  {"path":%s,"bytes":%d,"mtime_ns":%d,"sha256":"%s"}'
            % (_ENC(f["path"]), f["bytes"], f["mtime_ns"], f["sha256"]) for f in m["files"]]
    parts = [_list("files", rows)]
    for key in ("symlinks", "skipped"):
        parts.append(_list(key, ["  " + json.dumps(x, ensure_ascii=False, separators=(",", ":"))
                                 for x in m.get(key, [])]))
    return ",\n".join(parts)


def _list(key: str, rows: List[str]) -> str:
    return ' "%s": [\n%s\n ]' % (key, ",\n".join(rows)) if rows else ' "%s": []' % key


def iso_now(now: Optional[float] = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


def build_manifest(home: Home, run: str, spec: Dict[str, Any], force: bool = False,
                   workers: Optional[int] = None, now: Optional[float] = None) -> Dict[str, Any]:
    """Build/refresh runs/<run>/manifest.json from spec["artifacts"]; return the manifest.

    Refuses (AgentError) while the stage writing the artifacts is running unless force: the
    daemon, which calls this once it has recorded the last stage's success, may pass force."""
    art = spec.get("artifacts")
    if isinstance(art, dict) and not art.get("include"):
        # A run that declares no artifacts: nothing to build, and nothing for the daemon to log.
        return {"schema": SCHEMA, "run": run, "declared": False, "files": [], "symlinks": [],
                "skipped": [], "warnings": [], "hashed": 0,
                "totals": {"files": 0, "bytes": 0, "symlinks": 0, "skipped": 0}}
    root, include, exclude, writer = artifact_spec(spec)
    check_quiet(home, run, writer, force)
    path = home.manifest(run)
    old_raw, old = _read_old(path)
    got = collect(root, include, exclude, _old_files(old, root), workers)
    m = {"schema": SCHEMA, "run": run, "created_at": old.get("created_at") or iso_now(now), "root": root,
         "include": include, "exclude": exclude,
         "totals": {"files": len(got["files"]), "bytes": sum(f["bytes"] for f in got["files"]),
                    "symlinks": len(got["symlinks"]), "skipped": len(got["skipped"])},
         "warnings": got["warnings"],
         "files": got["files"], "symlinks": got["symlinks"], "skipped": got["skipped"]}
    # Nothing changed: keep the file as it is, so its sha256 (in the run_succeeded notification)
    # stays the one the laptop's PULL_VERIFIED.json records.
    body = _body(m)
    if serialize(m, body) != old_raw:
        m["created_at"] = iso_now(now)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_bytes(path, serialize(m, body))
    m["hashed"] = got["hashed"]  # how many files this refresh hashed (not stored)
    return m


_SUMMARY_CACHE: Dict[str, Tuple[Tuple[int, int], Dict[str, Any]]] = {}


def summary(home: Home, run: str) -> Dict[str, Any]:
    """status.json runs[].artifacts: {files, bytes, manifest (path or null), sha256}.

    Cached on the file's (size, mtime_ns): the daemon asks every status write, and re-reading
    a 10 MB manifest each tick would be the agent's biggest cost."""
    path = home.manifest(run)
    try:
        st = os.stat(path)
    except OSError:
        return {"files": 0, "bytes": 0, "manifest": None, "sha256": None}
    key = (st.st_size, st.st_mtime_ns)
    hit = _SUMMARY_CACHE.get(path)
    if hit and hit[0] == key:
        return dict(hit[1])
    try:
        raw = safefile.read_bytes(path)
        totals = boxjson.loads(raw).get("totals") or {}
    except (OSError, ValueError, AttributeError):
        return {"files": 0, "bytes": 0, "manifest": path, "sha256": None, "error": "unreadable manifest"}
    out = {"files": int(totals.get("files") or 0), "bytes": int(totals.get("bytes") or 0),
           "manifest": path, "sha256": hashlib.sha256(raw).hexdigest()}
    _SUMMARY_CACHE[path] = (key, out)
    return dict(out)
