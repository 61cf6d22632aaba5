"""Ray backend benchmark: a sweep of one-GPU cells through rgt on a real two-node Ray cluster on
loopback (2 nodes x 4 declared GPUs), beside Ray's own record of the same jobs.

  python bench/ray_sweep.py                 # 32 cells of 2 s
  python bench/ray_sweep.py --cells 16 --seconds 1
  python bench/ray_sweep.py --attempts tasks  # each attempt a task of rgt's driver (raytasks.py)

Rows:
  makespan        submit of the sweep -> the last run's run_succeeded event, vs the ideal: the
                  cells in waves of 8 (2 x 4 GPUs) x the seconds of one (32 x 2 s: 4 waves, 8 s); also
                  against the 16 s the goal was set with (<= 1.2 x 16 s).
  reference       the same cells submitted straight to Ray at once (no rgt: Ray queues them
                  itself), on the same cluster in the same run: as Jobs (Jobs API) and as tasks of
                  a plain driver (`ray.remote(num_gpus=1)` running `sleep`); ratio = rgt / Ray.
  The ideal: 32 cells x 2 s on 8 GPUs is 4 waves = 8 s; the issue's goal was set as 1.2 x 16 s
  (twice the ideal already), so both ratios are printed.
  queue wait      per cell: rgt's stage_started -> rgt's submission (the cell waits in rgt's queue
                  for a free GPU, as designed: never in Ray's past RAY_JOB_START_WAIT_TIME_S).
  submit->start   per cell: rgt's submission -> Ray's job start_time (the Jobs API), beside Ray's
                  own start cost: Ray's start_time -> the shim's first instant (pid file's started_at).
  end->status     per cell: the shim's exit record (ended_at) -> rgt's run_succeeded event (rgt
                  seeing the exit file, judging it, building the manifest) beside Ray's own: the exit
                  record -> Ray's end_time for the job.
Medians and 90th percentiles, seconds. The cluster and the daemon are this script's own, stopped at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.ray.cluster import GPUS_PER_NODE, RayCluster  # noqa: E402
from tests.realbox import Box, job  # noqa: E402


def _iso(ts: str) -> float:
    from datetime import datetime
    return datetime.strptime(ts.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() \
        if "." in ts else datetime.strptime(ts.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z").timestamp()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(p / 100.0 * len(xs))) - 1)] if xs else float("nan")


def reference(cluster: RayCluster, cells: int, seconds: float) -> float:
    """The same cells straight into Ray's Jobs API, all at once: submit -> the last job's end."""
    import urllib.request
    t0 = time.time()
    ids = []
    for i in range(cells):
        sid = "ref-%d-%d" % (int(t0), i)
        body = json.dumps({"entrypoint": "sleep %s" % seconds, "submission_id": sid, "entrypoint_num_gpus": 1,
                           "entrypoint_num_cpus": 0}).encode()
        req = urllib.request.Request(cluster.dashboard + "/api/jobs/", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
        ids.append(sid)
    while True:
        jobs = {j["submission_id"]: j for j in cluster.jobs()}
        if all(jobs.get(s, {}).get("end_time") for s in ids):
            return max(jobs[s]["end_time"] for s in ids) / 1000.0 - t0
        time.sleep(0.2)


def reference_tasks(cluster: RayCluster, cells: int, seconds: float) -> float:
    """The same cells as tasks of one plain driver, all at once: submit -> the last one's end."""
    import subprocess
    import ray
    ray.init(address=cluster.gcs, logging_level=40, log_to_driver=False)
    try:
        @ray.remote(num_gpus=1, num_cpus=0, max_retries=0)
        def cell(s: float) -> int:
            return subprocess.call(["sleep", str(s)])
        ray.get(cell.remote(0))         # the driver itself up (rgt's driver is up before the sweep too)
        t0 = time.time()
        ray.get([cell.remote(seconds) for _ in range(cells)])
        return time.time() - t0
    finally:
        ray.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--poll", default="0.2", help="RGT_RAY_POLL: the Jobs API list call's interval")
    ap.add_argument("--attempts", choices=("tasks", "jobs"), default="tasks", help="config.json ray_attempts (default: tasks, as rgt)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgt-ray-bench-"))
    cluster = RayCluster(tmp / "c")
    (tmp / "c").mkdir()
    cluster.start()
    box = Box(tmp / "b")
    box.env.update(RGT_RAY_POLL=args.poll, RGT_RAY_EXIT_GRACE="1")
    box.home.mkdir(parents=True, exist_ok=True)
    (box.home / "config.json").write_text(json.dumps({"ray_attempts": args.attempts}))
    try:
        box.daemon()
        spec = job("bench", box.workdir, {"name": "s", "run": "sleep %s" % args.seconds}, gpus=1, backend="ray",
                   ray={"address": cluster.dashboard}, matrix={"I": [str(i) for i in range(args.cells)]})
        t0 = time.time()
        out = box.submit(spec)
        assert out.returncode == 0, out.stderr
        names = ["bench-%d" % i for i in range(1, args.cells + 1)]
        for name in names:
            assert box.wait_run(name, timeout=600)["state"] == "succeeded", box.diagnostics()
        ends = {e["run"]: _iso(e["at"]) for e in box.events("run_succeeded")}
        starts = {e["run"]: _iso(e["at"]) for e in box.events("stage_started")}
        makespan = max(ends[n] for n in names) - t0
        deadline = time.time() + 30          # Ray names a job's end a moment after its shim exits
        while True:
            jobs = {(j.get("metadata") or {}).get("rgt_run"): j for j in cluster.jobs()}
            if args.attempts == "tasks":        # the driver's records, in the Jobs API's shape
                for path in (box.home / "ray-driver").glob("*/state/*.json"):
                    if not path.name.endswith((".start.json", ".shim.json")):
                        run = path.name[:-5].split("-", 2)[2].rsplit("-s-", 1)[0]
                        jobs[run] = json.loads(path.read_text())
            if all((jobs.get(n) or {}).get("end_time") for n in names) or time.time() > deadline:
                break
            time.sleep(0.5)
        wait, rgt_start, ray_start, rgt_end, ray_end = [], [], [], [], []
        for n in names:
            stages = box.home / "runs" / n / "stages"
            pid = json.loads((stages / "s.1.pid").read_text())
            ex = json.loads((stages / "s.1.exit").read_text())
            sub = json.loads((stages / "s.1.ray").read_text())["submitted_at"]
            j = jobs[n]
            wait.append(sub - starts[n])
            rgt_start.append(j["start_time"] / 1000.0 - sub)
            ray_start.append(pid["started_at"] - j["start_time"] / 1000.0)
            rgt_end.append(ends[n] - ex["ended_at"])
            ray_end.append(j["end_time"] / 1000.0 - ex["ended_at"])
        gpus = 2 * GPUS_PER_NODE
        waves = math.ceil(args.cells / float(gpus))
        ideal = waves * args.seconds
        print("ray_sweep: %d cells x %.1f s, 1 GPU each, 2 nodes x %d GPUs (%d waves), RGT_RAY_POLL=%s, attempts as %s,"
              " load average %s" % (args.cells, args.seconds, GPUS_PER_NODE, waves, args.poll, args.attempts,
                                    " ".join(open("/proc/loadavg").read().split()[:3])))
        print("%-28s %8s %8s" % ("", "median", "p90"))
        ref = reference(cluster, args.cells, args.seconds)
        ref_tasks = reference_tasks(cluster, args.cells, args.seconds)
        for label, xs in (("rgt queue wait (by design)", wait), ("rgt submit->Ray start", rgt_start), ("Ray start->shim runs", ray_start),
                          ("rgt shim exit->status", rgt_end), ("Ray shim exit->job end", ray_end)):
            print("%-28s %8.3f %8.3f" % (label, statistics.median(xs), pct(xs, 90)))
        print("makespan %.2f s; ideal %.1f s (%d waves x %.1f s): %.2fx; vs 16 s: %.2fx (goal <= 1.2x)"
              % (makespan, ideal, waves, args.seconds, makespan / ideal, makespan / 16.0))
        print("reference (Ray Jobs API directly, all at once): makespan %.2f s; rgt / Ray = %.2fx"
              % (ref, makespan / ref))
        print("reference (tasks of a plain driver, all at once): makespan %.2f s; rgt / Ray = %.2fx"
              % (ref_tasks, makespan / ref_tasks))
        return 0
    finally:
        box.cleanup()
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
