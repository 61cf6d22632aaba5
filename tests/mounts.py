"""A real tmpfs for disk-full / inode-exhaustion tests (root); skips with the reason elsewhere."""
from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager

import pytest


@contextmanager
def tmpfs(path, options: str, source: str = "rgt-test"):
    """Mount tmpfs with `options` (e.g. "size=1m,nr_inodes=50") at path; lazy-unmount after."""
    os.makedirs(path, exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", options, source, str(path)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("cannot mount tmpfs here: %s" % out.stderr.strip())
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
