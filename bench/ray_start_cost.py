"""How long Ray takes to start one unit of work, two ways, on the loopback test cluster
(tests/ray/cluster.py: 2 nodes x 4 declared GPUs):

  (a) a Ray Job (POST /api/jobs/, entrypoint_num_gpus=1): submit -> the entrypoint's first instant
  (b) a `ray.remote(num_gpus=1)` task run from one long-lived driver that launches a short
      subprocess: submit (.remote()) -> the subprocess's first instant; the first ones (cold: Ray
      starts worker processes) and then warm ones (workers reused).

  python bench/ray_start_cost.py [--n 8]

Prints medians / max, seconds. The subprocess records its own time.time() in a file.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.ray.cluster import RayCluster  # noqa: E402

STAMP = "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"


def jobs(cluster: RayCluster, out: Path, n: int) -> list:
    took = []
    for i in range(n):
        mark = out / ("job%d" % i)
        sid = "probe-%d-%d" % (int(time.time()), i)
        body = json.dumps({"entrypoint": "%s -S -c \"%s\" %s" % (sys.executable, STAMP, mark), "submission_id": sid,
                           "entrypoint_num_gpus": 1, "entrypoint_num_cpus": 0}).encode()
        t0 = time.time()
        urllib.request.urlopen(urllib.request.Request(cluster.dashboard + "/api/jobs/", data=body, method="POST",
                                                      headers={"Content-Type": "application/json"}), timeout=30).read()
        while not (mark.exists() and mark.read_text()):
            time.sleep(0.02)
        took.append(float(mark.read_text()) - t0)
    return took


def job_burst(cluster: RayCluster, out: Path, n: int) -> list:
    """n Jobs at once (one wave of the sweep): each submit -> its entrypoint's first instant."""
    t0, marks = {}, []
    for i in range(n):
        mark = out / ("burst%d" % i)
        sid = "burst-%d-%d" % (int(time.time()), i)
        body = json.dumps({"entrypoint": "%s -S -c \"%s\" %s" % (sys.executable, STAMP, mark), "submission_id": sid,
                           "entrypoint_num_gpus": 1, "entrypoint_num_cpus": 0}).encode()
        t0[mark] = time.time()
        urllib.request.urlopen(urllib.request.Request(cluster.dashboard + "/api/jobs/", data=body, method="POST",
                                                      headers={"Content-Type": "application/json"}), timeout=30).read()
        marks.append(mark)
    while not all(m.exists() and m.read_text() for m in marks):
        time.sleep(0.05)
    return [float(m.read_text()) - t0[m] for m in marks]


def tasks(cluster: RayCluster, out: Path, n: int) -> list:
    import ray
    ray.init(address=cluster.gcs, logging_level="ERROR", log_to_driver=False)

    @ray.remote(num_gpus=1, num_cpus=0, max_retries=0)
    def cell(mark: str) -> int:
        return subprocess.call([sys.executable, "-S", "-c", STAMP, mark])

    took = []
    try:
        for i in range(n):
            mark = out / ("task%d" % i)
            t0 = time.time()
            ray.get(cell.remote(str(mark)))
            took.append(float(mark.read_text()) - t0)
        t0s, refs = {}, []
        for i in range(8):                       # one wave at once, as the sweep sends them
            mark = out / ("tburst%d" % i)
            t0s[mark] = time.time()
            refs.append(cell.remote(str(mark)))
        ray.get(refs)
        took.extend(float(m.read_text()) - t0s[m] for m in t0s)
    finally:
        ray.shutdown()
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgt-ray-probe-"))
    (tmp / "c").mkdir()
    cluster = RayCluster(tmp / "c")
    cluster.start()
    try:
        j = jobs(cluster, tmp, args.n)
        jb = job_burst(cluster, tmp, 8)
        t = tasks(cluster, tmp, args.n)
        tb, t = t[args.n:], t[:args.n]
    finally:
        cluster.stop()
    load = open("/proc/loadavg").read().split()[:3]
    print("ray_start_cost: submit -> the command's first instant, seconds (load average %s)" % " ".join(load))
    print("  Ray Job                     first %.3f  median %.3f  max %.3f" % (j[0], statistics.median(j), max(j)))
    print("  8 Ray Jobs at once          median %.3f  max %.3f" % (statistics.median(jb), max(jb)))
    print("  task from a driver (cold)   first %.3f" % t[0])
    print("  task from a driver (warm)   median %.3f  max %.3f" % (statistics.median(t[1:]), max(t[1:])))
    print("  8 tasks at once             median %.3f  max %.3f" % (statistics.median(tb), max(tb)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
