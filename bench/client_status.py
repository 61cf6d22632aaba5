"""Client benchmark: the whole `rgt-client status HOST` a user types, against `ssh HOST true`.

  python bench/client_status.py                # rgt-client status HOST vs ssh HOST true, median of 15
  python bench/client_status.py --breakdown    # and where the time goes
  python bench/client_status.py --scale        # and 4 / 16 hosts in parallel

The box is this machine: a temp RGT_HOME with the agent installed by `install` (daemon running,
one finished 2-stage run), reached over a real sshd on 127.0.0.1. `rgt-client status HOST` is
the installed console script next to this interpreter (a fresh Python each time), with no
--home/--python: what install remembered, exactly as a user runs it. Goal: ratio <= 1.3.
Note: the ssh cost includes the box user's shell start-up (e.g. a .bashrc running `pyenv init`),
exactly as on a real box.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rgt_client.install.bootstrap import InstallOptions, install  # noqa: E402
from rgt_client.jobs.submit import submit  # noqa: E402
from rgt_client.status.fetch import fetch_many  # noqa: E402
from rgt_client.box.transport import SSH_OPTIONS, Target, run_agent  # noqa: E402
from tests.sshd import alias_names, start_sshd  # noqa: E402

GOAL = 1.3


def median_time(argv: list[str], repeats: int, env: dict | None = None) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired(a: list[str], b: list[str], repeats: int, env: dict | None = None) -> tuple[float, float]:
    """Medians of a and b run in turns (a, b, a, b...): a shared machine's load swings hit both."""
    ta, tb = [], []
    for _ in range(repeats):
        for argv, out in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            subprocess.run(argv, check=False, capture_output=True, env=env)
            out.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def median_call(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def client_argv() -> list[str]:
    """The console script as installed (`pip install -e .` puts it next to this python), else
    the same entry point through -c (a checkout without an install)."""
    script = Path(sys.executable).parent / "rgt-client"
    if script.exists() and os.environ.get("RGT_BENCH_ENTRY") != "-c":
        return [str(script)]
    entry = "entry" if (REPO / "rgt_client" / "entry.py").exists() else "cli"   # older checkouts: cli
    return [sys.executable, "-c", "import sys; from rgt_client.%s import main; sys.exit(main())" % entry]


def setup_box(base: Path, cfg: Path) -> Target:
    target = Target("rgt-box", home=str(base / "box"), ssh_config=str(cfg))
    rep = install(target, InstallOptions(sample_every=2.0, remember=True))
    target.python = rep.upload.get("python") or target.python   # what `install` remembered
    job = {"name": "bench", "workdir": str(base), "stage": [{"name": "a", "run": "echo a"},
                                                            {"name": "b", "run": "echo b"}]}
    submit(target, job)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = (fetch_many([target])[0].status or {}).get("runs") or []
        if runs and runs[0].get("state") == "succeeded":
            break
        time.sleep(0.3)
    return target


def breakdown(cfg: Path, target: Target, repeats: int, env: dict) -> list[tuple[str, float]]:
    """Where one `status` goes: each piece measured alone (medians; they overlap, not add)."""
    py, pyz = target.python, os.path.join(target.home or "", "rgt-agent.pyz")
    box_env = dict(os.environ, RGT_HOME=target.home or "")
    ssh = ["ssh", "-F", str(cfg), *SSH_OPTIONS, "rgt-box", "--"]
    from rgt_client.status.render import render_status
    hs = fetch_many([target])[0]
    return [
        ("client: python -c pass", median_time([sys.executable, "-c", "pass"], repeats)),
        ("client: import rgt_client.cli", median_time([sys.executable, "-c", "import rgt_client.cli"], repeats, env)),
        ("client: rgt-client --version", median_time(client_argv() + ["--version"], repeats, env)),
        ("client: render_status (in-process)", median_call(lambda: render_status(hs.status or {}, hs.client),
                                                           repeats)),
        ("ssh HOST true", median_time(ssh + ["true"], repeats)),
        ("box: python -c pass", median_time([py, "-c", "pass"], repeats)),
        ("box: rgt-agent.pyz status --json", median_time([py, pyz, "status", "--json", "--events", "0"],
                                                         repeats, box_env)),
        ("ssh HOST rgt-agent.pyz status --json",
         median_time(ssh + ["env", "RGT_HOME=%s" % target.home, py, pyz, "status", "--json", "--events", "0"],
                     repeats)),
    ]


def import_top(env: dict, n: int = 8) -> list[str]:
    """The slowest imports of the client (python -X importtime), cumulative microseconds."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import rgt_client.cli"],
                       capture_output=True, text=True, env=env)
    rows = []
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and len(m.group(3)) <= 3:      # top-level imports only
            rows.append((int(m.group(2)), m.group(4)))
    return ["%-40s %8.1f ms" % (name, us / 1000) for us, name in sorted(rows, reverse=True)[:n]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15, help="repeats per row (median); default 15")
    ap.add_argument("--breakdown", action="store_true", help="also measure where the time goes")
    ap.add_argument("--scale", action="store_true", help="also 4 and 16 hosts in parallel")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rgt-bench-client-"))
    os.environ["RGT_CLIENT_CONFIG_DIR"] = str(base / "client-config")
    aliases = alias_names(16)
    server = start_sshd(base / "sshd", aliases=aliases)
    target = None
    # The client as a user runs it: compiled bytecode is written once and used after (a shell that
    # exports PYTHONDONTWRITEBYTECODE would make every call compile the client from source), and
    # the installed package, not the checkout, unless the console script is missing.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not (Path(sys.executable).parent / "rgt-client").exists():
        env["PYTHONPATH"] = str(REPO)
    try:
        target = setup_box(base, server.config)
        ssh_true = ["ssh", "-F", str(server.config), *SSH_OPTIONS, "rgt-box", "--", "true"]
        status = client_argv() + ["--ssh-config", str(server.config), "status", "rgt-box"]
        subprocess.run(status, capture_output=True, env=env)      # warm the local build-sha cache
        check = subprocess.run(status, capture_output=True, text=True, env=env)
        if check.returncode != 0:
            raise SystemExit("rgt-client status failed: %s" % check.stderr)
        t_status, t_ssh = paired(status, ssh_true, args.repeat, env)
        rows = breakdown(server.config, target, args.repeat, env) if args.breakdown else []
        imports = import_top(env) if args.breakdown else []
        scale = {}
        if args.scale:
            for n in (1, 4, 16):
                scale[n] = median_time(status[:-1] + list(aliases[:n]), args.repeat, env)
    finally:
        if target is not None:
            run_agent(target, ["stop"], timeout=60)
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print("rgt-client status benchmark (loopback sshd, median of %d, %d cores, %s)"
          % (args.repeat, os.cpu_count() or 0, " ".join(Path(a).name for a in client_argv()[:1])))
    print("%-40s %10s %12s %8s  %s" % ("row", "rgt (s)", "reference(s)", "ratio", "goal"))
    print("%-40s %10.3f %12.3f %8.2f  <= %.1f" % ("rgt-client status HOST vs ssh HOST true", t_status, t_ssh,
                                                  t_status / t_ssh, GOAL))
    for n in (4, 16):
        if n in scale:
            print("%-40s %10.3f %12.3f %8.2f" % ("rgt-client status, %d hosts vs 1" % n, scale[n], scale[1],
                                                 scale[n] / scale[1]))
    if rows:
        print("\nwhere the time goes (each piece alone, median seconds):")
        for name, t in rows:
            print("  %-40s %8.3f" % (name, t))
        print("slowest client imports (python -X importtime, cumulative):")
        for line in imports:
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
