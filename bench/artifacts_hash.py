"""Artifacts benchmark: building a manifest vs `sha256sum` on the same files.

  python bench/artifacts_hash.py            # short run (~1 min)
  python bench/artifacts_hash.py --full     # 4x the data (2 GB large file, 1 GB of shards)
  python bench/artifacts_hash.py --dir /dev/shm   # where the test files go (default: system temp)

Rows (ours vs the named reference, wall seconds, best of --repeat, ratio = reference / ours,
so > 1 means rgt is faster):
  many files     `rgt-agent manifest` (fresh: every file hashed) vs `find -print0 | xargs -0 sha256sum`
                 (one process: what a shell "sync check" runs). Goal >= 1.5x using both cores.
  one large file the same on a single big file. Goal >= 0.95x.
  100k tiny      the same on 100,000 files of a few bytes (per-file overhead, not hashing).
  refresh 100k   re-running the manifest after ONE of the 100,000 files changed. Goal < 1 s.
All files are in the page cache (written just before), so both sides hash, neither waits on a disk.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.artifacts import build_manifest  # noqa: E402
from boxagent.base.home import Home  # noqa: E402


def write_files(root: str, n: int, size: int, sub: str) -> None:
    block = os.urandom(size)
    for i in range(n):
        d = os.path.join(root, sub, "%03d" % (i // 1000))
        os.makedirs(d, exist_ok=True)
        fd = os.open(os.path.join(d, "%06d.bin" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, block[: size - 8] + i.to_bytes(8, "little") if size >= 8 else b"%d" % i)
        os.close(fd)


def time_best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def sha256sum(root: str, sub: str) -> None:
    cmd = "cd %s && find %s -type f -print0 | xargs -0 sha256sum > /dev/null" % (root, sub)
    subprocess.run(["sh", "-c", cmd], check=True)


def fresh_manifest(home: Home, root: str, sub: str) -> dict:
    run = "bench-" + sub
    os.makedirs(home.run_dir(run), exist_ok=True)
    try:
        os.unlink(home.manifest(run))           # fresh: no hash can be reused
    except OSError:
        pass
    return build_manifest(home, run, {"name": run, "workdir": root, "artifacts": {"include": [sub + "/**"]}})


def row(name: str, ours: float, ref: float, goal: str) -> None:
    print("%-16s %10.3f %12.3f %8.2fx   %s" % (name, ours, ref, ref / ours if ours else 0, goal))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--dir", default=None, help="where to write the test files")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    k = 4 if a.full else 1
    tmp = tempfile.mkdtemp(prefix="rgt-bench-hash-", dir=a.dir)
    home = Home(os.path.join(tmp, "home"))
    root = os.path.join(tmp, "work")
    try:
        print("writing test files under %s ..." % tmp, file=sys.stderr)
        write_files(root, 1000 * k, 256 << 10, "many")        # 256 MB (x4 with --full) of shards
        write_files(root, 1, 512 << 20 * 1 if k == 1 else 2 << 30, "large")
        write_files(root, 100_000, 6, "tiny")
        print("cores: %s   hashing threads: default" % len(os.sched_getaffinity(0)))
        print("%-16s %10s %12s %9s   %s" % ("case", "rgt s", "sha256sum s", "ratio", "goal"))
        for sub, goal in (("many", ">= 1.5x"), ("large", ">= 0.95x"), ("tiny", "(overhead only)")):
            ours = time_best(lambda: fresh_manifest(home, root, sub), a.repeat)
            ref = time_best(lambda: sha256sum(root, sub), a.repeat)
            row(sub + " files" if sub != "large" else "one large file", ours, ref, goal)
        run = "bench-tiny"
        spec = {"name": run, "workdir": root, "artifacts": {"include": ["tiny/**"]}}
        build_manifest(home, run, spec)
        times = []
        for i in range(a.repeat):
            with open(os.path.join(root, "tiny", "042", "042042.bin"), "wb") as fh:
                fh.write(b"change %d" % i)
            t0 = time.perf_counter()
            m = build_manifest(home, run, spec)
            times.append(time.perf_counter() - t0)
            assert m["hashed"] == 1, m["hashed"]
        print("%-16s %10.3f %12s %9s   %s" % ("refresh 100k", min(times), "-", "-", "< 1 s (median %.3f)"
                                           % sorted(times)[len(times) // 2]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
