"""Which optional packages this Python can import, without importing them."""
from __future__ import annotations

import sys

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Dict

OPTIONAL = ("psutil", "requests", "watchdog", "pynvml")


def deps() -> Dict[str, bool]:
    import importlib.util
    out = {}
    for name in OPTIONAL:
        if _in_zip_on_path(name):   # pynvml travels inside the .pyz
            out[name] = True
            continue
        try:
            out[name] = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            out[name] = False
    return out


def _in_zip_on_path(name: str) -> bool:
    """True when a zip on sys.path (the .pyz) holds the top-level module `name`. find_spec() would
    say the same, but zipimport compiles the module's source to answer it (~90 ms for pynvml)."""
    import zipimport   # already loaded: it is what imports the .pyz
    for entry in sys.path:
        finder = sys.path_importer_cache.get(entry)
        if isinstance(finder, zipimport.zipimporter):
            try:
                finder.is_package(name)   # a lookup in the zip's table of contents; raises when absent
                return True
            except ImportError:   # zipimport.ZipImportError
                pass
    return False
