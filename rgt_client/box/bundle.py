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

from rgt_client.errors import ClientError

SHEBANG = b"#!/usr/bin/env python3\n"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# The .pyz's __main__.py (Python 3.8+, stdlib only). zipimport compiles every module from source
# on every call: the file can hold no .pyc (they depend on the box's Python, and the build must
# be reproducible), and that compile was most of what `status` cost on the box after Python's own
# start. So compiled code is kept beside the file, in .agent-pyc/<agent sha256>/<cache tag>/, one
# entry per module: the Python's magic number, the hash of the module's source as it is in THIS
# file, then the code. An entry runs only when both match and it is ours (owner, mode 0600 in a
# 0700 dir): a stale entry (another build, another Python) or a foreign one is never used, and a
# broken cache costs only the compile it would have saved. `--rgt-precompile` fills it (install).
_MAIN = b'''import sys


class CachedZip(object):
    """Finds and loads this file's modules (boxagent.*, pynvml) with their bytecode cached."""

    def __init__(self, pyz, cache):
        import os
        import zipimport
        try:
            from _frozen_importlib_external import MAGIC_NUMBER, _RAW_MAGIC_NUMBER
            from _imp import source_hash
            self.hash = lambda data: source_hash(_RAW_MAGIC_NUMBER, data)
        except ImportError:   # the same functions, public (slower to import)
            from importlib.util import MAGIC_NUMBER, source_hash
            self.hash = source_hash
        self.os, self.magic, self.cache, self.sources = os, MAGIC_NUMBER, cache, {}
        found = sys.path_importer_cache.get(pyz)
        self.zip = found if isinstance(found, zipimport.zipimporter) else zipimport.zipimporter(pyz)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in ("boxagent", "pynvml"):
            return None
        found = self.locate(name)
        if found is None:
            return None
        from importlib.machinery import ModuleSpec
        origin, package = found
        spec = ModuleSpec(name, self, origin=origin, is_package=package)
        spec.has_location = True
        if package:
            spec.submodule_search_locations = [self.os.path.dirname(origin)]
        return spec

    def locate(self, name):
        """(the module's path inside this file, is it a package), or None; its source is kept."""
        rel = self.os.path.join(self.zip.archive, *name.split("."))
        for origin, package in ((self.os.path.join(rel, "__init__.py"), True), (rel + ".py", False)):
            try:
                self.sources[name] = (origin, self.zip.get_data(origin))
            except OSError:
                continue
            return origin, package
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.get_code(module.__spec__.name), module.__dict__)

    def get_code(self, name):
        origin, source = self.sources.pop(name, None) or (None, None)
        if source is None:
            found = self.locate(name)
            if found is None:
                raise ImportError("no module %r in %s" % (name, self.zip.archive), name=name)
            origin, source = self.sources.pop(name)
        head = self.magic + self.hash(source)
        code = self.load(name, head)
        if code is None:
            code = compile(source, origin, "exec", dont_inherit=True)
            self.store(name, head, code)
        return code

    def get_source(self, name):
        found = self.locate(name)
        return None if found is None else self.sources.pop(name)[1].decode("utf-8")

    def get_data(self, path):
        return self.zip.get_data(path)

    def ours(self, st):
        return st.st_uid == self.os.geteuid() and not st.st_mode & 0o077

    def load(self, name, head):
        import marshal
        try:
            with open(self.os.path.join(self.cache, name + ".pyc"), "rb") as fh:
                if not self.ours(self.os.fstat(fh.fileno())):
                    return None
                data = fh.read()
            return marshal.loads(data[len(head):]) if data[:len(head)] == head else None
        except (OSError, ValueError, EOFError, TypeError):
            return None

    def store(self, name, head, code):
        import marshal
        os = self.os
        try:
            os.makedirs(self.cache, mode=0o700, exist_ok=True)
            if not self.ours(os.stat(self.cache)):
                return
            tmp = os.path.join(self.cache, ".%s.%d.tmp" % (name, os.getpid()))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(head + marshal.dumps(code))
            os.replace(tmp, os.path.join(self.cache, name + ".pyc"))
        except (OSError, ValueError):
            pass


def cache_dir(pyz):
    """<dir of the .pyz>/.agent-pyc/<the sha256 install wrote>/<cache tag>, or None."""
    import os
    here = os.path.dirname(pyz)
    try:
        with open(os.path.join(here, "agent.sha256"), "rb") as fh:
            key = fh.read(80).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    tag = sys.implementation.cache_tag
    if len(key) != 64 or key.strip("0123456789abcdef") or not tag:
        return None
    return os.path.join(here, ".agent-pyc", key, tag)


def precompile(finder):
    """Compile every module of this file into the cache; drop the caches of other builds."""
    import os
    import shutil
    import zipfile
    with zipfile.ZipFile(finder.zip.archive) as zf:
        names = [n[:-3].replace("/", ".") for n in zf.namelist() if n.endswith(".py") and n != "__main__.py"]
    for name in names:
        finder.get_code(name[:-len(".__init__")] if name.endswith(".__init__") else name)
        finder.sources.clear()
    builds = os.path.dirname(os.path.dirname(finder.cache))
    for old in os.listdir(builds):
        if old != os.path.basename(os.path.dirname(finder.cache)):
            shutil.rmtree(os.path.join(builds, old), ignore_errors=True)


def boot():
    import os
    pyz = os.path.dirname(os.path.abspath(__file__))
    cache = cache_dir(pyz)
    finder = CachedZip(pyz, cache) if cache else None
    if finder is not None:
        sys.meta_path.insert(0, finder)
    if sys.argv[1:] == ["--rgt-precompile"]:
        if finder is not None:
            precompile(finder)
        sys.exit(0)
    from boxagent.api import main
    sys.exit(main(process_exit=True))


boot()
'''


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
    files.append(("__main__.py", _MAIN))
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
