"""The sha256 of the agent this client would install, without rebuilding it on every `status`.

Building the zipapp costs tens of milliseconds (deflate level 9 over ~50 files); `status` must
stay close to one bare ssh round trip, so the hash is cached against a fingerprint of the
sources (path, size, mtime of every file that goes into the build).
"""
from __future__ import annotations

import json
import os

from rgt_client.box import hosts

# bundle (zipfile, pathlib...) is imported only to build: `status` only compares fingerprints.


def _sources() -> list[str]:
    """Every file whose change changes the build: the agent's sources and package data, pynvml.py,
    bundle.py and pyzmain.py (the file's bootstrap). The same set bundle._entries() packs."""
    import importlib.machinery

    from boxagent import api                      # the agent's face stands at its package's root
    root = os.path.dirname(os.path.abspath(api.__file__))
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out += [os.path.join(d, f) for f in files if f.endswith((".py", ".json.z"))]
    spec = importlib.machinery.PathFinder.find_spec("pynvml")
    if spec is None or not spec.origin:
        raise FileNotFoundError("pynvml")
    out.append(spec.origin)
    here = os.path.dirname(os.path.abspath(__file__))
    out += [os.path.join(here, "bundle.py"), os.path.join(here, "pyzmain.py")]
    return sorted(out)


def _fingerprint() -> str:
    """Paths, sizes and mtimes of the sources, as a crc32: it only says "the sources changed"
    (no secret to keep), and zlib spares every `status` loading OpenSSL for hashlib."""
    import zlib
    text = "".join("%s\0%d\0%d\n" % (p, st.st_size, st.st_mtime_ns)
                   for p, st in ((p, os.stat(p)) for p in _sources())).encode()
    return "%08x-%d" % (zlib.crc32(text), len(text))


def agent_bytes() -> tuple[bytes, str]:
    """Build the agent in memory (no shared temp file: parallel installs must not race)."""
    import hashlib

    from rgt_client.box import bundle
    data = bundle.build_agent_bytes()
    sha = hashlib.sha256(data).hexdigest()
    _store(sha)
    return data, sha


def _cache_path() -> str:
    return os.path.join(hosts.config_dir(), "build-cache.json")


def _store(sha: str, fp: str | None = None) -> None:
    try:
        path = _cache_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"fingerprint": fp or _fingerprint(), "sha256": sha}))
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
        with open(_cache_path(), encoding="utf-8") as fh:
            cached = json.loads(fh.read())
        if cached.get("fingerprint") == fp:
            return cached.get("sha256")
    except (OSError, ValueError, AttributeError):
        pass
    try:
        import hashlib

        from rgt_client.box import bundle
        sha = hashlib.sha256(bundle.build_agent_bytes()).hexdigest()
    except Exception:  # noqa: BLE001
        return None
    _store(sha, fp)
    return sha
