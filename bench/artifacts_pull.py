"""Artifacts benchmark: `rgt-client pull` vs plain `rsync -a` of the same files over the same sshd.

  python bench/artifacts_pull.py            # short run (~1-2 min): 256 MB file + 1,000 x 64 KB
  python bench/artifacts_pull.py --full     # 1 GB file + 4,000 x 64 KB
  python bench/artifacts_pull.py --dir /dev/shm   # where source and copies live (default: temp)

A real sshd on 127.0.0.1 (tests/sshd.py); the "box" is this machine. Each row is a fresh copy
into an empty folder, best of --repeat, wall seconds, and MB/s of artifact bytes:
  rsync -a         rsync -a -e "ssh -F cfg" box:workdir/ dest/        (the reference)
  rgt pull rsync   the whole command: pull-info round trip, rsync --files-from, verify (sha256
                   of every file), os.sync(), PULL_VERIFIED.json
  rgt pull stream  the same through the agent's ssh stream (no rsync on one side)
ratio = rsync -a time / ours (goal >= 0.9x for the rsync path). The breakdown line says where
rgt's extra time goes (transfer vs verify+sync), so the sync's cost on slow disks is visible.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rgt_client.box.bundle import build_agent  # noqa: E402
from tests.sshd import sshd_binary, start_sshd  # noqa: E402


def make_box(tmp: Path, big: int, n_small: int) -> tuple[Path, Path]:
    home, work = tmp / "home", tmp / "work"
    (home / "runs" / "bench").mkdir(parents=True)
    build_agent(home / "rgt-agent.pyz")
    (work / "ck").mkdir(parents=True)
    with open(work / "ck" / "model.bin", "wb") as fh:
        for _ in range(big >> 20):
            fh.write(os.urandom(1 << 20))
    block = os.urandom(64 << 10)
    for i in range(n_small):
        d = work / "samples" / ("%02d" % (i % 50))
        d.mkdir(parents=True, exist_ok=True)
        (d / ("%05d.bin" % i)).write_bytes(block[:-8] + i.to_bytes(8, "little"))
    spec = {"name": "bench", "workdir": str(work), "stage": [{"name": "s", "run": "true"}],
            "artifacts": {"include": ["ck/**", "samples/**"], "exclude": []}}
    (home / "runs" / "bench" / "spec.json").write_text(json.dumps(spec))
    return home, work


def timed(argv: list[str], env: dict | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, env=env, text=True)
    took = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit("failed: %s\n%s%s" % (" ".join(argv), out.stdout, out.stderr))
    return took, out.stdout


def best(fn, repeat: int) -> tuple[float, str]:
    runs = [fn(i) for i in range(repeat)]
    return min(runs, key=lambda r: r[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if not sshd_binary() or not shutil.which("rsync"):
        raise SystemExit("needs openssh-server and rsync")
    big, n_small = ((1 << 30), 4000) if a.full else ((256 << 20), 1000)
    tmp = Path(tempfile.mkdtemp(prefix="rgt-bench-pull-", dir=a.dir))
    server = start_sshd(tmp / "sshd")
    try:
        print("writing %d MB + %d x 64 KB under %s ..." % (big >> 20, n_small, tmp), file=sys.stderr)
        home, work = make_box(tmp, big, n_small)
        total = big + n_small * (64 << 10)
        cfg = str(server.config)
        env = dict(os.environ, RGT_CLIENT_CONFIG_DIR=str(tmp / "client"))
        client = [sys.executable, "-c", "from rgt_client.cli import main; main()", "--ssh-config", cfg]

        def dest(name: str, i: int) -> str:
            return str(tmp / ("%s-%d" % (name, i)))

        ref = best(lambda i: timed(["rsync", "-a", "-e", "ssh -F %s" % cfg, "rgt-box:%s/" % work,
                                    dest("rsync", i) + "/"]), a.repeat)
        rows = [("rsync -a", ref[0], "")]
        for method in ("rsync", "stream"):
            t, out = best(lambda i: timed(client + ["pull", "rgt-box", "bench", dest(method, i), "--home",
                                                    str(home), "--method", method, "--json"], env), a.repeat)
            res = json.loads(out)
            assert res["verify"]["ok"], res
            rows.append(("rgt pull " + method, t, "verify+sync %.2fs" % res["verify"]["elapsed_s"]))
        print("%d files, %.0f MB; cores: %d" % (n_small + 1, total / 1e6, len(os.sched_getaffinity(0))))
        print("%-16s %8s %9s %8s   %s" % ("copy", "s", "MB/s", "ratio", "notes"))
        for name, t, note in rows:
            print("%-16s %8.2f %9.1f %7.2fx   %s" % (name, t, total / t / 1e6, ref[0] / t, note))
        print("goal: rgt pull rsync >= 0.9x of rsync -a")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
