"""The sha256 of the agent this client would install, without rebuilding it on every `status`.

Building the zipapp costs tens of milliseconds (deflate level 9 over ~50 files); `status` must
stay close to one bare ssh round trip, so the hash is cached against a fingerprint of the
sources (path, size, mtime of every file that goes into the build).
"""
from __future__ import annotations

import hashlib
import json
import os

from rgt_client import bundle, hosts


def _fingerprint() -> str:
    h = hashlib.sha256()
    src = bundle.agent_source_dir()
    paths = sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts)
    paths.append(bundle.pynvml_source())
    for p in paths:
        st = p.stat()
        h.update(("%s\0%d\0%d\n" % (p, st.st_size, st.st_mtime_ns)).encode())
    return h.hexdigest()


def agent_bytes() -> tuple[bytes, str]:
    """Build the agent in memory (no shared temp file: parallel installs must not race)."""
    data = bundle.build_agent_bytes()
    sha = hashlib.sha256(data).hexdigest()
    _store(sha)
    return data, sha


def _cache_path():
    return hosts.config_dir() / "build-cache.json"


def _store(sha: str, fp: str | None = None) -> None:
    try:
        path = _cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".%d.tmp" % os.getpid())
        tmp.write_text(json.dumps({"fingerprint": fp or _fingerprint(), "sha256": sha}))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs a rebuild next time


def local_sha256() -> str | None:
    """The sha256 of the build this client would ship; None if the agent cannot be built here."""
    try:
        fp = _fingerprint()
    except Exception:  # noqa: BLE001 - no boxagent/pynvml here: status still works, without the check
        return None
    try:
        cached = json.loads(_cache_path().read_text())
        if cached.get("fingerprint") == fp:
            return cached.get("sha256")
    except (OSError, ValueError, AttributeError):
        pass
    try:
        sha = hashlib.sha256(bundle.build_agent_bytes()).hexdigest()
    except Exception:  # noqa: BLE001
        return None
    _store(sha, fp)
    return sha
