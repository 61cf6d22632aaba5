"""Scale benchmark: does an idle box pay for its history? The same idle daemon with 0, 2,000 and
20,000 ended runs, side by side: its CPU and RSS, the size of status.json, and the time of
`rgt-agent status --json` (what `rgt-client status` runs on the box).

  python bench/scale_history.py                    # 0 / 2,000 / 20,000 ended runs, 30 s idle each
  python bench/scale_history.py --counts 0 500 --idle 10

The ended runs are made directly (one real run's files, copied under new names: runs/<name>/
state.json + spec.json + HANDBOOK.md), not by running 20,000 jobs. The daemon runs with its
default intervals (sample_every 10 s). Goal: each figure within 20 % of the 0-run box's (for
status.json and `status`, of the 2,000-run box's: the 0-run box has no runs to show at all).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 1.2


def agent(home: Path, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, RGT_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "boxagent", *args], env=env, capture_output=True, text=True,
                          check=check, input=stdin)


def template(tmp: Path) -> Path:
    """One real run, run by the real daemon: the files every copy starts from."""
    home, work = tmp / "template", tmp / "work"
    work.mkdir(parents=True)
    job = {"name": "tpl", "workdir": str(work), "stage": [{"name": "train", "run": "echo loss=0.5"},
                                                          {"name": "eval", "run": "echo acc=0.9"}]}
    agent(home, "submit", "-", stdin=json.dumps(job))
    agent(home, "start")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = json.loads((home / "runs" / "tpl" / "state.json").read_text() or "{}")
        if state.get("state") == "succeeded":
            break
        time.sleep(0.2)
    agent(home, "stop")
    return home / "runs" / "tpl"


def make_home(tmp: Path, tpl: Path, n: int) -> Path:
    home = tmp / ("home-%d" % n)
    (home / "runs").mkdir(parents=True)
    state = json.loads((tpl / "state.json").read_text())
    spec = json.loads((tpl / "spec.json").read_text())
    handbook = (tpl / "HANDBOOK.md").read_text()
    for i in range(n):
        name = "old-%05d" % i
        d = home / "runs" / name
        d.mkdir()
        (d / "state.json").write_text(json.dumps(dict(state, name=name, seq=i + 1)))
        (d / "spec.json").write_text(json.dumps(dict(spec, name=name)))
        (d / "HANDBOOK.md").write_text(handbook.replace("tpl", name))
    return home


def proc_cpu_s(pid: int) -> float:
    fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int) -> float:
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def measure(home: Path, idle_s: float, repeats: int) -> dict:
    env = dict(os.environ, RGT_HOME=str(home), PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "boxagent", "daemon"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (home / "status.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(12)                                   # past start-up and the first samples
        cpu0, t0 = proc_cpu_s(proc.pid), time.monotonic()
        time.sleep(idle_s)
        cpu_pct = 100.0 * (proc_cpu_s(proc.pid) - cpu0) / (time.monotonic() - t0)
        rss = proc_rss_mb(proc.pid)
        size = (home / "status.json").stat().st_size
        moved = len(agent(home, "status", "--json").stdout)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    return {"cpu_pct": cpu_pct, "rss_mb": rss, "status_kb": size / 1024.0, "status_json_kb": moved / 1024.0}


def status_times(homes: list, repeats: int) -> list:
    """`status --json` on each box, in turns (a, b, c, a, b, c...): a shared machine's load swings
    hit them all alike. The daemons are stopped by now: status reads the same files either way."""
    times: list = [[] for _ in homes]
    for _ in range(repeats):
        for i, home in enumerate(homes):
            s0 = time.perf_counter()
            agent(home, "status", "--json", check=False)
            times[i].append(time.perf_counter() - s0)
    return [statistics.median(t) for t in times]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", type=int, nargs="+", default=[0, 2000, 20000])
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured per box")
    ap.add_argument("--repeats", type=int, default=11, help="`status --json` calls per box (median)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgt-scale-"))
    try:
        tpl = template(tmp)
        rows, homes = [], []
        for n in args.counts:
            homes.append(make_home(tmp, tpl, n))
            rows.append((n, measure(homes[-1], args.idle, args.repeats)))
        for (_n, row), t in zip(rows, status_times(homes, args.repeats)):
            row["status_s"] = t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    keys = ("cpu_pct", "rss_mb", "status_kb", "status_json_kb", "status_s")
    print("%-14s" % "ended runs" + "".join("%16s" % k for k in keys))
    for n, row in rows:
        print("%-14d" % n + "".join("%16.3f" % row[k] for k in keys))
    base = rows[0][1] if rows[0][0] == 0 and len(rows) > 1 else None
    ok = True
    if base is not None:
        print("ratio to %d ended runs:" % rows[0][0])
        for n, row in rows[1:]:
            ratios = {k: row[k] / base[k] if base[k] else float("inf") for k in keys}
            print("%-14d" % n + "".join("%16.2f" % ratios[k] for k in keys))
        ref = rows[1][1]                                # status size: the 2,000-run box shows a full tail
        for n, row in rows[1:]:
            flat = {"cpu_pct": row["cpu_pct"] <= max(base["cpu_pct"] * GOAL, base["cpu_pct"] + 0.2),
                    "rss_mb": row["rss_mb"] <= base["rss_mb"] * GOAL,
                    "status_kb": row["status_kb"] <= ref["status_kb"] * GOAL,
                    "status_s": row["status_s"] <= ref["status_s"] * GOAL}
            ok = ok and all(flat.values())
            print("%d ended runs: %s" % (n, ", ".join("%s %s" % (k, "flat" if v else "GROWS") for k, v in flat.items())))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
