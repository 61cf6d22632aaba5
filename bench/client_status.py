"""Client benchmark: `rgt-client status` against a bare `ssh HOST true` on a loopback sshd.

  python bench/client_status.py            # short run (~1 min): 9 repeats
  python bench/client_status.py --full     # 31 repeats

Rows (median wall seconds over the repeats):
  status vs ssh true   one host: `status` (in-process: ssh + the agent's `status --json` + render)
                       and the whole `rgt-client status` command (a fresh Python each time) against
                       `ssh HOST true` with the same options. Goal: status / ssh true <= 1.5.
  1 / 4 / 16 hosts     `status` over 1, 4 and 16 ssh aliases of the box, in parallel.
                       Goal: 16 hosts take < 3x one host. For context, the last row runs 16
                       `ssh true` in parallel: all 16 "boxes" are this machine, so their remote
                       halves (sshd, the login shell, the agent) share its cores.
The box is this machine: a temp RGT_HOME with the agent installed by `install` (daemon running,
one finished 2-stage run), reached over a real sshd on 127.0.0.1 with 16 host aliases.
Note: the ssh cost includes the box user's shell start-up (e.g. a .bashrc running `pyenv init`),
exactly as on a real box.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rgt_client.install import InstallOptions, install  # noqa: E402
from rgt_client.ops import fetch_many, submit  # noqa: E402
from rgt_client.render import render_status  # noqa: E402
from rgt_client.transport import SSH_OPTIONS, Target, run_agent  # noqa: E402
from tests.sshd import alias_names, start_sshd  # noqa: E402


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def setup_box(base: Path, cfg: Path) -> Target:
    os.environ["RGT_CLIENT_CONFIG_DIR"] = str(base / "client-config")
    target = Target("rgt-box", home=str(base / "box"), ssh_config=str(cfg))
    rep = install(target, InstallOptions(sample_every=2.0, remember=False))
    target.python = rep.upload.get("python") or target.python  # what `install` remembers for later calls
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


def parallel_ssh_true(cfg: Path, aliases: tuple[str, ...]) -> None:
    procs = [subprocess.Popen(["ssh", "-F", str(cfg), *SSH_OPTIONS, a, "--", "true"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for a in aliases]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("ssh %s true failed" % " ".join(p.args[-3:-2]))


def status_once(targets: list[Target]) -> None:
    for hs in fetch_many(targets):
        if hs.error is not None:
            raise SystemExit("status failed: %s" % hs.error.message)
        render_status(hs.status or {}, hs.client)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="31 repeats instead of 9")
    ap.add_argument("--repeat", type=int, help="repeats per row (median)")
    args = ap.parse_args()
    repeats = args.repeat or (31 if args.full else 9)
    base = Path(tempfile.mkdtemp(prefix="rgt-bench-client-"))
    aliases = alias_names(16)
    server = start_sshd(base / "sshd", aliases=aliases)
    target = None
    try:
        target = setup_box(base, server.config)
        home = target.home
        mk = lambda a: Target(a, home=home, python=target.python, ssh_config=str(server.config))  # noqa: E731
        ssh_true = ["ssh", "-F", str(server.config), *SSH_OPTIONS, "rgt-box", "--", "true"]
        cli = [sys.executable, "-m", "rgt_client.cli", "--ssh-config", str(server.config),
               "status", "rgt-box", "--home", home]
        status_once([mk("rgt-box")])  # warm the local build-sha cache, like any second call
        t_ssh = median_time(lambda: subprocess.run(ssh_true, check=True, capture_output=True), repeats)
        t_status = median_time(lambda: status_once([mk("rgt-box")]), repeats)
        t_cli = median_time(lambda: subprocess.run(cli, check=True, capture_output=True), repeats)
        scale = {n: median_time(lambda n=n: status_once([mk(a) for a in aliases[:n]]), repeats)
                 for n in (1, 4, 16)}
        # What this machine allows at all: the "boxes" are this machine, so 16 remote sides share its cores.
        t_ssh16 = median_time(lambda: parallel_ssh_true(server.config, aliases), repeats)
    finally:
        if target is not None:
            run_agent(target, ["stop"], timeout=60)
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print("rgt-client status benchmark (loopback sshd, median of %d, %d cores)" % (repeats, os.cpu_count() or 0))
    print("%-34s %10s %12s %8s  %s" % ("row", "rgt (s)", "reference(s)", "ratio", "goal"))
    print("%-34s %10.3f %12.3f %8.2f  %s" % ("status (in-process) vs ssh true", t_status, t_ssh,
                                             t_status / t_ssh, "<= 1.5"))
    print("%-34s %10.3f %12.3f %8.2f  %s" % ("rgt-client status (CLI) vs ssh true", t_cli, t_ssh,
                                             t_cli / t_ssh, "(info: + Python/click start-up)"))
    for n in (4, 16):
        print("%-34s %10.3f %12.3f %8.2f  %s" % ("status %2d hosts vs 1 host" % n, scale[n], scale[1],
                                                 scale[n] / scale[1], "< 3" if n == 16 else ""))
    print("%-34s %10.3f %12.3f %8.2f  %s" % ("16 parallel ssh true vs 1 ssh true", t_ssh16, t_ssh,
                                             t_ssh16 / t_ssh, "(info: the loopback's own limit)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
