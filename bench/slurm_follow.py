"""Slurm follow benchmark, on the real one-node test cluster (tests/slurm/cluster.py; root, and
the Debian packages slurmctld slurmd slurm-client munge).

  python bench/slurm_follow.py                 # 20 jobs, 60 s windows (about 3 minutes)
  python bench/slurm_follow.py --jobs 5 --seconds 15 --busy 100

1. Seeing a job end. Jobs run one after another; each writes its own end time (`date +%s.%N`)
   as the last thing it does. Two followers poll every 50 ms, side by side:
     squeue   rgt's batched call (`squeue --jobs=ID --states=all --format=...`), first seen
              COMPLETING or ended, and first seen in its terminal state
     scontrol `scontrol show job -o ID` (the per-job detail call), first seen ended
   Rows: p50 / p95 / max of (first seen - end stamp) over --jobs jobs.
2. Following 50 pending jobs for --seconds on a busy cluster (--busy other pending jobs, owned
   by `nobody`): rgt's one batched squeue call per 5 s interval (argv built and output parsed by
   boxagent.slurm.follow; --user lets slurmctld send only our jobs) against the reference users
   run, `watch -n 5 squeue` (under a pty, as on a terminal), and the same squeue call as rgt's
   without --user (what squeue does with several --jobs: it fetches every job). CPU seconds of
   the follower and its children (getrusage) and of slurmctld (/proc/PID/stat, 10 ms ticks) in
   the same window, and slurmctld's own background in an idle window of the same length;
   ratio = reference / rgt, so > 1 means rgt costs less.
"""
from __future__ import annotations

import argparse
import functools
import os
import pty
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.slurm import follow, states, submit  # noqa: E402
from boxagent.slurm.cmd import run_command  # noqa: E402
from tests.slurm.cluster import ClusterUnavailable, start_cluster  # noqa: E402

INTERVAL_S = 5.0
PENDING_JOBS = 50


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def sbatch(cluster, work: Path, name: str, body: str, extra=()) -> str:
    script = work / (name + ".sh")
    script.write_text("#!/bin/bash\n" + body + "\n")
    argv = submit.sbatch_argv(str(script), "bench", name, str(work / (name + ".log")), str(work))
    argv[-1:-1] = list(extra)
    return submit.submit(argv, runner=functools.partial(run_command, env=cluster.env))


def seen_ended(cluster, job: str, stamp: Path, timeout: float = 60):
    """(squeue first ended-or-completing, squeue first terminal, scontrol first ended) minus the stamp."""
    runner = functools.partial(run_command, env=cluster.env)
    got = {}
    deadline = time.monotonic() + timeout
    while len(got) < 3 and time.monotonic() < deadline:
        rec = follow.parse_squeue(runner(follow.squeue_argv([job]), 20).out).get(job) or {}
        now = time.time()
        if rec.get("state") == "COMPLETING" or states.phase(rec.get("state")) == "ended":
            got.setdefault("squeue_any", now)
        if states.phase(rec.get("state")) == "ended":
            got.setdefault("squeue_end", now)
        detail = follow.parse_scontrol(runner(follow.scontrol_argv(job), 20).out).get(job) or {}
        if states.phase(detail.get("state")) == "ended":
            got.setdefault("scontrol_end", time.time())
        time.sleep(0.05)
    end = float(stamp.read_text())
    return {k: v - end for k, v in got.items()}


def latency(cluster, work: Path, n: int) -> None:
    rows = {"squeue_any": [], "squeue_end": [], "scontrol_end": []}
    for i in range(n):
        stamp = work / ("end.%d" % i)
        job = sbatch(cluster, work, "lat%d" % i, "sleep 0.5; date +%%s.%%N > %s" % stamp)
        while not stamp.exists():
            time.sleep(0.02)
        for key, value in seen_ended(cluster, job, stamp).items():
            rows[key].append(value)
    print("\n1. job end -> follower sees it (%d jobs, 50 ms polling)" % n)
    print("%-44s %8s %8s %8s" % ("", "p50 s", "p95 s", "max s"))
    names = {"squeue_any": "squeue (rgt's call): COMPLETING or ended",
             "squeue_end": "squeue (rgt's call): terminal state",
             "scontrol_end": "scontrol show job -o: terminal state"}
    for key, values in rows.items():
        if values:
            print("%-44s %8.3f %8.3f %8.3f" % (names[key], pct(values, 0.5), pct(values, 0.95), max(values)))


def proc_cpu(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def follow_rgt(cluster, ids, seconds: float, user="self"):
    runner = functools.partial(run_command, env=cluster.env)
    calls, nxt, end = 0, time.monotonic(), time.monotonic() + seconds
    while time.monotonic() < end:
        out = follow.poll(ids, runner=runner, user=user)
        assert len(out["records"]) == len(ids) and out["error"] is None, out["error"]
        calls += out["calls"]
        nxt += INTERVAL_S
        time.sleep(max(0.0, min(nxt, end) - time.monotonic()))
    return calls


def follow_watch(cluster, seconds: float) -> int:
    master, slave = pty.openpty()
    proc = subprocess.Popen(["watch", "-n", "%g" % INTERVAL_S, "squeue"], stdin=slave, stdout=slave,
                            stderr=slave, env=dict(cluster.env, TERM="xterm"), start_new_session=True)
    os.close(slave)
    drained = threading.Thread(target=_drain, args=(master,), daemon=True)
    drained.start()
    time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    proc.wait(10)
    os.close(master)
    return int(seconds // INTERVAL_S) + 1


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def busy_jobs(cluster, n: int) -> None:
    """n pending jobs of another user: what a shared cluster's queue holds besides ours."""
    for _ in range(n):
        cluster.run("sbatch", "--uid=nobody", "--gid=nogroup", "--begin=now+1hour", "--output=/dev/null",
                    "--chdir=" + tempfile.gettempdir(), "--wrap", "true", check=True)


def cost(cluster, work: Path, seconds: float, busy: int) -> None:
    busy_jobs(cluster, busy)
    ids = [sbatch(cluster, work, "pend%d" % i, "true", extra=["--begin=now+1hour"]) for i in range(PENDING_JOBS)]
    ctld = cluster.procs["slurmctld"].pid
    time.sleep(5)      # let the scheduler finish with the submissions before any window
    res = {}
    for name, fn in (("idle", lambda: time.sleep(seconds) or 0),
                     ("rgt", lambda: follow_rgt(cluster, ids, seconds)),
                     ("nouser", lambda: follow_rgt(cluster, ids, seconds, user=None)),
                     ("watch", lambda: follow_watch(cluster, seconds))):
        c0, s0, d0 = children_cpu(), self_cpu(), proc_cpu(ctld)
        calls = fn()
        mine = self_cpu() - s0 if name in ("rgt", "nouser") else 0.0
        res[name] = (children_cpu() - c0 + mine, proc_cpu(ctld) - d0, calls)
    cluster.run("scancel", "--state=pending")
    print("\n2. following %d pending jobs for %g s, one call per %g s, %d other jobs queued"
          % (PENDING_JOBS, seconds, INTERVAL_S, busy))
    print("%-28s %11s %19s %8s %21s %8s" % ("CPU seconds", "rgt poll()", "watch -n 5 squeue", "ratio",
                                            "squeue --jobs only", "ratio"))
    for i, label in ((0, "follower (+ its children)"), (1, "slurmctld (server side)")):
        ours, ref, alt = res["rgt"][i], res["watch"][i], res["nouser"][i]
        print("%-28s %11.3f %19.3f %8s %21.3f %8s" % (label, ours, ref, _ratio(ref, ours), alt, _ratio(alt, ours)))
    print("%-28s %11d %19d %8s %21d" % ("squeue calls", res["rgt"][2], res["watch"][2], "", res["nouser"][2]))
    print("(slurmctld used %.3f CPU s in a window of the same length with no follower at all)" % res["idle"][1])


def _ratio(ref: float, ours: float) -> str:
    return ("%.2fx" % (ref / ours)) if ours > 0 else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--busy", type=int, default=1000, help="other users' pending jobs in the queue")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rgt-slurm-bench-"))
    try:
        cluster = start_cluster(work / "cluster")
    except ClusterUnavailable as exc:
        print("no Slurm test cluster: %s" % exc)
        return 2
    try:
        print("cluster up in %.2f s (munged + slurmctld + slurmd, node idle); --mem enforced by %s"
              % (cluster.start_s, cluster.mem_enforcement))
        jobs_dir = work / "jobs"
        jobs_dir.mkdir()
        latency(cluster, jobs_dir, args.jobs)
        cost(cluster, jobs_dir, args.seconds, args.busy)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
