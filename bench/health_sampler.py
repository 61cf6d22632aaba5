"""Health benchmark: what one sampler tick costs, and how big status.json gets.

  python bench/health_sampler.py           # short run (~10 s)
  python bench/health_sampler.py --full    # 10x the ticks

Rows (ours vs the named reference, per tick, and the ratio):
  sampler tick, 8 fake GPUs + 6 disks (main-thread CPU and wall)
      vs the shell equivalent a monitoring loop runs each tick: `cat` the cgroup files,
      `df -h` and `df -i` on the same 6 paths, and `nvidia-smi --query-gpu` where present
      (CPU of the child processes and wall).
  status.json with 8 GPUs and an hour of history  vs  the 64 KB goal.

The GPUs come from the fake libnvidia-ml.so.1 (tests/health/fakenvml, built here with gcc)
under the real pynvml; the fake re-reads its JSON state with a stat() per call, so the GPU
part is if anything pessimistic. Goal: under 5 ms per tick.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.base.fsutil import dumps  # noqa: E402
from boxagent.health import HealthMonitor  # noqa: E402
from boxagent.health.cgroup import find_cgroup  # noqa: E402
from boxagent.base.roots import Roots  # noqa: E402
from tests.health.conftest import FakeNvml, healthy  # noqa: E402


def build_fake(tmp: Path) -> FakeNvml:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        sys.exit("gcc is needed to build the fake libnvidia-ml.so.1")
    lib = tmp / "lib" / "libnvidia-ml.so.1"
    lib.parent.mkdir()
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(lib),
                    str(REPO / "tests/health/fakenvml/fakenvml.c"), "-lpthread"], check=True)
    fake = FakeNvml(lib, tmp / "state.json")
    fake.write(healthy(8))
    os.environ["FAKE_NVML_STATE"] = str(fake.state)
    os.environ["RGT_NVML_LIB"] = str(lib)
    return fake


def six_paths(tmp: Path) -> list:
    cands = [str(tmp), "/", "/tmp", os.path.expanduser("~"), "/var", "/usr", "/etc", "/opt"]
    out = []
    for p in cands:
        if os.path.isdir(p) and p not in out:
            out.append(p)
    return out[:6]


def bench_sampler(paths: list, ticks: int, kmsg: str):
    mon = HealthMonitor(Roots(kmsg=kmsg), {"xid_wait_ms": 200}, {})
    watched = [(p, "extra") for p in paths]
    mon.sample(time.time(), watched)  # first tick opens NVML handles and the kernel log
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for i in range(ticks):
        s = mon.sample(time.time(), watched)
        mon.alert_events(s, [])
    cpu = (time.thread_time() - cpu0) / ticks
    wall = (time.perf_counter() - wall0) / ticks
    assert len(s["disks"]) == len(paths)
    mon.close()
    return cpu, wall, len(s["gpus"])


def shell_command(paths: list) -> str:
    cg = find_cgroup("/proc", "/sys/fs/cgroup")
    if cg.version == "v1":
        files = ["memory.usage_in_bytes", "memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.oom_control"]
        cpu = ["%s/cpu.cfs_quota_us" % cg.cpu_dir, "%s/cpu.cfs_period_us" % cg.cpu_dir]
    else:
        files = ["memory.current", "memory.max", "memory.peak", "memory.events"]
        cpu = ["%s/cpu.max" % cg.cpu_dir]
    cats = " ".join("%s/%s" % (cg.memory_dir, f) for f in files) + " " + " ".join(cpu)
    qp = " ".join(paths)
    cmd = "cat %s /proc/meminfo >/dev/null 2>&1; df -h %s >/dev/null; df -i %s >/dev/null" % (cats, qp, qp)
    if shutil.which("nvidia-smi"):
        cmd += ("; nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
                "power.draw,clocks.sm,clocks.max.sm,clocks_event_reasons.active --format=csv,noheader >/dev/null")
    return cmd


def bench_shell(paths: list, ticks: int):
    cmd = shell_command(paths)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    for _ in range(ticks):
        subprocess.run(["sh", "-c", cmd], check=False)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) / ticks
    return cpu, (time.perf_counter() - wall0) / ticks


def status_size(paths: list, kmsg: str) -> int:
    """A status.json-shaped document: health with 8 GPUs, an hour of 10 s samples in history,
    and the alerts list, written the way the daemon writes it (fsutil.dumps)."""
    mon = HealthMonitor(Roots(kmsg=kmsg), {"xid_wait_ms": 200}, {})
    t0 = 1_700_000_000.0
    watched = [(p, "extra") for p in paths]
    for i in range(360):
        h = mon.sample(t0 + 10 * i, watched)
        mon.alert_events(h, [])
    doc = {"schema": "rgt.status/1", "health": h, "history": mon.history(), "alerts": mon.active_alerts()}
    mon.close()
    return len(dumps(doc).encode())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="10x the ticks")
    ap.add_argument("--real", action="store_true", help="use this machine's real NVML instead of the fake")
    args = ap.parse_args()
    ticks, shell_ticks = (2000, 300) if args.full else (200, 30)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.real:
            os.environ.pop("RGT_NVML_LIB", None)
        else:
            build_fake(tmp)
        kmsg = "/dev/kmsg" if os.access("/dev/kmsg", os.R_OK) else str(tmp / "no-kmsg")
        paths = six_paths(tmp)
        cpu, wall, n_gpus = bench_sampler(paths, ticks, kmsg)
        scpu, swall = bench_shell(paths, shell_ticks)
        size = status_size(paths, kmsg)
    gpu_ref = "nvidia-smi" if shutil.which("nvidia-smi") else "no nvidia-smi here"
    print("health sampler, %d %s GPUs + %d disks; %d ticks ours, %d shell (%s)" % (
        n_gpus, "real" if args.real else "fake", len(paths), ticks, shell_ticks, gpu_ref))
    print("%-34s %12s %12s %9s" % ("per tick", "rgt sampler", "shell", "ratio"))
    print("%-34s %10.2f ms %10.2f ms %8.1fx" % ("CPU (main thread / children)", cpu * 1e3, scpu * 1e3, scpu / cpu))
    print("%-34s %10.2f ms %10.2f ms %8.1fx" % ("wall", wall * 1e3, swall * 1e3, swall / wall))
    print("%-34s %12s %12s %9s" % ("status.json, %d GPUs, 1 h history" % n_gpus, "%.1f KB" % (size / 1024.0), "goal 64.0 KB",
                                   "%.2f" % (size / 65536.0)))
    print("goal: under 5 ms CPU per tick -> %s" % ("met" if cpu < 0.005 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
