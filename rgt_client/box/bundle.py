"""Build the agent into ONE file, `rgt-agent.pyz` (the zipapp format: a shebang line + a zip).

Byte-for-byte reproducible: sorted file order, fixed timestamps and permissions, no
__pycache__, so the same sources give the same sha256 — `install` and `status` compare it.
The pure-Python `pynvml.py` from the installed nvidia-ml-py travels inside.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import zipfile
from pathlib import Path

from rgt_client.box import pyzmain
from rgt_client.errors import ClientError

SHEBANG = b"#!/usr/bin/env python3\n"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def agent_source_dir() -> Path:
    spec = importlib.util.find_spec("boxagent")
    if spec is None or not spec.submodule_search_locations:
        raise ClientError("the boxagent package is not importable", "reinstall rgt: pip install -e .")
    return Path(list(spec.submodule_search_locations)[0])


def pynvml_source() -> Path:
    spec = importlib.util.find_spec("pynvml")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ClientError("nvidia-ml-py (pynvml.py) is not installed here, so the agent cannot carry it",
                          "pip install nvidia-ml-py")
    return Path(spec.origin)


# Package data the agent reads with pkgutil.get_data (pyproject's package-data says the same
# for a wheel): the known-failure index triage searches (boxagent/triage/known/).
PACKAGE_DATA = ("*.py", "*.json.z")


def _entries() -> list[tuple[str, bytes]]:
    src = agent_source_dir()
    files = []
    for path in sorted(p for pattern in PACKAGE_DATA for p in src.rglob(pattern)):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts:
            continue
        files.append(("boxagent/" + rel.as_posix(), path.read_bytes()))
    files.append(("pynvml.py", pynvml_source().read_bytes()))
    files.append(("__main__.py", pyzmain.MAIN))
    return sorted(files)


def build_agent_bytes() -> bytes:
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in _entries():
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100644 << 16)
            info.create_system = 3
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return buf.getvalue()


def build_agent(dest: str | os.PathLike | None = None) -> tuple[Path, str]:
    """Write rgt-agent.pyz (default: ~/.cache/rgt/rgt-agent.pyz); return (path, sha256)."""
    data = build_agent_bytes()
    sha = hashlib.sha256(data).hexdigest()
    path = Path(dest) if dest else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rgt" / "rgt-agent.pyz"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path, sha
