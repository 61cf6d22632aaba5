"""Profiles benchmark: what strict validation and platform detection cost.

  python bench/profiles_bench.py          # short run (a few seconds)
  python bench/profiles_bench.py --full   # 10x the repetitions

Rows (ours vs the named reference, per call, and the ratio):
  load+validate a profile   vs  bare tomllib.load of the same file (the price of strict checks)
  detect_facts() (stat)     vs  a shell probe: bash `test -e` per marker + `env` (what shell
                                monitors do; one process spawn per probe)
  detect() over 13 profiles vs  detect_facts() itself (the client-side guess is noise)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from boxagent.base import profile as agentprof  # noqa: E402
from rgt_client.profiles import catalog as P  # noqa: E402


def per_call(fn, n: int) -> float:
    fn()  # warm caches
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def shell_probe() -> str:
    tests = " ".join("test -e %s && echo %s;" % (p, p) for p in agentprof.PROBE_PATHS)
    return subprocess.run(["bash", "-c", tests + " env"], capture_output=True, text=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="10x the repetitions")
    args = ap.parse_args()
    k = 10 if args.full else 1
    names = P.list_profiles()
    files = [P.profiles_dir() / (n + ".toml") for n in names]

    def load_all():
        for n in names:
            P.load_profile(n)

    def parse_all():
        for f in files:
            with open(f, "rb") as fh:
                tomllib.load(fh)

    profiles = P.load_all()
    facts = agentprof.detect_facts()
    rows = [
        ("load+validate %d profiles" % len(names), per_call(load_all, 200 * k),
         "tomllib.load only", per_call(parse_all, 200 * k)),
        ("detect_facts() (%d stats)" % len(agentprof.PROBE_PATHS), per_call(agentprof.detect_facts, 2000 * k),
         "bash test -e probe", per_call(shell_probe, 50 * k)),
        ("detect() over %d profiles" % len(profiles), per_call(lambda: P.detect(facts, profiles), 5000 * k),
         "detect_facts()", per_call(agentprof.detect_facts, 2000 * k)),
    ]
    print("%-28s %12s   %-22s %12s   %s" % ("ours", "per call", "reference", "per call", "ours/ref"))
    for ours, t_ours, ref, t_ref in rows:
        print("%-28s %10.1f us   %-22s %10.1f us   %.2fx" % (ours, t_ours * 1e6, ref, t_ref * 1e6, t_ours / t_ref))
    print("python %s, %d CPUs" % (sys.version.split()[0], os.cpu_count() or 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
