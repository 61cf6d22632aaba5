"""The agent on a Slurm login node, on the real one-node test cluster (tests/slurm/cluster.py;
root, and the Debian packages slurmctld slurmd slurm-client munge). A real daemon with its
production defaults (slurm_poll 5 s, its default tick) runs jobs with backend = "slurm".

  python bench/slurm_agent.py                  # 20 stages, 50 pending jobs for 60 s (about 3 min)
  python bench/slurm_agent.py --stages 5 --seconds 20

1. Slurm job end -> stage event. One run, a chain of --stages stages (`sleep 0.3` each), all
   submitted at once, afterok. For each stage: the event's `at` minus the moment the command
   ended (the shim's `ended_at` in the exit file, written before the batch job exits: the job
   itself ends a little later, so this counts the job's own completion too). Two modes, side by
   side: inotify (watchdog importable: the exit file wakes the daemon) and polling
   (RGT_NO_INOTIFY=1, as on NFS, where inotify does not see another host's writes: the daemon
   looks for exit files every second while a job runs). Goal: p95 < 2 s.
2. Following --pending pending jobs for --seconds: one run whose chain of --pending stages is
   held (`--begin=now+1hour` on the first, Dependency on the rest). CPU seconds of the daemon
   and its children (squeue calls) against the reference users run, `watch -n 5 squeue` under a
   pty, and slurmctld's CPU in each window; and the same daemon's CPU in a window before it had
   any job (its health samples and status writes, which a box pays too). ratio = reference /
   agent (> 1: the agent costs less). /proc counts in 10 ms ticks.
"""
from __future__ import annotations

import argparse
import json
import os
import pty
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.base.units import parse_iso_utc  # noqa: E402
from tests.slurm.cluster import ClusterUnavailable, start_cluster  # noqa: E402

WATCH_S = 5.0


def pct(values: List[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def proc_cpu(pid: int, children: bool = True) -> float:
    """utime + stime (+ the waited-for children's) of a process, from /proc (10 ms ticks)."""
    with open("/proc/%d/stat" % pid) as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return ticks / float(os.sysconf("SC_CLK_TCK"))


class Agent:
    def __init__(self, cluster, base: Path, inotify: bool):
        self.home, self.work = base / "home", base / "work"
        self.work.mkdir(parents=True)
        self.env = dict(os.environ, RGT_HOME=str(self.home), PYTHONPATH=str(REPO), SLURM_CONF=str(cluster.conf))
        for var in ("RGT_TICK", "RGT_SLURM_POLL", "RGT_NO_INOTIFY"):
            self.env.pop(var, None)
        if not inotify:
            self.env["RGT_NO_INOTIFY"] = "1"
        self.log = open(str(base / "daemon.log"), "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "boxagent", "daemon"], env=self.env, stdout=self.log,
                                     stderr=self.log, start_new_session=True)
        self._wait(lambda: (self.home / "status.json").exists(), 20)

    def submit(self, job: Dict) -> None:
        out = subprocess.run([sys.executable, "-m", "boxagent", "submit", "-"], input=json.dumps(job).encode(),
                             env=self.env, capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr

    def state(self, run: str) -> Dict:
        try:
            return json.loads((self.home / "runs" / run / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def events(self) -> List[Dict]:
        text = (self.home / "events.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_run(self, run: str, timeout: float) -> Dict:
        self._wait(lambda: self.state(run).get("state") in ("succeeded", "failed", "cancelled"), timeout)
        return self.state(run)

    def _wait(self, pred, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("the daemon did not get there (see %s)" % self.log.name)
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def latency(cluster, base: Path, n: int, inotify: bool) -> List[float]:
    agent = Agent(cluster, base, inotify)
    try:
        stages = [{"name": "s%02d" % i, "run": "sleep 0.3"} for i in range(n)]
        agent.submit({"name": "lat", "workdir": str(agent.work), "backend": "slurm", "stage": stages})
        state = agent.wait_run("lat", 60 + 10 * n)
        assert state["state"] == "succeeded", state
        at = {e["stage"]: parse_iso_utc(e["at"]) for e in agent.events() if e["type"] == "stage_succeeded"}
        out = []
        for st in stages:
            exit_file = agent.home / "runs" / "lat" / "stages" / ("%s.1.exit" % st["name"])
            out.append(at[st["name"]] - json.loads(exit_file.read_text())["ended_at"])
        return out
    finally:
        agent.stop()


def watch_cpu(cluster, seconds: float) -> float:
    master, slave = pty.openpty()
    proc = subprocess.Popen(["watch", "-n", "%g" % WATCH_S, "squeue"], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(cluster.env, TERM="xterm"), start_new_session=True)
    os.close(slave)
    threading.Thread(target=_drain, args=(master,), daemon=True).start()
    time.sleep(0.5)
    c0 = proc_cpu(proc.pid)
    time.sleep(seconds)
    c1 = proc_cpu(proc.pid)
    proc.send_signal(signal.SIGINT)
    proc.wait(10)
    os.close(master)
    return c1 - c0


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def cost(cluster, base: Path, pending: int, seconds: float) -> None:
    agent = Agent(cluster, base, inotify=True)
    ctld = cluster.procs["slurmctld"].pid
    try:
        time.sleep(2)
        b0 = proc_cpu(agent.proc.pid)
        time.sleep(seconds)
        baseline = proc_cpu(agent.proc.pid) - b0
        stages = [{"name": "p%02d" % i, "run": "true"} for i in range(pending)]
        stages[0]["slurm"] = {"extra": ["--begin=now+1hour"]}
        agent.submit({"name": "held", "workdir": str(agent.work), "backend": "slurm", "stage": stages})
        agent._wait(lambda: sum(1 for s in agent.state("held").get("stages", []) if s.get("slurm_state") == "PENDING")
                    == pending, 60)
        time.sleep(5)
        a0, d0 = proc_cpu(agent.proc.pid), proc_cpu(ctld, children=False)
        time.sleep(seconds)
        ours, ctld_ours = proc_cpu(agent.proc.pid) - a0, proc_cpu(ctld, children=False) - d0
        d1 = proc_cpu(ctld, children=False)
        ref = watch_cpu(cluster, seconds)
        ctld_ref = proc_cpu(ctld, children=False) - d1
    finally:
        agent.stop()
        cluster.run("scancel", "--state=pending")
    print("\n2. following %d pending jobs for %g s (the agent: slurm_poll 5 s; watch -n %g squeue)"
          % (pending, seconds, WATCH_S))
    print("%-34s %10s %20s %8s" % ("CPU seconds", "rgt agent", "watch -n 5 squeue", "ratio"))
    print("%-34s %10.3f %20.3f %8s" % ("the follower (+ its squeue calls)", ours, ref, _ratio(ref, ours)))
    print("%-34s %10.3f %20.3f %8s" % ("slurmctld in the same window", ctld_ours, ctld_ref, _ratio(ctld_ref, ctld_ours)))
    print("%-34s %10.3f" % ("the agent with no job (its own)", baseline))
    print("(the agent following: %.2f %% of one core)" % (100.0 * ours / seconds))


def _ratio(ref: float, ours: float) -> str:
    return ("%.2fx" % (ref / ours)) if ours > 0 else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", type=int, default=20)
    ap.add_argument("--pending", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rgt-slurm-agent-bench-"))
    try:
        cluster = start_cluster(work / "cluster")
    except ClusterUnavailable as exc:
        print("no Slurm test cluster: %s" % exc)
        return 2
    try:
        print("cluster up in %.2f s; the agent runs from this source tree on %s" % (cluster.start_s, sys.version.split()[0]))
        rows = {mode: latency(cluster, work / mode, args.stages, mode == "inotify") for mode in ("inotify", "polling")}
        print("\n1. Slurm job end -> stage_succeeded event (%d stages, s; goal p95 < 2 s)" % args.stages)
        print("%-10s %8s %8s %8s" % ("", "p50", "p95", "max"))
        for mode, values in rows.items():
            print("%-10s %8.3f %8.3f %8.3f" % (mode, pct(values, 0.5), pct(values, 0.95), max(values)))
        cost(cluster, work / "cost", args.pending, args.seconds)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
