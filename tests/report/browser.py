"""A real headless Chromium for the report: screenshots and the parsed DOM, nothing else."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.report import png


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


needs_chromium = pytest.mark.skipif(chromium() is None, reason="chromium is not installed (apt-get install "
                                    "chromium): the report is checked as a real browser draws it")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--disable-extensions",
         # No name resolves: a report that needed the network would draw without it, visibly.
         "--host-resolver-rules=MAP * ~NOTFOUND")


def _run(extra: list[str], page: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="rgt-chromium-") as profile:
        argv = [chromium() or "chromium", *FLAGS, "--user-data-dir=%s" % profile, *extra, page.resolve().as_uri()]
        return subprocess.run(argv, capture_output=True, timeout=timeout)


def screenshot(page: Path, out: Path, width: int = 1100, height: int = 4200, dark: bool = False) -> png.Image:
    extra = ["--screenshot=%s" % out, "--window-size=%d,%d" % (width, height)]
    if dark:
        extra.append("--force-dark-mode")      # prefers-color-scheme: dark for the page
    res = _run(extra, page)
    assert out.exists(), "chromium wrote no screenshot: %s" % res.stderr.decode(errors="replace")[-2000:]
    return png.read(out)


def dump_dom(page: Path) -> str:
    res = _run(["--dump-dom"], page)
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    return res.stdout.decode("utf-8", "replace")


def near(c: tuple, target: tuple, tol: int = 40) -> bool:
    return sum(abs(a - b) for a, b in zip(c, target)) <= tol


def rows_with(img: png.Image, colour: tuple, x0: int = 0, x1: int | None = None, tol: int = 40) -> list[int]:
    """The y of every row holding a pixel of `colour` between x0 and x1 (scanning every 2nd pixel)."""
    x1 = img.width if x1 is None else x1
    ys = []
    for y in range(img.height):
        row, ch = img.rows[y], img.channels
        for x in range(x0, x1, 2):
            i = x * ch
            if abs(row[i] - colour[0]) + abs(row[i + 1] - colour[1]) + abs(row[i + 2] - colour[2]) <= tol:
                ys.append(y)
                break
    return ys


def clusters(ys: list[int], gap: int = 30) -> list[tuple[int, int]]:
    """Runs of rows no more than `gap` apart: one per figure a colour was drawn in."""
    out: list[tuple[int, int]] = []
    for y in ys:
        if out and y - out[-1][1] <= gap:
            out[-1] = (out[-1][0], y)
        else:
            out.append((y, y))
    return out


def content_height(img: png.Image, background: tuple) -> int:
    """The last row that is not all background (the page's end)."""
    for y in range(img.height - 1, -1, -1):
        row, ch = img.rows[y], img.channels
        if any(not near((row[i], row[i + 1], row[i + 2]), background, 6) for i in range(0, img.width * ch, ch * 3)):
            return y + 1
    return 0
