"""Core benchmark: what the agent daemon costs while it watches an idle one-stage run.

  python bench/core_daemon_cost.py              # 60 s (default)
  python bench/core_daemon_cost.py --full       # the 10 minutes of the issue
  python bench/core_daemon_cost.py --seconds 120

Side by side, in one run, over the same wall time:
  agent daemon, python3 with site-packages (watchdog/inotify, psutil importable), default intervals
  agent daemon, python3 -S (bare interpreter: the polling loop), default intervals
  the shell loop users run today, every 5 s: `cat` the cgroup memory files, `df -h`, `df -i`,
      `pgrep -f` the job, `grep` the log for errors, `tail` the log.
CPU seconds: the daemon's threads from /proc/PID/task/*/schedstat (ns); the loop from wait4()
(bash + every command it ran);
peak RSS = VmHWM of the daemon / ru_maxrss over the loop and its children.
Goals: agent CPU <= 1/10 of the loop's and < 0.2 % of one core; RSS < 30 MB with the optional
packages (psutil, requests, watchdog, nvidia-ml-py) importable, < 25 MB on a bare interpreter.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
SETTLE_S = 5.0

SHELL_LOOP = r'''
while true; do
  cat /sys/fs/cgroup/memory/memory.usage_in_bytes /sys/fs/cgroup/memory/memory.limit_in_bytes \
      /sys/fs/cgroup/memory.current /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.events >/dev/null 2>&1
  df -h "$WORK" >/dev/null 2>&1
  df -i "$WORK" >/dev/null 2>&1
  pgrep -f "sleep $SLEEP" >/dev/null
  grep -c -E "Error|Traceback|Killed" "$LOG" >/dev/null 2>&1
  tail -n 5 "$LOG" >/dev/null 2>&1
  sleep 5
done
'''


def cpu_s(pid: int) -> float:
    """On-CPU time of every thread, in ns from schedstat where the kernel has it (10 ms ticks
    from /proc/PID/stat are too coarse for a daemon that is meant to use almost nothing)."""
    total, ok = 0, True
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, task)) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            ok = False
    if ok:
        return total / 1e9
    with open("/proc/%d/stat" % pid) as fh:
        rest = fh.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / float(TICKS)


def hwm_kb(pid: int) -> int:
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def start_daemon(tmp: Path, name: str, python: list, stage_s: int) -> dict:
    home, work = tmp / name / "home", tmp / name / "work"
    work.mkdir(parents=True)
    env = dict(os.environ, RGT_HOME=str(home), PYTHONPATH=str(REPO))
    for k in list(env):
        if k.startswith("RGT_") and k != "RGT_HOME":
            del env[k]
    job = {"name": "idle", "workdir": str(work), "stage": [{"name": "train", "run": "sleep %d" % stage_s}]}
    subprocess.run(python + ["-m", "boxagent", "submit", "-"], input=json.dumps(job).encode(), env=env,
                   check=True, capture_output=True)
    proc = subprocess.Popen(python + ["-m", "boxagent", "daemon"], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(tmp / (name + ".log"), "wb"), start_new_session=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            st = json.loads((home / "runs/idle/state.json").read_text())
            if st["stages"][0]["state"] == "running":
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    return {"name": name, "proc": proc, "home": home}


def stop_daemon(d: dict) -> None:
    d["proc"].send_signal(signal.SIGTERM)     # preemption path: also ends the idle stage
    try:
        d["proc"].wait(60)
    except subprocess.TimeoutExpired:
        d["proc"].kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--full", action="store_true", help="600 s, as in the issue")
    args = ap.parse_args()
    seconds = 600.0 if args.full else args.seconds
    tmp = Path(tempfile.mkdtemp(prefix="rgt-bench-cost-"))
    stage_s = int(seconds + 120)
    daemons = [start_daemon(tmp, "agent (site, inotify)", [sys.executable], stage_s),
               start_daemon(tmp, "agent (python3 -S, polling)", [sys.executable, "-S"], stage_s)]
    log = daemons[0]["home"] / "runs/idle/logs/train.1.log"
    loop = subprocess.Popen(["bash", "-c", SHELL_LOOP], env=dict(os.environ, WORK=str(tmp), LOG=str(log),
                                                                 SLEEP=str(stage_s)))
    time.sleep(SETTLE_S)                             # past start-up: measure the steady state
    c0 = {d["name"]: cpu_s(d["proc"].pid) for d in daemons}
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    rows = []
    for d in daemons:
        rows.append((d["name"], cpu_s(d["proc"].pid) - c0[d["name"]], hwm_kb(d["proc"].pid) / 1024.0))
    os.kill(loop.pid, signal.SIGTERM)
    _, _, ru = os.wait4(loop.pid, 0)
    loop_cpu = ru.ru_utime + ru.ru_stime                 # bash + every command it ran and reaped
    loop_cpu *= wall / (wall + SETTLE_S)                 # it also ran during the settle
    rows.append(("shell loop every 5 s (reference)", loop_cpu, ru.ru_maxrss / 1024.0))
    for d in daemons:
        stop_daemon(d)            # SIGTERM = preemption: the idle stages end with their daemons
    print("daemon cost over %.0f s watching an idle one-stage run (%d CPUs)" % (wall, os.cpu_count() or 0))
    print("%-36s %10s %12s %11s %14s" % ("", "CPU s", "% of a core", "peak RSS", "CPU vs loop"))
    for name, cpu, rss in rows:
        print("%-36s %10.3f %11.3f%% %8.1f MB %13.3fx" % (name, cpu, 100.0 * cpu / wall, rss, cpu / loop_cpu if loop_cpu else 0))
    print("goals: agent CPU <= 0.1x the loop and < 0.2 %% of a core; bare RSS < 30 MB  (files in %s)" % tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
