"""rgt-pulls/ is inert for test runners: the markers rgt writes into it when it makes it."""
from __future__ import annotations

import os

# Pulled files are data. rgt-pulls/ lies inside the project, and the user's (or a coding
# agent's) next `pytest` from the project root once imported a box's pulled conftest.py. These
# files keep test runners out of it: pytest (8.1 and later) skips any folder holding a
# pyvenv.cfg as a virtualenv; the conftest.py, rgt's own, tells every pytest to collect nothing
# below it (a box's conftest.py further down is then never imported). The hyphen in the name
# keeps importers and `unittest discover` out (not a package name). Written once, never over
# a file of the user's.
INERT_MARKERS = {
    "pyvenv.cfg": "# written by rgt: pulled files are data, not a project to test (pytest skips this folder)\n",
    "conftest.py": "# written by rgt: pulled files are data; pytest collects nothing below rgt-pulls/\n"
                   "collect_ignore_glob = [\"*\"]\n",
}


def mark_inert(fd: int) -> None:
    """Write the markers into the open folder fd where absent (O_EXCL, never through a link)."""
    for name, text in INERT_MARKERS.items():
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        except OSError:
            continue            # there already (rgt's, or the user's: left as it is)
        try:
            os.write(out, text.encode("utf-8"))
        finally:
            os.close(out)
