"""The code `rgt-agent.pyz` starts with: its `__main__.py`, and the `boot.py` its precompile leaves
beside it. Text only: bundle.py puts MAIN in the file; nothing here runs on the laptop.

zipimport compiles every module from source on every call: the file can hold no .pyc (they depend
on the box's Python, and the build must be reproducible), and that compile was most of what
`status` cost on the box after Python's own start. So compiled code is kept beside the file, in
.agent-pyc/<agent sha256>/<cache tag>/, one entry per module: the Python's magic number, the hash
of the module's source as it is in THIS file, then the code. An entry runs only when both match
and it is ours (owner, mode 0600 in a 0700 dir): a stale entry (another build, another Python) or
a foreign one is never used, and a broken cache costs only the compile it would have saved.
`--rgt-precompile` fills it (install).

The precompile also writes an index (every module, its kind and the head its entry must carry),
valid only while the .pyz is the very file it was written from (size, mtime, ctime, inode), and
`.agent-pyc/boot.py`. The remote `status` runs boot.py: it starts the cached `__main__` code
without runpy (2-3 ms: importlib.util, contextlib, collections) and, with the index, loads every
module's entry without reading the zip at all (its directory, the sources, their hashes; with
`__main__`'s compile, 3 ms more). Anything off (another build of the .pyz, another Python, a file
that is not ours) and boot.py runs the .pyz exactly as `python rgt-agent.pyz` would.
"""
from __future__ import annotations

# The .pyz's __main__.py (Python 3.8+, stdlib only). No backslash below: this is a bytes literal.
MAIN = b'''import sys

BOOT = """# Written by rgt-agent.pyz --rgt-precompile (and rewritten by the next one). rgt's remote
# `status` runs it: it starts the agent from the bytecode cached beside it, without runpy and
# without reading the zip; anything off and it runs the .pyz as `python rgt-agent.pyz` would.
import sys

BUILD, TAG, STAMP = %r, %r, %r
# Where this file lies, not where it was written: a home moved or copied elsewhere must not run
# the .pyz at its old path, which another user may since have made (a sticky /tmp). The script's
# folder leaves sys.path first, so `os` (not loaded yet under -S) comes from the standard library
# (with PYTHONSAFEPATH, or -I, Python never put it there: the first entry is then its own).
if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated):
    del sys.path[0]
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PYZ, CACHE = os.path.join(os.path.dirname(HERE), "rgt-agent.pyz"), os.path.join(HERE, BUILD, TAG)


def cached_main():
    import marshal
    try:
        from _frozen_importlib_external import MAGIC_NUMBER
        st = os.stat(PYZ)
        if sys.implementation.cache_tag != TAG or (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != STAMP:
            return None
        with open(os.path.join(CACHE, "__main__.pyc"), "rb") as fh:
            own = os.fstat(fh.fileno())
            data = fh.read()
        if own.st_uid != os.geteuid() or own.st_mode & 0o077 or not data.startswith(MAGIC_NUMBER):
            return None
        return marshal.loads(data[len(MAGIC_NUMBER) + 8:])
    except (ImportError, OSError, ValueError, EOFError, TypeError):
        return None


sys.argv[0] = PYZ
sys.path.insert(0, PYZ)
code = cached_main()
if code is None:
    import runpy
    runpy.run_path(PYZ, run_name="__main__")
else:
    exec(code, {"__name__": "__main__", "__file__": PYZ + "/__main__.py", "__builtins__": __builtins__})
"""


class CachedZip(object):
    """Finds and loads this file's modules (boxagent.*, pynvml) with their bytecode cached."""

    def __init__(self, pyz, cache):
        import os
        try:
            from _frozen_importlib_external import MAGIC_NUMBER, _RAW_MAGIC_NUMBER
            from _imp import source_hash
            self.hash = lambda data: source_hash(_RAW_MAGIC_NUMBER, data)
        except ImportError:   # the same functions, public (slower to import)
            from importlib.util import MAGIC_NUMBER, source_hash
            self.hash = source_hash
        self.os, self.magic, self.pyz, self.cache, self.sources = os, MAGIC_NUMBER, pyz, cache, {}
        self.found_zip = None
        self.index = self.read_index()

    @property
    def zip(self):
        """The zipimporter of this file, made when first needed (it reads the zip's directory)."""
        if self.found_zip is None:
            import zipimport
            found = sys.path_importer_cache.get(self.pyz)
            self.found_zip = found if isinstance(found, zipimport.zipimporter) else zipimport.zipimporter(self.pyz)
        return self.found_zip

    def stamp(self):
        st = self.os.stat(self.pyz)
        return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def read_index(self):
        """{module: (is a package, the head its entry carries)} as precompile wrote it, or None
        unless it is ours and the .pyz is still the very file it was written from."""
        import marshal
        try:
            with open(self.os.path.join(self.cache, "index"), "rb") as fh:
                if not self.ours(self.os.fstat(fh.fileno())):
                    return None
                data = fh.read()
            if not data.startswith(self.magic):
                return None
            index = marshal.loads(data[len(self.magic):])
            if index.get("stamp") != self.stamp() or not isinstance(index.get("modules"), dict):
                return None
            return index["modules"]
        except (OSError, ValueError, EOFError, TypeError, AttributeError):
            return None

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in ("boxagent", "pynvml"):
            return None
        if self.index is not None:
            entry = self.index.get(name)
            if entry is None:
                return None
            package = entry[0]
            origin = self.origin(name, package)
        else:
            found = self.locate(name)
            if found is None:
                return None
            origin, package = found
        from importlib.machinery import ModuleSpec
        spec = ModuleSpec(name, self, origin=origin, is_package=package)
        spec.has_location = True
        if package:
            spec.submodule_search_locations = [self.os.path.dirname(origin)]
        return spec

    def origin(self, name, package):
        rel = self.os.path.join(self.pyz, *name.split("."))
        return self.os.path.join(rel, "__init__.py") if package else rel + ".py"

    def locate(self, name):
        """(the module's path inside this file, is it a package), or None; its source is kept."""
        for package in (True, False):
            origin = self.origin(name, package)
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
        entry = self.index.get(name) if self.index is not None else None
        if entry is not None:
            code = self.load(name, entry[1])
            if code is not None:
                return code
        return self.compiled(name)[1]

    def compiled(self, name):
        """(head, code) of the module from this file's source, cached code where it matches."""
        origin, source = self.sources.pop(name, None) or (None, None)
        if source is None:
            found = self.locate(name)
            if found is None:
                raise ImportError("no module %r in %s" % (name, self.pyz), name=name)
            origin, source = self.sources.pop(name)
        head = self.magic + self.hash(source)
        code = self.load(name, head)
        if code is None:
            code = compile(source, origin, "exec", dont_inherit=True)
            self.store(name, head, code)
        return head, code

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
        self.write(self.cache, name + ".pyc", head + marshal.dumps(code))

    def write(self, folder, name, data):
        os = self.os
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            if not self.ours(os.stat(folder)):
                return
            tmp = os.path.join(folder, ".%s.%d.tmp" % (name, os.getpid()))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, os.path.join(folder, name))
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
    """Compile every module of this file (and its __main__) into the cache, write the index and
    boot.py, and drop the caches of other builds."""
    import marshal
    import os
    import shutil
    import zipfile
    with zipfile.ZipFile(finder.pyz) as zf:
        names = [n[:-3].replace("/", ".") for n in zf.namelist() if n.endswith(".py") and n != "__main__.py"]
    finder.index, modules = None, {}
    for name in names:
        package = name.endswith(".__init__")
        module = name[:-len(".__init__")] if package else name
        modules[module] = (package, finder.compiled(module)[0])
        finder.sources.clear()
    origin = os.path.join(finder.pyz, "__main__.py")
    source = finder.zip.get_data(origin)
    finder.store("__main__", finder.magic + finder.hash(source), compile(source, origin, "exec", dont_inherit=True))
    stamp = finder.stamp()
    finder.write(finder.cache, "index", finder.magic + marshal.dumps({"stamp": stamp, "modules": modules}))
    builds = os.path.dirname(os.path.dirname(finder.cache))
    tag = sys.implementation.cache_tag
    try:                      # makedirs gave only the leaf 0700; boot.py is written only into ours
        if os.stat(builds).st_uid == os.geteuid():
            os.chmod(builds, 0o700)
    except OSError:
        pass
    build = os.path.basename(os.path.dirname(finder.cache))
    finder.write(builds, "boot.py", (BOOT % (build, tag, stamp)).encode("utf-8"))
    for old in os.listdir(builds):
        if old != os.path.basename(os.path.dirname(finder.cache)) and os.path.isdir(os.path.join(builds, old)):
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
