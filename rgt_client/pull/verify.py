"""Check a local copy against a run's manifest: the only thing that makes a pull "verified".

Set equality first (every manifest file present, nothing extra), then sizes, then sha256 of
every file (threads, the agent's own hashing code). PULL_VERIFIED.json is written only when
everything matches; a stale one from an earlier pull is moved aside, never left to lie.

DEST layout: the pulled files as they were under the run's workdir, plus
  PULL_VERIFIED.json     run, manifest_sha256, files, bytes, symlinks, verified_at
  .rgt/manifest.json     the manifest's exact bytes from the box
  .rgt/pull.json         host, run, profile facts (for the teardown gate), method, pulled_at
  .rgt/partial/          the no-rsync path's partial files;  */.rgt-partial/: rsync's
"""
from __future__ import annotations

import hashlib
import os
import stat as stat_mod
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from boxagent.api import dumps, hash_many
from rgt_client import exitcodes
from rgt_client.pull import manifest_check
from rgt_client.pull.destdir import Blocked, Dest
from rgt_client.errors import ClientError
from rgt_client.pull.manifest_check import META_DIR, RSYNC_PARTIAL, VERIFIED_NAME

SCHEMA = "rgt.pull_verified/1"
STALE_NAME = META_DIR + "/PULL_VERIFIED.stale.json"

# (size, mtime_ns, sha256) already known for a path: hashed while the pull wrote it.
Known = Dict[str, Tuple[int, int, str]]


@dataclass
class Problem:
    path: str
    kind: str        # missing | extra | size | sha256 | symlink | type | unreadable | load | empty
    detail: str = ""


@dataclass
class VerifyResult:
    dest: str
    run: str
    manifest_sha256: str
    files: int                 # manifest files
    bytes: int
    symlinks: int
    problems: List[Problem] = field(default_factory=list)
    checked: int = 0           # files whose sha256 matched
    loads: List[Dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    symlinks_not_made: List[str] = field(default_factory=list)    # a pull that makes no links

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> Dict[str, Any]:
        return {"ok": self.ok, "dest": self.dest, "run": self.run, "manifest_sha256": self.manifest_sha256,
                "files": self.files, "bytes": self.bytes, "symlinks": self.symlinks,
                "symlinks_not_made": self.symlinks_not_made, "checked": self.checked,
                "problems": [p.__dict__ for p in self.problems], "loads": self.loads,
                "elapsed_s": round(self.elapsed_s, 3)}


def manifest_path(dest: str) -> str:
    return os.path.join(dest, META_DIR, "manifest.json")


def load_manifest(path: str) -> Tuple[bytes, Dict[str, Any]]:
    """(exact bytes, parsed) of a manifest; ClientError(USAGE) when it is missing or not one."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(manifest_check.max_bytes() + 1)
    except OSError as exc:
        raise ClientError("cannot read the manifest %s: %s" % (path, exc.strerror or exc),
                          "pull first (rgt-client pull HOST RUN DEST), or name it with --manifest",
                          exitcodes.USAGE)
    return raw, manifest_check.parse(raw, path, exitcodes.USAGE)


def check_manifest(m: Any, where: str) -> None:
    """Refuse a manifest that is not one, or whose paths would write outside DEST (a box we do
    not trust must not be able to plant `../../.bashrc` or write through its own symlink)."""
    manifest_check.check(m, where)


def local_listing(dest: Dest) -> Tuple[Dict[str, os.stat_result], Dict[str, str], List[str]]:
    """(regular files, symlinks -> target, other entries) under dest, without rgt's own names;
    folders are entered by descriptor, never through a symlink."""
    files: Dict[str, os.stat_result] = {}
    links: Dict[str, str] = {}
    other: List[str] = []
    stack = [""]
    while stack:
        cur = stack.pop()
        try:
            entries = list(dest.entries(cur))
        except (OSError, Blocked) as exc:
            raise ClientError("cannot list %s: %s" % (os.path.join(dest.path, cur), getattr(exc, "strerror", None)
                                                      or exc), "check the folder's permissions")
        for name, st in entries:
            rel = cur + "/" + name if cur else name
            if (not cur and name in (META_DIR, VERIFIED_NAME)) or name == RSYNC_PARTIAL:
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                stack.append(rel)
            elif stat_mod.S_ISREG(st.st_mode):
                files[rel] = st
            elif stat_mod.S_ISLNK(st.st_mode):
                links[rel] = dest.readlink(rel)
            else:
                other.append(rel)
    return files, links, other


def _compare_sets(m: Dict[str, Any], files: Dict[str, os.stat_result], links: Dict[str, str],
                  other: List[str], not_made: Optional[List[str]] = None) -> Tuple[List[Problem], List[Dict[str, Any]]]:
    """Missing/extra/size/symlink problems; returns the manifest entries still to hash. With
    not_made (a pull that makes no links), an absent manifest symlink is listed there instead."""
    problems: List[Problem] = []
    to_hash = []
    want = {f["path"]: f for f in m["files"]}
    want_links = {s["path"]: s["target"] for s in m.get("symlinks") or []}
    for path, f in want.items():
        st = files.get(path)
        if st is None:
            kind = "type" if path in links or path in other else "missing"
            problems.append(Problem(path, kind, "expected a file of %d bytes" % f["bytes"]))
        elif st.st_size != f["bytes"]:
            problems.append(Problem(path, "size", "%d bytes, expected %d" % (st.st_size, f["bytes"])))
        else:
            to_hash.append(f)
    for path, target in want_links.items():
        got = links.get(path)
        if got is None and not_made is not None and path not in files and path not in other:
            not_made.append(path)
        elif got is None:
            problems.append(Problem(path, "type" if path in files else "missing", "expected a symlink -> %s" % target))
        elif got != target:
            problems.append(Problem(path, "symlink", "points to %s, expected %s" % (got, target)))
    for path in sorted(set(files) - set(want)) + sorted(set(links) - set(want_links)) + sorted(other):
        problems.append(Problem(path, "extra", "not in the manifest"))
    return problems, to_hash


def _hash_check(dest: str, to_hash: List[Dict[str, Any]], files: Dict[str, os.stat_result],
                known: Optional[Known], workers: Optional[int]) -> Tuple[List[Problem], int]:
    known = known or {}
    need, sums = [], {}
    for f in to_hash:
        st = files[f["path"]]
        k = known.get(f["path"])
        if k and k[0] == st.st_size and k[1] == st.st_mtime_ns:
            sums[f["path"]] = k[2]
        else:
            need.append(f)
    full = {os.path.join(dest, f["path"]): f["path"] for f in need}
    for p, h in hash_many(((p, files[r].st_size) for p, r in full.items()), workers).items():
        sums[full[p]] = h.sha256 if h.sha256 else "!" + (h.error or "unreadable")
    problems, ok = [], 0
    for f in to_hash:
        got = sums[f["path"]]
        if got.startswith("!"):
            problems.append(Problem(f["path"], "unreadable", got[1:]))
        elif got != f["sha256"]:
            problems.append(Problem(f["path"], "sha256", "is %s…, expected %s…" % (got[:12], f["sha256"][:12])))
        else:
            ok += 1
    return problems, ok


def verify(dest: str, manifest: Optional[str] = None, check_load: bool = False,
           known: Optional[Known] = None, workers: Optional[int] = None,
           now: Optional[float] = None, links: bool = True,
           expect_dir: Optional[Tuple[int, int]] = None) -> VerifyResult:
    """Check dest against the manifest (default dest/.rgt/manifest.json); write PULL_VERIFIED.json
    when everything matches, move a stale one aside when not. links=False: the pull made no
    symlinks (MCP); an absent manifest link is counted in symlinks_not_made, not a problem (its
    target is kept in .rgt/manifest.json, so nothing of the run is lost)."""
    t0 = time.monotonic()
    dest = os.path.abspath(dest)
    if not os.path.isdir(dest):
        raise ClientError("%s is not a directory" % dest, "name the folder you pulled into", exitcodes.USAGE)
    with Dest(dest) as d:
        st = os.fstat(d.fd)
        if expect_dir is not None and (st.st_dev, st.st_ino) != expect_dir:
            # a folder swapped in on the path after the copy: never read nor marked verified
            raise ClientError("%s is no longer the folder the pull wrote into; refused" % dest,
                              "check who else can write above it, then pull again")
        raw, m = load_manifest(manifest or manifest_path(dest))
        files, links_here, other = local_listing(d)
        not_made: Optional[List[str]] = None if links else []
        problems, to_hash = _compare_sets(m, files, links_here, other, not_made)
        if not m["files"] and not m.get("symlinks"):
            # An empty manifest "verifies" trivially; calling that safe would let a typo in the
            # include patterns end with the results destroyed on the box.
            problems.append(Problem("(manifest)", "empty", "the manifest lists no files: do the run's "
                                    "[artifacts] include patterns match what it wrote?"))
        hash_problems, ok = _hash_check(dest, to_hash, files, known, workers)
        res = VerifyResult(dest, str(m.get("run") or "?"), hashlib.sha256(raw).hexdigest(), len(m["files"]),
                           sum(f["bytes"] for f in m["files"]), len(m.get("symlinks") or []),
                           sorted(problems + hash_problems, key=lambda p: (p.kind != "sha256", p.path)), ok,
                           symlinks_not_made=not_made or [])
        if check_load:
            res.loads = check_loads(dest, [f["path"] for f in m["files"]])
            res.problems += [Problem(x["path"], "load", x["detail"]) for x in res.loads if x["ok"] is False]
        res.elapsed_s = time.monotonic() - t0
        record(d, res, now)
    return res


def record(dest: Dest, res: VerifyResult, now: Optional[float] = None) -> None:
    """PULL_VERIFIED.json when res is ok; else an old one moved aside. Both by descriptor: a
    `.rgt` that became a symlink is refused, not written through."""
    try:
        if not res.ok:
            if dest.lstat(VERIFIED_NAME) is not None:  # never leave an old "verified" beside files that differ
                dest.replace(VERIFIED_NAME, STALE_NAME)
            return
        _sync()
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
        body = {"schema": SCHEMA, "run": res.run, "manifest_sha256": res.manifest_sha256, "files": res.files,
                "bytes": res.bytes, "symlinks": res.symlinks, "verified_at": when}
        if res.symlinks_not_made:
            body["symlinks_not_made"] = len(res.symlinks_not_made)
        dest.write_atomic(VERIFIED_NAME, (dumps(body) + "\n").encode("utf-8"))
    except Blocked as b:
        raise ClientError("cannot write %s in %s: %s %s" % (VERIFIED_NAME, res.dest, b.at, b.why),
                          "make %s a plain folder again" % b.at)


def _sync() -> None:
    """The files reach the disk before the marker that says the box may go: a laptop crash
    right after a teardown must not lose the only copy."""
    try:
        os.sync()
    except (AttributeError, OSError):
        pass


# Run by this Python in a child with an empty environment, in /, on this process's sys.path less
# DEST: torch's unpickler parses a box's file there, never in the process holding the laptop's
# environment (tokens in it), and a `torch/` folder the box wrote into DEST is never imported.
_TORCH_CHILD = r"""
import json, sys
sys.path[:] = json.loads(sys.stdin.read())
try:
    import torch
except ImportError:
    print(json.dumps({"missing": True})); sys.exit(0)
import re
m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(.*)$", str(getattr(torch, "__version__", "0")).split("+")[0])
release = tuple(int(g or 0) for g in m.groups()[:3]) if m else (0, 0, 0)
# The fix is in the 2.6.0 release: a 2.6.0 alpha, dev build or release candidate may predate it.
if release < (2, 6, 0) or (release == (2, 6, 0) and m.group(4)):
    print(json.dumps({"refused": str(torch.__version__)[:40]})); sys.exit(0)
torch.load(sys.argv[1], map_location="cpu", weights_only=True)
print(json.dumps({"ok": True}))
"""
TORCH_SAFE = "torch >= 2.6 (weights_only=True runs a file's code in older torch: CVE-2025-32434)"


def _load_torch(path: str, dest: str = "") -> Optional[str]:
    """torch.load(weights_only=True) in a child. torch <= 2.5.1 runs a crafted file's code even
    with weights_only=True (CVE-2025-32434): a box's .pt would run on this laptop, so an older
    torch is refused, never called."""
    import json
    import subprocess
    import sys
    inside = os.path.realpath(dest or os.path.dirname(path))
    paths = [p for p in sys.path if p and not (os.path.realpath(p) + os.sep).startswith(inside + os.sep)]
    try:
        res = subprocess.run([sys.executable, "-I", "-c", _TORCH_CHILD, os.path.abspath(path)],
                             input=json.dumps(paths).encode(), capture_output=True, env={}, cwd="/",
                             timeout=600)
    except subprocess.TimeoutExpired:
        raise RuntimeError("torch.load took over 10 minutes") from None
    try:
        answer = json.loads(res.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = {}
    if answer.get("missing"):
        raise ModuleNotFoundError("torch")
    if "refused" in answer:
        raise ImportError("%s; this one is %s" % (TORCH_SAFE, answer["refused"]))
    if answer.get("ok") and res.returncode == 0:
        return None
    err = res.stderr.decode("utf-8", "replace").strip().splitlines()
    raise RuntimeError(err[-1] if err else "the loading process exited with %d" % res.returncode)


def _load_safetensors(path: str, dest: str = "") -> Optional[str]:
    from safetensors import safe_open
    with safe_open(path, framework="numpy") as fh:
        for k in fh.keys():
            fh.get_tensor(k)
    return None


def check_loads(dest: str, paths: List[str]) -> List[Dict[str, Any]]:
    """Open .pt/.pth/.safetensors with torch/safetensors when installed: a truncated checkpoint
    can hash "right" when the box wrote it truncated."""
    out = []
    for rel in paths:
        ext = os.path.splitext(rel)[1].lower()
        loader, lib = {".pt": (_load_torch, "torch"), ".pth": (_load_torch, "torch"),
                       ".safetensors": (_load_safetensors, "safetensors")}.get(ext, (None, ""))
        if loader is None:
            continue
        try:
            loader(os.path.join(dest, rel), dest)
            out.append({"path": rel, "ok": True, "detail": "loaded with %s" % lib})
        except ModuleNotFoundError:
            out.append({"path": rel, "ok": None, "detail": "skipped: %s is not installed here" % lib})
        except ImportError as exc:
            out.append({"path": rel, "ok": None, "detail": "skipped: needs %s" % exc})
        except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
            out.append({"path": rel, "ok": False, "detail": "%s cannot load it: %s: %s"
                        % (lib, type(exc).__name__, str(exc)[:200])})
    return out
